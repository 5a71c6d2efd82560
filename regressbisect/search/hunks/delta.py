"""Delta debugging, where the hunks interact: hierarchical ddmin with every subset paired with BASE."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from regressbisect.config import Direction
from regressbisect.search.ddmin import UNDECIDED, UNRESOLVED, HunkSearch
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.members import needed_members
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.hunks.subsets import Names, test_subset, with_share
from regressbisect.search.hunks.verdict import HunkDecision, out_of_probes, verdict_at_cap, verdict_of_named
from regressbisect.search.levels import LevelRule, slowdowns, subset_verdict, undecided
from regressbisect.search.phases import OutOfProbes, Phase
from regressbisect.search.stats import log_threshold
from regressbisect.search.verdicts import Verdict

__all__ = ["by_delta_debugging"]


def by_delta_debugging(ctx: HuntContext, facts: HunkDecision, base_samples: Sequence[float],
                       full_samples: Sequence[float]) -> Phase:
    """(A coroutine phase returning the HunkDecision.) Hierarchical ddmin over every hunk (search/ddmin.py), each subset paired with BASE;
    subsets known not to run are 'unresolved' without a probe. Each culprit it proposes is named
    after a fresh test against BASE (`subsets.test_subset`) and less the hunks it does not need.
    facts: the decision's fields known before it (the control arm, the prefix search)."""
    settings = ctx.settings
    try:
        signed_gap, pair_sd, pairs = yield from gap_after_more_pairs(ctx, base_samples, full_samples)
    except OutOfProbes:
        return replace(facts, verdict=Verdict.UNDECIDED,
                       reason=f"no hunk could be named: {out_of_probes(settings.max_probes)}")
    gap = abs(signed_gap)
    rule = replace(ctx.rule, max_pairs=min(ctx.rule.max_pairs, settings.max_samples))   # --max-samples caps all
    rule = rule.scaled_to(gap, log_threshold(settings.min_effect), pair_sd)
    direction = Direction.FASTER if signed_gap > 0 else Direction.SLOWER   # the reproduced one ('both' hunts either)
    margin = log_threshold(settings.min_effect)

    share_gap, gap_se = gap, pair_sd / math.sqrt(pairs) if pairs else math.inf
    try:
        return (yield from _search_and_name(ctx, facts, signed_gap, rule, direction, margin, share_gap, gap_se))
    except OutOfProbes as stop:     # what was named before the cap, the rest in the remainder
        return verdict_at_cap(facts, stop.names, share_gap, signed_gap, gap_se, settings)


def _search_and_name(ctx: HuntContext, facts: HunkDecision, signed_gap: float, rule: LevelRule, direction: str,
                     margin: float, share_gap: float, gap_se: float) -> Phase:
    """`by_delta_debugging` once the gap is measured: the search, then each culprit named. An
    `OutOfProbes` in the naming carries the names found before it."""
    settings = ctx.settings
    gap = abs(signed_gap)
    ctx.on_phase(f"delta debugging over {len(ctx.ids)} hunks, each subset paired with BASE")
    search = HunkSearch(ctx.ids, ctx.groups, ctx.ddmin)
    stuck = 0
    while (subset := search.next_subset()) is not None:
        if not ctx.runs(subset):
            search.record(subset, UNRESOLVED)
            continue
        verdict = yield from paired_verdict(ctx, subset, gap, margin, rule, direction,
                                            Purpose.CONFIRM if search.confirming else Purpose.DDMIN)
        if verdict is None:
            stuck += 1
            verdict = UNDECIDED
        search.record(subset, verdict)
    result = search.result()
    facts = replace(facts, search=result, undecided_subsets=stuck)

    names = Names()
    for proposed in result.culprits:
        ctx.on_phase(f"naming: {len(proposed)} hunk(s) against BASE on fresh pairs")
        try:
            tested = yield from test_subset(ctx, proposed, Purpose.NAME, scale=max(gap, margin))
            unsure = False
            if tested.verdict == Verdict.REPRODUCED:
                tested, unsure = yield from needed_members(ctx, tested, -1 if signed_gap < 0 else 1)
        except OutOfProbes:
            raise OutOfProbes(names) from None
        named = tested.verdict == Verdict.REPRODUCED and not unsure
        names = names.plus(with_share(tested, signed_gap), named=named,
                           open_question=not named and (unsure or tested.verdict == Verdict.UNDECIDED))
    if not names.named and (stuck or names.open_question or not result.complete):
        why = (f"{stuck} subset(s) could not be placed within {rule.max_pairs} pairs (--max-samples)"
               if stuck else "the sample cap or the search budget ran out")
        return replace(facts, verdict=Verdict.UNDECIDED, reason=f"no hunk could be named: {why}", culprits=(),
                       suspects=names.suspects)
    if not names.named:
        why = ("no proposed hunk reproduced the slowdown on fresh pairs" if names.suspects
               else "no subset of the hunks is slow on its own")
        return replace(facts, verdict=Verdict.NOT_LOCALISED, reason=f"the slowdown reproduced, but {why}", culprits=(),
                       suspects=names.suspects)
    return verdict_of_named(facts, replace(names, open_question=False), share_gap, signed_gap, gap_se,
                            settings.direction, settings.share_limit)


def paired_verdict(ctx: HuntContext, subset: frozenset, gap: float, margin: float, rule: LevelRule,
                   direction: str, purpose: Purpose) -> Phase:
    """(A coroutine phase returning a verdict.) Pairs (BASE, BASE + subset) in ABBA order, a pair
    side by side where there are slots, until a look decides; UNRESOLVED if it does not run; None
    when it used its pairs without a verdict."""
    base: list[float] = []
    subset_values: list[float] = []
    while True:
        order = ("base", "subset") if len(base) % 2 == 0 else ("subset", "base")
        values = yield from ctx.measure_all([(frozenset() if which == "base" else subset, purpose) for which in order],
                                            stop_after_skip=order.index("subset"))
        for which, value in zip(order, values):
            if value is None:
                if which == "subset":
                    return UNRESOLVED    # does not apply / import / run: neither fast nor slow
                value = math.nan        # BASE skipped once: the pair is lost
            (base if which == "base" else subset_values).append(value)
        ok = ctx.typical_pairs((frozenset(), subset), [(b, s) for b, s in zip(base, subset_values) if math.isfinite(b)])
        diffs = slowdowns([b for b, _ in ok], [s for _, s in ok], direction)
        verdict = subset_verdict(diffs, gap, margin, rule) if diffs else None
        if verdict is not None:
            return verdict
        if undecided(diffs, rule) or len(base) >= 2 * rule.max_pairs:
            return None


def gap_after_more_pairs(ctx: HuntContext, base_samples: Sequence[float], full_samples: Sequence[float]) -> Phase:
    """(A coroutine phase returning (mean, sd, pairs).) The gap every subset of the delta debugging is placed in, from more pairs than the control
    arm stopped at: a sequential test stops when the estimate is high (at 15% noise, a 6-pair stop
    on an 18% gap reads ~35%), and a gap read twice too large puts the slow hunk itself at half of
    it. The pairs so far are kept and as many again (at least 12) are added, in ABBA order, all
    side by side where there are slots (none waits for another's value). Returns (mean log difference, SD of one paired difference, pairs)."""
    pairs = min(len(base_samples), len(full_samples))
    base, full = list(base_samples)[:pairs], list(full_samples)[:pairs]
    ends = (frozenset(), frozenset(ctx.ids))
    orders = [(0, 1) if k % 2 == 0 else (1, 0) for k in range(max(pairs, 12))]
    taken = iter((yield from ctx.measure_all([(ends[which], Purpose.CONTROL) for order in orders for which in order])))
    for order in orders:
        values = {which: next(taken) for which in order}
        if values[0] is not None and values[1] is not None:
            base.append(values[0])
            full.append(values[1])
    pairs_read = ctx.typical_pairs(ends, list(zip(base, full))) or list(zip(base, full))
    diffs = [math.log(f) - math.log(b) for b, f in pairs_read]
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else 0.0
    return mean, sd, len(diffs)
