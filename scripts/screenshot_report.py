#!/usr/bin/env python3
"""Render a JSON report to its HTML page and screenshot it with headless Chromium.

    python scripts/screenshot_report.py REPORT.json OUT.png [--width 1280 --height 2000]

Chromium: `apt-get install -y chromium` (Debian) or any chromium/google-chrome on PATH, or
CHROMIUM=/path/to/binary. Exit codes: 0 written, 1 bad input, 3 no Chromium found, 4 Chromium
failed. Networking, sync and updates are switched off: the page is self-contained anyway.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.render import render_html  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """The browser to use: $CHROMIUM, else the first known name on PATH."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else shutil.which(explicit)
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(html_page: Path, out_png: Path, *, width: int = 1280, height: int = 2000,
               browser: str | None = None, timeout_s: float = 120) -> Path:
    """Screenshot `html_page` into `out_png` with headless Chromium; raises RuntimeError on failure."""
    browser = browser or find_chromium()
    if browser is None:
        raise FileNotFoundError("no Chromium found (apt-get install -y chromium, or set CHROMIUM)")
    out_png = Path(out_png).resolve()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="regressbisect-chromium-") as profile:
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                   "--no-first-run", "--disable-background-networking", "--disable-component-update",
                   "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
                   f"--screenshot={out_png}", f"--window-size={width},{height}",
                   Path(html_page).resolve().as_uri()]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0 or not out_png.exists() or out_png.stat().st_size == 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"chromium failed (exit {done.returncode}): {tail}")
    return out_png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="JSON report (--json of a hunt, or a nightly report)")
    parser.add_argument("out", type=Path, help="PNG to write")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args(argv)
    try:
        report = json.loads(args.report.read_text())
    except (OSError, json.JSONDecodeError) as error:
        print(f"error: cannot read {args.report}: {error}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="regressbisect-html-") as tmp:
        page = render_html(report, Path(tmp))
        try:
            screenshot(page, args.out, width=args.width, height=args.height)
        except FileNotFoundError as error:
            print(f"error: {error}", file=sys.stderr)
            return 3
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"error: {error}", file=sys.stderr)
            return 4
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
