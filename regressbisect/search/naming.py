"""The naming gate: a step is named only on pairs of its two commits taken after it was picked.

Pure (numpy only). The localisation's posterior and its SPRT read the samples that picked a step
(last_good, first_bad); on a noisy machine the commit beside the true step, measured at the wrong
level by chance, got picked, kept being sampled until the 0.99 mass came (optional stopping), and
was named in 0.5-1% of the hunts at 8-15% CV. Pairs taken after the pick are independent of it:
the gate tests them (`named`) and sizes the culprit from them (`own_step`). docs/search.md,
sections 3 and 4.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from regressbisect.search.book import SampleBook
from regressbisect.search.direction import toward
from regressbisect.search.stats import EFFECT_PRIORS, far_pairs_sign_log_e, mixture_half_width, pooled_t_log_bf, sign_log_e

__all__ = ["Target", "NamingGate", "OWN_DF_TO_NAME", "MOST_READ_OFF", "AlphaSpender", "alpha_share", "fresh_pairs_to_tell_a_mode"]

OWN_DF_TO_NAME = 2
"""Degrees of freedom of a step's two commits' own spread (split at the pick) before the gate may
name it: with fewer, whether they are as quiet as the pool is not known (`NamingGate.named`)."""


def alpha_share(total: float, k: int) -> float:
    """The k-th test's share of a family-wise level `total` (k = 1, 2, ...): total / (k (k + 1)),
    which sums to `total` over every k (a union bound, whatever the tests' dependence)."""
    return total / (k * (k + 1))


MOST_READ_OFF = 0.5
"""The largest share of a commit's runs a mode can hold: a share above half is the level, and the
reading never sets more than half of a commit's runs apart (docs/search.md, interference)."""


def fresh_pairs_to_tell_a_mode(alpha: float, share: float) -> int:
    """Fresh pairs before a step may be named at level alpha where any commit may hold a mode of
    up to `share` of its runs that the hunt has not seen yet (`SearchSettings.stall_share`): if
    the step's two commits are one shape with a mode of share w <= share, a pair puts a's run out
    of the mode and b's in it with probability w (1 - w), all n pairs with (w (1 - w))^n, at most
    alpha from ln(alpha) / ln(share (1 - share)) pairs on (5 at 0.3 for the first step named, 6
    for the second). BAD's first runs all stalled sent the search past the stall, where a commit
    whose runs all missed it beside one whose runs all caught it read as a clean -30% step, with
    no run off any level in the whole hunt, and the gate named it on three fresh pairs (17 runs
    in all). 0 where share is 0."""
    if share <= 0:
        return 0
    w = min(share, MOST_READ_OFF)
    return math.ceil(math.log(alpha) / math.log(w * (1 - w)))


class AlphaSpender:
    """Hands out `alpha_share(total, k)` to the k-th test that asks, in the order they ask."""

    def __init__(self, total: float):
        self.total = total
        self.spent = 0
        """Tests that got a share so far."""

    def next(self) -> float:
        self.spent += 1
        return alpha_share(self.total, self.spent)


@dataclass(frozen=True)
class Target:
    """A step (last_good, first_bad) that reached confirmation: its rank among the steps picked in
    the hunt (its share of name_alpha), the round it was picked in (only pairs taken after it name
    it) and the naming test's effect prior: the step the model expected then, in units of the
    noise then (both fixed at the pick, so the test's prior does not look at its own data).
    paired: the machine had changed by the pick (`SampleBook.drifting`), so the test reads the
    spread within side-by-side pairs, in whose units `effect` is."""

    order: int
    since: int
    scale: float
    effect: float = math.nan
    paired: bool = False


class NamingGate:
    """The steps picked so far, and the always-valid test that names each on its fresh pairs."""

    def __init__(self, book: SampleBook, name_alpha: float, stall_share: float = 0.0, min_effect: float = 0.02):
        """stall_share: the share of runs a mode may hold at any commit before the hunt sees it
        (`SearchSettings.stall_share`, `fresh_pairs_to_tell_a_mode`); min_effect: the least far
        pair the signs bet on once every run is read (`stats.far_pairs_sign_log_e`)."""
        self.book = book
        self.name_alpha = name_alpha
        self.stall_share = stall_share
        self.min_effect = min_effect
        self.targets: dict[tuple[int, int], Target] = {}

    def pick(self, a: int, b: int, when: int, step: float) -> Target:
        """Register step (a, b) when it first reaches confirmation in round `when`, expecting a log
        step of `step`; a step picked before keeps its first pick."""
        if (a, b) not in self.targets:
            paired = self.book.drifting()
            noise = self.book.pair_noise() if paired else self.book.noise()
            self.targets[(a, b)] = Target(len(self.targets) + 1, when, abs(step), abs(step) / noise.sigma, paired)
        return self.targets[(a, b)]

    def since(self, a: int, b: int) -> int:
        return self.targets[(a, b)].since

    def fresh_pairs(self, a: int, b: int) -> list[float]:
        """log(b / a) of the pairs taken after the step's pick ([] for a step never picked)."""
        target = self.targets.get((a, b))
        return self.book.paired_diffs(a, b, since=target.since) if target else []

    def fresh_pairs_needed(self, a: int, b: int) -> int:
        """The floor of fresh pairs step (a, b) is named on where a mode of `stall_share` could
        hide (`fresh_pairs_to_tell_a_mode` at the step's share of name_alpha); 0 for a step never
        picked."""
        target = self.targets.get((a, b))
        return fresh_pairs_to_tell_a_mode(alpha_share(self.name_alpha, target.order), self.stall_share) if target else 0

    def short_of_the_floor(self) -> tuple[int, int] | None:
        """(fresh pairs, floor) of the first picked step still below its floor of fresh pairs, or
        None: the reason a hunt out of samples names the floor (--stall-share) it stopped at."""
        for (a, b) in self.targets:
            have, need = len(self.fresh_pairs(a, b)), self.fresh_pairs_needed(a, b)
            if have < need:
                return have, need
        return None

    def named(self, a: int, b: int, sign: int) -> bool:
        """The fresh pairs show a step in the hunted direction (`sign`; 0: either) by an e-value at
        this step's share of name_alpha.

        Under 'no step' the e-value of their mean (`stats.pooled_t_log_bf`, its effect prior fixed
        at the pick) is a nonnegative martingale, so it ever reaches 1/alpha_k with probability at
        most alpha_k, however often it is looked at; alpha_k = name_alpha / (k (k + 1)) for the
        k-th step picked sums to name_alpha over the whole hunt (a union bound over every bracket
        and side). The noise is the hunt's pooled spread, with a and b each split at the pick (so
        that it is independent of the fresh pairs' mean), or theirs alone where they are noisier
        than the rest (`SampleBook.noise`); for a step picked once the machine had changed, the
        spread within side-by-side pairs, the step's own split at the pick (`SampleBook.pair_noise`,
        docs/search.md section 3): the e-value needs no bound on sigma (an upper
        confidence bound cost ~1.2-1.4x the pairs). It names only once a and b have 2 degrees of
        freedom of their own after the split: before that nothing tells a flaky commit that read
        low twice from a quiet one, and the pool's quiet made its scatter a step (docs/search.md,
        section 1, "A commit noisier than the rest").
        """
        target = self.targets[(a, b)]
        diffs = self.fresh_pairs(a, b)
        if not diffs:
            return False
        est = float(np.mean(diffs))
        if toward(est, sign) <= 0:
            return False
        alpha_k = alpha_share(self.name_alpha, target.order)
        if len(diffs) < max(self.book.runs_to_tell_from_interference(est, alpha_k), self.fresh_pairs_needed(a, b)):
            return False
        priors = (target.effect ** 2,) if math.isfinite(target.effect) and target.effect > 0 else EFFECT_PRIORS
        split = {a: target.since, b: target.since}
        if self.book.own_noise(split, only=(a, b)).df < OWN_DF_TO_NAME:
            return False
        noise = (self.book.pair_noise(of=(a, b), since=target.since) if target.paired
                 else self.book.noise(split=split, of=(a, b)))
        log_e = pooled_t_log_bf(est, 2 / len(diffs), noise, sign=sign, priors=priors)
        if self.book.reads_every_run:
            # every run read, a stall's among them: the mean of two e-values is one, and the signs
            # of the pairs far apart hold whatever the shape (`stats.far_pairs_sign_log_e`)
            every = self.book.paired_diffs(a, b, since=target.since, every_run=True)
            far = far_pairs_sign_log_e(every, sign if sign else (1 if est > 0 else -1), self.min_effect)
            log_e = float(np.logaddexp(log_e, far) - math.log(2))
        if log_e < math.log(1 / alpha_k):
            return False
        if self.book.runs_at_the_other_level(a, b, noise.sigma):
            every = self.book.paired_diffs(a, b, since=target.since, every_run=True)
            return sign_log_e(every, sign if sign else (1 if est > 0 else -1)) >= math.log(1 / alpha_k)
        return True

    def own_size(self, a: int, b: int, sigma: float) -> tuple[float, float] | None:
        """(log step, half width of its 95% interval) of step (a, b) from its own fresh pairs, with
        the pooled noise `sigma` (see `Culprit.step`); None without fresh pairs or noise."""
        target = self.targets.get((a, b))
        diffs = self.fresh_pairs(a, b)
        if not diffs or target is None or not (sigma > 0 and target.scale > 0):
            return None
        # The gate stopped these pairs when they looked convincing, so a fixed-n interval would
        # cover too rarely (27 of 30 at 2% noise): Robbins' normal-mixture confidence sequence
        # (Howard et al. 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences",
        # two-sided), its prior scale the step expected at the pick, covers at any stopping time
        return float(np.mean(diffs)), mixture_half_width(2 * sigma * sigma, len(diffs), target.scale)
