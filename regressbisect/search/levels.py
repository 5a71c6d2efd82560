"""Where a measured subset of hunks sits between base (0) and base + all hunks (1). Pure.

The verdict rule of the hunk search (search/ddmin.py): on the log scale, the position p of the
subset's mean between the two references and its t-interval (Student's t, the references taken
as exact: they carry many more samples). Sampling is sequential - take `min_samples`, then one
more at a time - and stops as soon as the interval lies in one zone:
    hi < good_below -> 'good',  lo > bad_above -> 'bad',
    partial_low < lo and hi < partial_high -> 'partial';
at `max_samples` the point estimate decides. scripts/bench_hunks.py measures this rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from scipy import stats as st


@dataclass(frozen=True)
class LevelRule:
    """Zones of the position p (0 = base level, 1 = the whole regression)."""

    good_below: float = 0.3
    """Interval entirely below this: as fast as base."""
    bad_above: float = 0.7
    """Interval entirely above this: carries the whole regression."""
    partial_low: float = 0.2
    """Interval inside (partial_low, partial_high): a measurable part of the regression."""
    partial_high: float = 0.8
    """See partial_low."""
    min_samples: int = 3
    """Samples taken before the first decision."""
    max_samples: int = 15
    """Samples after which the point estimate decides."""
    confidence: float = 0.95
    """Two-sided confidence of the t-interval."""
    good_floor: float = 0.1
    """On a large gap the good and partial zones narrow to this share of it (see scaled_to)."""

    def scaled_to(self, gap: float, min_effect_log: float, noise_log: float = 0.0) -> "LevelRule":
        """The zones for a gap of `gap` (log base - log full, > 0) on a machine whose run-to-run
        noise (log SD, from the control arm) is `noise_log`.

        Shares of the gap alone would call 'as fast as base' a subset 22% slower than base when
        one hunk makes the whole diff 69% slower (0.21 of that gap), and a second, smaller
        culprit would never be peeled. 'good' and the lower edge of 'partial' are therefore capped
        at max(good_floor, 2 min_effect, 3 noise) / gap. The noise term matters: every verdict
        compares a subset with the control arm's levels, measured once at the start, and on a
        noisy machine that drifts by 10-15% within a hunt, a narrow zone turned harmless
        docstring hunks into 'culprits' (8 of them in one CPU run of the demo).
        """
        if not gap > 0:
            raise ValueError("the gap must be positive")
        cap = max(self.good_floor, (2 * min_effect_log) / gap, (3 * noise_log) / gap)
        return replace(self, good_below=min(self.good_below, cap), partial_low=min(self.partial_low, cap))


@dataclass(frozen=True)
class Position:
    p: float
    lo: float
    hi: float
    n: int


def position(values: Sequence[float], base_tok_s: float, full_tok_s: float,
             confidence: float = 0.95) -> Position:
    """Position of the subset's geometric mean between base (0) and full (1), with interval."""
    if base_tok_s == full_tok_s:
        raise ValueError("base and full levels are equal: no gap to place a subset in")
    logs = [math.log(v) for v in values]
    n = len(logs)
    gap = math.log(base_tok_s) - math.log(full_tok_s)
    mean = sum(logs) / n
    p = (math.log(base_tok_s) - mean) / gap
    if n < 2:
        return Position(p, -math.inf, math.inf, n)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = st.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n) / abs(gap)
    return Position(p, p - half, p + half, n)


def subset_verdict(values: Sequence[float], base_tok_s: float, full_tok_s: float,
                   rule: LevelRule = LevelRule()) -> str | None:
    """'good' | 'partial' | 'bad', or None while more samples are needed."""
    if len(values) < rule.min_samples:
        return None
    pos = position(values, base_tok_s, full_tok_s, rule.confidence)
    if pos.hi < rule.good_below:
        return "good"
    if pos.lo > rule.bad_above:
        return "bad"
    if rule.partial_low < pos.lo and pos.hi < rule.partial_high:
        return "partial"
    if len(values) >= rule.max_samples:
        return "good" if pos.p < rule.good_below else "bad" if pos.p > rule.bad_above else "partial"
    return None
