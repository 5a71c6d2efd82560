"""A subset of hunks against BASE: its test, its size and share of the gap; the names so far."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from regressbisect.search.book import SampleBook
from regressbisect.search.control import ControlArm
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.runnable import Phase, Purpose
from regressbisect.search.stats import NoisePool, t_ppf
from regressbisect.search.verdicts import Verdict

__all__ = ["TestedSubset", "Names", "test_subset", "tested", "with_share", "log_se"]


@dataclass(frozen=True)
class TestedSubset:
    """BASE + hunks against BASE, paired, with the control arm's rule."""

    hunks: frozenset
    verdict: Verdict
    """'reproduced', 'not-reproduced', 'undecided' or 'all-skipped' (it does not run)."""
    change: float
    """BASE + hunks relative to BASE (-0.18: 18% slower)."""
    ci95: tuple[float, float]
    pairs: int
    share_of_gap: float = math.nan
    """Its log change over the BASE -> BASE + all log change."""


@dataclass(frozen=True)
class Names:
    """What the naming phases found so far, in the order found."""

    named: tuple[TestedSubset, ...] = ()
    suspects: tuple[TestedSubset, ...] = ()
    """Proposed, not named (a hunk's need stayed open, or the alone test ran out of pairs)."""
    open_question: bool = False
    """A hunk's need, or a step's alone test, stayed open."""

    @property
    def taken(self) -> frozenset:
        """Every hunk named or suspected."""
        return frozenset().union(*(c.hunks for c in self.named + self.suspects))

    def plus(self, tested: TestedSubset, *, named: bool, open_question: bool = False) -> "Names":
        if named:
            return replace(self, named=self.named + (tested,), open_question=self.open_question or open_question)
        return replace(self, suspects=self.suspects + (tested,), open_question=self.open_question or open_question)


def test_subset(ctx: HuntContext, hunks: frozenset, purpose: Purpose) -> Phase:
    """(A coroutine phase returning a TestedSubset.) BASE vs BASE + hunks, interleaved (ABBA),
    decided like the commit hunt's control arm; the hunt's pooled spread so far joins the pairs'
    own as the commit search's remembered noise does (capped, and only while the pairs are not
    noisier). control.run_control_arm's loop, as a coroutine: a pair side by side where there are
    two slots, one sample at a time with one."""
    sides = (frozenset(), frozenset(hunks))
    settings = ctx.settings
    book = SampleBook(settings.pair_window, ctx.noise, read_interference=settings.read_interference,
                      reader=ctx.reader(sides))
    arm = ControlArm(book, settings, 0, 1)
    taken = 0
    while (verdict := arm.decide()) is None:
        indices = arm.next_samples(ctx.slots)
        values = yield from ctx.measure_all([(sides[i], purpose) for i in indices])
        for index, value in zip(indices, values):
            taken += 1
            book.add(index, value, tag=arm.tag, when=taken)
    cmp = arm.comparison
    change, ci = (cmp.change, cmp.ci95) if cmp is not None else (math.nan, (math.nan, math.nan))
    return TestedSubset(frozenset(hunks), verdict, change, ci, arm.pairs())


def tested(hunks: frozenset, base: Sequence[float], subset: Sequence[float], noise: NoisePool) -> TestedSubset:
    """A subset that reproduced (replace the verdict otherwise), sized from its arm and BASE's: the
    difference of their mean log tok/s with a 95% t interval from the hunt's pooled noise (a
    handful of pairs' own spread gives an interval too unsteady for the shares of the gap)."""
    est = float(np.mean(np.log(subset)) - np.mean(np.log(base)))
    half = t_ppf(0.975, noise.df) * noise.sigma * math.sqrt(1 / len(base) + 1 / len(subset))
    return TestedSubset(hunks, Verdict.REPRODUCED, math.expm1(est), (math.expm1(est - half), math.expm1(est + half)),
                        min(len(base), len(subset)))


def with_share(tested: TestedSubset, signed_gap: float) -> TestedSubset:
    """Its log change over the gap's (both signed: a share of the regression)."""
    ok = math.isfinite(tested.change) and tested.change > -1 and signed_gap != 0
    return replace(tested, share_of_gap=math.log1p(tested.change) / signed_gap if ok else math.nan)


def log_se(tested: TestedSubset) -> float:
    """The standard error of a tested subset's log change, from its 95% interval."""
    lo, hi = tested.ci95
    if not (lo > -1 and math.isfinite(hi)):
        return math.inf
    return (math.log1p(hi) - math.log1p(lo)) / (2 * 1.96)
