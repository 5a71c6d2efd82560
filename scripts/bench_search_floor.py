#!/usr/bin/env python
"""Where the commit search's executions go: two lower references for one step in 128 commits.

* oracle      probabilistic bisection that KNOWS both levels and the noise sigma: each sample's
              likelihood under 'commit x is good / bad' is exact; median split; stop when one gap
              holds 0.99 of the mass. No search that must learn the levels can beat it.
* ends given  our posterior (regressbisect.search.bisect, the private _posterior, _quantile_picks
              and _anchor_needed of CommitSearch) and our design, after K pairs of GOOD/BAD samples
              given for free; stop at 0.99 of the mass, no paired confirmation, no side checks.
              Shows how the cost of localisation falls as the levels are known better, and what
              the K pairs plus the localisation cost together. The step's prior scale is the
              true step (in a real hunt, the control arm's estimate of it).

    python scripts/bench_search_floor.py --trials 200 --jobs 16

Prints one markdown table; docs/experiments/search_cost_floor.md holds a run.
"""
from __future__ import annotations

import argparse
import math
import multiprocessing as mp

import numpy as np

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.search.bisect import CommitSearch  # noqa: E402

N = 128
CONFIDENCE = 0.99


def _first_bad(rng: np.random.Generator) -> int:
    return int(rng.integers(1, N))


def oracle_trial(task: tuple[float, float, int]) -> tuple[bool, int]:
    step, cv, trial = task
    rng = np.random.default_rng([7, trial, int(cv * 1e4), int(-step * 1e4)])
    sigma, d = math.sqrt(math.log1p(cv ** 2)), math.log1p(step)
    fb = _first_bad(rng)
    logp = np.zeros(N - 1)                       # hypothesis g: first bad = g + 1
    firsts = np.arange(1, N)
    k = 0
    while True:
        p = np.exp(logp - logp.max())
        p /= p.sum()
        if p.max() >= CONFIDENCE or k >= 5000:
            break
        c = np.cumsum(p)
        xs = np.arange(1, N - 1)
        x = int(xs[np.argmin(np.abs(c[xs - 1] - 0.5))])     # P(first bad <= x) nearest 1/2
        y = (d if x >= fb else 0.0) + rng.normal(0.0, sigma)
        k += 1
        mu = np.where(firsts <= x, d, 0.0)
        logp += -(y - mu) ** 2 / (2 * sigma ** 2)
    return int(np.argmax(p)) + 1 == fb, k


def ends_given_trial(task: tuple[float, float, int, int]) -> tuple[bool, int]:
    step, cv, pairs, trial = task
    rng = np.random.default_rng([11, trial, int(cv * 1e4), int(-step * 1e4)])
    sigma = math.sqrt(math.log1p(cv ** 2))
    fb = _first_bad(rng)
    search = CommitSearch(N)
    clock = [0]

    def measure(i: int) -> None:
        clock[0] += 1
        search._round = clock[0]
        search.record(i, 1000.0 * (1 + step if i >= fb else 1.0) * math.exp(rng.normal(0.0, sigma)))

    for _ in range(pairs):
        measure(0)
        measure(N - 1)
    search._start_search(step)
    iv = search._queue[0]
    k = 0
    while True:
        post = search._posterior(iv, sign=-1)
        if post.probs.max() >= CONFIDENCE or k >= 5000:
            break
        picks = search._quantile_picks(iv, post, 1, exclude=set())
        anchor = search._anchor_needed(iv, picks)
        picks = [anchor] if anchor is not None else picks
        if not picks:
            break
        measure(picks[0])
        k += 1
    return post.gaps[int(np.argmax(post.probs))][1] == fb, k


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args(argv)
    cells = [(-0.03, 0.02), (-0.05, 0.02), (-0.10, 0.02), (-0.03, 0.05), (-0.05, 0.05), (-0.10, 0.05)]
    pair_counts = (3, 9, 30)
    print(f"One step in {N} commits, stop at posterior mass {CONFIDENCE}; {args.trials} trials per cell.\n")
    print("| step / CV | oracle: exact / executions | " +
          " | ".join(f"our posterior, {k} pairs of ends given: exact / after / total" for k in pair_counts) + " |")
    print("|---|---|" + "---|" * len(pair_counts))
    with mp.Pool(args.jobs) as pool:
        for step, cv in cells:
            rows = pool.map(oracle_trial, [(step, cv, t) for t in range(args.trials)])
            line = (f"| {-step:.0%} / {cv:.0%} | {np.mean([r[0] for r in rows]):.1%} / "
                    f"{np.mean([r[1] for r in rows]):.1f} |")
            for k in pair_counts:
                rows = pool.map(ends_given_trial, [(step, cv, k, t) for t in range(args.trials)])
                after = float(np.mean([r[1] for r in rows]))
                line += f" {np.mean([r[0] for r in rows]):.1%} / {after:.1f} / {after + 2 * k:.1f} |"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
