#!/usr/bin/env python3
"""Must-show (c): a C extension whose C source holds a -30% step, hunted three ways.

The repository (tests/cextrepo.py) has 7 commits; commit 4 changes the speed in `fastmod.c`.
The user's environment has the BAD build installed (`pip install .` of HEAD, non-editable). The
probe is `python bench.py`, which imports the compiled `fastmod`.

  no setup          every worktree holds only sources (and --no-build-check, which would stop
                    it): the probe imports the installed build
  --setup inplace   `python setup.py build_ext --inplace` per candidate
  --venv + pip      `pip install --no-deps --no-build-isolation .` into per-slot virtualenvs

Prints, per way: exit code, verdict, whether the culprit is the right commit, probes, probe
seconds, setup runs (builds), probes run on a tree already built, and setup seconds (apart from
probe time). Runs with --no-busy-check (the busy-machine guard is not what this shows; pass
--busy-check to keep it). `--noise CV` sets the bench's noise between runs (default 0.02): more
noise, more probes of GOOD and BAD, the case where one worktree per candidate pays; `--way N`
runs only the ways given (0, 1, 2 in the order above).

    python scripts/bench_setup_cext.py [--busy-check] [--noise 0.1] [--way 1 --way 2]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import _common  # noqa: E402,F401  (puts the repository on sys.path)

from tabulate import tabulate  # noqa: E402

from regressbisect.cli import main  # noqa: E402
from regressbisect.testing.cextrepo import make_cext_repo  # noqa: E402
from regressbisect.testing.isorepo import make_venv, pip_install  # noqa: E402

SPEEDS = [1000.0] * 4 + [700.0] * 3
WAYS = {
    "no setup": ["--no-build-check"],
    "--setup build_ext --inplace": ["--setup", "python setup.py build_ext --inplace"],
    "--venv --setup 'pip install .'": ["--venv", "--setup",
                                       "pip install -q --force-reinstall --no-deps --no-build-isolation --no-index ."],
}


def user_env(tmp: Path, repo: Path) -> Path:
    env = tmp / "userenv"
    pip_install(make_venv(env), repo, editable=False)
    return env


def hunt(repo: Path, env: Path, tmp: Path, name: str, extra: list[str], busy_check: bool,
         noise: float) -> tuple[int, dict | None, float]:
    out = tmp / f"{name}.json"
    args = ["run", "-C", str(repo), "--cmd", "python bench.py", "--tokens", "1000",
            "--env", f"BENCH_STATE={tmp / ('state-' + name)}", "--env", f"BENCH_NOISE={noise}",
            "--env", f"PATH={env / 'bin'}{os.pathsep}{os.environ['PATH']}", "--instrument", "off",
            "--quiet", "--store", str(tmp / f"{name}.sqlite"), "--json", str(out),
            *([] if busy_check else ["--no-busy-check"]), *extra, "HEAD~6", "HEAD"]
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # each hunt's own summary: not this table
            main(args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    wall = time.perf_counter() - started
    return code, (json.loads(out.read_text()) if out.exists() else None), wall


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy-check", action="store_true")
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--way", type=int, action="append", choices=range(len(WAYS)))
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        shas = make_cext_repo(tmp / "repo", SPEEDS)
        env = user_env(tmp, tmp / "repo")
        rows = []
        for i, (way, extra) in enumerate(WAYS.items()):
            if options.way and i not in options.way:
                continue
            code, report, wall = hunt(tmp / "repo", env, tmp, f"way{i}", extra, options.busy_check, options.noise)
            measurement = (report or {}).get("measurement") or {}
            setup = measurement.get("setup") or {}
            reused = sum(c.get("reuses", 0) for c in (setup.get("per_candidate") or {}).values())
            culprits = [c["commit"] for c in (report or {}).get("culprits", [])]
            rows.append([way, code, (report or {}).get("verdict", "error (no report)"),
                         f"{(report or {}).get('gap_pct', float('nan')):+.1f}%" if report else "-",
                         "yes" if culprits == [shas[4]] else "no", (report or {}).get("probes", "-"),
                         f"{measurement.get('probe_seconds', 0):.1f}", setup.get("runs", "-"),
                         reused if setup else "-", f"{setup['seconds']:.1f}" if setup else "-", f"{wall:.1f}"])
    print(tabulate(rows, headers=["way", "exit", "verdict", "gap", "right culprit", "probes", "probe s",
                                  "setup runs", "on a built tree", "setup s", "wall s"], tablefmt="github"))


if __name__ == "__main__":
    main_()
