"""The base of the package's value sets (verdicts, outcomes, flags' words)."""
from __future__ import annotations

from enum import Enum


class WordEnum(str, Enum):
    """A value set whose members are their words: equal to them, written as them by str(),
    f-strings and JSON (Python 3.11's str mixins would write 'Verdict.X' in f-strings), and read
    back from them (`Verdict("culprits")`)."""

    def __str__(self) -> str:
        return self.value
