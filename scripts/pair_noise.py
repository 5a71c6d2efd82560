#!/usr/bin/env python3
"""How much of a hunt's noise its side-by-side pairs cancel, from its store.

The search's tests read one noise: every candidate's spread about its own mean, pooled over the
hunt (`SampleBook.noise`, docs/search.md). A candidate sampled early and late in a hunt also
carries the machine's changes between those times, which a pair taken side by side cancels; the
naming gate and the side checks test such pairs. This script compares the two spreads on a stored
hunt: the pooled within-candidate spread, and the spread within pairs (two neighbouring samples,
in the order the probes started, of two different candidates; each sample in one pair at most;
per sample, the pair differences' spread over sqrt 2, about each candidate pair's own mean).
Their ratio squared is about the factor in pairs that a paired test would need less at the
within-pair spread (1 on a machine whose noise does not change over the hunt).

    python scripts/pair_noise.py .git/regressbisect/store.sqlite             # the last hunt
    python scripts/pair_noise.py store.sqlite --hunt 3 --json pair-noise.json
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

from _common import write_results  # noqa: E402  (also puts the repository on sys.path)

from regressbisect.search.stats import NoisePool  # noqa: E402
from regressbisect.store import Store  # noqa: E402


def neighbour_pairs(samples: list[tuple[str, float]]) -> dict[tuple[str, str], list[float]]:
    """log(second) - log(first) of neighbouring samples of two candidates, by the sorted pair."""
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    k = 0
    while k + 1 < len(samples):
        (a, x), (b, y) = samples[k], samples[k + 1]
        if a == b:
            k += 1
            continue
        key = (a, b) if a < b else (b, a)
        out[key].append(math.log(y / x) if a == key[0] else math.log(x / y))
        k += 2
    return out


def spreads(samples: list[tuple[str, float]]) -> dict:
    by_candidate: dict[str, list[float]] = defaultdict(list)
    for candidate, value in samples:
        by_candidate[candidate].append(value)
    within = NoisePool.of(list(by_candidate.values()))
    pairs = neighbour_pairs(samples)
    # a pair difference has twice a sample's variance: its sum of squares over 2 is per sample
    diff_pools = {key: NoisePool.of([[math.exp(d) for d in ds]]) for key, ds in pairs.items()}
    in_pairs = NoisePool(sum(p.ss for p in diff_pools.values()) / 2, sum(p.df for p in diff_pools.values()))
    rows = [{"a": a[:10], "b": b[:10], "pairs": len(ds),
             "sigma": diff_pools[(a, b)].sigma / math.sqrt(2) if diff_pools[(a, b)].df else None}
            for (a, b), ds in sorted(pairs.items(), key=lambda kv: -len(kv[1]))]
    ratio = (within.sigma / in_pairs.sigma) ** 2 if in_pairs.df and in_pairs.sigma > 0 else None
    return {"samples": len(samples), "within_candidates": {"sigma": within.sigma, "df": within.df},
            "within_pairs": {"sigma": in_pairs.sigma, "df": in_pairs.df}, "variance_ratio": ratio,
            "pairs": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path, help="a store.sqlite")
    parser.add_argument("--hunt", type=int, default=None, help="hunt id (default: the last one)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    with Store(args.store, read_only=True) as store:
        hunt_id = store.last_hunt_id() if args.hunt is None else args.hunt
        rows = [] if hunt_id is None else store.hunt_samples_in_order(hunt_id)
    samples = [(f"{commit}:{patch}", tok_s) for commit, patch, tok_s in rows]
    if len(samples) < 3:
        print(f"hunt {hunt_id}: {len(samples)} plain samples, too few to compare spreads", file=sys.stderr)
        return 1
    out = spreads(samples)
    print(f"hunt {hunt_id}: {out['samples']} plain samples of the main arm")
    print("| candidates (commit:patch) | pairs | sigma within the pairs |")
    print("|---|---|---|")
    for r in out["pairs"]:
        sigma = "-" if r["sigma"] is None else f"{100 * r['sigma']:.1f}%"
        print(f"| {r['a']} / {r['b']} | {r['pairs']} | {sigma} |")
    w, p = out["within_candidates"], out["within_pairs"]
    print(f"within candidates (pooled, as the search reads it): {100 * w['sigma']:.1f}% on {w['df']} df")
    print(f"within pairs: {100 * p['sigma']:.1f}% on {p['df']} df")
    if out["variance_ratio"] is not None:
        print(f"variance ratio {out['variance_ratio']:.2f}: about the factor in pairs a paired test needs "
              f"less at the within-pair spread")
    if args.json:
        write_results(args.json, {"hunt": hunt_id, **out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
