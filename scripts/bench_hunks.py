#!/usr/bin/env python
"""Simulate the hunk hunt (search/hunkdecide.py) with a noisy numeric probe; print a table.

    python scripts/bench_hunks.py [--trials 100] [--seed 0] [--cv 0.02] [--only TEXT] [--phases]
                                  [--interference 0.25@0.7] [--no-read-interference]
                                  [--name-alpha A] [--shapes] [--jobs N]

The diff: N hunks in files of 5 hunks, functions of 2 (group_hunks' three levels). Scenarios:
  one culprit      one hunk costs 10% of throughput
  two culprits     two independent hunks cost 5% each (compound: neither alone is the whole gap)
  dependent pair   hunk A defines a helper hunk B calls: B alone does not import, A alone does
                   nothing, A+B cost 10%; the hunt knows B needs A without a probe (`needs`)
  hidden pair      the same, but the hunt is not told: B without A is a probe that crashes
  renamed function a definition and 4 call sites, none runs without the others (each needs all
                   four others, known), together 12% slower
  feature chain    six hunks in file order that slow the step 10% only all together, the shape of
                   a new feature: a new module, its import, an object built from it, its call, a
                   config field and the value that turns it on; the hunt is told what the diff
                   shows (the import needs the module, the object the import's name) and not the
                   rest (the object and the value crash without the field, the call without the
                   object)
  no culprit       an A/A diff: every hunk harmless; right = 'not reproduced'
  one stall        one hunk sends 40% of the runs to 0.7x (a stall every few steps: the mean 14%
                   slower), the others harmless
Positions are random per trial, drawn from a generator of (seed, row, trial), so two versions of
the code see the same diffs; the probe's noise has its own generator.

Probe: one sample = true tok/s x lognormal noise (sigma = CV, 2% by default; some rows fix their
own). The decisions are the real hunk hunt's (search/hunkdecide.py). Every run is counted in the
probes; a subset known not to run is never a run. A trial is right when the culprit sets named
equal the true ones exactly (for 'no culprit': when the verdict is 'not-reproduced'); 'wrong
hunk' counts trials that named a hunk of no true culprit; 'of them measured' leaves out the probes
that crashed at import (a subset that does not run: an answer without noise, counted apart). --phases adds each row's mean probes by
what they were for (the `purpose` the decisions give each run: control, prefix, needs, name,
remainder, ddmin, confirm); --name-alpha runs the decisions at another naming level.
"""
from __future__ import annotations

import argparse
import functools
import inspect
import math
import multiprocessing
from collections import Counter
from dataclasses import dataclass

import numpy as np
from tabulate import tabulate

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from regressbisect.search.bisect import SearchSettings  # noqa: E402
from regressbisect.search.hunkdecide import decide_hunks  # noqa: E402
from regressbisect.testing.hunkdiff import SimulatedDiff, feature_chain  # noqa: E402

BASE_TOK_S = 10_000.0
PER_FUNCTION = 2


Diff = functools.partial(SimulatedDiff, per_function=PER_FUNCTION, base_tok_s=BASE_TOK_S)
"""n hunks in files of 5, functions of 2."""

ONE_STALL = (0.40, 0.7)
"""The 'one stall' scenario's hunk: 40% of the runs at 0.7x (a stall every few steps: the mean 14% slower)."""


@dataclass(frozen=True)
class Row:
    """One row of the table: `hunks` hunks, a scenario, the probe's noise (None: --cv), the
    machine's runs far off their level ((fraction, factor) each, None: --interference), and the
    stall of the 'one stall' scenario's hunk (fraction of runs, factor)."""

    hunks: int
    scenario: str
    cv: float | None = None
    interference: tuple[tuple[float, float], ...] | None = None
    stall: tuple[float, float] = ONE_STALL

    @property
    def shape(self) -> str:
        kinds = [f"{p:.0%} at {f:g}x" for p, f in self.interference or ()]
        if self.scenario == "one stall":
            kinds.insert(0, f"stall {self.stall[0]:.0%} at {self.stall[1]:g}x")
        return " + ".join(kinds)


CASES: list[Row] = [Row(n, scenario) for n in (10, 50, 200) for scenario in ("one culprit", "two culprits", "dependent pair")] + [
    Row(50, "hidden pair"), Row(54, "renamed function"), Row(54, "renamed function", 0.10),
    Row(54, "feature chain"), Row(54, "feature chain", 0.08), Row(5, "one culprit 15%", 0.14),
    Row(10, "no culprit"), Row(10, "no culprit", 0.14), Row(10, "one stall")]
"""The rows of the table."""


def shape_cases() -> list[Row]:
    """The commit search's run-time shapes (`bench_accuracy.SHAPE_CELLS`: the machine's second
    mode at 0.1-0.5 of the runs, 0.5-1.6x, on 1-5% noise, and a culprit's stall with and without
    the machine's tail), each as a hunk hunt of 10 hunks: one hunk costing 10% where the cell has
    a step, none where it is an A/A range, a stalling hunk where the cell's culprit stalls."""
    from bench_accuracy import SHAPE_CELLS   # the one definition of the families

    rows = []
    for cell in SHAPE_CELLS:
        kinds = tuple((k.fraction, k.factor) for k in cell.interference)
        if cell.stall is not None:
            rows.append(Row(10, "one stall", cell.cv, kinds, (cell.stall.fraction, cell.stall.factor)))
        else:
            rows.append(Row(10, "one culprit" if cell.steps else "no culprit", cell.cv, kinds))
    return rows


def make_diff(n: int, scenario: str, rng: np.random.Generator,
              stall: tuple[float, float] = ONE_STALL) -> tuple[SimulatedDiff, dict | bool]:
    """The diff and the dependencies the hunt is told: True for all of them, False for none."""
    picks = [f"h{i:03d}" for i in rng.choice(n, size=min(n, 5), replace=False)]
    if scenario == "one culprit":
        return Diff(n, effects={picks[0]: 0.10}), True
    if scenario == "one culprit 15%":
        return Diff(n, effects={picks[0]: 0.15}), True
    if scenario == "two culprits":
        return Diff(n, effects={picks[0]: 0.05, picks[1]: 0.05}), True
    if scenario in ("dependent pair", "hidden pair"):
        a, b = picks[:2]
        return (Diff(n, joint=[(frozenset({a, b}), 0.10)], needs={b: frozenset({a})}),
                scenario == "dependent pair")
    if scenario == "renamed function":
        group = frozenset(picks)
        return Diff(n, joint=[(group, 0.12)], needs={h: group - {h} for h in group}), True
    if scenario == "feature chain":
        return feature_chain(n, rng.choice(n - 1, size=5, replace=False), per_function=PER_FUNCTION,
                             base_tok_s=BASE_TOK_S)
    if scenario == "no culprit":
        return Diff(n), True
    if scenario == "one stall":
        return Diff(n, stalls={picks[0]: stall}), True
    raise ValueError(scenario)


TAKES_NEEDS = "needs" in inspect.signature(decide_hunks).parameters
"""Older decisions have no `needs`: they learn a dependency from the crash."""


def run_trial(n: int, scenario: str, seed: int, row: int, trial: int, cv: float,
              settings: SearchSettings = SearchSettings(),
              interference: tuple[tuple[float, float], ...] = (),
              stall: tuple[float, float] = ONE_STALL) -> tuple[bool, bool, Counter, int]:
    """(right, named a wrong hunk, probes by purpose, probes that crashed) of one hunk hunt with the real decisions
    and a simulated probe; `interference`: (fraction, factor) of runs far off their level, drawn
    per run after its lognormal noise (none: the noise stream of before)."""
    diff, told = make_diff(n, scenario, np.random.default_rng([seed, row, trial]), stall)
    noise = np.random.default_rng([seed, row, trial, 1])
    probes: Counter = Counter()
    crashed = 0

    def measure(subset: frozenset[str], purpose: str) -> float | None:
        nonlocal crashed
        probes[purpose] += 1
        if not diff.runs(subset):
            crashed += 1
            return None            # the probe crashes at import: a skip
        value = diff.tok_s(subset) * math.exp(noise.normal(0.0, cv))
        if diff.stalls:      # drawn only for diffs that have them: the other rows keep their random stream
            value *= diff.stall_factor(subset, noise.random)
        hits = [factor for fraction, factor in interference if noise.random() < fraction]
        return value * hits[0] if hits else value

    needs = diff.needs if told is True else (told or None)
    extra = {"needs": needs} if needs and TAKES_NEEDS else {}
    decision = decide_hunks(diff.ids, diff.groups(), measure, settings, **extra)
    named = {c.hunks for c in decision.culprits}
    truth = diff.culprits()
    right = decision.verdict == "not-reproduced" if not truth else named == truth
    wrong = bool(set().union(*named) - set().union(*truth)) if named else False
    return right, wrong, probes, crashed


PURPOSES = ("control", "prefix", "needs", "name", "remainder", "ddmin", "confirm")
"""The columns of --phases, in the order a hunt spends them."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cv", type=float, default=0.02, help="probe noise (lognormal sigma) of the rows without their own")
    parser.add_argument("--only", default="", help="only the rows whose scenario contains this text")
    parser.add_argument("--phases", action="store_true", help="add each row's mean probes by purpose")
    parser.add_argument("--interference", action="append", default=[], metavar="P@F",
                        help="a fraction P of runs at F times their level, on top of the lognormal noise "
                             "(e.g. 0.25@0.7; repeatable: slow and fast)")
    parser.add_argument("--read-interference", action=argparse.BooleanOptionalAction,
                        default=SearchSettings().read_interference,
                        help="the decisions read runs far off their level as interfered (SearchSettings.read_interference)")
    shipped = SearchSettings().name_alpha
    parser.add_argument("--name-alpha", type=float, default=shipped,
                        help="the naming level the decisions run at (SearchSettings.name_alpha)")
    parser.add_argument("--shapes", action="store_true",
                        help="the rows of the commit search's run-time shapes (bench_accuracy.py --shapes) "
                             "as hunk hunts of 10 hunks, in place of the scenarios above")
    parser.add_argument("--jobs", type=int, default=1, help="hunts at once (processes)")
    args = parser.parse_args(argv)
    settings = SearchSettings(name_alpha=args.name_alpha, read_interference=args.read_interference)
    interference = tuple((float(p), float(f)) for p, f in (spec.split("@") for spec in args.interference))
    cases = shape_cases() if args.shapes else CASES
    rows = []
    with multiprocessing.Pool(args.jobs) as pool:
        for index, case in enumerate(cases):
            if args.only not in case.scenario:
                continue
            # the shapes' rows draw their diffs from a stream of their own (rows numbered from 100)
            row = index + 100 if args.shapes else index
            cv = args.cv if case.cv is None else case.cv
            kinds = interference if case.interference is None else case.interference
            outcomes = pool.starmap(run_trial, [(case.hunks, case.scenario, args.seed, row, t, cv, settings, kinds, case.stall)
                                                for t in range(args.trials)])
            rows.append(_row(case, cv, outcomes, args))
    print(f"{args.trials} trials per row, seed {args.seed}"
          + (f", name_alpha {args.name_alpha:g}" if args.name_alpha != shipped else "")
          + (f", runs off their level: {', '.join(args.interference)}" if interference else "")
          + ("" if args.read_interference else ", --no-read-interference"))
    print(tabulate(rows, headers=["hunks", "scenario", "CV"] + (["shape"] if args.shapes else [])
                   + ["right", "wrong hunk named", "mean probes", "of them measured", "p95 probes"]
                   + (list(PURPOSES) if args.phases else []), tablefmt="github"))


def _row(case: Row, cv: float, outcomes: list, args: argparse.Namespace) -> list:
    """A row of the table from its hunts' outcomes."""
    probes = [sum(p.values()) for _, _, p, _ in outcomes]
    measured = [sum(p.values()) - c for _, _, p, c in outcomes]
    row = ([case.hunks, case.scenario, f"{cv:.0%}"] + ([case.shape] if args.shapes else [])
           + [f"{np.mean([r for r, _, _, _ in outcomes]):.0%}", sum(w for _, w, _, _ in outcomes),
              f"{np.mean(probes):.0f}", f"{np.mean(measured):.0f}", f"{np.percentile(probes, 95):.0f}"])
    if args.phases:
        spent = sum((p for _, _, p, _ in outcomes), Counter())
        if set(spent) - set(PURPOSES):
            raise SystemExit(f"purposes without a column: {sorted(set(spent) - set(PURPOSES))}")
        row += [f"{spent[purpose] / args.trials:.0f}" for purpose in PURPOSES]
    return row


if __name__ == "__main__":
    main()
