"""The verdicts of a hunt and of its control arms, named once. The JSON report writes their
values (docs/report-schema.md, docs/verdicts.md): a member is its value wherever it is written."""
from __future__ import annotations

from regressbisect.enums import WordEnum

__all__ = ["CandidateCall", "Verdict"]


class Verdict(WordEnum):
    """A commit or hunk hunt's verdict (each with its exit code: hunts/common.py `VERDICT_EXIT`),
    and REPRODUCED, the verdict of a control arm or a tested subset that goes on to a search."""

    CULPRITS = "culprits"
    """At least one culprit named."""
    NOT_REPRODUCED = "not-reproduced"
    """BAD is not slower than GOOD by min_effect."""
    ALL_SKIPPED = "all-skipped"
    """An endpoint, or every candidate between them, could not be measured."""
    NOT_LOCALISED = "not-localised"
    """The regression reproduced, but no single step (commit, hunk group) carries it."""
    UNDECIDED = "undecided"
    """The sample caps or the budget ran out before an answer."""
    AMBIGUOUS = "ambiguous"
    """Every step that passed the culprit rule has unmeasurable commits inside: none is named."""
    REPRODUCED = "reproduced"
    """A control arm's (or a tested subset's): the slowdown reproduced. Never a hunt's verdict."""


class CandidateCall(WordEnum):
    """What a search concluded about one candidate it measured or tried to (`bisect.CandidateVerdict.verdict`,
    each candidate's `verdict` in the JSON report)."""

    GOOD = "good"
    """At GOOD's level."""
    BAD = "bad"
    """At BAD's level."""
    LEVEL = "level"
    """Between two culprits."""
    SKIP = "skip"
    """Unmeasurable."""
    UNSURE = "unsure"
    """Inside a range the search could not resolve, or no run of it could be read."""
