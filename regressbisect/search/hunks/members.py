"""Which hunks of a culprit it needs: each left out in turn (leave-one-out)."""
from __future__ import annotations

from typing import Sequence

from regressbisect.search.control import shows_step
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.runnable import Purpose
from regressbisect.search.hunks.subsets import Joined, TestedSubset, sized_at_stop, step_scale, with_joined
from regressbisect.search.phases import Phase
from regressbisect.search.stats import log_step
from regressbisect.enums import WordEnum

__all__ = ["Need", "needed_members"]


class Need(WordEnum):
    """What leaving one hunk out of a culprit said (`leave_each_out`)."""

    NEEDED = "needed"
    """The culprit is slower than the rest without it."""
    NOT_NEEDED = "not needed"
    """The rest alone reproduces the slowdown against BASE."""
    OPEN = "open"
    """Out of pairs."""


def needed_members(ctx: HuntContext, tested: TestedSubset, sign: int) -> Phase:
    """(A coroutine phase returning (TestedSubset, bool).) The culprit less every hunk it does not need, and whether a hunk's need stayed open.

    A hunk without which the rest does not run (known without a probe) is needed, and so is one
    `settled` by how it joined (`TestedSubset.settled`: alone, because the subset without it
    crashed, or by a needs search's confirmed step): neither is tested. Every other is tested by
    leaving it out (`leave_each_out`, all of them at once): needed once the
    culprit is slower than the rest by min_effect and an e-value of 1/alpha_k, not needed once
    the rest alone reproduces the slowdown against BASE by the same rule. The k-th such test of
    the hunt that measures gets alpha_k = name_alpha / (2 k (k + 1)) for each answer (they sum
    to name_alpha: a hunk named that the culprit does not need is as rare as a commit named
    that is no step; `HuntContext.leave_out_alphas`); one ended by the rest's crash claims nothing
    by chance. Of two or more hunks found not needed each on its own, only the first is dropped at
    once: the others are tested again, one at a time, without it (two hunks may each stand in for
    the other). The culprit returned says how each of its hunks joined or was kept
    (`TestedSubset.joined`)."""
    members = tested.hunks
    joined = tested.how_joined()
    settled = tested.settled & members
    testable = []
    for h in sorted(members - settled):
        if len(members) < 2:
            continue
        if ctx.runs(members - {h}):
            testable.append(h)
        else:
            joined[h] = Joined.NEEDED_TO_RUN
    if not testable:
        return with_joined(tested, joined, settled), False
    outcomes = yield from leave_each_out(ctx, tested, testable, sign)
    for h in testable:
        if outcomes[h][0] == Need.NEEDED and joined.get(h) != Joined.NEEDED_TO_BE_SLOW:
            joined[h] = Joined.KEPT_BY_LEAVE_ONE_OUT if ctx.runs(members - {h}) else Joined.NEEDED_TO_RUN
    unsure = any(outcome == Need.OPEN for outcome, _ in outcomes.values())
    dropped = [h for h in testable if outcomes[h][0] == Need.NOT_NEEDED]
    if dropped:
        tested = outcomes[dropped[0]][1]
    for hunk in dropped[1:]:
        if len(tested.hunks) < 2:
            continue
        if not ctx.runs(tested.hunks - {hunk}):
            joined[hunk] = Joined.NEEDED_TO_RUN
            continue
        outcome, smaller = (yield from leave_each_out(ctx, tested, [hunk], sign))[hunk]
        if outcome == Need.NOT_NEEDED:
            tested = smaller
        elif outcome == Need.NEEDED:
            joined[hunk] = (Joined.KEPT_BY_LEAVE_ONE_OUT if ctx.runs(tested.hunks - {hunk})
                            else Joined.NEEDED_TO_RUN)
        unsure = unsure or outcome == Need.OPEN
    return with_joined(tested, joined, settled), unsure


def leave_each_out(ctx: HuntContext, tested: TestedSubset, hunks: Sequence[str],
                   sign: int) -> Phase:
    """(A coroutine phase returning a dict.) hunk -> a `Need`: NEEDED, NOT_NEEDED (with the rest's test against BASE) or OPEN (out of
    pairs), for each of `hunks` left out of the culprit `tested`.

    One rotation measures BASE, the culprit less each hunk still open, and the culprit (in that
    order, then reversed: a linear drift cancels over two rounds; side by side where there are
    slots), so that a culprit of m hunks
    costs m + 2 runs a round, not 3 m: BASE and the culprit serve every test. Each test reads
    the rounds in which its three arms ran; its e-values are its own (a union bound over the
    tests holds whatever their dependence) with the noise pooled over every arm and the hunt.
    Either answer is a difference of the culprit's step (the rest at BASE's level, or at the
    culprit's): the e-values' effect prior is centred on it (`HuntContext.effect_prior`)."""
    members = tested.hunks
    priors = ctx.effect_prior(tested.change)
    scale = step_scale(tested.change, ctx.settings.min_effect)     # the rest's size, at its test's stop
    min_effect = ctx.settings.min_effect
    ctx.on_phase(f"naming: which of {len(hunks)} hunk(s) of {len(members)} are needed? BASE, the culprit "
                 "without each, the culprit, in rotation")
    rests = {h: members - {h} for h in hunks}
    arms: dict[str, tuple[list[float], list[float], list[float]]] = {h: ([], [], []) for h in hunks}
    every: dict[frozenset, list[float]] = {}     # each subset's samples, once: the noise's groups
    alphas: dict[str, float] = {}
    outcomes: dict[str, tuple[Need, TestedSubset | None]] = {}
    for k in range(min(ctx.rule.max_pairs, ctx.settings.max_samples)):
        open_hunks = [h for h in hunks if h not in outcomes]
        if not open_hunks:
            break
        sets = [frozenset()] + [rests[h] for h in open_hunks] + [members]
        values = yield from ctx.measure_all([(subset, Purpose.NAME) for subset in (sets if k % 2 == 0 else sets[::-1])])
        if k % 2:
            values.reverse()
        for subset, value in zip(sets, values):
            if value is not None:
                every.setdefault(subset, []).append(value)
        base, full = values[0], values[-1]
        for h, rest in zip(open_hunks, values[1:-1]):
            if not ctx.runs(rests[h]):
                outcomes[h] = (Need.NEEDED, None)         # the rest does not run without it
            elif rest is not None and base is not None and full is not None:
                if h not in alphas:
                    alphas[h] = ctx.leave_out_alphas.next()   # a test that measures spends its share
                for arm, value in zip(arms[h], (base, rest, full)):
                    arm.append(value)
        pool = ctx.noise_with(ctx.typical(list(every), list(every.values())))
        for h in open_hunks:
            if h in outcomes or h not in alphas:
                continue
            base_arm, rest_arm, full_arm = ctx.typical((frozenset(), rests[h], members), arms[h])
            every_base, every_rest, every_full = arms[h]
            needed, alone = log_step(rest_arm, full_arm), log_step(base_arm, rest_arm)
            if (shows_step(rest_arm, full_arm, pool, sign=sign, alpha=alphas[h], min_effect=min_effect, priors=priors,
                           least=ctx.runs_to_name(alphas[h], needed))
                    and ctx.signs_show(every_rest, every_full, needed, alphas[h], sign)):
                outcomes[h] = (Need.NEEDED, None)
            elif (shows_step(base_arm, rest_arm, pool, sign=sign, alpha=alphas[h], min_effect=min_effect, priors=priors,
                             least=ctx.runs_to_name(alphas[h], alone))
                  and ctx.signs_show(every_base, every_rest, alone, alphas[h], sign)):
                outcomes[h] = (Need.NOT_NEEDED, sized_at_stop(rests[h], base_arm, rest_arm, pool, scale))
    return {h: outcomes.get(h, (Need.OPEN, None)) for h in hunks}
