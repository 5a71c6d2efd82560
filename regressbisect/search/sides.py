"""The side rule: does a side of a culprit hold another step (search it), none (clear it), or is it
too early to say? Pinpoint's rule, only if its ends differ (docs/search.md, section 4).

Pure (numpy/scipy only). It reads the sample book and decides; which samples to take next, and
when, is the search's (bisect.py).
"""
from __future__ import annotations

import math

import numpy as np

from regressbisect.search.book import SampleBook
from regressbisect.search.direction import toward
from regressbisect.search.stats import log_threshold, mixture_log_lr, t_cdf, t_ppf
from regressbisect.enums import WordEnum

__all__ = ["SideOutcome", "SideRule"]


class SideOutcome(WordEnum):
    """What became of one side of a culprit (`SideRule.decide`, `bisect.SideCheck.outcome`)."""

    SEARCHED = "searched"
    """Its ends differed: searched again."""
    CLEARED = "cleared"
    """A further step is implausible there."""
    UNRESOLVED = "unresolved"
    """Its ends could not be told apart or alike within the sample cap."""
    REMAINDER = "remainder"
    """Cleared, then searched all the same (the unexplained remainder was larger than what the
    cleared sides ruled out, and this side's ends differed most)."""


class SideRule:
    """The thresholds of the side checks, over one search's samples."""

    def __init__(self, book: SampleBook, *, min_effect: float, alpha: float, side_share: float,
                 side_drop: float, side_pairs: int | None, side_resolution: float | None = None):
        self.book = book
        self.min_effect = min_effect
        self.alpha = alpha
        self.side_share = side_share
        self.side_drop = side_drop
        self.side_pairs = side_pairs
        self.side_resolution = side_resolution

    def decide(self, lo: int, hi: int, since: int, *, sign: int, gap_scale: float) -> tuple[SideOutcome, float] | None:
        """('searched', nan) when the ends of the side lo..hi differ, ('cleared', the ruled-out
        relative size) when a further step is implausible there, None while neither.

        The two ends' mean log tok/s, compared with the pooled sigma, or the ends' own where it is
        larger than the rest's (`SampleBook.noise`: host-bound ends among GPU-bound commits
        borrowed their quiet and were cleared on it). 'searched' when a
        normal-mixture SPRT (scale: the side margin) rejects 'no difference' at alpha/5, the
        difference is at least min_effect and in the hunted direction: the check is repeated at
        every new pair, and that test's false starts stay below alpha/5 however many looks it
        takes. 'cleared' when a step of the side margin in the hunted direction has become
        implausible (probability below side_drop, t distribution), both on all samples of its ends
        and on the pairs of them taken after round `since` (the fresh pairs: docs/search.md,
        section 4). The margin is the larger of min_effect and side_share x the gap `gap_scale`
        (with side_resolution set: of min_effect and side_resolution, and nothing else),
        and, with side_pairs set, at least the step that many fresh pairs rule out at the pooled
        noise, t(1 - side_drop) sigma sqrt(2 / side_pairs) (`SearchSettings.side_pairs`): a
        check is then sized for about side_pairs pairs, and a smaller further step is left to what
        runs after the sides instead of costing (sigma / margin)^2 pairs per side.

        Why the fresh pairs: an end of a side is a culprit's commit, picked because its samples
        read at the far level, and those samples may come from another state of the machine than
        the other end's. On the means alone, a first_bad that read low by chance or while the
        machine was slower cleared the side that held the next step: 16 of 200 simulated hunts of
        two steps at 8% noise missed one so when the machine's speed switched by 15% every ~20
        rounds (scripts/sim_sides.py). A pair taken side by side cancels the machine's state, and
        pairs taken after the pick are independent of it (as the naming gate's, search/naming.py).
        Their price is one pair per side at low noise, a few at high noise.
        """
        lo_v, hi_v = self.book.raw.get(lo, []), self.book.raw.get(hi, [])
        sigma, df = self.book.pooled_sigma(of=(lo, hi))
        if not (lo_v and hi_v and sigma > 0):
            return None
        est = float(np.mean(np.log(hi_v)) - np.mean(np.log(lo_v)))
        se = sigma * math.sqrt(1 / len(lo_v) + 1 / len(hi_v))
        margin = log_threshold(self.min_effect)
        drop_margin = (max(margin, log_threshold(self.side_resolution)) if self.side_resolution is not None
                       else max(margin, self.side_share * gap_scale, self.pairs_margin(sigma, df)))
        ours = toward(est, sign)
        if abs(est) >= margin and ours > 0 and mixture_log_lr(est, se, drop_margin) >= math.log(5 / self.alpha):
            return SideOutcome.SEARCHED, math.nan
        fresh = self.book.paired_diffs(lo, hi, since=since)
        if fresh and self.implausible(ours, se, drop_margin, df):
            # all samples rule the step out; the pairs taken since the side opened must too
            ours, se = toward(float(np.mean(fresh)), sign), sigma * math.sqrt(2 / len(fresh))
            if self.implausible(ours, se, drop_margin, df):
                bound = ours + t_ppf(1 - self.side_drop, df) * se
                # The bound is of the net change between the ends (from the fresh pairs); it is
                # below zero when they moved the other way (an improvement in the side). Steps
                # under min_effect are never culprits, so a cleared side rules out min_effect at
                # the least.
                return SideOutcome.CLEARED, -math.expm1(-max(bound, margin))
        return None

    def resolution(self, lo: int, hi: int, since: int, *, sign: int) -> float | None:
        """The smallest further step in the hunted direction (relative, at least min_effect) that
        the side's fresh pairs rule out at side_drop, as `decide` clears one: the bound of their
        mean at t(1 - side_drop) with the pooled sigma; None without fresh pairs, or while its
        ends differ our way (then it is no resolution: the side may hold a step)."""
        fresh = self.book.paired_diffs(lo, hi, since=since)
        sigma, df = self.book.pooled_sigma(of=(lo, hi))
        if not (fresh and sigma > 0 and df > 0):
            return None
        ours, se = toward(float(np.mean(fresh)), sign), sigma * math.sqrt(2 / len(fresh))
        if ours > 0 and ours - t_ppf(1 - self.side_drop, df) * se > 0:
            return None
        bound = ours + t_ppf(1 - self.side_drop, df) * se
        return -math.expm1(-max(bound, log_threshold(self.min_effect)))

    def pairs_margin(self, sigma: float, df: int) -> float:
        """The step side_pairs fresh pairs rule out at probability side_drop when the ends read
        alike (log scale; 0 without side_pairs or a noise estimate)."""
        if not (self.side_pairs and df > 0 and sigma > 0):
            return 0.0
        return t_ppf(1 - self.side_drop, df) * sigma * math.sqrt(2 / self.side_pairs)

    def implausible(self, ours: float, se: float, margin: float, df: int) -> bool:
        """A step of `margin` in the hunted direction has less than side_drop probability, given an
        estimate `ours` of it (t distribution)."""
        return t_cdf((ours - margin) / se, df) < self.side_drop
