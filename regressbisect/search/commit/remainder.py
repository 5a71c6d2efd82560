"""When every bracket is settled: is the hunt's answer whole? A remainder of the gap that the
culprits leave beyond what the cleared sides ruled out sends one side back to be searched
(docs/search.md, "The remainder"), and a shape of the ends seen only over the whole hunt starts the
search again on every run ("A shape seen late"). Each returns True when it queued more search."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from regressbisect.search.commit.context import Bracket, SearchContext
from regressbisect.search.commit.control import start_search
from regressbisect.search.sides import SideOutcome
from regressbisect.search.stats import log_threshold

__all__ = ["contradicts_itself", "search_remainder", "search_the_changed_shape"]


def search_remainder(ctx: SearchContext) -> bool:
    """Once per hunt, when every bracket is settled: if the culprits, each sized by its own
    pairs, leave a remainder of the gap in the hunted direction whose 95% interval (the
    report's, `CulpritRule.remainder`) lies beyond min_effect and beyond what every cleared side
    ruled out, one of those sides holds more than its check saw (its ends read alike by chance,
    or a shift of the machine hid the step). Search the cleared side
    whose ends differ most our way, as a side (with its 'no step here' hypothesis and its own
    budget), instead of leaving it to the user; True when a search was queued."""
    cleared = [k for k, sd in enumerate(ctx.side_checks) if sd.outcome == SideOutcome.CLEARED]
    if ctx.remainder_searched or not cleared or not ctx.culprits:
        return False
    ctx.remainder_searched = True
    named, _ = ctx.rule.named_culprits(ctx.culprits)
    gap, gap_se = ctx.rule.end_difference()
    remainder, half = ctx.rule.remainder([ctx.rule.own_step(c) for c in named], gap, gap_se)
    if not math.isfinite(half):
        return False
    ruled_out = max(math.log1p(ctx.side_checks[k].ruled_out) for k in cleared)
    if ctx.toward(remainder) - half <= max(ruled_out, log_threshold(ctx.settings.min_effect)) or (
            ctx.sign == 0 and remainder * gap < 0):
        return False

    def ends_differ(k: int) -> float:
        sd = ctx.side_checks[k]
        return ctx.toward(float(np.mean(np.log(ctx.book.raw[sd.hi])) - np.mean(np.log(ctx.book.raw[sd.lo]))))

    # a side whose end has every run read as interfered has no level to compare (a mode of
    # half the runs leaves a commit of few runs so): its ends cannot say it holds more
    readable = [k for k in cleared if ctx.book.raw.get(ctx.side_checks[k].lo) and ctx.book.raw.get(ctx.side_checks[k].hi)]
    if not readable:
        return False
    k = max(readable, key=ends_differ)
    side = ctx.side_checks[k]
    ctx.side_checks[k] = replace(side, outcome=SideOutcome.REMAINDER, ruled_out=math.nan)
    ctx.queue.append(Bracket(side.lo, side.hi, checked=True, is_side=True, probes_at_start=ctx.probes,
                             opened=ctx.round))
    return True


def search_the_changed_shape(ctx: SearchContext) -> bool:
    """Once, as the hunt would end on runs read apart: where GOOD's and BAD's shares of runs
    off their levels differ over every run the hunt took of them (`ControlArm.
    shape_over_the_hunt`), the runs read apart were a commit's, not the machine's; where the
    culprits named on the typical runs contradict the gap (`contradicts_itself`), a level
    was read on a mode. Either way the book reads every run from then on and the search
    starts again over GOOD..BAD on them; True when it did."""
    if ctx.shape_reviewed:
        return False
    ctx.shape_reviewed = True
    shape = ctx.control.shape_over_the_hunt(typical_alike=not ctx.reproduced_overall())
    if shape is None and not contradicts_itself(ctx):
        return False
    ctx.control.shape = shape
    ctx.book.read_every_run(machine=(ctx.control.good, ctx.control.bad) if shape is not None else None)
    ctx.culprits, ctx.side_checks, ctx.refuted, ctx.unresolved, ctx.given_up = [], [], [], [], []
    ctx.priced, ctx.remainder_searched = {}, False
    gap, _ = ctx.rule.end_difference()
    start_search(ctx, math.expm1(gap))
    return True


def contradicts_itself(ctx: SearchContext) -> bool:
    """Where runs were read apart and culprits are named, the ends' typical runs no longer
    read a gap our way (GOOD read at its fast mode: +13% after the arm's -12%; or an end
    with every run read off: no gap), or a culprit owns more than share_limit of the gap
    beside a remainder whose 95% interval lies wholly against the hunted direction: "-26.8%,
    222% of the gap" beside "-122% unexplained (95% CI -184%..-61%)", a commit after the step
    read on three runs that all fell in a fast mode. A real improvement inside a slowdown
    reads so too, and reading every run confirms it."""
    if not ctx.book.interfered() or ctx.sign == 0:
        return False
    named, _ = ctx.rule.named_culprits(ctx.culprits)
    steps = [ctx.rule.own_step(c) for c in named]
    if not steps:
        return False
    gap, gap_se = ctx.rule.end_difference()
    if not math.isfinite(gap) or ctx.toward(gap) <= 0:
        return True     # the ends' typical runs no longer read the gap the arm saw: no share is read
    remainder, half = ctx.rule.remainder(steps, gap, gap_se)
    return (math.isfinite(remainder) and math.isfinite(half) and ctx.toward(remainder) + half < 0
            and max(c.share_of_gap for c in steps) > ctx.settings.share_limit)
