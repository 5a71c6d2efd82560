"""A step's group alone against BASE, joined by what it needs to run or to be slow."""
from __future__ import annotations

import math
from dataclasses import replace

from regressbisect.search.control import rules_out_step, shows_step
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.prefix import search_prefixes
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.hunks.subsets import Joined, TestedSubset, sized_at_stop, tested, with_joined
from regressbisect.search.phases import Phase
from regressbisect.search.stats import log_step, log_threshold
from regressbisect.search.verdicts import Verdict
from regressbisect.enums import WordEnum

__all__ = ["NEEDS_DEPTH", "Alone", "alone_with_what_it_needs", "first_group_alone"]


class Alone(WordEnum):
    """What a step's group against BASE, beside the slow prefix it ends, said (`alone`)."""

    REPRODUCED = "reproduced"
    """Slower than BASE by min_effect on its own."""
    DOES_NOT_RUN = "does not run"
    """It crashes without more of the prefix."""
    INTERACTS = "interacts"
    """The prefix it ends is slower than it: it needs more than itself."""
    OPEN = "open"
    """Out of pairs."""


NEEDS_DEPTH = 3
"""Prefix searches for what a step needs to be slow, before delta debugging takes over (the
bisections on whether it runs cost a few probes and are not counted)."""

Arms = tuple[list[float], list[float]]
"""BASE's arm and the prefix's, side by side."""


def alone_with_what_it_needs(ctx: HuntContext, proposed: frozenset, before: list[frozenset], sign: int,
                             priors: tuple[float, ...] | None = None, scale: float = math.nan) -> Phase:
    """A coroutine phase (phases.Phase) returning a TestedSubset or None. `proposed` (the group a step adds) alone against BASE (`alone`, beside the slow prefix it
    ends), joined by what it needs until it reproduces the slowdown alone:

    * when it does not run, the first j at which BASE + proposed + the first j groups of
      `before` runs, by bisection on whether it runs (a crash answers without noise, in one
      or two probes), and group j joins it;
    * when it runs but is clearly less slow alone, a second prefix search over BASE, BASE +
      proposed, BASE + proposed + the first j groups of `before` (a commit search), whose
      first step adds the group it needs to be slow; up to NEEDS_DEPTH such searches.

    None past them, or when no such group is found; 'undecided' when the alone test runs out
    of pairs. `priors`: the alone tests' effect prior, the step's (`HuntContext.effect_prior`);
    `scale`: the prior scale of the size a reproduced test reports (`subsets.sized_at_stop`).

    The subset returned says how each group joined (`TestedSubset.joined`): 'needed to run' or
    'needed to be slow'. A group of one hunk that joined by a crash, or by a confirmed step, is
    `settled`: leave-one-out does not test it again (a crash is deterministic; the step was
    confirmed on its own pairs). A group of several joined as a whole: which of its hunks it
    needs is left to leave-one-out."""
    s = ctx.settings
    searches = 0
    joined: dict[str, Joined] = {}
    settled: set[str] = set()

    def join(group: frozenset, how: Joined, confirmed: bool) -> None:
        joined.update((h, how) for h in group)
        if confirmed and len(group) == 1:
            settled.update(group)

    while True:
        ctx.on_phase(f"alone: {len(proposed)} hunk(s) against BASE, beside the prefix they end")
        outcome, found, ends = yield from alone(ctx, proposed, proposed.union(*before), sign, priors, scale)
        if outcome == Alone.REPRODUCED:
            return with_joined(found, joined, frozenset(settled))
        if outcome == Alone.OPEN:
            return with_joined(found or TestedSubset(proposed, Verdict.UNDECIDED, math.nan, (math.nan, math.nan), 0),
                               joined, frozenset(settled))
        if not before:
            return None
        if outcome == Alone.DOES_NOT_RUN:
            k = yield from first_group_it_runs_with(ctx, proposed, before)
            if k is None:
                return None
            # it needs group k to run; what it needs to be slow may lie anywhere in the rest
            join(before[k], Joined.NEEDED_TO_RUN, confirmed=True)
            proposed, before = proposed | before[k], before[:k] + before[k + 1:]
            continue
        if searches == NEEDS_DEPTH:
            return None
        searches += 1
        ctx.on_phase(f"needs: BASE + {len(proposed)} hunk(s) + the first j of {len(before)} "
                     "group(s) before them, bisected")
        candidates = [frozenset()] + [proposed.union(*before[:j]) for j in range(len(before) + 1)]
        # only its first step is used: a further need shows in the next alone test. Its ends
        # are BASE and the prefix the alone test just measured side by side: its control arm
        # goes on from those pairs
        search = yield from search_prefixes(ctx, candidates, first=Purpose.NEEDS, rest=Purpose.NEEDS, one_step=True,
                                            carried=ends)
        result = search.result()
        steps = sorted(result.culprits + result.ambiguous, key=lambda c: c.first_bad)
        if not steps:
            return None
        step = steps[0]
        # the search's gate steers (it does not wait for a mode): its step names only on fresh
        # pairs as many as naming needs, at no kind's size
        fresh = len(search.gate.fresh_pairs(step.last_good, step.first_bad))
        named_there = (step in result.culprits
                       and fresh >= ctx.runs_to_name(s.name_alpha, math.log1p(step.step))
                       and not ctx.near_a_kind(math.log1p(step.step), s.name_alpha))
        if step.first_bad == 1:       # slow alone after all
            if named_there:
                # named on the search's fresh pairs against BASE, as many as naming needs
                pairs = min(result.endpoints[0].n, next((c.n for c in result.candidates if c.index == 1), 0))
                found = TestedSubset(proposed, Verdict.REPRODUCED, step.step, step.step_ci95, pairs)
            else:
                # fewer (its gate steers and does not wait for them): on pairs of its own
                found = yield from first_group_alone(ctx, proposed, sign, priors, scale)
            return None if found is None else with_joined(found, joined, frozenset(settled))
        k = step.first_bad - 2      # candidate j holds before[:j - 1]: its step adds before[k]
        # an ambiguous step (unmeasurable candidates inside) may lie in another group, and one the
        # gate named on fewer fresh pairs than naming needs may be a mode's split: not settled
        # (half the runs at 0.7x: a harmless hunk joined so was kept without a leave-one-out test)
        join(before[k], Joined.NEEDED_TO_BE_SLOW, confirmed=named_there)
        proposed, before = proposed | before[k], before[:k]


def first_group_it_runs_with(ctx: HuntContext, proposed: frozenset, before: list[frozenset]) -> Phase:
    """(A coroutine phase returning an int or None.) The k for which BASE + proposed + before[:k + 1] runs and BASE + proposed + before[:k]
    does not, by bisection on whether each runs; None when it does not run with all of them."""
    ctx.on_phase(f"needs: the first j of {len(before)} group(s) with which {len(proposed)} hunk(s) run, "
                 "bisected on whether they run")
    lo, hi = 0, len(before)          # before[:lo] does not run with it; before[:hi] is to be seen
    if not (yield from ctx.runs.settle(proposed.union(*before), Purpose.NEEDS)):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (yield from ctx.runs.settle(proposed.union(*before[:mid]), Purpose.NEEDS)):
            hi = mid
        else:
            lo = mid
    return hi - 1


def alone(ctx: HuntContext, proposed: frozenset, prefix: frozenset, sign: int,
          priors: tuple[float, ...] | None = None, scale: float = math.nan) -> Phase:
    """(A coroutine phase returning (Alone, TestedSubset | None, Arms).) REPRODUCED (BASE + proposed
    is slower than BASE by min_effect, e-value 1/reproduce_alpha:
    the control arm's rule), 'does not run', 'interacts' (the slow `prefix` it ends is slower
    than it by min_effect, e-value 1/alpha: it needs more than itself) or 'open' (out of
    pairs). Three arms in rotation, BASE, BASE + proposed, BASE + prefix; a wrong 'interacts'
    costs only a search, so it is held to alpha, not reproduce_alpha. Also returns the BASE and
    prefix arms (the ends of the search for what it needs). A reproduced subset is sized on the
    runs that stopped the test, with a confidence sequence valid at that stop (`sized_at_stop`,
    prior scale `scale`, min_effect's by default), as the commit search sizes a culprit."""
    sets = (frozenset(), proposed, prefix)
    arms: tuple[list[float], list[float], list[float]] = ([], [], [])
    s = ctx.settings
    for k in range(s.max_samples):
        values = yield from round_of_three(ctx, sets, k)
        if not ctx.runs(proposed):
            return Alone.DOES_NOT_RUN, None, (arms[0], arms[2])
        if any(v is None for v in values.values()):
            continue
        for i in range(3):
            arms[i].append(values[i])
        typical = ctx.typical(sets, arms)
        pool = ctx.noise_with(typical)
        base, alone_arm, prefix_arm = typical
        least = ctx.least_runs()
        step = log_step(base, alone_arm)
        if (shows_step(base, alone_arm, pool, sign=sign, alpha=s.reproduce_alpha, min_effect=s.min_effect, priors=priors,
                       least=ctx.runs_to_name(s.name_alpha, step))
                and ctx.signs_show(arms[0], arms[1], step, s.name_alpha, sign)):
            size = sized_at_stop(proposed, base, alone_arm, pool,
                                 scale if math.isfinite(scale) and scale > 0 else log_threshold(s.min_effect))
            return Alone.REPRODUCED, size, (arms[0], arms[2])
        if shows_step(alone_arm, prefix_arm, pool, sign=sign, alpha=s.alpha, min_effect=s.min_effect, priors=priors,
                      least=least):
            return Alone.INTERACTS, None, (arms[0], arms[2])
    typical = ctx.typical(sets, arms)
    if not (typical[0] and typical[1]):
        return Alone.OPEN, None, (arms[0], arms[2])
    return Alone.OPEN, replace(tested(proposed, typical[0], typical[1], ctx.noise_with(typical)), verdict=Verdict.UNDECIDED), (arms[0], arms[2])


def first_group_alone(ctx: HuntContext, group: frozenset, sign: int, priors: tuple[float, ...] | None = None,
                      scale: float = math.nan) -> Phase:
    """(A coroutine phase returning a TestedSubset or None.) The group a prefix search's first
    step adds (BASE + it is the first prefix), against BASE on pairs of its own: 'reproduced' by
    the alone test's rule, on at least `HuntContext.runs_to_name` typical runs an arm; None once
    the pairs rule a step of min_effect out (the control arm's stop), or at the cap. The prefix
    search's gate steers: it named such a step on one fresh pair where BASE's four runs all sat
    at a 1.4x mode, and a harmless hunk was named -29%."""
    s = ctx.settings
    sets = (frozenset(), group)
    arms: tuple[list[float], list[float]] = ([], [])
    ctx.on_phase(f"alone: {len(group)} hunk(s) of the first group against BASE, side by side")
    for k in range(s.max_samples):
        order = (0, 1) if k % 2 == 0 else (1, 0)
        values = dict(zip(order, (yield from ctx.measure_all([(sets[i], Purpose.NAME) for i in order]))))
        if not ctx.runs(group):
            return None
        if any(v is None for v in values.values()):
            continue
        for i in (0, 1):
            arms[i].append(values[i])
        base, alone_arm = ctx.typical(sets, arms)
        pool = ctx.noise_with([base, alone_arm])
        step = log_step(base, alone_arm)
        if (shows_step(base, alone_arm, pool, sign=sign, alpha=s.reproduce_alpha, min_effect=s.min_effect, priors=priors,
                       least=ctx.runs_to_name(s.name_alpha, step))
                and ctx.signs_show(arms[0], arms[1], step, s.name_alpha, sign)):
            return sized_at_stop(group, base, alone_arm, pool,
                                 scale if math.isfinite(scale) and scale > 0 else log_threshold(s.min_effect))
        if rules_out_step(base, alone_arm, pool, sign=sign, alpha=s.alpha, min_effect=s.min_effect,
                          least=ctx.least_runs()):
            return None
    return None


def round_of_three(ctx: HuntContext, sets: tuple[frozenset, frozenset, frozenset], k: int) -> Phase:
    """One rotation of the three arms (BASE, the subset tested, the reference), in the order
    0 1 2, then 2 1 0, side by side where there are slots; once the tested subset's run is
    skipped the round stops (its other samples would have no partner). Returns {arm: value}."""
    order = (0, 1, 2) if k % 2 == 0 else (2, 1, 0)
    values = yield from ctx.measure_all([(sets[i], Purpose.NAME) for i in order], stop_after_skip=order.index(1))
    return dict(zip(order, values))
