"""The rest: a prefix search of the hunks not named, while the culprits leave a remainder."""
from __future__ import annotations

import math
from dataclasses import replace

from regressbisect.search.control import shows_step
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.prefix import prefixes, search_prefixes
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.hunks.steps import name_steps
from regressbisect.search.hunks.subsets import Names, log_se, spread_over
from regressbisect.search.phases import OutOfProbes, Phase
from regressbisect.search.stats import log_threshold
from regressbisect.search.verdicts import Verdict

__all__ = ["peel_the_rest"]


def peel_the_rest(ctx: HuntContext, signed_gap: float, gap_se: float, names: Names) -> Phase:
    """(A coroutine phase returning Names.) While the named culprits' own slowdowns leave a remainder r of the gap of at least
    min_effect and at least one standard error, or one above zero that BASE + every hunk
    shows against BASE + the named hunks on pairs of its own (`shows_on_top`), and r is
    small enough in pairs to show within the cap (about 2 ln(1/reproduce_alpha) 2 sigma^2 /
    r^2 pairs, sigma the pooled noise: a search that cannot end is not started): a prefix search
    over the hunks not taken yet, in the same order (its control arm: BASE vs BASE + all of them),
    its steps named as the first search's (one that reproduces but refutes every single step
    finds the rest spread over its hunks: `Names.spread`). A culprit after a large one in the list steps little in
    the prefixes (costs in time add: a hunk -22% alone is -9% on top of one of -65%), below what
    the side checks look for (a fifth of the gap); against BASE it is its own size again. Returns
    `names` with what it found; a search whose steps could not all be placed adds its names, not
    its open questions. The probe cap (`phases.OutOfProbes`) ends it with the names found before it."""
    sign = -1 if signed_gap < 0 else 1
    s = ctx.settings
    for _ in range(ctx.ddmin.max_culprits):
        rest = (signed_gap - sum(math.log1p(c.change) for c in names.named)) * sign
        se = math.sqrt(gap_se ** 2 + sum(log_se(c) ** 2 for c in names.named))
        sigma2 = ctx.noise.sigma ** 2 if ctx.noise.df else math.inf
        pairs = 2 * math.log(1 / s.reproduce_alpha) * 2 * sigma2 / rest ** 2 if rest > 0 else math.inf
        taken = names.taken
        order = [g - taken for g in ctx.order if g - taken]
        if not order:
            break
        if not (rest > 0 and pairs <= s.max_samples):
            break
        clear = rest >= se and rest >= log_threshold(s.min_effect)
        try:
            if not (clear or (yield from shows_on_top(ctx, taken, rest + 2 * se, sign))):
                break
            ctx.on_phase(f"the rest: BASE + the first k of the {len(order)} group(s) not named, bisected")
            search = yield from search_prefixes(ctx, prefixes(order), first=Purpose.REMAINDER, rest=Purpose.PREFIX)
        except OutOfProbes:     # the probe cap: what was named before it (name_steps' own carry theirs)
            raise OutOfProbes(names) from None
        found = search.result()
        if found.verdict == Verdict.NOT_LOCALISED:
            # what the culprits leave is spread over hunks that each add less than min_effect
            names = replace(names, spread=names.spread | spread_over(found, prefixes(order)))
        if found.verdict not in (Verdict.CULPRITS, Verdict.AMBIGUOUS):
            break
        steps = sorted(found.culprits + found.ambiguous, key=lambda c: c.first_bad)
        more, placed = yield from name_steps(ctx, steps, search, order, signed_gap, names)
        if not placed or len(more.named + more.suspects) == len(names.named + names.suspects):
            names = replace(more, open_question=names.open_question)
            break
        names = more
    return names


def shows_on_top(ctx: HuntContext, taken: frozenset, upper: float, sign: int) -> Phase:
    """(A coroutine phase returning a bool.) Whether BASE + every hunk is slower than BASE + the hunks `taken` (the named culprits and
    suspects) by min_effect, on fresh pairs of the two back to back (ABBA: a drift cancels), at
    an e-value of 1/alpha: the remainder asked directly, where its estimate from the culprits'
    own sizes is too wide to tell. A culprit of -65% is named on one pair, and the remainder
    then has an interval a tenth of the gap wide: a hunk 22% slower alone, 9% on top of it,
    was missed in 15 of 300 simulated hunts (docs/results/hunks.md). `upper`, the
    estimate's upper bound (log), is read before the pairs, so it may set the e-value's effect
    prior (in units of the pooled noise) and the cap of pairs, as many as a remainder of that
    size needs to show (2 ln(1/alpha) 2 sigma^2 / upper^2, at least two, at most
    max_samples): a noisy machine buys no more than it can see. A wrong yes costs one prefix
    search, whose own control arm answers; it names nothing."""
    s = ctx.settings
    noise = ctx.noise
    if upper < log_threshold(s.min_effect) or not noise.df:
        return False
    cap = min(s.max_samples, max(2, math.ceil(2 * math.log(1 / s.alpha) * 2 * noise.sigma ** 2 / upper ** 2)))
    priors = ((upper / noise.sigma) ** 2,)
    ctx.on_phase(f"the rest: BASE + the {len(taken)} hunk(s) named against BASE + all hunks, side by side")
    sets = (taken, frozenset(ctx.ids))
    arms: tuple[list[float], list[float]] = ([], [])
    shown = False
    for k in range(cap):
        order = (0, 1) if k % 2 == 0 else (1, 0)
        values = dict(zip(order, (yield from ctx.measure_all([(sets[i], Purpose.REMAINDER) for i in order]))))
        if any(v is None for v in values.values()):
            break
        for i in order:
            arms[i].append(values[i])
        typical = ctx.typical(sets, arms)
        if shows_step(typical[0], typical[1], ctx.noise_with(typical), sign=sign, alpha=s.alpha,
                      min_effect=s.min_effect, priors=priors, least=ctx.least_runs()):
            shown = True
            break
    ctx.learn(ctx.typical(sets, arms))    # the hunt's samples, whatever they showed
    return shown
