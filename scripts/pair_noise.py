#!/usr/bin/env python3
"""How much of a hunt's noise its side-by-side pairs cancel, from its store.

The search's tests read one noise: every candidate's spread about its own mean, pooled over the
hunt (`SampleBook.noise`, docs/search.md). A candidate sampled early and late in a hunt also
carries the machine's changes between those times, which a pair taken side by side cancels; the
naming gate tests such pairs, and reads their spread for a step picked once the machine had
changed (`SampleBook.drifting`, docs/search.md section 3). This script compares the two spreads on a stored
hunt: the pooled within-candidate spread, and the spread within pairs (two neighbouring samples,
in the order the probes started, of two different candidates, paired as the search pairs them;
per sample, the pair differences' spread over sqrt 2, about each candidate pair's own mean).
Their ratio squared is about the factor in pairs that a paired test would need less at the
within-pair spread (1 on a machine whose noise does not change over the hunt).

    python scripts/pair_noise.py .git/regressbisect/store.sqlite             # the last hunt
    python scripts/pair_noise.py store.sqlite --hunt 3 --json pair-noise.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _common import write_results  # noqa: E402  (also puts the repository on sys.path)

from regressbisect.search.book import SampleBook  # noqa: E402
from regressbisect.search.stats import NoisePool  # noqa: E402
from regressbisect.store import Store  # noqa: E402


def spreads(samples: list[tuple[str, float]]) -> dict:
    """The two spreads of samples in start order, paired as the search pairs them
    (`SampleBook.pairs`: neighbours, each sample in one pair at most)."""
    names = sorted({candidate for candidate, _ in samples})
    book = SampleBook(pair_window=1)
    for n, (candidate, value) in enumerate(samples):
        book.add(names.index(candidate), value, tag=None, when=n)
    within = book.own_noise()
    pairs = book.pairs()
    in_pairs = NoisePool.of_ratios(pairs.diffs.values())
    rows = []
    for (a, b), diffs in sorted(pairs.diffs.items(), key=lambda kv: -len(kv[1])):
        own = NoisePool.of_ratios([diffs])
        rows.append({"a": names[a][:10], "b": names[b][:10], "pairs": len(diffs),
                     "sigma": own.sigma if own.df else None})
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
