"""The sides of a culprit: does a side hold another step? (docs/search.md, section 4). Each side's
check is a phase over the search's context; `SideRule` (search/sides.py) decides it, and the sides
of a step the naming gate is confirming have their outer ends measured in the gate's rounds."""
from __future__ import annotations

import math

from regressbisect.search.commit.context import Bracket, Pick, SearchContext
from regressbisect.search.phases import Phase
from regressbisect.search.results import Measure, SideCheck
from regressbisect.search.sides import SideOutcome

__all__ = ["check_side", "side_ends_beside_gate", "sides_of"]


def check_side(ctx: SearchContext, iv: Bracket) -> Phase:
    """(A coroutine phase returning whether the side is searched next: its ends differ.) Does side
    `iv` of a culprit hold another step? `SideRule.decide` says; until it does, both ends are
    measured again, in pairs (spare slots: the next side's too). Its check joins
    `ctx.side_checks`; a side whose end became unmeasurable, or both ends at their cap, is given up."""
    while True:
        if ctx.book.unmeasurable(iv.lo) or ctx.book.unmeasurable(iv.hi):
            ctx.give_up(iv)     # an end of a side became unmeasurable: that side is left unresolved
            return False
        decision = ctx.sides.decide(iv.lo, iv.hi, iv.opened, sign=ctx.sign, gap_scale=ctx.gap_scale())
        if decision is not None:
            outcome, bound = decision
            if outcome == SideOutcome.SEARCHED:
                iv.checked, iv.probes_at_start = True, ctx.probes   # searched from here, on a budget of its own
            ctx.side_checks.append(SideCheck(iv.lo, iv.hi, outcome, bound))
            return outcome == SideOutcome.SEARCHED
        if _over_price(ctx, iv):
            ctx.side_checks.append(SideCheck(iv.lo, iv.hi, SideOutcome.CLEARED, ctx.priced[(iv.lo, iv.hi)], priced=True))
            return False
        if ctx.capped(iv.lo) and ctx.capped(iv.hi):
            ctx.give_up(iv)
            ctx.side_checks.append(SideCheck(iv.lo, iv.hi, SideOutcome.UNRESOLVED, math.nan))
            return False
        yield from ctx.measure(_side_round(ctx, iv))


def _side_round(ctx: SearchContext, iv: Bracket) -> list[Pick]:
    """The next round of side `iv`'s check (`check_side`)."""
    slots = ctx.slots
    # an end at max_samples gets no more samples; the other end still may
    ends = [i for i in ctx.pairing.next(iv.lo, iv.hi, slots, ctx.round) if not ctx.capped(i)]
    ends = ends or [i for i in (iv.lo, iv.hi) if not ctx.capped(i)]
    picks = [(Measure(i, f"check side {iv.lo}..{iv.hi}"), None) for i in ends]
    # a side check measures two commits; spare slots check the next queued side at once (the
    # two sides of a culprit are independent, and their checks dominate rounds at high noise)
    for other in ctx.queue[1:]:
        chosen = {m.index for m, _ in picks}
        if slots - len(picks) < 2:
            break
        if other.checked or chosen & {other.lo, other.hi} or ctx.capped(other.lo) or ctx.capped(other.hi):
            continue
        picks += [(Measure(i, f"check side {other.lo}..{other.hi}"), None) for i in (other.lo, other.hi)]
    # slots still spare: more samples of the same ends in this round (the ends test needs
    # samples, not commits, and the slots' runs are independent draws). One side alone (two
    # picks are its two ends: no other side was added) alternates its ends over every slot
    # (a, b, a then b, a, b), as a step's pairs do, so that an odd slot also serves a pair
    if len(picks) == 2 and slots > 2:
        picks = [(Measure(i, f"check side {iv.lo}..{iv.hi}"), None) for i in ctx.pairing.round_of(iv.lo, iv.hi, slots, ctx.round)]
    elif len(picks) >= 2:
        room = min(ctx.settings.max_samples - ctx.book.run_count(m.index) for m, _ in picks)
        repeats = min(slots // len(picks), room)
        picks = [p for p in picks for _ in range(repeats)] if repeats > 1 else picks
    return picks


def _over_price(ctx: SearchContext, iv: Bracket) -> bool:
    """The side has cost as many probes as the search before it opened, and its fresh pairs
    rule out a further step smaller than the gap (`SideRule.resolution`, kept in
    `ctx.priced`): ruling out the margin would cost more than the rest of the hunt, so the side
    stops at what it bought (`SearchSettings.side_resolution` None)."""
    if ctx.settings.side_resolution is not None or ctx.probes - iv.probes_at_start < iv.probes_at_start:
        return False
    reached = ctx.sides.resolution(iv.lo, iv.hi, iv.opened, sign=ctx.sign)
    if reached is None or not reached < abs(ctx.gap_scale_relative()):
        return False
    ctx.priced[(iv.lo, iv.hi)] = reached
    return True


def sides_of(iv: Bracket, a: int, b: int) -> list[tuple[int, int]]:
    """The sides a culprit (a, b) of bracket iv leaves: lo..a and b..hi, where not empty."""
    return [side for side in ((iv.lo, a), (b, iv.hi)) if side[1] > side[0]]


def side_ends_beside_gate(ctx: SearchContext, iv: Bracket, a: int, b: int, slots: int) -> list[int]:
    """Outer ends of the sides that step (a, b) would leave, to measure in the naming gate's
    rounds: each side's check needs pairs of its ends taken after the pick, and one end of each
    (a or b) is being measured in those rounds anyway. One sample of an outer end per sample of
    its partner, right after it (within pair_window), until its side's check has decided;
    the sides are then opened at the pick (`localise.accept`) and need no rounds of their own for
    the end the gate measured (at 3% noise the checks took 30 of 225 executions, about half of
    them for that end)."""
    since = ctx.gate.since(a, b)
    now = ctx.round + 1
    picks = []
    for lo, hi in sides_of(iv, a, b):
        outer, partner = (lo, a) if hi == a else (hi, b)
        last = (ctx.book.time.get(partner) or [-1])[-1]
        unpaired = last > since and now - last <= ctx.settings.pair_window and last > (ctx.book.time.get(outer) or [-1])[-1]
        if unpaired and not ctx.capped(outer) and ctx.sides.decide(lo, hi, since, sign=ctx.sign, gap_scale=ctx.gap_scale()) is None:
            picks.append(outer)
    return picks[: max(1, slots)] if slots < 4 else picks
