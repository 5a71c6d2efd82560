#!/usr/bin/env python
"""Where the commit search's executions go: two lower references for one step in 128 commits.

* oracle      probabilistic bisection that KNOWS both levels and the noise sigma: each sample's
              likelihood under 'commit x is good / bad' is exact; median split; stop when one gap
              holds 0.99 of the mass. No search that must learn the levels can beat it.
* ends given  our posterior (the search context's posterior, search/commit/context.py, and its Picker's quantiles and
              anchor, search/picker.py) and our design, after K pairs of GOOD/BAD samples given for free; stop at 0.99 of the mass, no paired confirmation, no side checks.
              Shows how the cost of localisation falls as the levels are known better, and what
              the K pairs plus the localisation cost together. The step's prior scale is the
              true step (in a real hunt, the control arm's estimate of it).

    python scripts/bench_search_floor.py --trials 200 --jobs 16

Prints one markdown table; docs/experiments/search_cost_floor.md holds a run.

With --levels, instead: what the two tests a single-step hunt must pass cost at least, at the
levels they are held to (SearchSettings.reproduce_alpha and the first step's share of name_alpha),
in the cost goals' cells (bench_accuracy.py --floor), next to the oracle's localisation there.
Each test is our own e-value (stats.pooled_t_log_bf) given the best case: the noise sigma known
(a pool of 10^4 degrees of freedom) and its effect prior the true step; the executions are twice
its pairs. Their sum is a floor of any search that keeps both guarantees and runs them apart.

    python scripts/bench_search_floor.py --levels --trials 300
"""
from __future__ import annotations

import argparse
import math
import multiprocessing as mp

import numpy as np

import _common  # noqa: E402,F401  (puts the repository on sys.path)

from regressbisect.search.bisect import CommitSearch, SearchSettings  # noqa: E402
from regressbisect.search.commit.control import start_search  # noqa: E402
from regressbisect.search.stats import NoisePool, log_threshold, pooled_t_log_bf  # noqa: E402

N = 128
CONFIDENCE = 0.99


def _first_bad(rng: np.random.Generator, n: int = N) -> int:
    return int(rng.integers(1, n))


def oracle_trial(task: tuple[float, float, int, int]) -> tuple[bool, int]:
    step, cv, trial, n = task
    rng = np.random.default_rng([7, trial, int(cv * 1e4), int(-step * 1e4)])
    sigma, d = math.sqrt(math.log1p(cv ** 2)), math.log1p(step)
    fb = _first_bad(rng, n)
    logp = np.zeros(n - 1)                       # hypothesis g: first bad = g + 1
    firsts = np.arange(1, n)
    k = 0
    while True:
        p = np.exp(logp - logp.max())
        p /= p.sum()
        if p.max() >= CONFIDENCE or k >= 5000:
            break
        c = np.cumsum(p)
        xs = np.arange(1, n - 1)
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
        search.ctx.round = clock[0]
        search.record(i, 1000.0 * (1 + step if i >= fb else 1.0) * math.exp(rng.normal(0.0, sigma)))

    for _ in range(pairs):
        measure(0)
        measure(N - 1)
    start_search(search.ctx, step)
    iv = search.ctx.queue[0]
    k = 0
    while True:
        post = search.ctx.posterior(iv, sign=-1)
        if post.probs.max() >= CONFIDENCE or k >= 5000:
            break
        picks = search.picker.quantiles(iv, post, 1, exclude=set())
        anchor = search.picker.anchor(iv, picks)
        picks = [anchor] if anchor is not None else picks
        if not picks:
            break
        measure(picks[0])
        k += 1
    return post.gaps[int(np.argmax(post.probs))][1] == fb, k


KNOWN_NOISE_DF = 10_000


def pairs_to_pass(task: tuple[float, float, float, int]) -> int:
    """Pairs until the e-value of their mean difference (half-normal prior at the true step, sigma
    known) reaches 1/alpha with the estimate at least min_effect our way (the control arm's
    rule; the gate's is the same without the min_effect part, which a 3% or larger step rarely
    binds)."""
    step, cv, alpha, trial = task
    rng = np.random.default_rng([13, trial, int(cv * 1e4), int(-step * 1e4), int(1 / alpha)])
    sigma, d = math.sqrt(math.log1p(cv ** 2)), math.log1p(step)
    noise = NoisePool(sigma * sigma * KNOWN_NOISE_DF, KNOWN_NOISE_DF)
    margin = log_threshold(SearchSettings().min_effect)
    total = 0.0
    for k in range(1, 5001):
        total += d + rng.normal(0.0, sigma * math.sqrt(2))
        est = total / k
        if est <= -margin and pooled_t_log_bf(est, 2 / k, noise, sign=-1, priors=((d / sigma) ** 2,)) >= math.log(1 / alpha):
            return k
    return 5000


def levels_table(trials: int, jobs: int) -> None:
    from bench_accuracy import FLOOR_CELLS   # the cost goals' cells

    s = SearchSettings()
    gate_alpha = s.name_alpha / 2     # the first step picked: name_alpha / (1 * 2)
    print(f"Floors of the two tests of a single-step hunt at their levels (reproduce_alpha {s.reproduce_alpha:g}, "
          f"first step's share of name_alpha {gate_alpha:g}), sigma known, prior = the true step; "
          f"{trials} trials per cell.\n")
    print("| cell | control arm: executions | naming gate: executions | oracle localisation | sum of the floors |")
    print("|---|---|---|---|---|")
    with mp.Pool(jobs) as pool:
        for cell in FLOOR_CELLS:
            if len(cell.steps) != 1:
                continue
            (step,) = cell.steps
            control = 2 * np.mean(pool.map(pairs_to_pass, [(step, cell.cv, s.reproduce_alpha, t) for t in range(trials)]))
            gate = 2 * np.mean(pool.map(pairs_to_pass, [(step, cell.cv, gate_alpha, t) for t in range(trials)]))
            local = np.mean([r[1] for r in pool.map(oracle_trial, [(step, cell.cv, t, cell.n) for t in range(trials)])])
            print(f"| {cell.name} | {control:.1f} | {gate:.1f} | {local:.1f} | {control + gate + local:.1f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--levels", action="store_true",
                   help="the floors of the control arm and the naming gate at their levels, in the cost goals' cells")
    args = p.parse_args(argv)
    if args.levels:
        levels_table(args.trials, args.jobs)
        return 0
    cells = [(-0.03, 0.02), (-0.05, 0.02), (-0.10, 0.02), (-0.03, 0.05), (-0.05, 0.05), (-0.10, 0.05)]
    pair_counts = (3, 9, 30)
    print(f"One step in {N} commits, stop at posterior mass {CONFIDENCE}; {args.trials} trials per cell.\n")
    print("| step / CV | oracle: exact / executions | " +
          " | ".join(f"our posterior, {k} pairs of ends given: exact / after / total" for k in pair_counts) + " |")
    print("|---|---|" + "---|" * len(pair_counts))
    with mp.Pool(args.jobs) as pool:
        for step, cv in cells:
            rows = pool.map(oracle_trial, [(step, cv, t, N) for t in range(args.trials)])
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
