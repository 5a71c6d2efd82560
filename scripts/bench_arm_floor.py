#!/usr/bin/env python
"""The floor of a change of shape at the control arm's cap: how often a fixed-sample look at n runs
of each end, at the arm's last-look level, tells GOOD from BAD, for the stall cells of
`bench_accuracy.py --shapes`; print a table.

    python scripts/bench_arm_floor.py [--draws 4000] [--seed 1] [--runs 48,64,96,128,192]

Each draw takes n runs of GOOD and of BAD from the simulation's own executor (`FakeExecutor`:
lognormal noise, the machine's kinds, BAD's stall), then asks three fixed-sample tests on log
tok/s, each at the arm's last look (two-sided reproduce_alpha, the slowdown's side):

* t        Welch's t on every run's mean, what the arm's last look reads (and what a long run's
           time follows);
* KS       the two-sample Kolmogorov-Smirnov test (Pinpoint reads min(KS, Mann-Whitney): a
           change of shape is a change of the distribution);
* oracle   Fisher's exact test on the share of runs below the stall's depth halfway (a test that
           knows where the modes are: what no label-free test beats by much).

The arm ends 'could not decide' at its cap where its looks before the cap did not decide and the
last look does not either: the t column is an upper bound of what the arm's last look reproduces
at n = --max-samples (96); a hunt also needs its search to find and name the step after it.
"""
from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import fisher_exact, ks_2samp, ttest_ind
from tabulate import tabulate

import _common  # noqa: F401  (puts the repository on sys.path)
from bench_accuracy import SHAPE_CELLS
from regressbisect.search.settings import SearchSettings
from regressbisect.search.simulate import FakeExecutor, FakeHistory


def floor(cell, runs: int, draws: int, seed: int, level: float) -> tuple[float, float, float, float]:
    """(t, KS, oracle, mean log change) over `draws` draws of `runs` runs of each end of `cell`."""
    history = FakeHistory((1000.0, 1000.0 * (1 + cell.steps[0])), cell.cv, interference=cell.interference,
                          stalls=((1, cell.stall),))
    executor = FakeExecutor(history, seed)
    cut = np.log((1 + cell.stall.factor) / 2)
    hits = np.zeros(3)
    change = []
    for _ in range(draws):
        good = np.log([executor.measure(0, 0) / 1000.0 for _ in range(runs)])
        bad = np.log([executor.measure(1, 0) / 1000.0 for _ in range(runs)]) - np.log1p(cell.steps[0])
        change.append(float(np.mean(bad) - np.mean(good)))
        k_good, k_bad = int(np.sum(good < cut)), int(np.sum(bad < cut))
        hits += (ttest_ind(bad, good, equal_var=False, alternative="less").pvalue < level / 2,
                 ks_2samp(bad, good).pvalue < level,
                 fisher_exact([[k_bad, runs - k_bad], [k_good, runs - k_good]], alternative="greater")[1] < level / 2)
    return (*(hits / draws), float(np.mean(change)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--draws", type=int, default=4000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runs", default="48,64,96,128,192", help="runs of each end, comma-separated")
    args = p.parse_args()
    level = SearchSettings().reproduce_alpha
    rows = []
    for cell in (c for c in SHAPE_CELLS if c.stall is not None):
        for runs in (int(x) for x in args.runs.split(",")):
            t, ks, oracle, change = floor(cell, runs, args.draws, args.seed, level)
            rows.append([cell.name, runs, f"{np.expm1(change):+.1%}", f"{t:.1%}", f"{ks:.1%}", f"{oracle:.1%}"])
    print(f"{args.draws} draws a row, seed {args.seed}, level {level:g} (two-sided; the slowdown's side)")
    print(tabulate(rows, headers=["cell (the stall's change of shape alone)", "runs of each end", "mean change",
                                  "t (the arm's last look)", "KS", "oracle share test"], tablefmt="github"))


if __name__ == "__main__":
    main()
