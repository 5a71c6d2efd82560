"""The commit search's first phase: the control arm, GOOD and BAD in pairs until it says 'go' or
ends the hunt (search/control.py's `ControlArm` decides; docs/search.md, section 1)."""
from __future__ import annotations

import math

from regressbisect.config import Direction
from regressbisect.search.commit.context import Bracket, SearchContext
from regressbisect.search.phases import Phase
from regressbisect.search.results import Measure, MeasureTag
from regressbisect.search.stats import log_threshold

__all__ = ["control_arm", "start_search"]


def control_arm(ctx: SearchContext) -> Phase:
    """(A coroutine phase returning the arm's `Verdict`: 'reproduced', or one that ends the hunt.)
    GOOD and BAD in pairs, the arm's samples tagged as its own; spare slots (three or more) start
    the localisation inside the range, whose samples serve it once the arm says 'go'."""
    while (verdict := ctx.control.decide()) is None:
        picks = [(Measure(i, MeasureTag.CONTROL_ARM), ctx.control.tag) for i in ctx.control.next_samples(ctx.slots)]
        if ctx.slots > 2:
            good, bad = 0, ctx.n - 1
            iv = Bracket(good, bad, True)
            post = ctx.posterior(iv, sign=-1 if ctx.settings.direction != Direction.FASTER else 1)
            for i in ctx.picker.quantiles(iv, post, ctx.slots - 2, exclude={good, bad}):
                picks.append((Measure(i, f"bisect {good}..{bad}"), None))
        yield from ctx.measure(picks)
    return verdict


def start_search(ctx: SearchContext, gap: float) -> None:
    """The arm said 'go' on a relative `gap`: search GOOD..BAD for its steps, the posterior's prior
    step scale that gap (at least min_effect)."""
    ctx.reproduced = True
    ctx.sign = ctx.hunted_sign()
    ctx.tau = max(abs(math.log1p(gap)), log_threshold(ctx.settings.min_effect))
    ctx.queue = [Bracket(0, ctx.n - 1, checked=True, probes_at_start=ctx.probes)]
