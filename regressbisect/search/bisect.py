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

Each stage is a coroutine phase over one explicit `SearchContext` (search/commit/: control,
localise, sides, remainder, verdict), run ask/tell by `phases.PhaseRunner` as the hunk hunt's
phases are.

Skips: a candidate whose probe is skipped (crash, exit 125, timeout) is asked again once; a second
skip with no more successes than skips marks it unmeasurable (crashes are usually deterministic,
a single one may be a flake). Unmeasurable commits are not hypotheses of their own: a step next to
them is reported as the range (last_good, first_bad), as git bisect does.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Sequence

from regressbisect.search.book import SampleBook
from regressbisect.search.commit import remainder
from regressbisect.search.commit.context import SearchContext
from regressbisect.search.commit.control import control_arm, start_search
from regressbisect.search.commit.localise import accept, localise
from regressbisect.search.commit.sides import check_side, side_ends_beside_gate
from regressbisect.search.commit.verdict import search_result
from regressbisect.search.confirm import StepConfirmation
from regressbisect.search.culprits import Culprit
from regressbisect.search.interference import Reader
from regressbisect.search.phases import OutOfProbes, Phase, PhaseRunner
from regressbisect.search.results import (CandidateVerdict, LeadingStep, Measure, MeasureTag, SearchResult,
                                          SideCheck)
from regressbisect.search.settings import SearchSettings
from regressbisect.search.stats import NoisePool
from regressbisect.search.verdicts import Verdict

# the settings and result types live in settings.py and results.py; every import of them from here keeps working
__all__ = ["SearchSettings", "MeasureTag", "Measure", "Culprit", "CandidateVerdict", "SideCheck", "LeadingStep",
           "SearchResult", "CommitSearch"]


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
        book = SampleBook(settings.pair_window, noise_prior,     # every sample, its round and tag
                          read_interference=settings.read_interference, reader=reader)
        self.ctx = ctx = SearchContext(n, settings, book, one_step=one_step)
        ctx.confirmation = StepConfirmation(book, settings, ctx.gate, ctx.picker, ctx.pairing, ctx.capped,
                                            partial(side_ends_beside_gate, ctx))   # is the proposed step a step
        self.n, self.settings, self.book = n, settings, book
        self.control, self.gate, self.picker, self.pairing = ctx.control, ctx.gate, ctx.picker, ctx.pairing
        self.confirmation, self.rule, self.sides = ctx.confirmation, ctx.rule, ctx.sides
        self._runner = PhaseRunner(_search(ctx))
        self._pending: list[tuple[int, str | None, int, int]] = []   # (index, tag, round, position) handed out

    # ------------------------------------------------------------------ public API

    def next_batch(self, slots: int = 1) -> list[Measure]:
        """One round: up to `slots` measures, one sample each; [] when done. The candidates of a
        round are distinct, except in side checks, where spare slots take more samples of the ends,
        and in rounds of a step's pairs, which alternate its two commits over every slot."""
        if slots < 1:
            raise ValueError("slots must be >= 1")
        if self._pending:
            raise RuntimeError("record() every measure of the previous round before asking for the next")
        self.ctx.slots = slots
        batch = self._runner.ask(math.inf)   # a round is planned for `slots` (ctx.slots), and handed out whole
        if batch:
            self.ctx.round += 1
            self._pending = [(m.index, tag, self.ctx.round, position) for position, (m, tag) in batch]
        return [m for _, (m, _) in batch]

    def record(self, index: int, value: float | None) -> None:
        """Feed one sample (tok/s) of `index`, or None when its run was skipped."""
        if not 0 <= index < self.n:
            raise ValueError(f"index {index} out of range 0..{self.n - 1}")
        tag, when, position = None, self.ctx.round, None
        for k, (i, t, r, p) in enumerate(self._pending):
            if i == index:
                tag, when, position = t, r, p
                del self._pending[k]
                break
        self.ctx.probes += 1
        self.book.add(index, value, tag=tag, when=when)
        if position is not None:
            self._runner.tell(position, value)

    def carry_control_pairs(self, good: Sequence[float], bad: Sequence[float]) -> None:
        """Pairs of the two ends measured before this search, side by side (another test's arms in
        rotation): the control arm goes on from them. Its e-values are anytime-valid, so a
        sequence that another rule stopped may be continued (Ville's inequality holds at every
        stopping time). Only before the first round; they are no probes of this search."""
        if self.ctx.round or self._pending:
            raise RuntimeError("carry_control_pairs() comes before the first round")
        for good_value, bad_value in zip(good, bad):
            self.ctx.round += 1
            self.book.add(0, good_value, tag=self.control.tag, when=self.ctx.round)
            self.book.add(self.n - 1, bad_value, tag=self.control.tag, when=self.ctx.round)

    @property
    def done(self) -> bool:
        """True once the search has nothing more to measure."""
        if not self._pending:
            self._runner.settle()   # settles any decision the last samples allow; requests nothing
            # (the round it plans, for the slots last asked, is the next one handed out)
        return self._runner.done

    def samples(self, index: int) -> tuple[float, ...]:
        """The tok/s recorded for a candidate, in recording order."""
        return tuple(self.book.raw.get(index, ()))

    def live_interval(self) -> tuple[int, int]:
        """Narrowest bracket (last_good, first_bad) currently searched, for the progress display."""
        return self.ctx.live

    def estimated_remaining(self) -> int | None:
        """Best-effort estimate of the probes still to run (None when unknown)."""
        if self._runner.done:
            return 0
        per = self.ctx.samples_per_decision()
        if not self.ctx.reproduced:    # in the control arm
            pairs = self.control.pairs()
            return 2 * max(0, max(2, per) - pairs) + int(math.log2(max(2, self.n)) * per) + 2 * per
        lo, hi = self.ctx.live
        width = max(1, hi - lo)
        return int(math.log2(width) * per + 2 * per * (1 + len(self.ctx.queue)))

    def result(self, end_names: tuple[str, str] = ("GOOD", "BAD")) -> SearchResult:
        """What the search has found so far (final once `done`; commit/verdict.py's
        `search_result`); end_names: what its reasons call index 0 and n - 1."""
        end_verdict = self._runner.value if self._runner.done else None
        return search_result(self.ctx, end_verdict, finished=self._runner.done, end_names=end_names)

    def noise_prior_report(self) -> dict | None:
        """The remembered noise scale and whether the hunt's noise now uses it (None: no prior)."""
        return self.book.noise_prior_report()


def _search(ctx: SearchContext) -> Phase:
    """The phases in order, as one coroutine returning the verdict the control arm ended the hunt
    on (None: it went on to search): the control arm; then, once it says 'go', each bracket in
    the queue (a side's check first, then its localisation), until the queue is empty and
    neither a remainder nor a shape seen late sends the search back. At `max_probes`
    (`OutOfProbes`, before any decision the last round allows) the arm ends 'not-reproduced' and a
    search gives up the brackets it was searching."""
    try:
        verdict = yield from control_arm(ctx)
    except OutOfProbes:
        return Verdict.NOT_REPRODUCED
    if verdict != Verdict.REPRODUCED:
        return verdict
    start_search(ctx, ctx.control.comparison.change)
    try:
        while ctx.queue or remainder.search_remainder(ctx) or remainder.search_the_changed_shape(ctx):
            iv = ctx.queue[0]
            if not iv.checked and not (yield from check_side(ctx, iv)):
                ctx.queue.pop(0)
                continue
            step = yield from localise(ctx, iv)
            ctx.queue.pop(0)
            if step is not None:
                accept(ctx, iv, *step)
    except OutOfProbes:
        for iv in ctx.queue:
            if iv.checked:
                ctx.give_up(iv)
        ctx.queue = []
    return None
