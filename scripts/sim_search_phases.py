#!/usr/bin/env python
"""Where our search spends its executions, phase by phase, in the single-step cells of
bench_accuracy.py (same histories and seeds): control arm, bisection, paired confirmation, side
checks. The phase is the first word of each Measure's reason.

    python scripts/sim_search_phases.py --trials 200 --jobs 2
    python scripts/sim_search_phases.py --floor --by-picks      # hunts by the steps they picked
    python scripts/sim_search_phases.py --interference --only '0.7x' --trials 100

--by-picks splits each cell's hunts by how many distinct steps reached confirmation (the naming
gate's picks: a wrong pick costs pairs until it is dropped, and lowers the share of name_alpha of
the step picked after it).
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp

import numpy as np

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from bench_accuracy import FLOOR_CELLS, INTERFERENCE_CELLS, Cell, _history  # noqa: E402
from regressbisect.search.bisect import CommitSearch, SearchSettings  # noqa: E402
from regressbisect.search.driver import drive  # noqa: E402
from regressbisect.search.simulate import FakeExecutor  # noqa: E402

PHASES = ("control", "bisect", "confirm", "check")


def trial(task: tuple[Cell, int, int]) -> tuple[bool, bool, int, collections.Counter, int]:
    """(exact, false culprit, executions, executions by phase, steps picked) of one hunt: the
    simulated hunt of search/simulate.py, with the search kept to count its naming gate's picks."""
    cell, t, seed = task
    history, truth, noise_seed = _history(cell, t, seed)
    executor = FakeExecutor(history, noise_seed)
    search = CommitSearch(len(history.levels), SearchSettings())
    phases: collections.Counter = collections.Counter()
    rounds = 0

    def measure(batch):
        nonlocal rounds
        rounds += 1
        phases.update(m.reason.split()[0] for m in batch)
        return [executor.measure(m.index, rounds) for m in batch]

    result = drive(search, measure, slots=1)
    found = {c.first_bad for c in result.culprits}
    return found == truth and bool(truth), bool(found - truth), executor.executions, phases, len(search.gate.targets)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--floor", action="store_true", help="the cost goals' cells (bench_accuracy.py --floor)")
    p.add_argument("--interference", action="store_true",
                   help="the cells with runs far off their level (bench_accuracy.py --interference)")
    p.add_argument("--only", default="", help="only the cells whose name contains this text")
    p.add_argument("--by-picks", action="store_true",
                   help="one row per cell and number of steps picked (hunts, their share, the same columns)")
    args = p.parse_args(argv)
    cells = list(FLOOR_CELLS) if args.floor else list(INTERFERENCE_CELLS) if args.interference else (
        [Cell(128, (-s,), cv) for cv in (0.02, 0.05) for s in (0.03, 0.05, 0.10)] + [Cell(128, (), 0.02)])
    cells = [c for c in cells if args.only in c.name]
    picks_head = "steps picked | hunts | " if args.by_picks else ""
    print(f"| cell | {picks_head}exact | false culprit | executions | " + " | ".join(PHASES) + " |")
    print("|---|" + "---|---|" * args.by_picks + "---|---|---|" + "---|" * len(PHASES))
    with mp.Pool(args.jobs) as pool:
        for cell in cells:
            rows = pool.map(trial, [(cell, t, args.seed) for t in range(args.trials)])
            groups = ({k: [r for r in rows if r[4] == k] for k in sorted({r[4] for r in rows})}
                      if args.by_picks else {None: rows})
            for picks, group in groups.items():
                label = f"{picks} | {len(group) / len(rows):.0%} | " if args.by_picks else ""
                print(f"| {cell.name} | {label}" + _row(group), flush=True)
    return 0


def _row(rows: list) -> str:
    """exact, false culprit, mean executions and mean executions per phase of these hunts."""
    total: collections.Counter = collections.Counter()
    for r in rows:
        total.update(r[3])
    n = len(rows)
    return (f"{sum(r[0] for r in rows) / n:.1%} | {sum(r[1] for r in rows) / n:.1%} | {np.mean([r[2] for r in rows]):.1f} | "
            + " | ".join(f"{total[ph] / n:.1f}" for ph in PHASES) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
