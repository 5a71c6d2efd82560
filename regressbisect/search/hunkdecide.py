"""What a hunk hunt decides, pure: prefix search, naming, delta debugging where hunks interact.

No git, no I/O. This module runs the phases in order; each is its own module of search/hunks/
(its __init__ lists them) over one explicit `HuntContext`, and calls the commit search's rules
where they are the same rule. hunts/hunks.py supplies `measure(subset, purpose)`: one sample of
BASE + that subset of hunks (the empty set is BASE), tok/s or None when the run was skipped, and
`needs`: the hunks a hunk cannot run without, read from the diff. The simulation in scripts/
supplies fake ones, so the benchmark and the real hunt run the same decisions.

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
   prefix searches do not place) or the paired test refuted every step the prefix search proposed
   ('not-localised') though the control arm reproduced: the earlier search, hierarchical ddmin
   (search/ddmin.py) with every subset paired with BASE (search/levels.py), each culprit named
   after a fresh test against BASE, or when the prefix search was left 'undecided' with prefixes
   that do not run (a dependency nobody declared). Without such prefixes, 'undecided' ends the
   hunt undecided.

Subsets that break `needs`, and subsets seen not to run (skipped twice, no sample), are never
measured again: they count as skipped without a probe (`hunks/runnable.py`). Culprits that surely own more than
share_limit of the gap, or leave a remainder below -100%, name nothing: the step model does not
fit, the hunt is undecided. Every e-value uses the hunt's pooled noise (stats.NoisePool) beside
the arms' own spread.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from regressbisect.search.bisect import SearchSettings
from regressbisect.search.ddmin import DdminSettings
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.delta import by_delta_debugging
from regressbisect.search.hunks.prefix import HUNK_SIDE_PAIRS, end_gap, prefix_groups, prefixes, search_prefixes
from regressbisect.search.hunks.rest import peel_the_rest
from regressbisect.search.hunks.runnable import Measure, Needs, Runnable
from regressbisect.search.hunks.steps import name_steps
from regressbisect.search.hunks.subsets import Names, TestedSubset, test_subset
from regressbisect.search.hunks.verdict import HunkDecision, verdict_of_named
from regressbisect.search.levels import LevelRule
from regressbisect.search.naming import AlphaSpender

__all__ = ["HUNK_SIDE_PAIRS", "HunkDecision", "Measure", "Needs", "Runnable", "TestedSubset", "decide_hunks",
           "prefix_groups", "test_subset"]


def decide_hunks(hunk_ids: Sequence[str], groups, measure: Measure, settings: SearchSettings,
                 rule: LevelRule = LevelRule(), ddmin: DdminSettings = DdminSettings(),
                 on_phase: Callable[[str], None] = lambda text: None,
                 needs: Needs | None = None) -> HunkDecision:
    """`needs`: for a hunk, the hunks it cannot run without, known without a probe. A subset that
    holds a hunk without them is never measured: it counts as skipped."""
    runs = Runnable(measure, needs)
    ctx = HuntContext(settings=settings, rule=rule, ddmin=ddmin, runs=runs, ids=list(hunk_ids), groups=groups,
                      order=prefix_groups(hunk_ids, groups, needs), on_phase=on_phase,
                      leave_out_alphas=AlphaSpender(settings.name_alpha / 2))
    return replace(_decide(ctx), did_not_run=runs.did_not_run)


def _decide(ctx: HuntContext) -> HunkDecision:
    """The phases in order (the module docstring)."""
    candidates = prefixes(ctx.order)
    ctx.on_phase(f"prefix search: BASE + the first k of {len(ctx.order)} hunk group(s) in file "
                 "order, bisected like commits")
    search = search_prefixes(ctx, candidates, first="control", rest="prefix")
    prefix = search.result()
    measurable_ends = all(e.n for e in prefix.endpoints)
    if not prefix.reproduced and not (prefix.verdict == "all-skipped" and measurable_ends):
        return HunkDecision(prefix.verdict, prefix.reason, prefix, prefix=prefix)
    # what every verdict below reports beside its culprits
    facts = HunkDecision("", "", replace(prefix, verdict="reproduced"), prefix=prefix, ruled_out=frozenset().union(
        *(candidates[c.index] for c in prefix.candidates if c.verdict == "good")))
    if prefix.verdict in ("culprits", "ambiguous"):
        steps = sorted(prefix.culprits + prefix.ambiguous, key=lambda c: c.first_bad)
        signed_gap, gap_se = end_gap(search, ctx.noise)
        names, placed = name_steps(ctx, steps, search, ctx.order, signed_gap, Names())
        if placed:
            names = peel_the_rest(ctx, signed_gap, gap_se, names)
            # shares are 'surely' too large only against the largest gap the ends allow
            return verdict_of_named(facts, names, abs(signed_gap) + 2 * gap_se, signed_gap, gap_se,
                                    ctx.settings.direction, ctx.settings.share_limit)
    elif prefix.verdict == "undecided" and not any(c.verdict == "skip" for c in prefix.candidates):
        # out of samples or budget: delta debugging would need more of both, not less (with
        # prefixes that do not run, a dependency nobody declared, it is the search that fits)
        return replace(facts, verdict="undecided",
                       reason=f"no hunk could be named: the prefix search was left undecided ({prefix.reason})")
    # A step whose groups alone do not reproduce it, or steps refuted one by one (hunks that
    # only act together, or compensate): the hunks interact.
    return by_delta_debugging(ctx, facts, search.samples(0), search.samples(len(candidates) - 1))
