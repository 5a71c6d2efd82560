"""What a hunk hunt decides, and the verdict of the culprits it named."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from regressbisect.search.bisect import SearchResult
from regressbisect.search.culprits import remainder_of_gap, share_interval, shares_do_not_add_up
from regressbisect.search.ddmin import DdminResult
from regressbisect.search.hunks.subsets import Names, TestedSubset
from regressbisect.search.verdicts import Verdict

__all__ = ["HunkDecision", "out_of_probes", "verdict_at_cap", "verdict_of_named"]


@dataclass(frozen=True)
class HunkDecision:
    verdict: Verdict
    """'culprits', 'not-reproduced', 'undecided', 'not-localised', 'all-skipped'."""
    reason: str
    control: SearchResult
    search: DdminResult | None = None
    culprits: tuple[TestedSubset, ...] = ()
    suspects: tuple[TestedSubset, ...] = ()
    """Proposed, not named (a hunk's need stayed open, the fresh test did not reproduce, or the
    shares did not add up)."""
    undecided_subsets: int = 0
    """Subsets that used their pairs without a verdict."""
    prefix: SearchResult | None = None
    """The prefix search: candidate k is BASE + the first k groups of `prefix_groups`."""
    ruled_out: frozenset = frozenset()
    """Hunks of prefixes measured at BASE's level."""
    did_not_run: frozenset = frozenset()
    """Subsets asked for that gave no sample: known not to run (no probe), or skipped."""
    spread_over: frozenset = frozenset()
    """Hunks the slowdown (or, beside culprits, what they leave of it) is spread over: a prefix
    search reproduced it and its paired test refuted every single step it proposed. Each adds less
    than min_effect, so none is named alone, and delta debugging is not run for it (its 1-minimal
    slow subsets of such a diff are pairs of small hunks, each named on a stopped test)."""
    spread_note: str = ""
    """With `spread_over`: 'spread over 10 hunks, none alone >= 2%' (`subsets.spread_note`)."""
    unexplained_ci95: tuple[float, float] = (math.nan, math.nan)
    """95% interval of the share of the gap the culprits leave (`culprits.remainder_of_gap`: the
    gap's error and each culprit's own interval against BASE, as reported); nan without culprits."""


def verdict_of_named(facts: HunkDecision, names: Names, share_gap: float, signed_gap: float, gap_se: float,
                     direction: str, share_limit: float) -> HunkDecision:
    """The hunt's verdict once its culprits are named: `facts` (what the hunt knows beside them:
    its control arm, prefix search, ...) with the culprits, suspects and reason. share_gap: the
    gap the shares are held to (`culprits.shares_do_not_add_up`, with direction 'both' held to
    it too: the hunk hunt's rule, unlike the commit search's); signed_gap, gap_se: the gap and its
    standard error, for the remainder's interval."""
    named, suspects = list(names.named), list(names.suspects)
    facts = replace(facts, spread_over=facts.spread_over | names.spread)
    if named and shares_do_not_add_up([c.ci95 for c in named], share_gap, share_limit, direction=direction,
                                      exempt_both=False):
        shares = ", ".join(f"{c.share_of_gap:.0%}" for c in named)
        return replace(facts, verdict=Verdict.UNDECIDED,
                       reason=f"the culprits' shares of the gap ({shares}) do not add up: the samples do not "
                              "fit one step per culprit", culprits=(), suspects=tuple(named + suspects))
    if named:
        # the report's remainder reads each culprit's interval as the report prints it (valid at
        # the stop of the test that named it: `TestedSubset.reported_ci95`)
        _, half = remainder_of_gap(signed_gap, gap_se, [(c.change, c.reported_ci95) for c in named])
        unexplained = 1 - sum(c.share_of_gap for c in named)
        return replace(facts, verdict=Verdict.CULPRITS, reason="", culprits=tuple(named), suspects=tuple(suspects),
                       unexplained_ci95=share_interval(unexplained, half, signed_gap))
    why = ("a hunk of a culprit could be neither shown needed nor left out within the pairs"
           if names.open_question else "no step could be named")
    return replace(facts, verdict=Verdict.UNDECIDED, reason=f"no hunk could be named: {why}", culprits=(),
                   suspects=tuple(suspects))


def out_of_probes(max_probes: int) -> str:
    """Why a hunt stopped at its probe cap (`SearchSettings.max_probes`: for a drill,
    `search.budget.drill_probe_cap`), in a few words."""
    return f"its cap of {max_probes} probes ran out"


def verdict_at_cap(facts: HunkDecision, names: Names | None, share_gap: float, signed_gap: float, gap_se: float,
                   settings) -> HunkDecision:
    """The verdict of a hunt its probe cap stopped (`phases.OutOfProbes`): the culprits named
    before it, what they leave in the remainder, the reason saying the cap ran out; `undecided`
    when none was named. settings: the hunt's SearchSettings."""
    names = replace(names or Names(), open_question=False)
    decision = verdict_of_named(facts, names, share_gap, signed_gap, gap_se, settings.direction, settings.share_limit)
    if decision.verdict == Verdict.CULPRITS:
        return replace(decision, reason=f"{out_of_probes(settings.max_probes)}: the culprits named before it are "
                                        "reported, what they leave is the remainder")
    return replace(decision, reason=f"no hunk could be named: {out_of_probes(settings.max_probes)}")
