#!/usr/bin/env python
"""Where our search spends its executions, phase by phase, in the single-step cells of
bench_accuracy.py (same histories and seeds): control arm, bisection, paired confirmation, side
checks. The phase is the first word of each Measure's reason.

    python scripts/sim_search_phases.py --trials 200 --jobs 2
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp

import numpy as np

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from bench_accuracy import FLOOR_CELLS, Cell, _history  # noqa: E402
from regressbisect.search.bisect import SearchSettings  # noqa: E402
from regressbisect.search.simulate import simulate  # noqa: E402

PHASES = ("control", "bisect", "confirm", "check")


def trial(task: tuple[Cell, int, int]) -> tuple[bool, bool, int, collections.Counter]:
    cell, t, seed = task
    history, truth, noise_seed = _history(cell, t, seed)
    run = simulate(history, SearchSettings(), seed=noise_seed)
    phases = collections.Counter(reason.split()[0] for batch in run.reasons for reason in batch)
    found = {c.first_bad for c in run.result.culprits}
    return found == truth and bool(truth), bool(found - truth), run.executions, phases


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--floor", action="store_true", help="the cost goals' cells (bench_accuracy.py --floor)")
    p.add_argument("--only", default="", help="only the cells whose name contains this text")
    args = p.parse_args(argv)
    cells = list(FLOOR_CELLS) if args.floor else (
        [Cell(128, (-s,), cv) for cv in (0.02, 0.05) for s in (0.03, 0.05, 0.10)] + [Cell(128, (), 0.02)])
    cells = [c for c in cells if args.only in c.name]
    print("| cell | exact | false culprit | executions | " + " | ".join(PHASES) + " |")
    print("|---|---|---|---|" + "---|" * len(PHASES))
    with mp.Pool(args.jobs) as pool:
        for cell in cells:
            rows = pool.map(trial, [(cell, t, args.seed) for t in range(args.trials)])
            total: collections.Counter = collections.Counter()
            for r in rows:
                total.update(r[3])
            n = len(rows)
            print(f"| {cell.name} | {sum(r[0] for r in rows) / n:.1%} | {sum(r[1] for r in rows) / n:.1%} | "
                  f"{np.mean([r[2] for r in rows]):.1f} | " + " | ".join(f"{total[ph] / n:.1f}" for ph in PHASES) + " |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
