"""What a hunk hunt decides, pure: prefix search, naming, delta debugging where hunks interact.

No git, no I/O. This module runs the phases in order; each is its own module of search/hunks/
(its __init__ lists them) over one explicit `HuntContext`, and calls the commit search's rules
where they are the same rule. Every phase is a coroutine (`phases.Phase`): it yields a batch
of (subset, purpose) requests whose samples do not depend on each other (a round of the prefix
search, the ABBA pair, the rotation of arms) and is sent their values. `HunkDecider` runs them
ask/tell as `CommitSearch` is run (`next_batch(slots)` / `record`, by `search/driver.drive`), so
a hunt's slots take a batch side by side; with one slot the measures come in the order of the
loops that ask for them. hunts/hunks.py measures each request: one sample of BASE + that subset
of hunks (the empty set is BASE), tok/s or None when the run was skipped, and supplies `needs`:
the hunks a hunk cannot run without, read from the diff. The simulation in scripts/ calls
`decide_hunks` with a fake `measure`, so the benchmark and the real hunt run the same decisions.

1. Prefix search (hunks/prefix.py). The hunks in file order (files by path, hunks by line), each
   in one group with the hunks it needs or that need it (`prefix_groups`); candidate k is BASE +
   the first k groups. The commit search (search/bisect.py) runs on them as on a commit range:
   its control arm is BASE vs BASE + all hunks (not reproduced: the hunt ends there), then the
   localisation, the naming of each step on fresh pairs at its share of name_alpha, and the side
   checks for more steps: about log2(groups) decisions, where delta debugging paid 2 log2(hunks)
   subsets and a paired test of each.
2. Alone (hunks/steps.py, hunks/alone.py). A step adds a group; it is named when BASE + that
   group alone reproduces the slowdown against BASE (the control arm's rule), three arms in
   rotation: BASE, BASE + group, and the prefix it ends. A group that does not run alone needs
   something before it to run: the first j groups with which it runs, found by bisection on
   whether it runs, and group j joins it. One that runs but is clearly less slow alone than that
   prefix needs something to be slow: a second prefix search over BASE, BASE + group, BASE +
   group + the first j groups finds the first j with which it is slow, and group j joins it (up
   to NEEDS_DEPTH such searches). A step at the first group is its own test against BASE.
   When the named culprits' own slowdowns leave at least min_effect of the gap unexplained (one
   standard error clear, and showable within the pair cap), the hunks not named get a prefix
   search of their own (`hunks/rest.py`): costs in time add, so a culprit after a large one steps
   too little in the prefixes for their side checks.
3. Needed hunks (hunks/members.py). A culprit of several hunks keeps a hunk the rest cannot run
   without (known without a probe), and tests every other by leaving it out (BASE, the rest, the
   culprit): needed when the culprit is slower than the rest, dropped when the rest reproduces
   alone.
4. Delta debugging (hunks/delta.py), only when 2 fails (the hunks interact in a way the two
   prefix searches do not place): the earlier search, hierarchical ddmin (search/ddmin.py) with
   every subset paired with BASE (search/levels.py), each culprit named after a fresh test
   against BASE, or when the prefix search was left 'undecided' with prefixes that do not run (a
   dependency nobody declared). Without such prefixes, 'undecided' ends the hunt undecided.
   When the paired test refuted every step the prefix search proposed ('not-localised') though
   the control arm reproduced, the slowdown is spread over many hunks, each below min_effect:
   the hunt ends there and says so (`HunkDecision.spread_over`).

A named group is sized on the runs of the test that named it, with a confidence sequence valid
at that test's stop (`subsets.sized_at_stop`: the commit search's rule). `SearchSettings.max_probes`
caps the measures of every phase together: at the cap the phases are stopped
(`phases.OutOfProbes`) and the hunt reports the culprits named before it.

Subsets that break `needs`, and subsets seen not to run (skipped twice, no sample), are never
measured again: they count as skipped without a probe (`hunks/runnable.py`). Culprits that surely own more than
share_limit of the gap, or leave a remainder below -100%, name nothing: the step model does not
fit, the hunt is undecided. Every e-value uses the hunt's pooled noise (stats.NoisePool) beside
the arms' own spread.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from regressbisect.search.bisect import Measure as Ask, SearchSettings
from regressbisect.search.ddmin import DdminSettings
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.delta import by_delta_debugging
from regressbisect.search.hunks.prefix import END_NAMES, HUNK_SIDE_PAIRS, end_gap, prefix_groups, prefixes, search_prefixes
from regressbisect.search.hunks.rest import peel_the_rest
from regressbisect.search.driver import drive
from regressbisect.search.hunks.runnable import Measure, Needs, Purpose, Runnable
from regressbisect.search.hunks.steps import name_steps
from regressbisect.search.hunks.subsets import (Names, TestedSubset, spread_note, spread_over, spread_reason,
                                               test_subset)
from regressbisect.search.hunks.verdict import HunkDecision, verdict_at_cap, verdict_of_named
from regressbisect.search.levels import LevelRule
from regressbisect.search.naming import AlphaSpender
from regressbisect.search.phases import OutOfProbes, Phase, PhaseRunner
from regressbisect.search.stats import NoisePool
from regressbisect.search.verdicts import CandidateCall, Verdict

__all__ = ["HUNK_SIDE_PAIRS", "HunkDecider", "HunkDecision", "Measure", "Needs", "Runnable", "TestedSubset",
           "decide_hunks", "prefix_groups", "test_subset"]


class HunkDecider:
    """A hunk hunt's decisions, ask/tell like `CommitSearch`: `next_batch(slots)` gives up to
    `slots` measures (`Ask`: `index` names a subset, `subset(index)`; `reason` is the purpose),
    `record(index, value)` feeds each, `result()` is the HunkDecision once `next_batch` gives [].
    The phases ask in batches (`phases.Batch`), run by `phases.PhaseRunner`: a batch longer than
    the slots is handed out a slot-count at a time, in its order, and a subset known not to run is
    answered None here, without a probe. `needs`: for a hunk, the hunks it cannot run without,
    known without a probe."""

    def __init__(self, hunk_ids: Sequence[str], groups, settings: SearchSettings, rule: LevelRule = LevelRule(),
                 ddmin: DdminSettings = DdminSettings(), on_phase: Callable[[str], None] = lambda text: None,
                 needs: Needs | None = None, noise_prior: NoisePool | None = None,
                 end_names: tuple[str, str] = END_NAMES):
        """noise_prior: noise pooled before the hunt (a commit hunt's, for `run --drill`): the
        prefix searches' remembered noise (CommitSearch's noise_prior: capped, and dropped while
        their own spread is larger). Not the start of the hunt's own pool: uncapped, the commit
        hunt's degrees of freedom would outweigh every test's own pairs. end_names: what the
        decision's reasons call the empty subset and the full one (a deps hunt's GOOD and BAD)."""
        self.runs = Runnable(needs)
        self.ctx = HuntContext(settings=settings, rule=rule, ddmin=ddmin, runs=self.runs, ids=list(hunk_ids),
                               groups=groups, order=prefix_groups(hunk_ids, groups, needs), on_phase=on_phase,
                               leave_out_alphas=AlphaSpender(settings.name_alpha / 2), noise_prior=noise_prior)
        self._runner = PhaseRunner(_decide(self.ctx, end_names))
        self._subsets: list[frozenset] = []
        self._index: dict[frozenset, int] = {}
        self._decision: HunkDecision | None = None
        self.asked = 0
        """Measures handed out (each a probe or a stored sample; a subset known not to run is none)."""

    def subset(self, index: int) -> frozenset:
        """The subset of hunk ids a measure's index names (BASE + it is measured)."""
        return self._subsets[index]

    def next_batch(self, slots: int = 1) -> list[Ask]:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        if self._runner.waiting():
            raise RuntimeError("record() every measure of the previous round before asking for the next")
        self.ctx.slots = slots
        handed = self._runner.ask(slots, admit=lambda request: self.runs.admit(request[0]), at_cap=self._at_cap)
        out = [Ask(self._index_of(subset), purpose) for _, (subset, purpose) in handed]
        self.asked += len(out)
        if self._runner.done and self._decision is None:
            self._decision = replace(self._runner.value, did_not_run=self.runs.did_not_run)
        return out

    def record(self, index: int, value: float | None) -> None:
        """Feed one sample (tok/s) of the subset `index` names, or None when its run was skipped."""
        position = next((p for p, (subset, _) in self._runner.waiting() if subset == self._subsets[index]), None)
        if position is None:
            raise ValueError(f"no measure of subset {index} is waiting for its value")
        self._runner.tell(position, value)
        self.runs.note(self._subsets[index], value)
        self.ctx.record(self._subsets[index], value)

    def result(self) -> HunkDecision:
        if self._decision is None:
            raise RuntimeError("the hunt is not done: next_batch() until it gives []")
        return self._decision

    def _index_of(self, subset: frozenset) -> int:
        if subset not in self._index:
            self._index[subset] = len(self._subsets)
            self._subsets.append(subset)
        return self._index[subset]

    def _at_cap(self, more: int = 0) -> bool:
        """The hunt has asked for `SearchSettings.max_probes` measures (with `more` about to be
        handed out), past its first prefix search (which stops at its own cap)."""
        return self.ctx.capped and self.asked + more >= self.ctx.settings.max_probes


def decide_hunks(hunk_ids: Sequence[str], groups, measure: Measure, settings: SearchSettings,
                 rule: LevelRule = LevelRule(), ddmin: DdminSettings = DdminSettings(),
                 on_phase: Callable[[str], None] = lambda text: None,
                 needs: Needs | None = None, slots: int = 1) -> HunkDecision:
    """The hunt's decisions (`HunkDecider`) with `measure(subset, purpose)` taking each sample,
    `slots` a round. A subset that holds a hunk without what it needs is never measured: it counts
    as skipped."""
    decider = HunkDecider(hunk_ids, groups, settings, rule, ddmin, on_phase, needs)
    return drive(decider, lambda batch: [measure(decider.subset(m.index), m.reason) for m in batch], slots=slots)


def _decide(ctx: HuntContext, end_names: tuple[str, str] = END_NAMES) -> Phase:
    """The phases in order (the module docstring), as one coroutine returning the HunkDecision,
    with a note of the hunks the slowdown, or what the culprits leave of it, is spread over."""
    decision = yield from _phases(ctx, end_names)
    if decision.spread_over:
        decision = replace(decision, spread_note=spread_note(len(decision.spread_over), ctx.settings.min_effect))
    return decision


def _phases(ctx: HuntContext, end_names: tuple[str, str]) -> Phase:
    """`_decide`'s phases."""
    candidates = prefixes(ctx.order)
    ctx.on_phase(f"prefix search: BASE + the first k of {len(ctx.order)} hunk group(s) in file "
                 "order, bisected like commits")
    search = yield from search_prefixes(ctx, candidates, first=Purpose.CONTROL, rest=Purpose.PREFIX)
    prefix = search.result(end_names)
    measurable_ends = all(e.n for e in prefix.endpoints)
    if not prefix.reproduced and not (prefix.verdict == Verdict.ALL_SKIPPED and measurable_ends):
        return HunkDecision(prefix.verdict, prefix.reason, prefix, prefix=prefix)
    # what every verdict below reports beside its culprits
    facts = HunkDecision("", "", replace(prefix, verdict=Verdict.REPRODUCED), prefix=prefix, ruled_out=frozenset().union(
        *(candidates[c.index] for c in prefix.candidates if c.verdict == CandidateCall.GOOD)))
    ctx.capped = True      # from here on the probe cap stops the phases (the prefix search has its own)
    if prefix.shape is not None:
        # BASE + every hunk changed the shape of the run times (a stall), not only their level:
        # every later test reads every run, as the prefix search did from its control arm on
        # (docs/search.md, "A change of shape is a change")
        ctx.settings = replace(ctx.settings, read_interference=False)
    if prefix.verdict in (Verdict.CULPRITS, Verdict.AMBIGUOUS):
        steps = sorted(prefix.culprits + prefix.ambiguous, key=lambda c: c.first_bad)
        signed_gap, gap_se = end_gap(search, ctx.noise)
        # shares are 'surely' too large only against the largest gap the ends allow
        share_gap = abs(signed_gap) + 2 * gap_se
        try:
            names, placed = yield from name_steps(ctx, steps, search, ctx.order, signed_gap, Names())
            if placed:
                names = yield from peel_the_rest(ctx, signed_gap, gap_se, names)
        except OutOfProbes as stop:     # what was named before the cap, the rest in the remainder
            return verdict_at_cap(facts, stop.names, share_gap, signed_gap, gap_se, ctx.settings)
        if placed:
            return verdict_of_named(facts, names, share_gap, signed_gap, gap_se,
                                    ctx.settings.direction, ctx.settings.share_limit)
    elif prefix.verdict == Verdict.NOT_LOCALISED:
        # every single step it proposed refuted: the slowdown is spread over hunks that each add
        # less than min_effect. Delta debugging's 1-minimal slow subsets of such a diff are pairs
        # of small hunks, each named on a test stopped once it read min_effect, at a thousand
        # probes and more for ten hunks of 1.5% (docs/hunks.md, "Spread over many hunks")
        spread = spread_over(prefix, candidates)
        return replace(facts, verdict=Verdict.NOT_LOCALISED, spread_over=spread,
                       reason=spread_reason(len(spread), len(prefix.refuted), ctx.settings.min_effect))
    elif prefix.verdict == Verdict.UNDECIDED and not any(c.verdict == CandidateCall.SKIP for c in prefix.candidates):
        # out of samples or budget: delta debugging would need more of both, not less (with
        # prefixes that do not run, a dependency nobody declared, it is the search that fits)
        return replace(facts, verdict=Verdict.UNDECIDED,
                       reason=f"no hunk could be named: the prefix search was left undecided ({prefix.reason})")
    # A step whose groups alone do not reproduce it, or steps refuted one by one (hunks that
    # only act together, or compensate): the hunks interact.
    return (yield from by_delta_debugging(ctx, facts, search.samples(0), search.samples(len(candidates) - 1)))
