#!/usr/bin/env python3
"""Wall time of one hunt with --slots 1, 2, 4 on the same repository (real processes).

A 64-commit repository whose probe sleeps (so K probes can truly run at once on this 2-core
machine, as K GPUs would) and reports tok/s from `speed.py` with 2% seeded noise; two culprits
(5% and 8%). Each --slots value hunts with its own store. Prints: culprits found, probes, rounds
(wall time / probe time), wall time, and the ratio to --slots 1.

    python scripts/bench_slots.py [--sleep 0.5]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import _common  # noqa: E402,F401  (puts the repository on sys.path)

from tabulate import tabulate  # noqa: E402

from regressbisect.cli import main  # noqa: E402
from regressbisect.testing.benchrepo import make_bench_repo  # noqa: E402


def hunt(repo: Path, slots: int, state: Path, store: Path, sleep: float, out: Path) -> float:
    args = ["run", "-C", str(repo), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
            "--env", f"BENCH_STATE={state}", "--env", f"BENCH_SLEEP={sleep}", "--instrument", "off",
            "--slots", str(slots), "--store", str(store), "--quiet", "--json", str(out), "HEAD~63", "HEAD"]
    started = time.perf_counter()
    try:
        main(args)
    except SystemExit:
        pass
    return time.perf_counter() - started


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sleep", type=float, default=0.5)
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    speeds = [1000.0] * 20 + [950.0] * 25 + [874.0] * 19
    rows, base = [], None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shas = make_bench_repo(tmp / "repo", speeds)
        truth = {shas[20], shas[45]}
        for k in args.slots:
            out = tmp / f"slots{k}.json"
            wall = hunt(tmp / "repo", k, tmp / f"state{k}", tmp / f"store{k}.sqlite", args.sleep, out)
            report = json.loads(out.read_text())
            found = {c["commit"] for c in report["culprits"]}
            base = base or wall
            rows.append([k, f"{len(found & truth)}/2" + ("" if found <= truth else f" +{len(found - truth)} false"),
                         report["probes"], f"{wall:.1f}", f"{wall / base:.2f}"])
    print(f"64 commits, culprits 5% and 8%, 2% noise, probe sleeps {args.sleep}s")
    print(tabulate(rows, headers=["--slots", "culprits found", "probes", "wall s", "wall / slots 1"],
                   tablefmt="github"))


if __name__ == "__main__":
    main_()
