"""Localisation and confirmation of one bracket (docs/search.md, sections 2-3): the posterior over
its first bad commit picks what to measure, and once one step holds confirm_enter of the mass the
paired test and the naming gate (search/confirm.py) decide it."""
from __future__ import annotations

import math

import numpy as np

from regressbisect.search.commit.context import Bracket, SearchContext
from regressbisect.search.commit.sides import sides_of
from regressbisect.search.confirm import Action
from regressbisect.search.culprits import Culprit
from regressbisect.search.phases import Phase
from regressbisect.search.results import Measure

__all__ = ["accept", "localise"]


def localise(ctx: SearchContext, iv: Bracket) -> Phase:
    """(A coroutine phase returning the step (last_good, first_bad) it named, or None.) Search
    bracket `iv` for one step until it is named, the bracket is given up (`ctx.give_up`: an end
    unmeasurable, a cap, its budget, or every step it proposed refuted) or, for a side, 'no
    further step' reaches side_null."""
    s = ctx.settings
    while True:
        if ctx.book.unmeasurable(iv.lo) or ctx.book.unmeasurable(iv.hi):
            ctx.give_up(iv)     # an end of a side became unmeasurable: that side is left unresolved
            return None
        post = ctx.posterior(iv, sign=ctx.sign, null_prior=0.5 if iv.is_side else 0.0)
        if iv.is_side and post.p_null >= s.side_null:
            return None         # the data now favour 'no further step' on this side
        if not post.gaps or len(iv.vetoed) >= s.max_vetoes or ctx.over_budget(iv):
            # every step the posterior proposed was refuted: an answer ('not localised'); a
            # bracket that ran over its budget is not one
            ctx.give_up(iv, refuted=not ctx.over_budget(iv))
            return None
        best = int(np.argmax(post.probs))
        a, b = post.gaps[best]
        mass = float(post.probs[best])
        ctx.live = ctx.picker.central(post)
        past = next((x for x in (b, a) if ctx.picker.past_skips(iv, x) != x), None)
        if mass >= s.confirm_enter and past is not None:
            # the step's mass sits on a gap of unmeasurable commits whose end is still untried
            # beside them: find where they end first, instead of walking them pair by pair
            yield from ctx.measure([(Measure(ctx.picker.past_skips(iv, past), f"bisect {iv.lo}..{iv.hi} (past skips)"), None)])
            continue
        if mass >= s.confirm_enter:
            step = ctx.confirmation.decide(iv, post, best, ctx.slots, ctx.round, ctx.sign)
            if step.action is Action.NAMED:
                return a, b
            if step.action is Action.REFUTED:
                iv.vetoed.add((a, b))
                ctx.refuted.append((a, b))
            elif step.action is Action.GIVE_UP:
                ctx.give_up(iv)
                return None
            else:
                yield from ctx.measure([(Measure(i, why), None) for i, why in step.picks])
            continue
        picks = [(Measure(i, f"bisect {iv.lo}..{iv.hi}"), None) for i in ctx.picker.quantiles(iv, post, ctx.slots, exclude=set())]
        anchor = ctx.picker.anchor(iv, [m.index for m, _ in picks])
        if anchor is not None:
            # the levels are shared by every hypothesis: when one interior commit has been sampled
            # more than an end of the bracket, a free level can hide behind it (a step placed at
            # the dense commit fits as well); another sample of that end pins the level down
            picks = [(Measure(anchor, f"bisect {iv.lo}..{iv.hi} (level)"), None)] + picks[: ctx.slots - 1]
        if not picks:
            ctx.give_up(iv)
            return None
        yield from ctx.measure(picks)


def accept(ctx: SearchContext, iv: Bracket, a: int, b: int) -> None:
    """Step (a, b) of bracket `iv` was named (iv has left the queue): it joins the culprits, and
    the two sides it leaves are queued first, since they may hold further steps (Pinpoint explores
    every differing pair); with `ctx.one_step`, the search is done instead."""
    # size and interval are filled in by the verdict, from all samples of the segments
    ctx.culprits.append(Culprit(first_bad=b, last_good=a, step=math.nan, step_ci95=(math.nan, math.nan),
                                step_tok_s=math.nan, share_of_gap=math.nan))
    if ctx.one_step:
        # its sides are not searched, nor a remainder: the search is done
        ctx.queue = []
        ctx.remainder_searched = True
        return
    # opened at the pick: the pairs of their ends taken since then are as fresh as the gate's
    # (`sides.side_ends_beside_gate`)
    since = ctx.gate.since(a, b)
    ctx.queue[0:0] = [Bracket(lo, hi, checked=False, is_side=True, opened=since, probes_at_start=ctx.probes)
                      for lo, hi in sides_of(iv, a, b)]
