"""Commit search: find every commit in GOOD..BAD where tok/s steps in the hunted direction.

Pure: no git, no processes, no I/O. The caller (hunts/commits.py) asks `next_batch()` for a round of
measures, runs them (concurrently when slots > 1), feeds each tok/s back with `record()`, and
repeats until the batch is empty. Everything is decided from the recorded values alone, so
replaying the same values in the same order gives the same requests (resume after a kill).

The method (docs/search.md has the details and the references):

1. Control arm. GOOD (index 0) and BAD (index n-1) are measured interleaved, in ABBA order when
   one sample runs at a time, and compared after every pair with an anytime-valid e-value on log
   tok/s (stats.pooled_t_log_bf), up to max_samples pairs. No regression in the
   hunted direction (or one provably below min_effect) -> 'not-reproduced'.
2. Localisation. Within an interval [lo, hi] whose ends differ, the first bad commit is a change
   point. Its posterior uses every numeric sample (not pass/fail): log tok/s = level + step *
   [index >= first_bad] + noise, a Bayesian linear model where the level has a flat prior, the
   step a Gaussian prior (half-Gaussian in the hunted direction), and the noise sigma a 1/sigma
   prior integrated numerically. Each round measures the commits that split the posterior mass
   into slots + 1 equal parts (the median for one slot: the split of greatest expected
   information), plus an end of the bracket when an interior commit has as many samples (the
   levels are shared by all hypotheses and must stay pinned).
3. Confirmation (search/confirm.py). Once one step (last_good, first_bad) holds confirm_enter of
   the mass, the two commits are measured in pairs and a Wald SPRT on their paired log
   differences (sigma pooled from all samples) must accept the step, and the posterior must reach
   `confidence`. A drift of the machine cancels in each pair, so it cannot make a culprit; an SPRT
   that accepts 'no step' vetoes that pair and the search moves on. Those read the samples that
   picked the step, so it is named only once pairs taken after the pick show it too (an
   always-valid test whose error is spent over every step the hunt picks: `search/naming.py`,
   `NamingGate`).
4. Every change point. After a culprit, the two sides [lo, last_good] and [first_bad, hi] are
   checked (Pinpoint-style: do their ends differ?) and searched the same way, with a 'no step
   here' hypothesis added to the posterior.

Skips: a candidate whose probe is skipped (crash, exit 125, timeout) is asked again once; a second
skip with no more successes than skips marks it unmeasurable (crashes are usually deterministic,
a single one may be a flake). Unmeasurable commits are not hypotheses of their own: a step next to
them is reported as the range (last_good, first_bad), as git bisect does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Sequence

import numpy as np

from regressbisect.config import MAX_SAMPLES
from regressbisect.search.book import SampleBook
from regressbisect.search.confirm import Action, StepConfirmation
from regressbisect.search.control import ControlArm
from regressbisect.search.culprits import Culprit, CulpritRule
from regressbisect.search.direction import hunted_sign, toward
from regressbisect.search.interference import Reader
from regressbisect.search.localise import Posterior, step_posterior
from regressbisect.search.naming import NamingGate
from regressbisect.search.pairing import Pairing
from regressbisect.search.picker import Picker
from regressbisect.search.results import (CONTROL_ARM, CandidateVerdict, LeadingStep, Measure, SearchResult,
                                          SideCheck)
from regressbisect.search.settings import SearchSettings
from regressbisect.search.sides import SideOutcome, SideRule
from regressbisect.search.stats import NoisePool, Summary, log_threshold, summarize
from regressbisect.search.verdicts import CandidateCall, Verdict

# the settings and result types live in settings.py and results.py; every import of them from here keeps working
__all__ = ["SearchSettings", "CONTROL_ARM", "Measure", "Culprit", "CandidateVerdict", "SideCheck", "LeadingStep",
           "SearchResult", "CommitSearch"]


class _Phase(str, Enum):
    """Where a search is: its control arm, the search after it, or done."""

    CONTROL = "control"
    SEARCH = "search"
    DONE = "done"

    def __str__(self) -> str:   # its value, also in f-strings
        return self.value


@dataclass
class _Interval:
    """A bracket [lo, hi] searched for one step; a side of a culprit is first `checked`."""

    lo: int
    hi: int
    checked: bool
    vetoed: set[tuple[int, int]] = field(default_factory=set)
    is_side: bool = False
    probes_at_start: int = 0
    opened: int = -1
    """Round in which a side was opened: only pairs of its ends taken after it may clear it."""


BUDGET_WINDOW = 40
"""Rounds of the recent noise an interval's budget is priced at (`CommitSearch._over_budget`):
enough for RECENT_DF degrees of freedom at one sample a round, short next to a busy hunt's
hundreds of rounds."""

_EMPTY = Summary(n=0, median=math.nan, ci95=(math.nan, math.nan), cv=math.nan)


class CommitSearch:
    """Adaptive search of the first-parent list 0 (GOOD) .. n-1 (BAD); see the module docstring."""

    def __init__(self, n: int, settings: SearchSettings = SearchSettings(), *,
                 noise_prior: NoisePool | None = None, reader: Reader | None = None, one_step: bool = False):
        """noise_prior: a remembered noise scale (the spread of earlier hunts' samples on this machine
        and probe config, at most NOISE_PRIOR_DF degrees of freedom), joined to the hunt's own
        pooled spread while that is not larger (`SampleBook.with_prior`). reader: who reads which
        runs were interfered (`SampleBook`; default the search's own runs). one_step: end at the
        first named step, its sides unchecked (the hunk hunt's search for what a step needs)."""
        if n < 2:
            raise ValueError("a commit search needs at least GOOD and BAD (n >= 2)")
        self.n = n
        self.one_step = one_step
        self.settings = settings
        self.book = SampleBook(settings.pair_window, noise_prior,     # every sample, its round and tag
                               read_interference=settings.read_interference, reader=reader)
        self._pending: list[tuple[int, str | None, int]] = []
        self._round = 0
        self._probes = 0
        self._phase: _Phase = _Phase.CONTROL
        self._end_verdict: Verdict | None = None
        """The control arm's verdict where it ended the hunt (or not-reproduced: out of budget in it)."""
        self._queue: list[_Interval] = []
        self._culprits: list[Culprit] = []
        self._unresolved: list[tuple[int, int]] = []
        self._given_up: list[_Interval] = []             # brackets left at a cap or budget, in order
        self._refuted: list[tuple[int, int]] = []       # steps the paired test vetoed
        self._sides: list[SideCheck] = []
        self._sign = 0
        self._tau = log_threshold(settings.min_effect)
        self._live = (0, n - 1)
        self.control = ControlArm(self.book, settings, 0, n - 1)   # GOOD and BAD in pairs, first
        self._reproduced = False                         # the control arm said 'go'
        self.gate = NamingGate(self.book, settings.name_alpha, settings.stall_share, settings.min_effect)   # steps that reached confirmation
        self.picker = Picker(self.book, self._capped)            # what the localisation measures next
        self.pairing = Pairing(self.book, settings.pair_window, self._room)   # which of two commits a pair takes next
        self.confirmation = StepConfirmation(self.book, settings, self.gate, self.picker, self.pairing,
                                             self._capped, self._side_ends_beside_gate)   # is the proposed step a step
        self.rule = CulpritRule(self.book, settings, self.gate, n)   # which confirmed steps are named, their sizes
        self.sides = SideRule(self.book, min_effect=settings.min_effect, alpha=settings.alpha,
                              side_share=settings.side_share, side_drop=settings.side_drop,
                              side_pairs=settings.side_pairs, side_resolution=settings.side_resolution)
        self._remainder_searched = False                 # a cleared side was searched for the remainder
        self._shape_reviewed = False                     # the ends' shapes were read over the whole hunt
        self._priced: dict[tuple[int, int], float] = {}   # sides cleared at their price: the step ruled out

    # ------------------------------------------------------------------ public API

    def next_batch(self, slots: int = 1) -> list[Measure]:
        """One round: up to `slots` measures, one sample each; [] when done. The candidates of a
        round are distinct, except in side checks, where spare slots take more samples of the ends,
        and in rounds of a step's pairs, which alternate its two commits over every slot."""
        if slots < 1:
            raise ValueError("slots must be >= 1")
        if self._pending:
            raise RuntimeError("record() every measure of the previous round before asking for the next")
        batch = self._plan(slots)
        if batch:
            self._round += 1
            self._pending = [(m.index, tag, self._round) for m, tag in batch]
        return [m for m, _ in batch]

    def record(self, index: int, value: float | None) -> None:
        """Feed one sample (tok/s) of `index`, or None when its run was skipped."""
        if not 0 <= index < self.n:
            raise ValueError(f"index {index} out of range 0..{self.n - 1}")
        tag, when = None, self._round
        for k, (i, t, r) in enumerate(self._pending):
            if i == index:
                tag, when = t, r
                del self._pending[k]
                break
        self._probes += 1
        self.book.add(index, value, tag=tag, when=when)

    def carry_control_pairs(self, good: Sequence[float], bad: Sequence[float]) -> None:
        """Pairs of the two ends measured before this search, side by side (another test's arms in
        rotation): the control arm goes on from them. Its e-values are anytime-valid, so a
        sequence that another rule stopped may be continued (Ville's inequality holds at every
        stopping time). Only before the first round; they are no probes of this search."""
        if self._round or self._pending:
            raise RuntimeError("carry_control_pairs() comes before the first round")
        for good_value, bad_value in zip(good, bad):
            self._round += 1
            self.book.add(0, good_value, tag=self.control.tag, when=self._round)
            self.book.add(self.n - 1, bad_value, tag=self.control.tag, when=self._round)

    @property
    def done(self) -> bool:
        """True once the search has nothing more to measure."""
        if self._phase != _Phase.DONE and not self._pending:
            self._plan(1)   # settles any decision the last samples allow; requests nothing
        return self._phase == _Phase.DONE

    def samples(self, index: int) -> tuple[float, ...]:
        """The tok/s recorded for a candidate, in recording order."""
        return tuple(self.book.raw.get(index, ()))

    def live_interval(self) -> tuple[int, int]:
        """Narrowest bracket (last_good, first_bad) currently searched, for the progress display."""
        return self._live

    def estimated_remaining(self) -> int | None:
        """Best-effort estimate of the probes still to run (None when unknown)."""
        if self._phase == _Phase.DONE:
            return 0
        per = self._samples_per_decision()
        if self._phase == _Phase.CONTROL:
            pairs = self.control.pairs()
            return 2 * max(0, max(2, per) - pairs) + int(math.log2(max(2, self.n)) * per) + 2 * per
        lo, hi = self._live
        width = max(1, hi - lo)
        return int(math.log2(width) * per + 2 * per * (1 + len(self._queue)))

    def result(self, end_names: tuple[str, str] = ("GOOD", "BAD")) -> SearchResult:
        """What the search has found so far (final once `done`); end_names: what its reasons call
        index 0 and n - 1.

        A confirmed step is named a culprit only when, sized from every sample of its segments,
        its point estimate is at least min_effect in the hunted direction and its 95% interval
        excludes zero; one that is not stays a suspect. Culprits that own more than share_limit of
        the gap, or leave a remainder below -100%, mean the step model does not fit: none is
        named and the verdict is 'undecided'.
        """
        culprits, suspects = self.rule.named_culprits(self._culprits)
        gap_log, gap_se = self.rule.end_difference()
        gap = math.expm1(gap_log)
        reason = ""
        if culprits and self.rule.shares_do_not_add_up(culprits):
            shares = ", ".join(f"{c.share_of_gap:.0%}" for c in culprits)
            reason = (f"the confirmed steps own {shares} of the gap, which does not add up: "
                      "the samples do not fit one step per culprit")
            suspects, culprits = tuple(sorted(culprits + suspects, key=lambda c: c.first_bad)), ()
        steps = tuple(self.rule.own_step(c) for c in culprits)   # every step that passed the rule, its own size
        whole = len(steps) == 1 and steps[0].first_bad - steps[0].last_good == self.n - 1 and self.n > 2
        ambiguous = () if whole else tuple(c for c in steps if c.first_bad - c.last_good > 1)
        culprits = tuple(c for c in steps if c not in ambiguous)
        if self._end_verdict is not None:
            verdict = self._end_verdict
            if verdict in (Verdict.NOT_REPRODUCED, Verdict.UNDECIDED) and self.control.comparison is not None:
                reason = self.control.not_reproduced_reason(verdict, out_of_probes=self._probes >= self.settings.max_probes,
                                                            names=end_names)
        elif whole:
            verdict = Verdict.ALL_SKIPPED
        elif culprits:
            verdict = Verdict.CULPRITS   # an ambiguous step beside them is reported, not named
        elif ambiguous:
            verdict = Verdict.AMBIGUOUS
        elif self._phase == _Phase.DONE and not self._reproduced_overall():
            verdict = Verdict.NOT_REPRODUCED
            reason = ("every sample of GOOD and BAD taken so far puts the difference below "
                      f"{self.settings.min_effect:.1%}: the control arm's start was a fluke")
        elif self._given_up or suspects or self._phase != _Phase.DONE:
            verdict = Verdict.UNDECIDED
            short = self.gate.short_of_the_floor()
            if not reason and short is not None and not suspects:
                reason = (f"the sample cap (--max-samples) or the budget ran out with {short[0]} fresh pair(s) "
                          f"at the leading step, which is named on {short[1]}: a stall in "
                          f"{self.settings.stall_share:.0%} of runs (--stall-share) could split one shape "
                          "between fewer")
            if not reason:
                reason = ("steps could not be confirmed at a size of at least "
                          f"{self.settings.min_effect:.1%} with an interval excluding zero"
                          if suspects else "the sample cap (--max-samples) or the budget ran out before "
                                           "a step could be confirmed or ruled out")
        else:
            verdict = Verdict.NOT_LOCALISED
            reason = (f"the slowdown reproduced, but the paired test refuted every single step the "
                      f"search proposed ({len(self._refuted)}): a gradual slowdown, or several small steps")
        explained = sum(c.share_of_gap for c in culprits + ambiguous)
        unexplained = math.nan if verdict in (Verdict.NOT_REPRODUCED, Verdict.ALL_SKIPPED) else 1.0 - explained
        unexplained_ci95 = self.rule.unexplained_interval(culprits + ambiguous, unexplained, gap_log, gap_se)
        ends = tuple(summarize(self.book.raw[i]) if self.book.raw.get(i) else _EMPTY for i in (0, self.n - 1))
        return SearchResult(verdict=verdict, culprits=culprits, endpoints=ends, gap=gap,  # type: ignore[arg-type]
                            unexplained=unexplained, unexplained_ci95=unexplained_ci95, candidates=self._candidate_verdicts(steps),
                            probes=self._probes, sides=tuple(self._sides), refuted=tuple(self._refuted),
                            unresolved=tuple(self._unresolved), suspects=tuple(suspects), reason=reason,
                            reproduced=self._reproduced and verdict not in (Verdict.NOT_REPRODUCED, Verdict.ALL_SKIPPED),
                            control=self.control.comparison, ambiguous=ambiguous,
                            established=self._established(suspects) if verdict == Verdict.UNDECIDED else None,
                            shape=self.control.shape,
                            more_samples_would_tell=verdict == Verdict.UNDECIDED or (
                                verdict == Verdict.NOT_REPRODUCED and self._end_verdict is not None
                                and self.control.more_pairs_would_tell()))

    def _established(self, suspects: Sequence[Culprit]) -> LeadingStep | None:
        """The step an undecided search had got to (`SearchResult.established`): the leading
        step of the first bracket it gave up at a cap or budget, or else its strongest
        confirmed step that the culprit rule did not name."""
        def step(lo: int, hi: int, a: int, b: int, mass: float) -> LeadingStep | None:
            if not (self.book.raw.get(a) and self.book.raw.get(b)):
                return None
            return LeadingStep(lo=lo, hi=hi, last_good=a, first_bad=b, mass=mass, before=summarize(self.book.raw[a]),
                               after=summarize(self.book.raw[b]), confirmed=any(c.first_bad == b for c in self._culprits))

        for iv in self._given_up:
            post = self._posterior(iv, sign=self._sign, null_prior=0.5 if iv.is_side else 0.0)
            if post.gaps:
                best = int(np.argmax(post.probs))
                found = step(iv.lo, iv.hi, *post.gaps[best], float(post.probs[best]))
                if found is not None:
                    return found
        if suspects:
            strongest = max(suspects, key=self.rule.evidence)
            return step(0, self.n - 1, strongest.last_good, strongest.first_bad, math.nan)
        return None

    def _reproduced_overall(self) -> bool:
        """False when every sample the hunt took of GOOD and BAD puts their difference below
        min_effect (or the other way): the control arm's start was then a fluke, and the hunt
        did not reproduce the regression. The difference comes from a fit with a drift in time
        when that is significant (the end samples of a search are taken at different times)."""
        est, _ = self.rule.end_difference()
        if not math.isfinite(est):
            return True
        return toward(est, self._hunted_sign()) > 0 and abs(est) >= log_threshold(self.settings.min_effect)

    # ------------------------------------------------------------------ data helpers

    def _capped(self, i: int) -> bool:
        """At max_samples, not counting the control arm's pairs, which have a cap of their own: a
        control arm that needed them all would otherwise leave GOOD or BAD no sample for the search,
        and a step next to either could never be confirmed in pairs."""
        return self._room(i) <= 0

    def _room(self, i: int) -> int:
        """Samples `i` may still take before max_samples (as _capped counts them)."""
        n = self.book.run_count(i)
        if i in (0, self.n - 1):
            n -= self.book.run_count(i, self.control.tag)
        return self.settings.max_samples - n

    def _samples_per_decision(self, recent: bool = False) -> int:
        """Samples that tell a step's two levels apart at 100:1 odds: n tau^2 / (2 sigma^2) = log 100.

        tau is half the GOOD->BAD gap measured so far (at least min_effect): early on that estimate
        rests on as few as 3 pairs and is often twice the truth, and the budgets built on it must not
        be short. recent: sigma is at least that of the last BUDGET_WINDOW rounds (`_over_budget`).
        """
        sigma, _ = self.book.pooled_sigma()
        if recent:
            known = [x for x in (sigma, self.book.recent_sigma(self._round - BUDGET_WINDOW)) if x > 0]
            sigma = max(known, default=math.nan)
        tau = max(self._gap_scale() / 2, log_threshold(self.settings.min_effect))
        if not sigma > 0:
            return 3
        return int(min(self.settings.max_samples, max(1, math.ceil(2 * math.log(100) * sigma ** 2 / tau ** 2))))

    # ------------------------------------------------------------------ the state machine

    def _plan(self, slots: int) -> list[tuple[Measure, str | None]]:
        """Apply every decision the data allow, then return the next round (empty when done)."""
        while self._phase != _Phase.DONE:
            if self._probes >= self.settings.max_probes:
                self._finish_budget()
                break
            if self._phase == _Phase.CONTROL:
                batch = self._plan_control(slots)
            else:
                batch = self._plan_search(slots)
            if batch is not None:
                return batch
        return []

    def _finish_budget(self) -> None:
        if self._phase == _Phase.CONTROL:
            self._end_verdict = Verdict.NOT_REPRODUCED
        else:
            for iv in self._queue:
                if iv.checked:
                    self._give_up(iv)
            self._queue = []
        self._phase = _Phase.DONE

    # control arm -----------------------------------------------------------------

    def _plan_control(self, slots: int) -> list[tuple[Measure, str | None]] | None:
        verdict = self.control.decide()
        if verdict == Verdict.REPRODUCED:
            self._start_search(self.control.comparison.change)
            return None
        if verdict is not None:
            self._end_verdict = verdict
            self._phase = _Phase.DONE
            return None
        picks = [(Measure(i, CONTROL_ARM), self.control.tag) for i in self.control.next_samples(slots)]
        if slots > 2:
            # spare slots: start the search in the interior (its samples serve the localisation)
            good, bad = 0, self.n - 1
            iv = _Interval(good, bad, True)
            post = self._posterior(iv, sign=-1 if self.settings.direction != "faster" else 1)
            for i in self.picker.quantiles(iv, post, slots - 2, exclude={good, bad}):
                picks.append((Measure(i, f"bisect {good}..{bad}"), None))
        return picks

    def _hunted_sign(self) -> int:
        return hunted_sign(self.settings.direction)

    def _start_search(self, gap: float) -> None:
        self._reproduced = True
        self._sign = self._hunted_sign()
        self._tau = max(abs(math.log1p(gap)), log_threshold(self.settings.min_effect))
        self._queue = [_Interval(0, self.n - 1, checked=True, probes_at_start=self._probes)]
        self._phase = _Phase.SEARCH

    # localisation and confirmation ----------------------------------------------------

    def _plan_search(self, slots: int) -> list[tuple[Measure, str | None]] | None:
        if not self._queue and not self._search_remainder() and not self._search_the_changed_shape():
            self._phase = _Phase.DONE
            return None
        iv = self._queue[0]
        s = self.settings
        if self.book.unmeasurable(iv.lo) or self.book.unmeasurable(iv.hi):
            # an end of a side became unmeasurable: that side is left unresolved
            self._queue.pop(0)
            self._give_up(iv)
            return None
        if not iv.checked:
            return self._plan_side_check(iv, slots)
        post = self._posterior(iv, sign=self._sign, null_prior=0.5 if iv.is_side else 0.0)
        if iv.is_side and post.p_null >= s.side_null:
            self._queue.pop(0)   # the data now favour 'no further step' on this side
            return None
        if not post.gaps or len(iv.vetoed) >= s.max_vetoes or self._over_budget(iv):
            self._queue.pop(0)
            # every step the posterior proposed was refuted: an answer ('not localised'); a
            # bracket that ran over its budget is not one
            self._give_up(iv, refuted=not self._over_budget(iv))
            return None
        best = int(np.argmax(post.probs))
        a, b = post.gaps[best]
        mass = float(post.probs[best])
        self._live = self.picker.central(post)
        past = next((x for x in (b, a) if self.picker.past_skips(iv, x) != x), None)
        if mass >= s.confirm_enter and past is not None:
            # the step's mass sits on a gap of unmeasurable commits whose end is still untried
            # beside them: find where they end first, instead of walking them pair by pair
            return [(Measure(self.picker.past_skips(iv, past), f"bisect {iv.lo}..{iv.hi} (past skips)"), None)]
        if mass >= s.confirm_enter:
            step = self.confirmation.decide(iv, post, best, slots, self._round, self._sign)
            if step.action is Action.NAMED:
                self._accept(iv, a, b)
            elif step.action is Action.REFUTED:
                iv.vetoed.add((a, b))
                self._refuted.append((a, b))
            elif step.action is Action.GIVE_UP:
                self._queue.pop(0)
                self._give_up(iv)
            else:
                return [(Measure(i, why), None) for i, why in step.picks]
            return None
        picks = [(Measure(i, f"bisect {iv.lo}..{iv.hi}"), None) for i in self.picker.quantiles(iv, post, slots, exclude=set())]
        anchor = self.picker.anchor(iv, [m.index for m, _ in picks])
        if anchor is not None:
            # the levels are shared by every hypothesis: when one interior commit has been sampled
            # more than an end of the bracket, a free level can hide behind it (a step placed at
            # the dense commit fits as well); another sample of that end pins the level down
            picks = [(Measure(anchor, f"bisect {iv.lo}..{iv.hi} (level)"), None)] + picks[: slots - 1]
        if not picks:
            self._queue.pop(0)
            self._give_up(iv)
            return None
        return picks

    def _search_remainder(self) -> bool:
        """Once per hunt, when every bracket is settled: if the culprits, each sized by its own
        pairs, leave a remainder of the gap in the hunted direction whose 95% interval (the
        report's, `CulpritRule.remainder`) lies beyond min_effect and beyond what every cleared side
        ruled out, one of those sides holds more than its check saw (its ends read alike by chance,
        or a shift of the machine hid the step). Search the cleared side
        whose ends differ most our way, as a side (with its 'no step here' hypothesis and its own
        budget), instead of leaving it to the user; True when a search was queued."""
        cleared = [k for k, sd in enumerate(self._sides) if sd.outcome == SideOutcome.CLEARED]
        if self._remainder_searched or not cleared or not self._culprits:
            return False
        self._remainder_searched = True
        named, _ = self.rule.named_culprits(self._culprits)
        gap, gap_se = self.rule.end_difference()
        remainder, half = self.rule.remainder([self.rule.own_step(c) for c in named], gap, gap_se)
        if not math.isfinite(half):
            return False
        ruled_out = max(math.log1p(self._sides[k].ruled_out) for k in cleared)
        if self._toward(remainder) - half <= max(ruled_out, log_threshold(self.settings.min_effect)) or (
                self._sign == 0 and remainder * gap < 0):
            return False

        def ends_differ(k: int) -> float:
            sd = self._sides[k]
            return self._toward(float(np.mean(np.log(self.book.raw[sd.hi])) - np.mean(np.log(self.book.raw[sd.lo]))))

        # a side whose end has every run read as interfered has no level to compare (a mode of
        # half the runs leaves a commit of few runs so): its ends cannot say it holds more
        readable = [k for k in cleared if self.book.raw.get(self._sides[k].lo) and self.book.raw.get(self._sides[k].hi)]
        if not readable:
            return False
        k = max(readable, key=ends_differ)
        side = self._sides[k]
        self._sides[k] = replace(side, outcome=SideOutcome.REMAINDER, ruled_out=math.nan)
        self._queue.append(_Interval(side.lo, side.hi, checked=True, is_side=True, probes_at_start=self._probes,
                                     opened=self._round))
        return True

    def _search_the_changed_shape(self) -> bool:
        """Once, as the hunt would end on runs read apart: where GOOD's and BAD's shares of runs
        off their levels differ over every run the hunt took of them (`ControlArm.
        shape_over_the_hunt`), the runs read apart were a commit's, not the machine's; where the
        culprits named on the typical runs contradict the gap (`_contradicts_itself`), a level
        was read on a mode. Either way the book reads every run from then on and the search
        starts again over GOOD..BAD on them; True when it did."""
        if self._shape_reviewed:
            return False
        self._shape_reviewed = True
        shape = self.control.shape_over_the_hunt(typical_alike=not self._reproduced_overall())
        if shape is None and not self._contradicts_itself():
            return False
        self.control.shape = shape
        self.book.read_every_run()
        self._culprits, self._sides, self._refuted, self._unresolved, self._given_up = [], [], [], [], []
        self._priced, self._remainder_searched = {}, False
        gap, _ = self.rule.end_difference()
        self._start_search(math.expm1(gap))
        return True

    def _contradicts_itself(self) -> bool:
        """Where runs were read apart and culprits are named, the ends' typical runs no longer
        read a gap our way (GOOD read at its fast mode: +13% after the arm's -12%; or an end
        with every run read off: no gap), or a culprit owns more than share_limit of the gap
        beside a remainder whose 95% interval lies wholly against the hunted direction: "-26.8%,
        222% of the gap" beside "-122% unexplained (95% CI -184%..-61%)", a commit after the step
        read on three runs that all fell in a fast mode. A real improvement inside a slowdown
        reads so too, and reading every run confirms it."""
        if not self.book.interfered() or self._sign == 0:
            return False
        named, _ = self.rule.named_culprits(self._culprits)
        steps = [self.rule.own_step(c) for c in named]
        if not steps:
            return False
        gap, gap_se = self.rule.end_difference()
        if not math.isfinite(gap) or self._toward(gap) <= 0:
            return True     # the ends' typical runs no longer read the gap the arm saw: no share is read
        remainder, half = self.rule.remainder(steps, gap, gap_se)
        return (math.isfinite(remainder) and math.isfinite(half) and self._toward(remainder) + half < 0
                and max(c.share_of_gap for c in steps) > self.settings.share_limit)

    def _plan_side_check(self, iv: _Interval, slots: int) -> list[tuple[Measure, str | None]] | None:
        """Does a side of a culprit hold another step? `SideRule.decide` (search/sides.py) says;
        until it does, both ends are measured again, in pairs (spare slots: the next side's too)."""
        decision = self.sides.decide(iv.lo, iv.hi, iv.opened, sign=self._sign, gap_scale=self._gap_scale())
        if decision is not None:
            outcome, bound = decision
            if outcome == SideOutcome.SEARCHED:
                iv.checked = True
                iv.probes_at_start = self._probes
            else:
                self._queue.pop(0)
            self._sides.append(SideCheck(iv.lo, iv.hi, outcome, bound))
            return None
        if self._over_price(iv):
            self._queue.pop(0)
            self._sides.append(SideCheck(iv.lo, iv.hi, SideOutcome.CLEARED, self._priced[(iv.lo, iv.hi)], priced=True))
            return None
        if self._capped(iv.lo) and self._capped(iv.hi):
            self._queue.pop(0)
            self._give_up(iv)
            self._sides.append(SideCheck(iv.lo, iv.hi, SideOutcome.UNRESOLVED, math.nan))
            return None
        # an end at max_samples gets no more samples; the other end still may
        ends = [i for i in self.pairing.next(iv.lo, iv.hi, slots, self._round) if not self._capped(i)]
        ends = ends or [i for i in (iv.lo, iv.hi) if not self._capped(i)]
        picks = [(Measure(i, f"check side {iv.lo}..{iv.hi}"), None) for i in ends]
        # a side check measures two commits; spare slots check the next queued side at once (the
        # two sides of a culprit are independent, and their checks dominate rounds at high noise)
        for other in self._queue[1:]:
            chosen = {m.index for m, _ in picks}
            if slots - len(picks) < 2:
                break
            if other.checked or chosen & {other.lo, other.hi} or self._capped(other.lo) or self._capped(other.hi):
                continue
            picks += [(Measure(i, f"check side {other.lo}..{other.hi}"), None) for i in (other.lo, other.hi)]
        # slots still spare: more samples of the same ends in this round (the ends test needs
        # samples, not commits, and the slots' runs are independent draws). One side alone (two
        # picks are its two ends: no other side was added) alternates its ends over every slot
        # (a, b, a then b, a, b), as a step's pairs do, so that an odd slot also serves a pair
        if len(picks) == 2 and slots > 2:
            picks = [(Measure(i, f"check side {iv.lo}..{iv.hi}"), None) for i in self.pairing.round_of(iv.lo, iv.hi, slots, self._round)]
        elif len(picks) >= 2:
            room = min(self.settings.max_samples - self.book.run_count(m.index) for m, _ in picks)
            repeats = min(slots // len(picks), room)
            picks = [p for p in picks for _ in range(repeats)] if repeats > 1 else picks
        return picks

    def _over_price(self, iv: _Interval) -> bool:
        """The side has cost as many probes as the search before it opened, and its fresh pairs
        rule out a further step smaller than the gap (`SideRule.resolution`, kept in
        `_priced`): ruling out the margin would cost more than the rest of the hunt, so the side
        stops at what it bought (`SearchSettings.side_resolution` None)."""
        if self.settings.side_resolution is not None or self._probes - iv.probes_at_start < iv.probes_at_start:
            return False
        reached = self.sides.resolution(iv.lo, iv.hi, iv.opened, sign=self._sign)
        if reached is None or not reached < abs(self._gap_scale_relative()):
            return False
        self._priced[(iv.lo, iv.hi)] = reached
        return True

    def _gap_scale_relative(self) -> float:
        """The GOOD -> BAD gap as a relative change (from `_gap_scale`'s log)."""
        return -math.expm1(-self._gap_scale())

    def _sides_of(self, iv: _Interval, a: int, b: int) -> list[tuple[int, int]]:
        """The sides a culprit (a, b) of bracket iv leaves: lo..a and b..hi, where not empty."""
        return [side for side in ((iv.lo, a), (b, iv.hi)) if side[1] > side[0]]

    def _side_ends_beside_gate(self, iv: _Interval, a: int, b: int, slots: int) -> list[int]:
        """Outer ends of the sides that step (a, b) would leave, to measure in the naming gate's
        rounds: each side's check needs pairs of its ends taken after the pick, and one end of each
        (a or b) is being measured in those rounds anyway. One sample of an outer end per sample of
        its partner, right after it (within pair_window), until its side's check has decided;
        the sides are then opened at the pick (`_accept`) and need no rounds of their own for the
        end the gate measured (at 3% noise the checks took 30 of 225 executions, about half of
        them for that end)."""
        since = self.gate.since(a, b)
        now = self._round + 1
        picks = []
        for lo, hi in self._sides_of(iv, a, b):
            outer, partner = (lo, a) if hi == a else (hi, b)
            last = (self.book.time.get(partner) or [-1])[-1]
            unpaired = last > since and now - last <= self.settings.pair_window and last > (self.book.time.get(outer) or [-1])[-1]
            if unpaired and not self._capped(outer) and self.sides.decide(lo, hi, since, sign=self._sign, gap_scale=self._gap_scale()) is None:
                picks.append(outer)
        return picks[: max(1, slots)] if slots < 4 else picks

    def _toward(self, change: float) -> float:
        return toward(change, self._sign)

    def _give_up(self, iv: _Interval, refuted: bool = False) -> None:
        """Leave a bracket unresolved; unless every step it proposed was refuted, the search ran
        out of samples or budget there (the hunt is then 'undecided', not 'not localised')."""
        self._unresolved.append((iv.lo, iv.hi))
        if not refuted:
            self._given_up.append(iv)

    def noise_prior_report(self) -> dict | None:
        """The remembered noise scale and whether the hunt's noise now uses it (None: no prior)."""
        return self.book.noise_prior_report()

    def _over_budget(self, iv: _Interval) -> bool:
        """An interval may spend 3x what finding one step should cost, then it is unresolved
        (bounds the cost of a range whose step cannot be pinned, e.g. a gradual slowdown).

        What a step costs is priced at the larger of the hunt's pooled noise and the noise of its
        last BUDGET_WINDOW rounds: a machine that got busy mid-hunt pays for the noise it has now,
        not the average with its quiet start, whose many degrees of freedom held the pooled sigma
        down while every fresh pair was read at the new noise (docs/search.md, "Budgets"). Never
        below the pooled price, so a machine that grew quiet keeps the budget it had. Priced in
        typical runs: where a share of the runs is read as interfered (the machine's second mode),
        every typical run costs `runs_per_typical_run` runs, and the budget pays them."""
        per = self._samples_per_decision(recent=True)
        budget = (3 * max(per, 4) * (math.log2(iv.hi - iv.lo + 1) + 4) * self._budget_scale()
                  * self.book.runs_per_typical_run() ** 2)
        return self._probes - iv.probes_at_start > budget

    def _budget_scale(self) -> float:
        """A max_samples above the default raises each interval's budget in proportion: the one
        flag a user raises to let an undecided hunt go further (the report's continue command)."""
        return max(1.0, self.settings.max_samples / MAX_SAMPLES)

    def _gap_scale(self) -> float:
        """|log GOOD->BAD gap| from every sample of the two ends so far, at least min_effect (for
        the budgets and the side margin; the posterior's prior scale stays the control arm's look)."""
        if self._phase == _Phase.CONTROL or not (self.book.raw.get(0) and self.book.raw.get(self.n - 1)):
            return self._tau
        return max(abs(self.rule.total_log_gap()), log_threshold(self.settings.min_effect))

    def _accept(self, iv: _Interval, a: int, b: int) -> None:
        # size and interval are filled in by result(), from all samples of the segments
        self._culprits.append(Culprit(first_bad=b, last_good=a, step=math.nan, step_ci95=(math.nan, math.nan),
                                      step_tok_s=math.nan, share_of_gap=math.nan))
        self._queue.pop(0)
        if self.one_step:
            # its sides are not searched, nor a remainder: the search is done
            self._queue = []
            self._remainder_searched = True
            return
        # the two sides may hold further steps (Pinpoint explores every differing pair)
        # opened at the pick: the pairs of their ends taken since then are as fresh as the gate's
        # (`_side_ends_beside_gate`)
        since = self.gate.since(a, b)
        self._queue[0:0] = [_Interval(lo, hi, checked=False, is_side=True, opened=since, probes_at_start=self._probes)
                            for lo, hi in self._sides_of(iv, a, b)]

    # helpers --------------------------------------------------------------------------

    def _measurable_in(self, lo: int, hi: int) -> list[int]:
        return [i for i in range(lo, hi + 1) if not self.book.unmeasurable(i)]

    def _posterior(self, iv: _Interval, sign: int, null_prior: float = 0.0) -> Posterior:
        """Posterior over the step position in [iv.lo, iv.hi] (`localise.step_posterior`)."""
        return step_posterior(self.book, self._measurable_in(iv.lo, iv.hi), iv.vetoed, tau=self._tau, sign=sign,
                              null_prior=null_prior, drift_prior=self.settings.drift_prior)

    def _candidate_verdicts(self, culprits: Sequence[Culprit]) -> tuple[CandidateVerdict, ...]:
        out = []
        bounds = sorted(c.first_bad for c in culprits)
        off = self.book.interfered()
        for i in sorted(set(self.book.runs) | set(self.book.skips)):
            vals = self.book.raw.get(i, [])
            summ = summarize(vals) if vals else None
            if self.book.unmeasurable(i) or not self.book.run_count(i):
                verdict = CandidateCall.SKIP
            elif not vals:
                verdict = CandidateCall.UNSURE
            elif any(lo < i < hi for lo, hi in self._unresolved) or (self._end_verdict in (Verdict.NOT_REPRODUCED, Verdict.UNDECIDED) and i != 0):
                verdict = CandidateCall.UNSURE
            elif not culprits:
                verdict = CandidateCall.GOOD if i == 0 else CandidateCall.UNSURE
            else:
                seg = sum(1 for b in bounds if b <= i)
                verdict = CandidateCall.GOOD if seg == 0 else CandidateCall.BAD if seg == len(bounds) else CandidateCall.LEVEL
            out.append(CandidateVerdict(index=i, n=len(vals), summary=summ, verdict=verdict,
                                        interfered=tuple(off.get(i, ()))))
        return tuple(out)
