#!/usr/bin/env python
"""Simulate the hunk search (search/ddmin.py) with a noisy numeric probe; print a table.

    python scripts/bench_hunks.py [--trials 100] [--seed 0] [--cv 0.02]

The diff: N hunks in files of 5 hunks, functions of 2 (group_hunks' three levels). Scenarios:
  one culprit      one hunk costs 10% of throughput
  two culprits     two independent hunks cost 5% each (compound: neither alone is 'bad')
  dependent pair   hunk A defines a helper hunk B calls: B alone does not import
                   ('unresolved', one probe that crashes), A alone does nothing, A+B cost 10%
Positions are random per trial.

Probe: one sample = true tok/s x lognormal noise (sigma = CV, 2% by default).
The decisions are the real hunk hunt's (search/hunkdecide.py): control arm, subsets paired with
BASE measured beside them (search/levels.py), each culprit named after a fresh test against BASE
(docs/verdicts.md). Every run is counted in the probes.
A trial is correct when the culprit sets named equal the true ones exactly.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tabulate import tabulate

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from regressbisect.search.bisect import SearchSettings  # noqa: E402
from regressbisect.search.ddmin import DdminResult  # noqa: E402
from regressbisect.search.hunkdecide import decide_hunks  # noqa: E402

BASE_TOK_S = 10_000.0
PER_FILE, PER_FUNCTION = 5, 2


@dataclass
class Diff:
    """A simulated diff: per-hunk and joint slowdowns, and import dependencies."""

    n: int
    effects: dict[str, float] = field(default_factory=dict)
    joint: list[tuple[frozenset[str], float]] = field(default_factory=list)
    needs: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return [f"h{i:03d}" for i in range(self.n)]

    def groups(self) -> list[list[list[str]]]:
        ids = self.ids
        files = [ids[i:i + PER_FILE] for i in range(0, self.n, PER_FILE)]
        functions = [f[j:j + PER_FUNCTION] for f in files for j in range(0, len(f), PER_FUNCTION)]
        return [files, functions, [[i] for i in ids]]

    def applies(self, subset: frozenset[str]) -> bool:
        return all(self.needs.get(h, frozenset()) <= subset for h in subset)

    def true_tok_s(self, subset: frozenset[str]) -> float:
        factor = math.prod(1 - self.effects.get(h, 0.0) for h in subset)
        factor *= math.prod(1 - e for members, e in self.joint if members <= subset)
        return BASE_TOK_S * factor

    def culprits(self) -> set[frozenset[str]]:
        return {frozenset({h}) for h in self.effects} | {m for m, _ in self.joint}


def make_diff(n: int, scenario: str, rng: np.random.Generator) -> Diff:
    picks = [f"h{i:03d}" for i in rng.choice(n, size=2, replace=False)]
    if scenario == "one culprit":
        return Diff(n, effects={picks[0]: 0.10})
    if scenario == "two culprits":
        return Diff(n, effects={picks[0]: 0.05, picks[1]: 0.05})
    if scenario == "dependent pair":
        a, b = picks
        return Diff(n, joint=[(frozenset({a, b}), 0.10)], needs={b: frozenset({a})})
    raise ValueError(scenario)


def run_trial(n: int, scenario: str, rng: np.random.Generator,
              cv: float) -> tuple[bool, DdminResult, int]:
    """One hunk hunt with the real decisions (search/hunkdecide.py) and a simulated probe."""
    diff = make_diff(n, scenario, rng)
    probes = 0

    def measure(subset: frozenset[str], purpose: str) -> float | None:
        nonlocal probes
        probes += 1
        if not diff.applies(subset):
            return None            # the probe crashes at import: a skip
        return diff.true_tok_s(subset) * math.exp(rng.normal(0.0, cv))

    decision = decide_hunks(diff.ids, diff.groups(), measure, SearchSettings())
    named = {c.hunks for c in decision.culprits}
    return named == diff.culprits(), decision.search, probes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cv", type=float, default=0.02, help="probe noise (lognormal sigma)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    for n in (10, 50, 200):
        for scenario in ("one culprit", "two culprits", "dependent pair"):
            outcomes = [run_trial(n, scenario, rng, args.cv) for _ in range(args.trials)]
            rows.append([n, scenario, f"{np.mean([ok for ok, _, _ in outcomes]):.0%}",
                         f"{np.mean([r.tests for _, r, _ in outcomes]):.1f}",
                         f"{np.mean([p for _, _, p in outcomes]):.0f}"])
    print(f"{args.trials} trials per row, probe CV {args.cv:.0%}, seed {args.seed}")
    print(tabulate(rows, headers=["hunks", "scenario", "correct", "mean subsets tested",
                                  "mean probes"], tablefmt="github"))


if __name__ == "__main__":
    main()
