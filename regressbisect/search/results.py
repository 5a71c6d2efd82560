"""What the commit search asks for (`Measure`) and what it reports (`SearchResult`, with the
verdict of each candidate, each side of a culprit and the step an undecided search had got to)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from regressbisect.search.control import ShapeChange
from regressbisect.search.culprits import Culprit
from regressbisect.search.sides import SideOutcome
from regressbisect.search.stats import Comparison, Summary
from regressbisect.search.verdicts import CandidateCall, Verdict
from regressbisect.enums import WordEnum

__all__ = ["MeasureTag", "Measure", "Culprit", "CandidateVerdict", "SideCheck", "LeadingStep", "SearchResult"]


class MeasureTag(WordEnum):
    """A `Measure.reason` that its caller acts on, not only shows: told apart by the member
    (`is`), never by its text; written as its value (the progress display, a sample's note)."""

    CONTROL_ARM = "control arm"
    """The control arm's samples (a hunk hunt's prefix search gives them their own purpose)."""


@dataclass(frozen=True)
class Measure:
    """One sample the caller should take."""

    index: int
    """Candidate index: 0 = GOOD ... n-1 = BAD (first-parent order)."""
    reason: str = ""
    """Short text for the progress display ('bisect 12..40', 'confirm step'), or a `MeasureTag`
    (a str: its value is shown)."""


@dataclass(frozen=True)
class CandidateVerdict:
    """What the search concluded about one candidate it measured (or tried to)."""

    index: int
    """Candidate index."""
    n: int
    """Samples taken."""
    summary: Summary | None
    """Median and interval of its tok/s; None when it has no sample."""
    verdict: CandidateCall
    """'good' (at GOOD's level), 'bad' (at BAD's level), 'level' (between two culprits), 'skip'
    (unmeasurable), 'unsure' (inside a range the search could not resolve, or no run of it could
    be read: see `interfered`)."""
    interfered: tuple[float, ...] = ()
    """tok/s of its runs read as interfered (far off its level: left out of every test and of
    `n` and `summary`; search/interference.py)."""


@dataclass(frozen=True)
class SideCheck:
    """What became of one side of a culprit (Pinpoint's 'do its ends differ?')."""

    lo: int
    """First index of the side."""
    hi: int
    """Last index of the side."""
    outcome: SideOutcome
    """'searched' (its ends differed: searched again), 'cleared' (a further step is implausible),
    'unresolved' (its ends could not be told apart or alike within the sample cap) or 'remainder'
    (cleared, then searched all the same: the unexplained remainder was larger than what the
    cleared sides ruled out, and this side's ends differed most)."""
    ruled_out: float
    """With 'cleared': a further step in the hunted direction of this size or more (relative,
    at least min_effect) has probability below side_drop; nan otherwise."""
    priced: bool = False
    """Cleared at its price (`SearchSettings.side_resolution` None): a smaller further step than
    `ruled_out` was not looked for."""


@dataclass(frozen=True)
class LeadingStep:
    """What an undecided search had established: the step its posterior put first in a bracket
    it gave up at a cap or its budget (or, without one, the strongest confirmed step it did not
    name), with the two commits' levels. Not a culprit: more samples of the same hunt decide it."""

    lo: int
    """First index of the bracket."""
    hi: int
    """Last index of the bracket."""
    last_good: int
    first_bad: int
    mass: float
    """Posterior probability that the bracket's step is this one (nan for a confirmed step the
    culprit rule did not name)."""
    before: Summary
    """last_good's tok/s."""
    after: Summary
    """first_bad's tok/s."""
    confirmed: bool
    """The paired test accepted it (the naming gate or the culprit rule had not named it)."""


@dataclass(frozen=True)
class SearchResult:
    """The outcome of a search."""

    verdict: Verdict
    """'culprits' (each named step is at least min_effect and its interval excludes zero),
    'not-localised' (the regression reproduced, and every step the search proposed was refuted by
    the paired test: e.g. a gradual slowdown), 'undecided' (the sample caps or the budget ran out
    before an answer, or the named steps would not add up to the gap), 'not-reproduced',
    'all-skipped' (an endpoint, or every commit between them, unmeasurable), 'ambiguous' (every
    step that passed the culprit rule has unmeasurable commits between its two ends: `ambiguous`)."""
    culprits: tuple[Culprit, ...]
    """Confirmed steps in the hunted direction whose two commits are adjacent, by index."""
    endpoints: tuple[Summary, Summary]
    """GOOD and BAD (an empty Summary with n=0 when an endpoint has no sample)."""
    gap: float
    """BAD relative to GOOD: ratio of the geometric means of all their samples, minus 1."""
    unexplained: float
    """Fraction of the gap not owned by the culprits (log scale; negative if they overshoot)."""
    candidates: tuple[CandidateVerdict, ...]
    """Every candidate measured or skipped, by index."""
    probes: int
    """Benchmark executions recorded (skipped runs included)."""
    sides: tuple[SideCheck, ...] = ()
    """Every side of a culprit that was checked, in the order checked."""
    refuted: tuple[tuple[int, int], ...] = ()
    """Steps (last_good, first_bad) the posterior proposed and the paired test refuted (what a
    'not-localised' hunt ruled out)."""
    unresolved: tuple[tuple[int, int], ...] = ()
    """Brackets (lo, hi) given up without an answer."""
    suspects: tuple[Culprit, ...] = ()
    """Steps the search confirmed but that are not named: their interval includes zero, their
    point estimate is below min_effect, or the shares of the gap do not add up."""
    reason: str = ""
    """One line: why the verdict is what it is (for 'not-localised', 'undecided', 'not-reproduced')."""
    control: Comparison | None = None
    """The control arm's last look: GOOD vs BAD, paired (None before the first look)."""
    reproduced: bool = False
    """The control arm showed the regression (and the hunt's later samples did not overturn it);
    False for 'not-reproduced', and for 'undecided' when the control arm ran out of pairs."""
    ambiguous: tuple[Culprit, ...] = ()
    """Steps that passed the culprit rule but whose last_good and first_bad are not adjacent: the
    commits between could not be measured, so the step is any of them or first_bad, and none is
    named (beside `culprits`, or alone with the verdict 'ambiguous')."""
    unexplained_ci95: tuple[float, float] = (math.nan, math.nan)
    """95% interval of `unexplained`: the gap's own error and each culprit's own interval, taken
    as independent (nan when one is unknown)."""
    established: LeadingStep | None = None
    """With 'undecided': the step the search had got to (`LeadingStep`); None when it had none
    (e.g. the control arm ran out of pairs)."""
    more_samples_would_tell: bool = False
    """'undecided', or 'not-reproduced' by a control arm that stopped at the pair cap without
    ruling out a regression of min_effect (`ControlArm.more_pairs_would_tell`): a larger
    --max-samples would tell (the report's `continue_command`)."""
    shape: ShapeChange | None = None
    """Where GOOD and BAD differed in shape, not only in level (`ControlArm.shape`): the hunt read
    every run from then on, and this says how (None where they did not)."""
