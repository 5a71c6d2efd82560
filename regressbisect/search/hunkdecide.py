"""What a hunk hunt decides, pure: prefix search, naming, delta debugging where hunks interact.

No git, no I/O. hunts/hunks.py supplies `measure(subset, purpose)`: one sample of BASE + that
subset of hunks (the empty set is BASE), tok/s or None when the run was skipped, and `needs`: the
hunks a hunk cannot run without, read from the diff. The simulation in scripts/ supplies fake
ones, so the benchmark and the real hunt run the same decisions.

1. Prefix search. The hunks in file order (files by path, hunks by line), each in one group with
   the hunks it needs or that need it (`prefix_groups`); candidate k is BASE + the first k
   groups. The commit search (search/bisect.py) runs on them as on a commit range: its control
   arm is BASE vs BASE + all hunks (not reproduced: the hunt ends there), then the localisation,
   the naming of each step on fresh pairs at its share of name_alpha, and the side checks for
   more steps: about log2(groups) decisions, where delta debugging paid 2 log2(hunks) subsets
   and a paired test of each.
2. Alone. A step adds a group; it is named when BASE + that group alone reproduces the slowdown
   against BASE (the control arm's rule), three arms in rotation: BASE, BASE + group, and the
   prefix it ends. A group that does not run alone needs something before it to run: the first
   j groups with which it runs, found by bisection on whether it runs, and group j joins it. One
   that runs but is clearly less slow alone than that prefix needs something to be slow: a
   second prefix search over BASE, BASE + group, BASE + group + the first j groups finds the
   first j with which it is slow, and group j joins it (up to NEEDS_DEPTH such searches). A step
   at the first group is its own test against BASE.
   When the named culprits' own slowdowns leave at least min_effect of the gap unexplained (one
   standard error clear, and showable within the pair cap), the hunks not named get a prefix
   search of their own (`_peel_the_rest`): costs in time add, so a culprit after a large one
   steps too little in the prefixes for their side checks.
3. Needed hunks. A culprit of several hunks keeps a hunk the rest cannot run without (known
   without a probe), and tests every other by leaving it out (BASE, the rest, the culprit):
   needed when the culprit is slower than the rest, dropped when the rest reproduces alone.
4. Delta debugging, only when 2 fails (the hunks interact in a way the two prefix searches do
   not place) or the paired test refuted every step the prefix search proposed ('not-localised')
   though the control arm reproduced: the earlier search, hierarchical ddmin (search/ddmin.py)
   with every subset paired with BASE (search/levels.py), each culprit named after a fresh test
   against BASE, or when the prefix search was left 'undecided' with prefixes that do not run
   (a dependency nobody declared). Without such prefixes, 'undecided' ends the hunt undecided.

Subsets that break `needs`, and subsets seen not to run (skipped twice, no sample), are never
measured again: they count as skipped without a probe. Culprits that surely own more than
share_limit of the gap, or leave a remainder below -100%, name nothing: the step model does not
fit, the hunt is undecided. Every e-value uses the hunt's pooled noise (stats.NoisePool) beside
the arms' own spread.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from regressbisect.search.bisect import CommitSearch, Culprit, SearchResult, SearchSettings
from regressbisect.search.control import run_control_arm
from regressbisect.search.culprits import remainder_of_gap, share_interval
from regressbisect.search.ddmin import UNDECIDED, UNRESOLVED, DdminResult, DdminSettings, HunkSearch
from regressbisect.search.driver import drive
from regressbisect.search.levels import LevelRule, slowdowns, subset_verdict, undecided
from regressbisect.search.stats import EFFECT_PRIORS, NoisePool, log_threshold, pooled_t_log_bf, t_ppf

Measure = Callable[[frozenset, str], "float | None"]
"""(subset of hunk ids, purpose) -> tok/s of one run of BASE + subset, or None (skipped)."""
Needs = Mapping[str, Iterable[str]]
"""hunk id -> the hunk ids it cannot run without."""


@dataclass(frozen=True)
class TestedSubset:
    """BASE + hunks against BASE, paired, with the control arm's rule."""

    hunks: frozenset
    verdict: str
    """'reproduced', 'not-reproduced', 'undecided' or 'all-skipped' (it does not run)."""
    change: float
    """BASE + hunks relative to BASE (-0.18: 18% slower)."""
    ci95: tuple[float, float]
    pairs: int
    share_of_gap: float = math.nan
    """Its log change over the BASE -> BASE + all log change."""


@dataclass(frozen=True)
class HunkDecision:
    verdict: str
    """'culprits', 'not-reproduced', 'undecided', 'not-localised', 'all-skipped'."""
    reason: str
    control: SearchResult
    search: DdminResult | None = None
    culprits: tuple[TestedSubset, ...] = ()
    suspects: tuple[TestedSubset, ...] = ()
    """Proposed, not named (a hunk's need stayed open, the fresh test did not reproduce, or the
    shares did not add up)."""
    undecided_subsets: int = 0
    """Subsets that used their pairs without a verdict."""
    prefix: SearchResult | None = None
    """The prefix search: candidate k is BASE + the first k groups of `prefix_groups`."""
    ruled_out: frozenset = frozenset()
    """Hunks of prefixes measured at BASE's level."""
    did_not_run: frozenset = frozenset()
    """Subsets asked for that gave no sample: known not to run (no probe), or skipped."""
    unexplained_ci95: tuple[float, float] = (math.nan, math.nan)
    """95% interval of the share of the gap the culprits leave (`culprits.remainder_of_gap`: the
    gap's error and each culprit's own interval against BASE); nan without culprits."""


def test_subset(hunks: frozenset, measure: Measure, settings: SearchSettings, purpose: str,
                noise: NoisePool | None = None) -> TestedSubset:
    """BASE vs BASE + hunks, interleaved (ABBA), decided like the commit hunt's control arm;
    `noise`, the hunt's pooled spread so far, joins the pairs' own as the commit search's
    remembered noise does (capped, and only while the pairs are not noisier)."""
    sides = (frozenset(), frozenset(hunks))
    outcome = run_control_arm(lambda i: measure(sides[i], purpose), settings, noise_prior=noise)
    cmp = outcome.comparison
    change, ci = (cmp.change, cmp.ci95) if cmp is not None else (math.nan, (math.nan, math.nan))
    return TestedSubset(frozenset(hunks), outcome.verdict, change, ci, outcome.pairs)


def prefix_groups(hunk_ids: Sequence[str], groups=None, needs: Needs | None = None) -> list[frozenset]:
    """The ordered list the prefix search walks: hunks in file order (the finest level of `groups`:
    files in path order, hunks in line order), each in one group with every hunk it needs or that
    needs it (transitively), the group placed where its first hunk is. A prefix of the list then
    never holds a hunk without one it needs."""
    order = [h for g in groups[-1] for h in g] if groups else list(hunk_ids)
    if sorted(order) != sorted(hunk_ids):
        raise ValueError("the finest level of `groups` must be a partition of the hunk ids")
    root = {h: h for h in order}

    def find(h: str) -> str:
        while root[h] != h:
            root[h] = root[root[h]]
            h = root[h]
        return h

    for hunk, required in (needs or {}).items():
        if hunk not in root or not set(required) <= root.keys():
            raise ValueError(f"needs of {hunk!r} name a hunk that is not in the list")
        for other in required:
            root[find(hunk)] = find(other)
    members: dict[str, list[str]] = {}
    for hunk in order:
        members.setdefault(find(hunk), []).append(hunk)
    return [frozenset(g) for g in members.values()]


HUNK_SIDE_PAIRS = 8
"""`SearchSettings.side_pairs` of the hunk hunt's prefix searches: a side check sized for about
eight fresh pairs, a smaller further step left to the search of the rest (`_peel_the_rest`). At
8-15% noise the hunts cost 18-41% fewer probes with the same answers (docs/results.md, "Side
checks sized by the noise")."""


def decide_hunks(hunk_ids: Sequence[str], groups, measure: Measure, settings: SearchSettings,
                 rule: LevelRule = LevelRule(), ddmin: DdminSettings = DdminSettings(),
                 on_phase: Callable[[str], None] = lambda text: None,
                 needs: Needs | None = None) -> HunkDecision:
    """`needs`: for a hunk, the hunks it cannot run without, known without a probe. A subset that
    holds a hunk without them is never measured: it counts as skipped."""
    decider = _HunkDecider(hunk_ids, groups, measure, settings, rule, ddmin, on_phase, needs)
    return replace(decider.decide(), did_not_run=decider.runs.did_not_run)


class Runnable:
    """Which subsets run: those that hold every hunk their hunks need (known without a probe), less
    the ones seen not to run (skipped twice, never measured: the commit search's rule for an
    unmeasurable commit). `measure` answers those with None without a probe."""

    def __init__(self, measure: Measure, needs: Needs | None = None):
        self._measure = measure
        self._needs = {h: frozenset(r) for h, r in (needs or {}).items()}
        self._skips: dict[frozenset, int] = {}
        self._ran: set[frozenset] = set()

    def __call__(self, subset: frozenset) -> bool:
        if not all(self._needs.get(h, frozenset()) <= subset for h in subset):
            return False
        return subset in self._ran or self._skips.get(subset, 0) < 2

    def measure(self, subset: frozenset, purpose: str) -> float | None:
        if not self(subset):
            self._skips.setdefault(subset, 2)
            return None
        value = self._measure(subset, purpose)
        if value is None:
            self._skips[subset] = self._skips.get(subset, 0) + 1
        else:
            self._ran.add(subset)
        return value

    def settle(self, subset: frozenset, purpose: str) -> bool:
        """Whether BASE + subset runs, probing it when that is not known yet (at most the skip
        rule's two tries; a crash is a probe that ends at once)."""
        while self(subset) and subset not in self._ran:
            self.measure(subset, purpose)
        return self(subset)

    @property
    def did_not_run(self) -> frozenset:
        """Subsets asked for that never gave a sample (known not to run, or skipped)."""
        return frozenset(s for s in self._skips if s not in self._ran)


class _HunkDecider:
    """One hunk hunt's decisions (the module docstring)."""

    NEEDS_DEPTH = 3
    """Prefix searches for what a step needs to be slow, before delta debugging takes over (the
    bisections on whether it runs cost a few probes and are not counted)."""

    def __init__(self, hunk_ids, groups, measure: Measure, settings: SearchSettings, rule: LevelRule,
                 ddmin: DdminSettings, on_phase, needs: Needs | None):
        self.ids, self.groups = list(hunk_ids), groups
        self.runs = Runnable(measure, needs)
        self.measure = self.runs.measure
        self.settings, self.rule, self.ddmin, self.on_phase = settings, rule, ddmin, on_phase
        self.order = prefix_groups(hunk_ids, groups, needs)
        self.noise = NoisePool()
        self.leave_outs = 0          # leave-one-out tests so far: the k-th spends its share of name_alpha

    def decide(self) -> HunkDecision:
        prefixes = list(accumulate(self.order, frozenset.union, initial=frozenset()))
        self.on_phase(f"prefix search: BASE + the first k of {len(self.order)} hunk group(s) in file "
                      "order, bisected like commits")
        search = self._commit_search(prefixes, first="control", rest="prefix")
        prefix = search.result()
        measurable_ends = all(e.n for e in prefix.endpoints)
        if not prefix.reproduced and not (prefix.verdict == "all-skipped" and measurable_ends):
            return HunkDecision(prefix.verdict, prefix.reason, prefix, prefix=prefix)
        self.control = replace(prefix, verdict="reproduced")
        self.facts = dict(prefix=prefix, ruled_out=frozenset().union(
            *(prefixes[c.index] for c in prefix.candidates if c.verdict == "good")))
        if prefix.verdict in ("culprits", "ambiguous"):
            steps = sorted(prefix.culprits + prefix.ambiguous, key=lambda c: c.first_bad)
            signed_gap, gap_se = _end_gap(search, self.noise)
            named: list[TestedSubset] = []
            suspects: list[TestedSubset] = []
            open_question = self._name_steps(steps, search, self.order, signed_gap, named, suspects)
            if open_question is not None:
                open_question = self._peel_the_rest(signed_gap, gap_se, named, suspects) or open_question
                # shares are 'surely' too large only against the largest gap the ends allow
                return self._verdict_of_named(named, suspects, open_question, abs(signed_gap) + 2 * gap_se,
                                              signed_gap, gap_se)
        elif prefix.verdict == "undecided" and not any(c.verdict == "skip" for c in prefix.candidates):
            # out of samples or budget: delta debugging would need more of both, not less (with
            # prefixes that do not run, a dependency nobody declared, it is the search that fits)
            return HunkDecision("undecided", f"no hunk could be named: the prefix search was left "
                                             f"undecided ({prefix.reason})", self.control, **self.facts)
        # A step whose groups alone do not reproduce it, or steps refuted one by one (hunks that
        # only act together, or compensate): the hunks interact.
        return self._by_delta_debugging(search.samples(0), search.samples(len(prefixes) - 1))

    def _commit_search(self, candidates: Sequence[frozenset], *, first: str, rest: str,
                       one_step: bool = False, carried: tuple[list[float], list[float]] | None = None) -> CommitSearch:
        """The commit search over BASE + each candidate subset, in order; its samples join the
        hunt's pooled noise. one_step: it ends at its first named step (`CommitSearch`). carried:
        pairs of its two ends measured already, its control arm's first
        (`CommitSearch.carry_control_pairs`)."""
        settings = replace(self.settings, side_pairs=HUNK_SIDE_PAIRS)
        search = CommitSearch(len(candidates), settings, end_names=("BASE", "BASE + all hunks"),
                              one_step=one_step)
        if carried:
            search.carry_control_pairs(*carried)
        drive(search, lambda batch: [self.measure(candidates[m.index], first if m.reason == "control arm" else rest)
                                     for m in batch])
        self.noise = self.noise.plus(NoisePool.of([search.samples(i) for i in range(len(candidates))]))
        return search

    # -- naming the steps of the prefix search -----------------------------------------------------

    def _name_steps(self, steps: Sequence[Culprit], search: CommitSearch, order: Sequence[frozenset],
                    signed_gap: float, named: list, suspects: list) -> bool | None:
        """Each step of `search` (over BASE + the first k groups of `order`) names the last group it
        adds, once that alone reproduces the slowdown against BASE on fresh pairs, with what it
        needs from the groups before it (found by a second prefix search,
        `_alone_with_what_it_needs`). Appends to `named` and `suspects`; returns whether a question
        stayed open, or None when a step's group cannot be placed (delta debugging)."""
        sign = -1 if signed_gap < 0 else 1
        open_question = False
        for step in steps:
            taken = frozenset().union(*(c.hunks for c in named + suspects))
            last = order[step.first_bad - 1] - taken
            if not last:
                continue            # an earlier culprit needed this group: it is named there
            if step.first_bad == 1:
                # BASE + this group is the prefix itself, named on fresh pairs against BASE already
                pairs = min(len(search.samples(0)), len(search.samples(1)))
                tested = TestedSubset(last, "reproduced", step.step, step.step_ci95, pairs)
            else:
                # the groups before it, less the culprits of earlier steps (their slowdown is theirs)
                before = [g - taken for g in order[:step.first_bad - 1] if g - taken]
                tested = self._alone_with_what_it_needs(last, before, sign, self._effect_prior(step.step))
                if tested is None:
                    return None
                if tested.verdict == "undecided":     # out of pairs: more would not come cheaper elsewhere
                    suspects.append(_with_share(tested, signed_gap))
                    open_question = True
                    continue
            tested, unsure = self._needed_members(tested, sign)
            open_question = open_question or unsure
            (suspects if unsure else named).append(_with_share(tested, signed_gap))
        return open_question

    def _peel_the_rest(self, signed_gap: float, gap_se: float, named: list, suspects: list) -> bool:
        """While the named culprits' own slowdowns leave a remainder r of the gap of at least
        min_effect and at least one standard error, or one above zero that BASE + every hunk
        shows against BASE + the named hunks on pairs of its own (`_shows_on_top`), and r is
        small enough in pairs to show within the cap (about 2 ln(1/reproduce_alpha) 2 sigma^2 /
        r^2 pairs, sigma the pooled noise: a search that cannot end is not started): a prefix search over the hunks not taken yet, in the same order (its control arm: BASE vs BASE + all of them), its steps named as
        the first search's. A culprit after a large one in the list steps little in the prefixes
        (costs in time add: a hunk -22% alone is -9% on top of one of -65%), below what the side
        checks look for (a fifth of the gap); against BASE it is its own size again. Returns
        whether a question stayed open."""
        sign = -1 if signed_gap < 0 else 1
        open_question = False
        s = self.settings
        for _ in range(self.ddmin.max_culprits):
            rest = (signed_gap - sum(math.log1p(c.change) for c in named)) * sign
            se = math.sqrt(gap_se ** 2 + sum(_log_se(c) ** 2 for c in named))
            sigma2 = self.noise.sigma ** 2 if self.noise.df else math.inf
            pairs = 2 * math.log(1 / s.reproduce_alpha) * 2 * sigma2 / rest ** 2 if rest > 0 else math.inf
            taken = frozenset().union(*(c.hunks for c in named + suspects))
            order = [g - taken for g in self.order if g - taken]
            if not order:
                break
            if not (rest > 0 and pairs <= s.max_samples):
                break
            clear = rest >= se and rest >= log_threshold(s.min_effect)
            if not (clear or self._shows_on_top(taken, rest + 2 * se, sign)):
                break
            self.on_phase(f"the rest: BASE + the first k of the {len(order)} group(s) not named, bisected")
            search = self._commit_search(list(accumulate(order, frozenset.union, initial=frozenset())),
                                         first="remainder", rest="prefix")
            found = search.result()
            if found.verdict not in ("culprits", "ambiguous"):
                break
            count = len(named) + len(suspects)
            steps = sorted(found.culprits + found.ambiguous, key=lambda c: c.first_bad)
            unsure = self._name_steps(steps, search, order, signed_gap, named, suspects)
            if unsure is None or len(named) + len(suspects) == count:
                break
            open_question = open_question or unsure
        return open_question

    def _shows_on_top(self, taken: frozenset, upper: float, sign: int) -> bool:
        """Whether BASE + every hunk is slower than BASE + the hunks `taken` (the named culprits and
        suspects) by min_effect, on fresh pairs of the two back to back (ABBA: a drift cancels), at
        an e-value of 1/alpha: the remainder asked directly, where its estimate from the culprits'
        own sizes is too wide to tell. A culprit of -65% is named on one pair, and the remainder
        then has an interval a tenth of the gap wide: a hunk 22% slower alone, 9% on top of it,
        was missed in 15 of 300 simulated hunts (docs/results.md). `upper`, the
        estimate's upper bound (log), is read before the pairs, so it may set the e-value's effect
        prior (in units of the pooled noise) and the cap of pairs, as many as a remainder of that
        size needs to show (2 ln(1/alpha) 2 sigma^2 / upper^2, at least two, at most
        max_samples): a noisy machine buys no more than it can see. A wrong yes costs one prefix
        search, whose own control arm answers; it names nothing."""
        s = self.settings
        if upper < log_threshold(s.min_effect) or not self.noise.df:
            return False
        cap = min(s.max_samples, max(2, math.ceil(2 * math.log(1 / s.alpha) * 2 * self.noise.sigma ** 2 / upper ** 2)))
        priors = ((upper / self.noise.sigma) ** 2,)
        self.on_phase(f"the rest: BASE + the {len(taken)} hunk(s) named against BASE + all hunks, side by side")
        sets = (taken, frozenset(self.ids))
        arms: tuple[list[float], list[float]] = ([], [])
        shown = False
        for k in range(cap):
            order = (0, 1) if k % 2 == 0 else (1, 0)
            values = {i: self.measure(sets[i], "remainder") for i in order}
            if any(v is None for v in values.values()):
                break
            for i in order:
                arms[i].append(values[i])
            if _shows_step(arms[0], arms[1], self.noise.plus(NoisePool.of(arms)), sign, s.alpha, s.min_effect, priors):
                shown = True
                break
        self.noise = self.noise.plus(NoisePool.of(arms))    # the hunt's samples, whatever they showed
        return shown

    def _alone_with_what_it_needs(self, proposed: frozenset, before: list[frozenset], sign: int,
                                  priors: tuple[float, ...] | None = None) -> TestedSubset | None:
        """`proposed` (the group a step adds) alone against BASE (`_alone`, beside the slow prefix it
        ends), joined by what it needs until it reproduces the slowdown alone:

        * when it does not run, the first j at which BASE + proposed + the first j groups of
          `before` runs, by bisection on whether it runs (a crash answers without noise, in one
          or two probes), and group j joins it;
        * when it runs but is clearly less slow alone, a second prefix search over BASE, BASE +
          proposed, BASE + proposed + the first j groups of `before` (a commit search), whose
          first step adds the group it needs to be slow; up to NEEDS_DEPTH such searches.

        None past them, or when no such group is found; 'undecided' when the alone test runs out
        of pairs. `priors`: the alone tests' effect prior, the step's (`_effect_prior`)."""
        searches = 0
        while True:
            self.on_phase(f"alone: {len(proposed)} hunk(s) against BASE, beside the prefix they end")
            outcome, tested, ends = self._alone(proposed, proposed.union(*before), sign, priors)
            if outcome == "reproduced":
                return tested
            if outcome == "open":
                return tested or TestedSubset(proposed, "undecided", math.nan, (math.nan, math.nan), 0)
            if not before:
                return None
            if outcome == "does not run":
                k = self._first_group_it_runs_with(proposed, before)
                if k is None:
                    return None
                # it needs group k to run; what it needs to be slow may lie anywhere in the rest
                proposed, before = proposed | before[k], before[:k] + before[k + 1:]
                continue
            if searches == self.NEEDS_DEPTH:
                return None
            searches += 1
            self.on_phase(f"needs: BASE + {len(proposed)} hunk(s) + the first j of {len(before)} "
                          "group(s) before them, bisected")
            candidates = [frozenset()] + [proposed.union(*before[:j]) for j in range(len(before) + 1)]
            # only its first step is used: a further need shows in the next alone test. Its ends
            # are BASE and the prefix the alone test just measured side by side: its control arm
            # goes on from those pairs
            found = self._commit_search(candidates, first="needs", rest="needs", one_step=True,
                                        carried=ends).result()
            steps = sorted(found.culprits + found.ambiguous, key=lambda c: c.first_bad)
            if not steps:
                return None
            if steps[0].first_bad == 1:       # slow alone after all: named on fresh pairs there
                pairs = min(found.endpoints[0].n, next((c.n for c in found.candidates if c.index == 1), 0))
                return TestedSubset(proposed, "reproduced", steps[0].step, steps[0].step_ci95, pairs)
            k = steps[0].first_bad - 2      # candidate j holds before[:j - 1]: its step adds before[k]
            proposed, before = proposed | before[k], before[:k]

    def _first_group_it_runs_with(self, proposed: frozenset, before: list[frozenset]) -> int | None:
        """The k for which BASE + proposed + before[:k + 1] runs and BASE + proposed + before[:k]
        does not, by bisection on whether each runs; None when it does not run with all of them."""
        self.on_phase(f"needs: the first j of {len(before)} group(s) with which {len(proposed)} hunk(s) run, "
                      "bisected on whether they run")
        lo, hi = 0, len(before)          # before[:lo] does not run with it; before[:hi] is to be seen
        if not self.runs.settle(proposed.union(*before), "needs"):
            return None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.runs.settle(proposed.union(*before[:mid]), "needs"):
                hi = mid
            else:
                lo = mid
        return hi - 1

    def _alone(self, proposed: frozenset, prefix: frozenset, sign: int,
               priors: tuple[float, ...] | None = None,
               ) -> tuple[str, TestedSubset | None, tuple[list[float], list[float]]]:
        """'reproduced' (BASE + proposed is slower than BASE by min_effect, e-value 1/reproduce_alpha:
        the control arm's rule), 'does not run', 'interacts' (the slow `prefix` it ends is slower
        than it by min_effect, e-value 1/alpha: it needs more than itself) or 'open' (out of
        pairs). Three arms in rotation, BASE, BASE + proposed, BASE + prefix; a wrong 'interacts'
        costs only a search, so it is held to alpha, not reproduce_alpha. Also returns the BASE and
        prefix arms (the ends of the search for what it needs)."""
        sets = (frozenset(), proposed, prefix)
        arms: tuple[list[float], list[float], list[float]] = ([], [], [])
        s = self.settings
        for k in range(s.max_samples):
            values = self._round_of_three(sets, k)
            if not self.runs(proposed):
                return "does not run", None, (arms[0], arms[2])
            if any(v is None for v in values.values()):
                continue
            for i in range(3):
                arms[i].append(values[i])
            pool = self.noise.plus(NoisePool.of(arms))
            if _shows_step(arms[0], arms[1], pool, sign, s.reproduce_alpha, s.min_effect, priors):
                return "reproduced", _tested(proposed, arms[0], arms[1], pool), (arms[0], arms[2])
            if _shows_step(arms[1], arms[2], pool, sign, s.alpha, s.min_effect, priors):
                return "interacts", None, (arms[0], arms[2])
        if not arms[0]:
            return "open", None, (arms[0], arms[2])
        return "open", replace(_tested(proposed, arms[0], arms[1], self.noise.plus(NoisePool.of(arms))),
                               verdict="undecided"), (arms[0], arms[2])

    def _round_of_three(self, sets: tuple[frozenset, frozenset, frozenset], k: int) -> dict[int, float | None]:
        """One rotation of the three arms (BASE, the subset tested, the reference), in the order
        0 1 2, then 2 1 0; once the tested subset's run is skipped the round stops (its other
        samples would have no partner)."""
        values: dict[int, float | None] = {}
        for i in ((0, 1, 2) if k % 2 == 0 else (2, 1, 0)):
            values[i] = self.measure(sets[i], "name")
            if i == 1 and values[i] is None:
                break
        return values

    def _verdict_of_named(self, named, suspects, open_question: bool, share_gap: float, signed_gap: float,
                          gap_se: float) -> HunkDecision:
        """share_gap: the gap the shares are held to (`_shares_do_not_add_up`); signed_gap, gap_se:
        the gap and its standard error, for the remainder's interval."""
        control, facts = self.control, self.facts
        if named and _shares_do_not_add_up(named, share_gap, self.settings):
            shares = ", ".join(f"{c.share_of_gap:.0%}" for c in named)
            return HunkDecision("undecided", f"the culprits' shares of the gap ({shares}) do not add up: the "
                                             "samples do not fit one step per culprit", control, culprits=(),
                                suspects=tuple(named + suspects), **facts)
        if named:
            _, half = remainder_of_gap(signed_gap, gap_se, [(c.change, c.ci95) for c in named])
            unexplained = 1 - sum(c.share_of_gap for c in named)
            return HunkDecision("culprits", "", control, culprits=tuple(named), suspects=tuple(suspects),
                                unexplained_ci95=share_interval(unexplained, half, signed_gap), **facts)
        why = ("a hunk of a culprit could be neither shown needed nor left out within the pairs"
               if open_question else "no step could be named")
        return HunkDecision("undecided", f"no hunk could be named: {why}", control, culprits=(),
                            suspects=tuple(suspects), **facts)

    # -- which hunks of a culprit it needs ----------------------------------------------------------

    def _needed_members(self, tested: TestedSubset, sign: int) -> tuple[TestedSubset, bool]:
        """The culprit less every hunk it does not need, and whether a hunk's need stayed open.

        A hunk without which the rest does not run (known without a probe) is needed. Every other
        is tested by leaving it out (`_leave_each_out`, all of them at once): needed once the
        culprit is slower than the rest by min_effect and an e-value of 1/alpha_k, not needed once
        the rest alone reproduces the slowdown against BASE by the same rule. The k-th such test of
        the hunt that measures gets alpha_k = name_alpha / (2 k (k + 1)) for each answer (they sum
        to name_alpha: a hunk named that the culprit does not need is as rare as a commit named
        that is no step); one ended by the rest's crash claims nothing by chance. Of two or more
        hunks found not needed each on its own, only the first is dropped at once: the others are
        tested again, one at a time, without it (two hunks may each stand in for the other)."""
        members = tested.hunks
        testable = [h for h in sorted(members) if len(members) >= 2 and self.runs(members - {h})]
        if not testable:
            return tested, False
        outcomes = self._leave_each_out(tested, testable, sign)
        unsure = any(outcome == "open" for outcome, _ in outcomes.values())
        dropped = [h for h in testable if outcomes[h][0] == "not needed"]
        if dropped:
            tested = outcomes[dropped[0]][1]
        for hunk in dropped[1:]:
            if len(tested.hunks) < 2 or not self.runs(tested.hunks - {hunk}):
                continue
            outcome, smaller = self._leave_each_out(tested, [hunk], sign)[hunk]
            if outcome == "not needed":
                tested = smaller
            unsure = unsure or outcome == "open"
        return tested, unsure

    def _next_leave_out_alpha(self) -> float:
        """alpha_k of the k-th leave-one-out test that measures (one the rest does not run without
        makes no claim that could be wrong, and spends nothing)."""
        self.leave_outs += 1
        k = self.leave_outs
        return self.settings.name_alpha / (2 * k * (k + 1))

    def _effect_prior(self, change: float) -> tuple[float, ...] | None:
        """The e-value's effect prior for tests whose answer is a difference of a step of `change`
        (a culprit's, a prefix step's): its log size in units of the hunt's pooled noise, both read
        before those tests measure (so the prior does not look at their data: the e-value stays
        valid, as the naming gate's does); None, the default mixture, without a step or a noise."""
        step = abs(math.log1p(change)) if change > -1 else math.nan
        if not (self.noise.df and self.noise.sigma > 0 and math.isfinite(step) and step > 0):
            return None
        return ((step / self.noise.sigma) ** 2,)

    def _leave_each_out(self, tested: TestedSubset, hunks: Sequence[str],
                        sign: int) -> dict[str, tuple[str, TestedSubset | None]]:
        """hunk -> 'needed', 'not needed' (with the rest's test against BASE) or 'open' (out of
        pairs), for each of `hunks` left out of the culprit `tested`.

        One rotation measures BASE, the culprit less each hunk still open, and the culprit (in that
        order, then reversed: a linear drift cancels over two rounds), so that a culprit of m hunks
        costs m + 2 runs a round, not 3 m: BASE and the culprit serve every test. Each test reads
        the rounds in which its three arms ran; its e-values are its own (a union bound over the
        tests holds whatever their dependence) with the noise pooled over every arm and the hunt.
        Either answer is a difference of the culprit's step (the rest at BASE's level, or at the
        culprit's): the e-values' effect prior is centred on it (`_effect_prior`)."""
        members = tested.hunks
        priors = self._effect_prior(tested.change)
        min_effect = self.settings.min_effect
        self.on_phase(f"naming: which of {len(hunks)} hunk(s) of {len(members)} are needed? BASE, the culprit "
                      "without each, the culprit, in rotation")
        rests = {h: members - {h} for h in hunks}
        arms: dict[str, tuple[list[float], list[float], list[float]]] = {h: ([], [], []) for h in hunks}
        every: dict[object, list[float]] = {}        # each subset's samples, once: the noise's groups
        alphas: dict[str, float] = {}
        outcomes: dict[str, tuple[str, TestedSubset | None]] = {}
        for k in range(min(self.rule.max_pairs, self.settings.max_samples)):
            open_hunks = [h for h in hunks if h not in outcomes]
            if not open_hunks:
                break
            sets = [frozenset()] + [rests[h] for h in open_hunks] + [members]
            values = [self.measure(subset, "name") for subset in (sets if k % 2 == 0 else sets[::-1])]
            if k % 2:
                values.reverse()
            for subset, value in zip(sets, values):
                if value is not None:
                    every.setdefault(subset, []).append(value)
            base, full = values[0], values[-1]
            for h, rest in zip(open_hunks, values[1:-1]):
                if not self.runs(rests[h]):
                    outcomes[h] = ("needed", None)         # the rest does not run without it
                elif rest is not None and base is not None and full is not None:
                    if h not in alphas:
                        alphas[h] = self._next_leave_out_alpha()
                    for arm, value in zip(arms[h], (base, rest, full)):
                        arm.append(value)
            pool = self.noise.plus(NoisePool.of(list(every.values())))
            for h in open_hunks:
                if h in outcomes or h not in alphas:
                    continue
                base_arm, rest_arm, full_arm = arms[h]
                if _shows_step(rest_arm, full_arm, pool, sign, alphas[h], min_effect, priors):
                    outcomes[h] = ("needed", None)
                elif _shows_step(base_arm, rest_arm, pool, sign, alphas[h], min_effect, priors):
                    outcomes[h] = ("not needed", _tested(rests[h], base_arm, rest_arm, pool))
        return {h: outcomes.get(h, ("open", None)) for h in hunks}

    # -- delta debugging, where the hunks interact --------------------------------------------------

    def _by_delta_debugging(self, base_samples, full_samples) -> HunkDecision:
        """Hierarchical ddmin over every hunk (search/ddmin.py), each subset paired with BASE;
        subsets known not to run are 'unresolved' without a probe."""
        settings = self.settings
        signed_gap, pair_sd, pairs = _gap_after_more_pairs(base_samples, full_samples, frozenset(self.ids), self.measure)
        gap = abs(signed_gap)
        rule = replace(self.rule, max_pairs=min(self.rule.max_pairs, settings.max_samples))   # --max-samples caps all
        rule = rule.scaled_to(gap, log_threshold(settings.min_effect), pair_sd)
        direction = "faster" if signed_gap > 0 else "slower"   # the reproduced one ('both' hunts either)
        margin = log_threshold(settings.min_effect)

        self.on_phase(f"delta debugging over {len(self.ids)} hunks, each subset paired with BASE")
        search = HunkSearch(self.ids, self.groups, self.ddmin)
        stuck = 0
        while (subset := search.next_subset()) is not None:
            if not self.runs(subset):
                search.record(subset, UNRESOLVED)
                continue
            verdict = _subset_verdict(subset, self.measure, gap, margin, rule, direction,
                                      "confirm" if search.confirming else "ddmin")
            if verdict is None:
                stuck += 1
                verdict = UNDECIDED
            search.record(subset, verdict)
        result = search.result()
        self.facts = dict(self.facts, search=result, undecided_subsets=stuck)

        named: list[TestedSubset] = []
        suspects: list[TestedSubset] = []
        open_question = False
        for proposed in result.culprits:
            self.on_phase(f"naming: {len(proposed)} hunk(s) against BASE on fresh pairs")
            tested = test_subset(proposed, self.measure, settings, "name", self.noise)
            unsure = False
            if tested.verdict == "reproduced":
                tested, unsure = self._needed_members(tested, -1 if signed_gap < 0 else 1)
            if tested.verdict == "reproduced" and not unsure:
                named.append(_with_share(tested, signed_gap))
            else:
                suspects.append(_with_share(tested, signed_gap))
                open_question = open_question or unsure or tested.verdict == "undecided"
        if not named and (stuck or open_question or not result.complete):
            why = (f"{stuck} subset(s) could not be placed within {rule.max_pairs} pairs (--max-samples)"
                   if stuck else "the sample cap or the search budget ran out")
            return HunkDecision("undecided", f"no hunk could be named: {why}", self.control, culprits=(),
                                suspects=tuple(suspects), **self.facts)
        if not named:
            why = ("no proposed hunk reproduced the slowdown on fresh pairs" if suspects
                   else "no subset of the hunks is slow on its own")
            return HunkDecision("not-localised", f"the slowdown reproduced, but {why}", self.control,
                                culprits=(), suspects=tuple(suspects), **self.facts)
        return self._verdict_of_named(named, suspects, False, gap, signed_gap,
                                      pair_sd / math.sqrt(pairs) if pairs else math.inf)


def _end_gap(search: CommitSearch, noise: NoisePool) -> tuple[float, float]:
    """Log tok/s of BASE + all hunks less BASE's from every sample of the two, and its standard
    error from the pooled noise."""
    base, full = search.samples(0), search.samples(search.n - 1)
    se = noise.sigma * math.sqrt(1 / len(base) + 1 / len(full)) if noise.df else math.inf
    return float(np.mean(np.log(full)) - np.mean(np.log(base))), se


def _log_se(tested: TestedSubset) -> float:
    """The standard error of a tested subset's log change, from its 95% interval."""
    lo, hi = tested.ci95
    if not (lo > -1 and math.isfinite(hi)):
        return math.inf
    return (math.log1p(hi) - math.log1p(lo)) / (2 * 1.96)


def _tested(hunks: frozenset, base: Sequence[float], subset: Sequence[float], noise: NoisePool) -> TestedSubset:
    """A subset that reproduced (replace the verdict otherwise), sized from its arm and BASE's: the difference of their mean log
    tok/s with a 95% t interval from the hunt's pooled noise (a handful of pairs' own spread gives an
    interval too unsteady for the shares of the gap)."""
    est = float(np.mean(np.log(subset)) - np.mean(np.log(base)))
    half = t_ppf(0.975, noise.df) * noise.sigma * math.sqrt(1 / len(base) + 1 / len(subset))
    return TestedSubset(hunks, "reproduced", math.expm1(est), (math.expm1(est - half), math.expm1(est + half)),
                        min(len(base), len(subset)))


def _shows_step(before: Sequence[float], after: Sequence[float], noise: NoisePool, sign: int,
                alpha: float, min_effect: float, priors: Sequence[float] | None = None) -> bool:
    """`after` differs from `before` in the direction `sign` by at least min_effect, with an
    anytime-valid e-value (stats.pooled_t_log_bf) of at least 1/alpha: the control arm's 'go'."""
    if len(before) < 1 or len(after) < 1:
        return False
    est = float(np.mean(np.log(after)) - np.mean(np.log(before)))
    c = 1 / len(before) + 1 / len(after)
    return (est * sign > 0 and abs(est) >= log_threshold(min_effect)
            and pooled_t_log_bf(est, c, noise, sign=sign, priors=priors or EFFECT_PRIORS) >= math.log(1 / alpha))


def _subset_verdict(subset: frozenset, measure: Measure, gap: float, margin: float, rule: LevelRule,
                    direction: str, purpose: str) -> str | None:
    """Pairs (BASE, BASE + subset) in ABBA order until a look decides; UNRESOLVED if it does not
    run; None when it used its pairs without a verdict."""
    base: list[float] = []
    subset_values: list[float] = []
    while True:
        order = ("base", "subset") if len(base) % 2 == 0 else ("subset", "base")
        for which in order:
            value = measure(frozenset() if which == "base" else subset, purpose)
            if value is None:
                if which == "subset":
                    return UNRESOLVED    # does not apply / import / run: neither fast nor slow
                value = math.nan        # BASE skipped once: the pair is lost
            (base if which == "base" else subset_values).append(value)
        ok = [(b, s) for b, s in zip(base, subset_values) if math.isfinite(b)]
        diffs = slowdowns([b for b, _ in ok], [s for _, s in ok], direction)
        verdict = subset_verdict(diffs, gap, margin, rule) if diffs else None
        if verdict is not None:
            return verdict
        if undecided(diffs, rule) or len(base) >= 2 * rule.max_pairs:
            return None


def _gap_after_more_pairs(base_samples: Sequence[float], full_samples: Sequence[float],
                         everything: frozenset, measure: Measure) -> tuple[float, float, int]:
    """The gap every subset of the delta debugging is placed in, from more pairs than the control
    arm stopped at: a sequential test stops when the estimate is high (at 15% noise, a 6-pair stop
    on an 18% gap reads ~35%), and a gap read twice too large puts the slow hunk itself at half of
    it. The pairs so far are kept and as many again (at least 12) are added, in ABBA order.
    Returns (mean log difference, SD of one paired difference, pairs)."""
    pairs = min(len(base_samples), len(full_samples))
    base, full = list(base_samples)[:pairs], list(full_samples)[:pairs]
    ends = (frozenset(), everything)
    for k in range(max(pairs, 12)):
        values = {}
        for which in ((0, 1) if k % 2 == 0 else (1, 0)):
            values[which] = measure(ends[which], "control")
        if values[0] is not None and values[1] is not None:
            base.append(values[0])
            full.append(values[1])
    diffs = [math.log(f) - math.log(b) for b, f in zip(base, full)]
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else 0.0
    return mean, sd, len(diffs)


def _with_share(tested: TestedSubset, signed_gap: float) -> TestedSubset:
    """Its log change over the gap's (both signed: a share of the regression)."""
    ok = math.isfinite(tested.change) and tested.change > -1 and signed_gap != 0
    return replace(tested, share_of_gap=math.log1p(tested.change) / signed_gap if ok else math.nan)


def _shares_do_not_add_up(named: Sequence[TestedSubset], gap: float, settings: SearchSettings) -> bool:
    """Surely over share_limit each, or surely summing past 200% (remainder below -100%): from
    the end of each interval nearest zero."""
    least = []
    for c in named:
        ends = [abs(math.log1p(x)) for x in c.ci95 if x > -1 and math.isfinite(x)]
        least.append(min(ends) / gap if ends else 0.0)
    return max(least) > settings.share_limit or sum(least) > 2.0
