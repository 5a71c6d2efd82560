"""Naming the steps of a prefix search: the group each adds, alone, with what it needs."""
from __future__ import annotations

import math
from typing import Sequence

from regressbisect.search.bisect import Culprit
from regressbisect.search.hunks.alone import alone_with_what_it_needs, first_group_alone
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.members import needed_members
from regressbisect.search.hunks.prefix import PrefixSearch
from regressbisect.search.hunks.subsets import Names, TestedSubset, step_scale, with_share
from regressbisect.search.phases import OutOfProbes, Phase
from regressbisect.search.verdicts import Verdict

__all__ = ["name_steps"]


def name_steps(ctx: HuntContext, steps: Sequence[Culprit], search: PrefixSearch, order: Sequence[frozenset],
               signed_gap: float, names: Names) -> Phase:
    """(A coroutine phase returning (Names, bool).) Each step of `search` (over BASE + the first k groups of `order`) names the last group it
    adds, once that alone reproduces the slowdown against BASE on fresh pairs, with what it
    needs from the groups before it (`alone.alone_with_what_it_needs`) and less the hunks it does
    not need (`members.needed_members`). Returns `names` with what it found, and whether every
    step's group was placed (False: one could not be, delta debugging's case; what was named before
    it is in the names all the same). The probe cap (`phases.OutOfProbes`) ends it with the names
    found before it."""
    sign = -1 if signed_gap < 0 else 1
    for step in steps:
        taken = names.taken
        last = order[step.first_bad - 1] - taken
        if not last:
            continue            # an earlier culprit needed this group: it is named there
        size, alpha = math.log1p(step.step), ctx.settings.name_alpha
        if (step.first_bad == 1 and len(search.gate.fresh_pairs(0, 1)) >= ctx.runs_to_name(alpha, size)
                and not ctx.near_a_kind(size, alpha)):
            # BASE + this group is the prefix itself, named on fresh pairs against BASE already,
            # as many as a mode of --stall-share needs (the prefix search's own gate steers and
            # does not wait for them); fewer, or a step of a kind's size (whose naming asks the
            # signs of every pair): the group against BASE on pairs of its own
            pairs = min(len(search.samples(0)), len(search.samples(1)))
            tested = TestedSubset(last, Verdict.REPRODUCED, step.step, step.step_ci95, pairs)
        elif step.first_bad == 1:
            try:
                found = yield from first_group_alone(ctx, last, sign, ctx.effect_prior(step.step),
                                                     step_scale(step.step, ctx.settings.min_effect))
            except OutOfProbes:     # the probe cap: what was named before this step
                raise OutOfProbes(names) from None
            if found is None:
                continue        # not slow alone after all: what it was is the remainder's to find
            tested = found
        else:
            # the groups before it, less the culprits of earlier steps (their slowdown is theirs)
            before = [g - taken for g in order[:step.first_bad - 1] if g - taken]
            try:
                found = yield from alone_with_what_it_needs(ctx, last, before, sign, ctx.effect_prior(step.step),
                                                            step_scale(step.step, ctx.settings.min_effect))
            except OutOfProbes:     # the probe cap: what was named before this step
                raise OutOfProbes(names) from None
            if found is None:
                return names, False
            tested = found
            if tested.verdict == Verdict.UNDECIDED:     # out of pairs: more would not come cheaper elsewhere
                names = names.plus(with_share(tested, signed_gap), named=False, open_question=True)
                continue
        try:
            tested, unsure = yield from needed_members(ctx, tested, sign)
        except OutOfProbes:     # reproduced alone, whether it needs each of its hunks left open: a suspect
            raise OutOfProbes(names.plus(with_share(tested, signed_gap), named=False, open_question=True)) from None
        names = names.plus(with_share(tested, signed_gap), named=not unsure, open_question=unsure)
    return names, True
