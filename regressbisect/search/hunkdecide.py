"""What a hunk hunt decides, pure: control arm, paired subset verdicts, naming. No git, no I/O.

hunts/hunks.py supplies `measure(subset, purpose)`: one sample of BASE + that subset of hunks (the
empty set is BASE), tok/s or None when the run was skipped. The simulation in scripts/ supplies
a fake one, so the benchmark and the real hunt run the same decisions.

1. Control arm: BASE vs BASE + all hunks with the commit search's control arm (CommitSearch on
   two candidates, control_only): reproduced only when the point estimate is at least
   min_effect and the interval excludes zero, at reproduce_alpha per look, never on the first.
2. Hierarchical ddmin over the hunks (search/ddmin.py); every subset is measured in pairs with
   BASE beside it and placed between the two levels (search/levels.py). A subset that uses its
   pairs without a verdict is 'undecided' for ddmin (it never reduces the search) and makes the
   hunt 'undecided' unless culprits are named anyway.
3. Naming: each culprit ddmin proposes is tested again on fresh pairs against BASE with the
   control arm's rule (reproduced = named). A culprit of several hunks names a hunk only when the
   others without it do not reproduce the slowdown on their own. Culprits that surely own more
   than share_limit of the gap, or leave a remainder below -100%, name nothing: the step model
   does not fit, the hunt is undecided.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from regressbisect.search.bisect import CommitSearch, SearchResult, SearchSettings
from regressbisect.search.ddmin import UNDECIDED, UNRESOLVED, DdminResult, DdminSettings, HunkSearch
from regressbisect.search.levels import LevelRule, slowdowns, subset_verdict, undecided
from regressbisect.search.stats import log_threshold

Measure = Callable[[frozenset, str], "float | None"]
"""(subset of hunk ids, purpose) -> tok/s of one run of BASE + subset, or None (skipped)."""


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
    """Proposed by ddmin, not named (the fresh test did not reproduce, or shares did not add up)."""
    undecided_subsets: int = 0
    """Subsets that used their pairs without a verdict."""


def test_subset(hunks: frozenset, measure: Measure, settings: SearchSettings, purpose: str) -> TestedSubset:
    """BASE vs BASE + hunks, interleaved (ABBA), decided like the commit hunt's control arm."""
    arm = CommitSearch(2, settings, control_only=True)
    sides = (frozenset(), frozenset(hunks))
    while batch := arm.next_batch(1):
        for m in batch:
            arm.record(m.index, measure(sides[m.index], purpose))
    result = arm.result()
    cmp = result.control
    change, ci = (cmp.change, cmp.ci95) if cmp is not None else (math.nan, (math.nan, math.nan))
    pairs = min(result.endpoints[0].n, result.endpoints[1].n)
    return TestedSubset(frozenset(hunks), result.verdict, change, ci, pairs)


def decide_hunks(hunk_ids: Sequence[str], groups, measure: Measure, settings: SearchSettings,
                 rule: LevelRule = LevelRule(), ddmin: DdminSettings = DdminSettings(),
                 on_phase: Callable[[str], None] = lambda text: None) -> HunkDecision:
    everything = frozenset(hunk_ids)
    on_phase(f"control arm: BASE vs BASE + all {len(everything)} hunks, interleaved")
    control_arm = CommitSearch(2, settings, control_only=True)
    ends = (frozenset(), everything)
    while batch := control_arm.next_batch(1):
        for m in batch:
            control_arm.record(m.index, measure(ends[m.index], "control"))
    control = control_arm.result()
    if control.verdict != "reproduced":
        return HunkDecision(control.verdict, control.reason, control)
    signed_gap, pair_sd = _gap_after_more_pairs(control_arm, ends, measure)   # log BASE + all - log BASE
    gap = abs(signed_gap)
    rule = replace(rule, max_pairs=min(rule.max_pairs, settings.max_samples))   # --max-samples caps all
    rule = rule.scaled_to(gap, log_threshold(settings.min_effect), pair_sd)
    direction = "faster" if signed_gap > 0 else "slower"   # the reproduced one ('both' hunts either)
    margin = log_threshold(settings.min_effect)

    on_phase(f"delta debugging over {len(everything)} hunks, each subset paired with BASE")
    search = HunkSearch(list(hunk_ids), groups, ddmin)
    stuck = 0
    while (subset := search.next_subset()) is not None:
        verdict = _subset_verdict(subset, measure, gap, margin, rule, direction,
                                  "confirm" if search.confirming else "ddmin")
        if verdict is None:
            stuck += 1
            verdict = UNDECIDED
        search.record(subset, verdict)
    result = search.result()

    named: list[TestedSubset] = []
    suspects: list[TestedSubset] = []
    open_question = False
    for proposed in result.culprits:
        on_phase(f"naming: {len(proposed)} hunk(s) against BASE on fresh pairs")
        tested = test_subset(proposed, measure, settings, "name")
        members = proposed
        for hunk in sorted(proposed):
            if tested.verdict != "reproduced" or len(members) < 2:
                break
            without = test_subset(members - {hunk}, measure, replace(settings, max_samples=rule.max_pairs), "name")
            if without.verdict == "reproduced":
                members, tested = members - {hunk}, without     # that hunk is not needed for it
            elif not _clearly_less_slow(without, tested):
                open_question = True                            # needed? not shown: name nothing
                tested = replace(tested, verdict="undecided")
        if tested.verdict == "reproduced":
            named.append(_with_share(tested, signed_gap))
        else:
            suspects.append(_with_share(tested, signed_gap))
            open_question = open_question or tested.verdict == "undecided"
    if named and _shares_do_not_add_up(named, gap, settings):
        shares = ", ".join(f"{c.share_of_gap:.0%}" for c in named)
        return HunkDecision("undecided", f"the culprits' shares of the gap ({shares}) do not add up: the "
                                         "samples do not fit one step per culprit", control, result, (),
                            tuple(named + suspects), stuck)
    if named:
        return HunkDecision("culprits", "", control, result, tuple(named), tuple(suspects), stuck)
    if stuck or open_question or not result.complete:
        why = (f"{stuck} subset(s) could not be placed within {rule.max_pairs} pairs (--max-samples)"
               if stuck else "the sample cap or the search budget ran out")
        return HunkDecision("undecided", f"no hunk could be named: {why}", control, result, (), tuple(suspects), stuck)
    why = ("no proposed hunk reproduced the slowdown on fresh pairs" if suspects
           else "no subset of the hunks is slow on its own")
    return HunkDecision("not-localised", f"the slowdown reproduced, but {why}", control, result, (),
                        tuple(suspects), stuck)


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


def _gap_after_more_pairs(control_arm: CommitSearch, ends, measure: Measure) -> tuple[float, float]:
    """The gap every subset is placed in, from more pairs than the control arm stopped at: a
    sequential test stops when the estimate is high (at 15% noise, a 6-pair stop on an 18% gap
    reads ~35%), and a gap read twice too large puts the slow hunk itself at half of it. The
    control arm's pairs are kept and as many again (at least 12) are added, in ABBA order.
    Returns (mean log difference, SD of one paired difference)."""
    result = control_arm.result()
    pairs = min(result.endpoints[0].n, result.endpoints[1].n)
    base = list(control_arm.samples(0))[:pairs]
    full = list(control_arm.samples(1))[:pairs]
    extra = max(pairs, 12)
    for k in range(extra):
        order = (0, 1) if k % 2 == 0 else (1, 0)
        values = {}
        for which in order:
            values[which] = measure(ends[which], "control")
        if values[0] is not None and values[1] is not None:
            base.append(values[0])
            full.append(values[1])
    diffs = [math.log(f) - math.log(b) for b, f in zip(base, full)]
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else 0.0
    return mean, sd


def _clearly_less_slow(without: TestedSubset, tested: TestedSubset) -> bool:
    """The culprit without a hunk is slower than BASE by clearly less than the culprit itself
    (their paired estimates differ by 2.58 standard errors): that hunk is needed for it. A hunk
    that does not run without the others (all-skipped) is needed too."""
    if without.verdict == "all-skipped":
        return True
    a, b = _log_estimate(tested), _log_estimate(without)
    if a is None or b is None:
        return False
    (ea, sa), (eb, sb) = a, b
    return abs(ea) - eb * math.copysign(1.0, ea) > 2.58 * math.hypot(sa, sb)


def _log_estimate(tested: TestedSubset) -> tuple[float, float] | None:
    """(log change, its standard error), backed out of the 95% t interval of the paired test."""
    lo, hi = tested.ci95
    if not (tested.pairs >= 2 and lo > -1 and math.isfinite(hi) and math.isfinite(tested.change)):
        return None
    from scipy.stats import t as student_t
    se = (math.log1p(hi) - math.log1p(lo)) / (2 * float(student_t.ppf(0.975, tested.pairs - 1)))
    return math.log1p(tested.change), se


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
