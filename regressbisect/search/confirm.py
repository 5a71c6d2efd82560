"""Confirmation: is the step the posterior proposes a step? (docs/search.md, section 3)

Pure. Once one step (last_good a, first_bad b) holds `confirm_enter` of the posterior's mass, its
two commits are measured in pairs and a Wald SPRT on their paired log differences (sigma pooled
from every sample of the hunt) decides between 'a step of the size the model expects' and 'no
step'; a drift of the machine cancels in each pair. 'No step' refutes the proposal (the search
vetoes it and moves on). 'A step' with the posterior at `confidence` hands it to the naming gate
(search/naming.py), which names it only on pairs taken after the pick; until the gate decides, its
rounds measure those fresh pairs, with the outer ends of the sides the step would leave beside
them (their checks need fresh pairs too).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Protocol

import numpy as np

from regressbisect.search.book import SampleBook
from regressbisect.search.localise import Posterior
from regressbisect.search.naming import NamingGate
from regressbisect.search.pairing import Pairing
from regressbisect.search.picker import Bracket, Picker
from regressbisect.search.stats import SprtDecision, log_threshold, sprt

__all__ = ["ConfirmSettings", "Action", "Confirmation", "StepConfirmation"]


class ConfirmSettings(Protocol):
    min_effect: float
    confirm_alpha: float
    beta: float
    confidence: float
    max_samples: int

    def pairs_to_name_a_step(self) -> int: ...


class Action(str, Enum):
    """What the confirmation of a step asks of the search."""

    NAMED = "named"
    """The gate named it."""
    REFUTED = "refuted"
    """The SPRT accepted 'no step': veto it."""
    GIVE_UP = "give-up"
    """A cap stops its pairs: the bracket is left unresolved."""
    MEASURE = "measure"
    """Take the samples of `Confirmation.picks`."""


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation of step (a, b) asks of the search now."""

    action: Action
    picks: tuple[tuple[int, str], ...] = ()
    """(candidate, why) of the next round, for 'measure'."""


class StepConfirmation:
    """The paired test and the naming gate's rounds of one search. `capped(i)`: candidate i is at
    its sample cap; `beside(bracket, a, b, slots)`: the outer ends of the sides step (a, b) would
    leave that are due a sample in the gate's rounds (`commit.sides.side_ends_beside_gate`)."""

    def __init__(self, book: SampleBook, settings: ConfirmSettings, gate: NamingGate, picker: Picker,
                 pairing: Pairing, capped: Callable[[int], bool],
                 beside: Callable[[Bracket, int, int, int], list[int]]):
        self.book = book
        self.settings = settings
        self.gate = gate
        self.picker = picker
        self.pairing = pairing
        self.capped = capped
        self.beside = beside

    def decide(self, iv: Bracket, post: Posterior, best: int, slots: int, last_round: int,
               sign: int) -> Confirmation:
        """The step post.gaps[best] of bracket `iv` holds confirm_enter of the mass (`sign`: the
        hunted direction, 0 for either): decide it, or say what to measure for it next."""
        s = self.settings
        a, b = post.gaps[best]
        mass = float(post.probs[best])
        diffs = self.book.paired_diffs(a, b)
        sigma, _ = self.book.pooled_sigma()
        delta = self.step_for_sprt(float(post.step_hat[best]), sign)
        self.gate.pick(a, b, last_round, delta)
        decision = SprtDecision.CONTINUE
        if sigma > 0 and diffs:
            decision = sprt(diffs, sigma=sigma * math.sqrt(2), delta=delta, alpha=s.confirm_alpha, beta=s.beta)
        confirm = f"confirm step {a}..{b}"
        if decision == SprtDecision.H1 and mass >= s.confidence:
            if self.gate.named(a, b, sign):
                return Confirmation(Action.NAMED)
            # the posterior and the SPRT read samples that picked this step; naming it needs
            # pairs taken since: measure the two commits in pairs until the gate decides
            outer = self.beside(iv, a, b, slots)
            capped = self.capped if self._at_its_floor(a, b) else (lambda i: False)
            fresh = [i for i in self.pairing.round_of(a, b, max(0, slots - len(outer)) if slots >= 4 else slots, last_round)
                     if not capped(i)]
            if fresh and not (capped(a) or capped(b)):
                beside = [(i, f"check ends beside step {a}..{b}") for i in outer]
                pairs = [(i, confirm) for i in fresh]
                return Confirmation(Action.MEASURE, tuple(beside if beside and slots < 4 else beside + pairs))   # under 4 slots: a round each
            return Confirmation(Action.GIVE_UP)
        if decision == SprtDecision.H0:
            return Confirmation(Action.REFUTED)
        if decision == SprtDecision.H1:
            # the pairs already show the step: what is missing is posterior mass, and the most
            # informative sample for it is the median split again (a, b or a neighbour)
            informative = self.picker.quantiles(iv, post, slots, exclude=set())
            if informative and set(informative) <= {a, b}:
                # the split points at the step itself: measure its two commits in pairs, not one
                # of them in a burst, which a drift of the machine would confound
                informative = [i for i in self.pairing.round_of(a, b, slots, last_round) if not self.capped(i)] or informative
            # the level rule applies here too: with the step next to GOOD (a == lo) the median
            # split never picks a, and only the end itself can pin the old level
            anchor = self.picker.anchor(iv, informative) if a == iv.lo else None
            if anchor is not None:
                informative = [anchor] + informative[: slots - 1]
            if informative:
                return Confirmation(Action.MEASURE, tuple((i, confirm) for i in informative))
        if self.capped(a) or self.capped(b):
            # a new pair needs a sample of both commits: with one at max_samples the paired test
            # can go no further. Once it has accepted, the other still moves the posterior
            uncapped = [i for i in (a, b) if not self.capped(i)]
            if decision == SprtDecision.H1 and uncapped:
                return Confirmation(Action.MEASURE, ((uncapped[0], confirm),))
            return Confirmation(Action.GIVE_UP)
        picks = [(i, "confirm step") for i in self.pairing.next(a, b, slots, last_round)]
        if slots > len(picks):
            picks += [(i, f"bisect {iv.lo}..{iv.hi}") for i in self.picker.quantiles(iv, post, slots - len(picks), exclude={a, b})]
        return Confirmation(Action.MEASURE, tuple(picks))

    def _at_its_floor(self, a: int, b: int) -> bool:
        """The step has the fresh pairs the gate names on at the least (`NamingGate.fresh_pairs_needed`).
        Below them, a commit at max_samples still takes the step's fresh pairs: the cap bounds
        what finding a step costs, and the floor is the price of naming one found, paid once (at
        most its 5-6 pairs). Half the runs at 0.7x: commit 13, sampled to its cap refuting the
        step 12..13, left the true step 13..14 at mass 1.0 with 2 fresh pairs of 5, 'could not
        decide' (1 hunt of 100 in `bench_accuracy.py --shapes`; 93% -> 94% exact). A cap below
        what a commit needs to be named (`SearchSettings.pairs_to_name_a_step`) is the user's
        bound on the cost, warned of (`hunts.common.warn_short_cap`), and stays one."""
        if self.settings.max_samples < self.settings.pairs_to_name_a_step():
            return True
        return len(self.gate.fresh_pairs(a, b)) >= self.gate.fresh_pairs_needed(a, b)

    def step_for_sprt(self, step_hat: float, sign: int) -> float:
        """Alternative of the SPRT: the model's step, at least min_effect, in the hunted direction."""
        margin = log_threshold(self.settings.min_effect)
        sign = sign or (1 if step_hat >= 0 else -1)
        return sign * max(abs(step_hat) if np.isfinite(step_hat) and np.sign(step_hat) == sign else 0.0, margin)
