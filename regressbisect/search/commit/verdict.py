"""What a commit search found, as its `SearchResult`: the verdict, the culprits the culprit rule
names (each sized on its own pairs), and what each candidate was read as (docs/verdicts.md)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from regressbisect.search.commit.context import SearchContext
from regressbisect.search.culprits import Culprit
from regressbisect.search.results import CandidateVerdict, LeadingStep, SearchResult
from regressbisect.search.stats import Summary, summarize
from regressbisect.search.verdicts import CandidateCall, Verdict

__all__ = ["search_result"]

_EMPTY = Summary(n=0, median=math.nan, ci95=(math.nan, math.nan), cv=math.nan)


def search_result(ctx: SearchContext, end_verdict: Verdict | None, *, finished: bool,
                  end_names: tuple[str, str] = ("GOOD", "BAD")) -> SearchResult:
    """What the search has found so far: final once `finished` (it has nothing left to ask);
    `end_verdict`: the verdict its control arm ended it on (None: it went on to search);
    end_names: what its reasons call index 0 and n - 1.

    A confirmed step is named a culprit only when, sized from every sample of its segments,
    its point estimate is at least min_effect in the hunted direction and its 95% interval
    excludes zero; one that is not stays a suspect. Culprits that own more than share_limit of
    the gap, or leave a remainder below -100%, mean the step model does not fit: none is
    named and the verdict is 'undecided'.
    """
    culprits, suspects = ctx.rule.named_culprits(ctx.culprits)
    gap_log, gap_se = ctx.rule.end_difference()
    gap = math.expm1(gap_log)
    reason = ""
    if culprits and ctx.rule.shares_do_not_add_up(culprits):
        shares = ", ".join(f"{c.share_of_gap:.0%}" for c in culprits)
        reason = (f"the confirmed steps own {shares} of the gap, which does not add up: "
                  "the samples do not fit one step per culprit")
        suspects, culprits = tuple(sorted(culprits + suspects, key=lambda c: c.first_bad)), ()
    steps = tuple(ctx.rule.own_step(c) for c in culprits)   # every step that passed the rule, its own size
    whole = len(steps) == 1 and steps[0].first_bad - steps[0].last_good == ctx.n - 1 and ctx.n > 2
    ambiguous = () if whole else tuple(c for c in steps if c.first_bad - c.last_good > 1)
    culprits = tuple(c for c in steps if c not in ambiguous)
    if end_verdict is not None:
        verdict = end_verdict
        if verdict in (Verdict.NOT_REPRODUCED, Verdict.UNDECIDED) and ctx.control.comparison is not None:
            reason = ctx.control.not_reproduced_reason(verdict, out_of_probes=ctx.probes >= ctx.settings.max_probes,
                                                        names=end_names)
    elif whole:
        verdict = Verdict.ALL_SKIPPED
    elif culprits:
        verdict = Verdict.CULPRITS   # an ambiguous step beside them is reported, not named
    elif ambiguous:
        verdict = Verdict.AMBIGUOUS
    elif finished and not ctx.reproduced_overall():
        verdict = Verdict.NOT_REPRODUCED
        reason = ("every sample of GOOD and BAD taken so far puts the difference below "
                  f"{ctx.settings.min_effect:.1%}: the control arm's start was a fluke")
    elif ctx.given_up or suspects or not finished:
        verdict = Verdict.UNDECIDED
        short = ctx.gate.short_of_the_floor()
        if not reason and short is not None and not suspects:
            reason = (f"the sample cap (--max-samples) or the budget ran out with {short[0]} fresh pair(s) "
                      f"at the leading step, which is named on {short[1]}: a stall in "
                      f"{ctx.settings.stall_share:.0%} of runs (--stall-share) could split one shape "
                      "between fewer")
        if not reason:
            reason = ("steps could not be confirmed at a size of at least "
                      f"{ctx.settings.min_effect:.1%} with an interval excluding zero"
                      if suspects else "the sample cap (--max-samples) or the budget ran out before "
                                       "a step could be confirmed or ruled out")
    else:
        verdict = Verdict.NOT_LOCALISED
        reason = (f"the slowdown reproduced, but the paired test refuted every single step the "
                  f"search proposed ({len(ctx.refuted)}): a gradual slowdown, or several small steps")
    explained = sum(c.share_of_gap for c in culprits + ambiguous)
    unexplained = math.nan if verdict in (Verdict.NOT_REPRODUCED, Verdict.ALL_SKIPPED) else 1.0 - explained
    unexplained_ci95 = ctx.rule.unexplained_interval(culprits + ambiguous, unexplained, gap_log, gap_se)
    ends = tuple(summarize(ctx.book.raw[i]) if ctx.book.raw.get(i) else _EMPTY for i in (0, ctx.n - 1))
    return SearchResult(verdict=verdict, culprits=culprits, endpoints=ends, gap=gap,  # type: ignore[arg-type]
                        unexplained=unexplained, unexplained_ci95=unexplained_ci95,
                        candidates=_candidate_verdicts(ctx, steps, end_verdict),
                        probes=ctx.probes, sides=tuple(ctx.side_checks), refuted=tuple(ctx.refuted),
                        unresolved=tuple(ctx.unresolved), suspects=tuple(suspects), reason=reason,
                        reproduced=ctx.reproduced and verdict not in (Verdict.NOT_REPRODUCED, Verdict.ALL_SKIPPED),
                        control=ctx.control.comparison, ambiguous=ambiguous,
                        established=_established(ctx, suspects) if verdict == Verdict.UNDECIDED else None,
                        shape=ctx.control.shape,
                        more_samples_would_tell=verdict == Verdict.UNDECIDED or (
                            verdict == Verdict.NOT_REPRODUCED and end_verdict is not None
                            and ctx.control.more_pairs_would_tell()))


def _established(ctx: SearchContext, suspects: Sequence[Culprit]) -> LeadingStep | None:
    """The step an undecided search had got to (`SearchResult.established`): the leading
    step of the first bracket it gave up at a cap or budget, or else its strongest
    confirmed step that the culprit rule did not name."""
    def step(lo: int, hi: int, a: int, b: int, mass: float) -> LeadingStep | None:
        if not (ctx.book.raw.get(a) and ctx.book.raw.get(b)):
            return None
        return LeadingStep(lo=lo, hi=hi, last_good=a, first_bad=b, mass=mass, before=summarize(ctx.book.raw[a]),
                           after=summarize(ctx.book.raw[b]), confirmed=any(c.first_bad == b for c in ctx.culprits))

    for iv in ctx.given_up:
        post = ctx.posterior(iv, sign=ctx.sign, null_prior=0.5 if iv.is_side else 0.0)
        if post.gaps:
            best = int(np.argmax(post.probs))
            found = step(iv.lo, iv.hi, *post.gaps[best], float(post.probs[best]))
            if found is not None:
                return found
    if suspects:
        strongest = max(suspects, key=ctx.rule.evidence)
        return step(0, ctx.n - 1, strongest.last_good, strongest.first_bad, math.nan)
    return None



def _candidate_verdicts(ctx: SearchContext, culprits: Sequence[Culprit], end_verdict: Verdict | None
                        ) -> tuple[CandidateVerdict, ...]:
    out = []
    bounds = sorted(c.first_bad for c in culprits)
    off = ctx.book.interfered()
    for i in sorted(set(ctx.book.runs) | set(ctx.book.skips)):
        vals = ctx.book.raw.get(i, [])
        summ = summarize(vals) if vals else None
        if ctx.book.unmeasurable(i) or not ctx.book.run_count(i):
            verdict = CandidateCall.SKIP
        elif not vals:
            verdict = CandidateCall.UNSURE
        elif any(lo < i < hi for lo, hi in ctx.unresolved) or (end_verdict in (Verdict.NOT_REPRODUCED, Verdict.UNDECIDED) and i != 0):
            verdict = CandidateCall.UNSURE
        elif not culprits:
            verdict = CandidateCall.GOOD if i == 0 else CandidateCall.UNSURE
        else:
            seg = sum(1 for b in bounds if b <= i)
            verdict = CandidateCall.GOOD if seg == 0 else CandidateCall.BAD if seg == len(bounds) else CandidateCall.LEVEL
        out.append(CandidateVerdict(index=i, n=len(vals), summary=summ, verdict=verdict,
                                    interfered=tuple(off.get(i, ()))))
    return tuple(out)
