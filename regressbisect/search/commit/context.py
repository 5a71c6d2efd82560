"""What every phase of the commit search reads and writes: one `SearchContext` (the settings, the
sample book, the rules over it, the round and probe count, and what the search has found so far),
and the `Bracket`s it searches. The phases are functions over it (this package's __init__ lists
them); none holds state of its own."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from regressbisect.config import MAX_SAMPLES
from regressbisect.search.book import SampleBook
from regressbisect.search.confirm import StepConfirmation
from regressbisect.search.control import ControlArm
from regressbisect.search.culprits import Culprit, CulpritRule
from regressbisect.search.direction import hunted_sign, toward
from regressbisect.search.localise import Posterior, step_posterior
from regressbisect.search.naming import NamingGate
from regressbisect.search.pairing import Pairing
from regressbisect.search.phases import Batch, OutOfProbes, Phase
from regressbisect.search.picker import Picker
from regressbisect.search.results import Measure, SideCheck
from regressbisect.search.settings import SearchSettings
from regressbisect.search.sides import SideRule
from regressbisect.search.stats import log_threshold

__all__ = ["BUDGET_WINDOW", "Bracket", "Pick", "SearchContext"]


@dataclass
class Bracket:
    """A bracket [lo, hi] searched for one step; a side of a culprit is first `checked`."""

    lo: int
    hi: int
    checked: bool
    vetoed: set[tuple[int, int]] = field(default_factory=set)
    is_side: bool = False
    probes_at_start: int = 0
    opened: int = -1
    """Round in which a side was opened: only pairs of its ends taken after it may clear it."""


Pick = tuple[Measure, "str | None"]
"""One measure of a round and the pairing tag its sample is booked under (the control arm's)."""

BUDGET_WINDOW = 40
"""Rounds of the recent noise a bracket's budget is priced at (`SearchContext.over_budget`):
enough for RECENT_DF degrees of freedom at one sample a round, short next to a busy hunt's
hundreds of rounds."""


class SearchContext:
    """One commit search's state, over candidates 0 (GOOD) .. n-1 (BAD): its rules (each over the
    one sample book), the round, the probes, the hunted sign and step scale once the control arm
    said 'go', and what it found (`queue` of brackets still to search, `culprits`, `side_checks`,
    `refuted`, `unresolved`, `given_up`). `slots`: how many measures the round being planned may
    take. `one_step`: the search ends at its first named step (a hunk hunt's search for a need)."""

    def __init__(self, n: int, settings: SearchSettings, book: SampleBook, *, one_step: bool = False):
        self.n = n
        self.settings = settings
        self.book = book
        self.one_step = one_step
        self.slots = 1
        self.round = 0
        """Rounds handed out so far (a round being planned is `round + 1`)."""
        self.probes = 0
        """Samples recorded (skipped runs included)."""
        self.sign = 0
        """The hunted direction once the search started (0 before, and for 'both')."""
        self.tau = log_threshold(settings.min_effect)
        """The posterior's prior scale of a step: the control arm's gap once it said 'go'."""
        self.live = (0, n - 1)
        self.reproduced = False
        """The control arm said 'go' (the search after it started)."""
        self.queue: list[Bracket] = []
        self.culprits: list[Culprit] = []
        self.unresolved: list[tuple[int, int]] = []
        self.given_up: list[Bracket] = []           # brackets left at a cap or budget, in order
        self.refuted: list[tuple[int, int]] = []    # steps the paired test vetoed
        self.side_checks: list[SideCheck] = []
        self.priced: dict[tuple[int, int], float] = {}   # sides cleared at their price: the step ruled out
        self.remainder_searched = False             # a cleared side was searched for the remainder
        self.shape_reviewed = False                 # the ends' shapes were read over the whole hunt
        self.control = ControlArm(book, settings, 0, n - 1)   # GOOD and BAD in pairs, first
        self.gate = NamingGate(book, settings.name_alpha, settings.stall_share, settings.min_effect)   # steps that reached confirmation
        self.picker = Picker(book, self.capped)              # what the localisation measures next
        self.pairing = Pairing(book, settings.pair_window, self.room)   # which of two commits a pair takes next
        self.rule = CulpritRule(book, settings, self.gate, n)   # which confirmed steps are named, their sizes
        self.sides = SideRule(book, min_effect=settings.min_effect, alpha=settings.alpha,
                              side_share=settings.side_share, side_drop=settings.side_drop,
                              side_pairs=settings.side_pairs, side_resolution=settings.side_resolution)
        self.confirmation: StepConfirmation | None = None
        """Is a proposed step a step (search/confirm.py); set by the search, which hands it the sides'
        ends to measure beside its pairs (`commit.sides.side_ends_beside_gate`)."""

    def measure(self, picks: list[Pick]) -> Phase:
        """Ask for one round (a coroutine phase); once its samples are recorded, `OutOfProbes` where
        they reached `SearchSettings.max_probes`, before any decision they allow."""
        yield Batch(tuple(picks))
        if self.probes >= self.settings.max_probes:
            raise OutOfProbes()

    # ------------------------------------------------------------------ caps and budgets

    def capped(self, i: int) -> bool:
        """At max_samples, not counting the control arm's pairs, which have a cap of their own: a
        control arm that needed them all would otherwise leave GOOD or BAD no sample for the search,
        and a step next to either could never be confirmed in pairs."""
        return self.room(i) <= 0

    def room(self, i: int) -> int:
        """Samples `i` may still take before max_samples (as `capped` counts them)."""
        n = self.book.run_count(i)
        if i in (0, self.n - 1):
            n -= self.book.run_count(i, self.control.tag)
        return self.settings.max_samples - n

    def samples_per_decision(self, recent: bool = False) -> int:
        """Samples that tell a step's two levels apart at 100:1 odds: n tau^2 / (2 sigma^2) = log 100.

        tau is half the GOOD->BAD gap measured so far (at least min_effect): early on that estimate
        rests on as few as 3 pairs and is often twice the truth, and the budgets built on it must not
        be short. recent: sigma is at least that of the last BUDGET_WINDOW rounds (`over_budget`).
        """
        sigma, _ = self.book.pooled_sigma()
        if recent:
            known = [x for x in (sigma, self.book.recent_sigma(self.round - BUDGET_WINDOW)) if x > 0]
            sigma = max(known, default=math.nan)
        tau = max(self.gap_scale() / 2, log_threshold(self.settings.min_effect))
        if not sigma > 0:
            return 3
        return int(min(self.settings.max_samples, max(1, math.ceil(2 * math.log(100) * sigma ** 2 / tau ** 2))))

    def over_budget(self, iv: Bracket) -> bool:
        """A bracket may spend 3x what finding one step should cost, then it is unresolved
        (bounds the cost of a range whose step cannot be pinned, e.g. a gradual slowdown).

        What a step costs is priced at the larger of the hunt's pooled noise and the noise of its
        last BUDGET_WINDOW rounds: a machine that got busy mid-hunt pays for the noise it has now,
        not the average with its quiet start, whose many degrees of freedom held the pooled sigma
        down while every fresh pair was read at the new noise (docs/search.md, "Budgets"). Never
        below the pooled price, so a machine that grew quiet keeps the budget it had. Priced in
        typical runs: where a share of the runs is read as interfered (the machine's second mode),
        every typical run costs `runs_per_typical_run` runs, and the budget pays them."""
        per = self.samples_per_decision(recent=True)
        budget = (3 * max(per, 4) * (math.log2(iv.hi - iv.lo + 1) + 4) * self.budget_scale()
                  * self.book.runs_per_typical_run() ** 2)
        return self.probes - iv.probes_at_start > budget

    def budget_scale(self) -> float:
        """A max_samples above the default raises each bracket's budget in proportion: the one
        flag a user raises to let an undecided hunt go further (the report's continue command)."""
        return max(1.0, self.settings.max_samples / MAX_SAMPLES)

    # ------------------------------------------------------------------ the gap and the posterior

    def gap_scale(self) -> float:
        """|log GOOD->BAD gap| from every sample of the two ends so far, at least min_effect (for
        the budgets and the side margin; the posterior's prior scale stays the control arm's look)."""
        if not self.reproduced or not (self.book.raw.get(0) and self.book.raw.get(self.n - 1)):
            return self.tau
        return max(abs(self.rule.total_log_gap()), log_threshold(self.settings.min_effect))

    def gap_scale_relative(self) -> float:
        """The GOOD -> BAD gap as a relative change (from `gap_scale`'s log)."""
        return -math.expm1(-self.gap_scale())

    def hunted_sign(self) -> int:
        return hunted_sign(self.settings.direction)

    def toward(self, change: float) -> float:
        return toward(change, self.sign)

    def measurable_in(self, lo: int, hi: int) -> list[int]:
        return [i for i in range(lo, hi + 1) if not self.book.unmeasurable(i)]

    def posterior(self, iv: Bracket, sign: int, null_prior: float = 0.0) -> Posterior:
        """Posterior over the step position in [iv.lo, iv.hi] (`localise.step_posterior`)."""
        return step_posterior(self.book, self.measurable_in(iv.lo, iv.hi), iv.vetoed, tau=self.tau, sign=sign,
                              null_prior=null_prior, drift_prior=self.settings.drift_prior)

    # ------------------------------------------------------------------ what the search found

    def give_up(self, iv: Bracket, refuted: bool = False) -> None:
        """Leave a bracket unresolved; unless every step it proposed was refuted, the search ran
        out of samples or budget there (the hunt is then 'undecided', not 'not localised')."""
        self.unresolved.append((iv.lo, iv.hi))
        if not refuted:
            self.given_up.append(iv)

    def reproduced_overall(self) -> bool:
        """False when every sample the hunt took of GOOD and BAD puts their difference below
        min_effect (or the other way): the control arm's start was then a fluke, and the hunt
        did not reproduce the regression. The difference comes from a fit with a drift in time
        when that is significant (the end samples of a search are taken at different times)."""
        est, _ = self.rule.end_difference()
        if not math.isfinite(est):
            return True
        return toward(est, self.hunted_sign()) > 0 and abs(est) >= log_threshold(self.settings.min_effect)

