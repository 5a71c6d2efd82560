"""A subset of hunks against BASE: its test, its size and share of the gap; the names so far."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from regressbisect.search.bisect import SearchResult
from regressbisect.search.book import SampleBook
from regressbisect.search.control import ControlArm
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.phases import Phase
from regressbisect.search.stats import NoisePool, log_threshold, mixture_half_width, t_ppf
from regressbisect.search.verdicts import CandidateCall, Verdict
from regressbisect.enums import WordEnum

__all__ = ["Joined", "TestedSubset", "Names", "with_joined", "test_subset", "tested", "sized_at_stop", "step_scale", "stop_interval",
           "spread_over", "spread_note", "spread_reason", "with_share", "log_se"]


class Joined(WordEnum):
    """How a hunk came to be in a culprit (or a suspect): the report's `joined`."""

    PROPOSED = "proposed"
    """In the group the step added (or delta debugging's subset), not shown needed by a test of its
    own (a culprit of one hunk, or its test stayed open)."""
    NEEDED_TO_RUN = "needed to run"
    """Without it the rest does not run: a subset without it crashed, or the diff says so."""
    NEEDED_TO_BE_SLOW = "needed to be slow"
    """The step of a search for what the group needs to be slow added it."""
    KEPT_BY_LEAVE_ONE_OUT = "kept by leave-one-out"
    """The culprit without it was shown less slow."""


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
    stop_ci95: tuple[float, float] | None = None
    """The 95% interval the report gives `change` when a sequential test stopped on these runs
    once they showed it: a confidence sequence, valid at that stop (`sized_at_stop`). None where
    `ci95` is valid as it is (a prefix step, sized by the commit search's own rule; a test that
    ran to its cap). `ci95` stays the test's fixed-n reading, which the hunt's decisions read
    (whether to search the rest, whether the shares add up)."""
    joined: tuple[tuple[str, Joined], ...] = ()
    """(hunk, how it joined), by hunk id; a hunk not in it joined as `Joined.PROPOSED` (`how_joined`)."""
    settled: frozenset = frozenset()
    """Hunks whose need is known from how they joined, kept without a leave-one-out test: a hunk
    that joined alone because the subset without it crashed (a crash is deterministic), or that
    a needs search's confirmed step added alone."""

    def how_joined(self) -> dict[str, Joined]:
        """Each hunk's way in, by hunk id."""
        known = dict(self.joined)
        return {h: known.get(h, Joined.PROPOSED) for h in sorted(self.hunks)}

    @property
    def reported_ci95(self) -> tuple[float, float]:
        """The interval the report prints: `stop_ci95` where there is one, else `ci95`."""
        return self.stop_ci95 if self.stop_ci95 is not None else self.ci95


@dataclass(frozen=True)
class Names:
    """What the naming phases found so far, in the order found."""

    named: tuple[TestedSubset, ...] = ()
    suspects: tuple[TestedSubset, ...] = ()
    """Proposed, not named (a hunk's need stayed open, or the alone test ran out of pairs)."""
    open_question: bool = False
    """A hunk's need, or a step's alone test, stayed open."""
    spread: frozenset = frozenset()
    """Hunks a prefix search of the rest found the slowdown spread over (it reproduced, and its
    paired test refuted every single step it proposed: `spread_over`)."""

    @property
    def taken(self) -> frozenset:
        """Every hunk named or suspected."""
        return frozenset().union(*(c.hunks for c in self.named + self.suspects))

    def plus(self, tested: TestedSubset, *, named: bool, open_question: bool = False) -> "Names":
        if named:
            return replace(self, named=self.named + (tested,), open_question=self.open_question or open_question)
        return replace(self, suspects=self.suspects + (tested,), open_question=self.open_question or open_question)


def with_joined(tested: TestedSubset, joined: Mapping[str, Joined], settled: frozenset = frozenset()) -> TestedSubset:
    """`tested` with how its hunks joined (those of its hunks in `joined`) and which of them are
    settled by it."""
    return replace(tested, joined=tuple(sorted((h, how) for h, how in joined.items()
                                               if h in tested.hunks and how is not Joined.PROPOSED)),
                   settled=frozenset(settled) & tested.hunks)


def spread_over(search: SearchResult, candidates: Sequence[frozenset]) -> frozenset:
    """The hunks of a prefix search's last candidate that no prefix measured at BASE's level rules
    out: what a search that reproduced and refuted every single step ('not-localised') found the
    slowdown spread over."""
    ruled_out = frozenset().union(*(candidates[c.index] for c in search.candidates if c.verdict == CandidateCall.GOOD))
    return candidates[-1] - ruled_out


def spread_note(hunks: int, min_effect: float) -> str:
    """'spread over 10 hunks, none alone >= 2%'."""
    return f"spread over {hunks} hunks, none alone >= {100 * min_effect:g}%"


def spread_reason(hunks: int, steps: int, min_effect: float) -> str:
    """Why no hunk is named where the slowdown is spread over `hunks` hunks."""
    return (f"the slowdown is {spread_note(hunks, min_effect)}: the prefix search reproduced it, and its paired "
            f"test refuted every single step it proposed ({steps}): many small changes, each below --min-effect")


def test_subset(ctx: HuntContext, hunks: frozenset, purpose: Purpose, scale: float = math.nan) -> Phase:
    """(A coroutine phase returning a TestedSubset.) BASE vs BASE + hunks, interleaved (ABBA),
    decided like the commit hunt's control arm; the hunt's pooled spread so far joins the pairs'
    own as the commit search's remembered noise does (capped, and only while the pairs are not
    noisier). control.run_control_arm's loop, as a coroutine: a pair side by side where there are
    two slots, one sample at a time with one. A subset that reproduced keeps the arm's interval in
    `ci95` and gets the confidence sequence at the arm's stop in `stop_ci95` (`stop_interval`;
    `scale`: its prior scale, fixed before the pairs; min_effect's by default)."""
    sides = (frozenset(), frozenset(hunks))
    settings = ctx.settings
    book = SampleBook(settings.pair_window, ctx.noise, read_interference=settings.read_interference,
                      reader=ctx.reader(sides))
    arm = ControlArm(book, settings, 0, 1, ends_a_hunt=purpose is Purpose.CONTROL)
    taken = 0
    while (verdict := arm.decide()) is None:
        indices = arm.next_samples(ctx.slots)
        values = yield from ctx.measure_all([(sides[i], purpose) for i in indices])
        for index, value in zip(indices, values):
            taken += 1
            book.add(index, value, tag=arm.tag, when=taken)
    cmp = arm.comparison
    change, ci = (cmp.change, cmp.ci95) if cmp is not None else (math.nan, (math.nan, math.nan))
    out = TestedSubset(frozenset(hunks), verdict, change, ci, arm.pairs())
    a, b = book.values(0, arm.tag), book.values(1, arm.tag)
    n = min(len(a), len(b))
    noise = book.with_prior(NoisePool.of([a[:n], b[:n]])) if n else NoisePool()
    if verdict == Verdict.REPRODUCED and noise.df and noise.sigma > 0 and math.isfinite(change) and change > -1:
        scale = scale if math.isfinite(scale) and scale > 0 else log_threshold(settings.min_effect)
        out = replace(out, stop_ci95=stop_interval(math.log1p(change), n, noise, scale))
    return out


def tested(hunks: frozenset, base: Sequence[float], subset: Sequence[float], noise: NoisePool) -> TestedSubset:
    """A subset that reproduced (replace the verdict otherwise), sized from its arm and BASE's: the
    difference of their mean log tok/s with a 95% t interval from the hunt's pooled noise (a
    handful of pairs' own spread gives an interval too unsteady for the shares of the gap)."""
    est = float(np.mean(np.log(subset)) - np.mean(np.log(base)))
    half = t_ppf(0.975, noise.df) * noise.sigma * math.sqrt(1 / len(base) + 1 / len(subset))
    return TestedSubset(hunks, Verdict.REPRODUCED, math.expm1(est), (math.expm1(est - half), math.expm1(est + half)),
                        min(len(base), len(subset)))


def sized_at_stop(hunks: frozenset, base: Sequence[float], subset: Sequence[float], noise: NoisePool,
                  scale: float) -> TestedSubset:
    """A subset that reproduced on runs a sequential test stopped once they showed it, sized as the
    commit search sizes a culprit from its naming gate's pairs (docs/search.md, "A culprit's size is
    its own"): the difference of the two arms' mean log tok/s, with a 95% normal-mixture confidence
    sequence (`stats.mixture_half_width`) at the hunt's pooled noise, its prior scale `scale` (log,
    fixed before the test measured: the step the prefix search expected). A fixed-n interval on
    runs stopped when they looked convincing covers too rarely: a 1.5% hunk whose test stopped
    once its estimate passed a min_effect of 2% read -2.35% on average, and the t interval at the
    stop missed -1.5% in one test of nine. Its `ci95` stays `tested`'s (the decisions read it);
    `stop_ci95` is the sequence's (none without a noise)."""
    fixed = tested(hunks, base, subset, noise)
    if not (noise.df and noise.sigma > 0 and math.isfinite(scale) and scale > 0):
        return fixed
    return replace(fixed, stop_ci95=stop_interval(math.log1p(fixed.change), 2 / (1 / len(base) + 1 / len(subset)),
                                                  noise, scale))


def stop_interval(est: float, pairs: float, noise: NoisePool, scale: float) -> tuple[float, float]:
    """95% confidence sequence of a log change `est` read on `pairs` side-by-side pairs (an
    effective count for two arms) at the pooled `noise`, as relative changes."""
    half = mixture_half_width(2 * noise.sigma * noise.sigma, pairs, scale)
    return math.expm1(est - half), math.expm1(est + half)


def step_scale(change: float, min_effect: float) -> float:
    """The prior scale (log) of `sized_at_stop` for a test of a step of `change` (a prefix step's,
    a culprit's), read before the test: its log size, at least min_effect's."""
    step = abs(math.log1p(change)) if math.isfinite(change) and change > -1 else 0.0
    return max(step, log_threshold(min_effect))


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
