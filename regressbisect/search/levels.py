"""Where a measured subset of hunks sits between base (0) and base + all hunks (1). Pure.

The verdict rule of the hunk search (search/ddmin.py). Every sample of a subset is paired with a
sample of BASE taken beside it (interleaved, ABBA): on a machine that drifts by 10-15% within a
hunt, levels measured once at the start turned harmless hunks into 'culprits' (shares of 213% of
the gap). On the log scale d_i = the slowdown of the subset against its BASE partner (positive in
the hunted direction); p = mean(d) / gap places the subset between the two levels, with a t
interval from the spread of the d_i themselves. Looks come at `looks()` pair counts (about x1.5
apart, not at every pair: repeated looks inflate the error of each verdict), and a look decides
when the interval lies in one zone:

    hi < good_below                                 -> 'good'    (less than that share of the gap)
    lo > bad_above, mean >= min_effect             -> 'bad'     (the regression, or most of it)
    lo > 0, hi < partial_high, mean >= min_effect  -> 'partial' (a real, smaller slowdown)

At `max_pairs` without a decision the answer is None ('could not decide'): the hunk search treats
it as unresolved (it never reduces the search) and the hunt reports that it ran out of samples.
A subset is only a search step: a culprit is named after a separate, fresh test of it against
BASE with the control arm's rule (hunts/hunks.py / search/hunkdecide.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from scipy import stats as st

from regressbisect.config import DIRECTION, Direction
from regressbisect.search.ddmin import SubsetVerdict


@dataclass(frozen=True)
class LevelRule:
    """Zones of the position p (0 = base level, 1 = the whole regression)."""

    good_below: float = 0.5
    """Interval entirely below this share of the gap: as fast as base (for the search)."""
    bad_above: float = 0.35
    """Interval entirely above this share (and not 'good'): carries the regression. Below one
    half: the gap is an estimate, and the slow hunk itself must not fall between the zones."""
    partial_high: float = 0.85
    """A slowdown (interval above 0) whose interval ends below this: part of the regression."""
    min_pairs: int = 4
    """Pairs taken before the first look."""
    max_pairs: int = 48
    """Pairs after which the subset is left undecided."""
    confidence: float = 0.95
    """Two-sided confidence of the t interval at each look."""

    good_floor: float = 0.1
    """The good zone never narrows below this share of the gap."""

    def scaled_to(self, gap: float, min_effect_log: float, pair_sd: float) -> "LevelRule":
        """The good zone for this gap and this machine's noise (pair_sd: SD of one paired log
        difference, from the control arm).

        'Less than half the gap' would call a second, smaller culprit as fast as BASE (a hunk of
        -22% beside one of -65% is 0.19 of the gap), so the zone narrows to
        max(good_floor, 2 min_effect / gap, resolution), where resolution is two standard errors
        of a subset measured with half of max_pairs: on a quiet machine small culprits are told
        apart, on a noisy one the zone stays as wide as the pairs can resolve (at 15% noise and
        an 18% gap, 0.2 of the gap would need ~140 pairs per subset)."""
        if not gap > 0:
            raise ValueError("the gap must be positive")
        resolution = 2 * pair_sd / math.sqrt(self.max_pairs / 2) / gap if pair_sd > 0 else 0.0
        return replace(self, good_below=min(self.good_below, max(self.good_floor, 2 * min_effect_log / gap, resolution)))

    def looks(self) -> list[int]:
        """Pair counts at which a verdict may be taken: min_pairs, then about x1.5, then max_pairs."""
        out, n = [], self.min_pairs
        while n < self.max_pairs:
            out.append(n)
            n = max(n + 1, round(n * 1.5))
        return out + [self.max_pairs]


@dataclass(frozen=True)
class Position:
    p: float
    lo: float
    hi: float
    n: int


def slowdowns(base: Sequence[float], subset: Sequence[float], direction: Direction = DIRECTION) -> list[float]:
    """Log slowdown of each subset sample against its BASE partner (i-th with i-th), positive in
    the hunted direction ('both' counts a slowdown as positive)."""
    sign = -1.0 if direction == Direction.FASTER else 1.0
    return [sign * (math.log(b) - math.log(s)) for b, s in zip(base, subset)]


def position(diffs: Sequence[float], gap: float, confidence: float = 0.95) -> Position:
    """Position of the mean slowdown in units of the gap (log, > 0), with its t interval."""
    if not gap > 0:
        raise ValueError("the gap must be positive: no regression to place a subset in")
    n = len(diffs)
    mean = sum(diffs) / n
    p = mean / gap
    if n < 2:
        return Position(p, -math.inf, math.inf, n)
    sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1))
    half = st.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n) / gap
    return Position(p, p - half, p + half, n)


def subset_verdict(diffs: Sequence[float], gap: float, min_effect_log: float,
                   rule: LevelRule = LevelRule()) -> SubsetVerdict | None:
    """'good' | 'partial' | 'bad' at a look, None while more pairs are needed or, at max_pairs,
    when the subset could not be decided (check `undecided`)."""
    n = len(diffs)
    if n not in rule.looks():
        return None
    pos = position(diffs, gap, rule.confidence)
    if pos.hi < rule.good_below:
        return SubsetVerdict.GOOD
    big = pos.p * gap >= min_effect_log
    if big and pos.lo > rule.bad_above:
        return SubsetVerdict.BAD
    if big and pos.lo > 0 and pos.hi < rule.partial_high:
        return SubsetVerdict.PARTIAL
    return None


def undecided(diffs: Sequence[float], rule: LevelRule = LevelRule()) -> bool:
    """True once a subset has used its pairs without a verdict."""
    return len(diffs) >= rule.max_pairs
