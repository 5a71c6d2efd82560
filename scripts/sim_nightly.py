#!/usr/bin/env python3
"""A 30-night replay with a simulated machine (fake executor), rendered as the morning report.

A real git repository of 30 commits whose tok/s steps down 5% at night 18 (2% lognormal noise);
the nightly measures each night's tip, detects the change point, hunts it, and writes the report
(JSON, Markdown, HTML with PNG plots) into OUT_DIR. README's series plot comes from here.

    python scripts/sim_nightly.py OUT_DIR
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.testing.benchrepo import make_bench_repo  # noqa: E402
from regressbisect.testing.nightly import FakeMachine, nightly_for  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "nightly-sim")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shas = make_bench_repo(tmp / "repo", [1000.0] * 17 + [950.0] * 13)
        nightly = nightly_for(tmp / "repo", FakeMachine(seed=1), tmp)
        nightly.report_dir = out
        nights = nightly.replay(30)
    alarms = [i + 1 for i, n in enumerate(nights) if int(n.exit_code) == 3]
    print(f"true culprit {shas[17][:10]} (night 18); alarm raised on night(s) {alarms}")
    for path in nights[-1].report_files:
        print(path)


if __name__ == "__main__":
    main()
