"""The driver loop every hunt runs a commit search with: ask for a round, measure it, record it.

Pure: the caller's `measure` runs the round (probes in a hunt, a fake executor in a simulation)
and returns one outcome per measure, in order; `value` reads the tok/s the search records from an
outcome (None: the run was skipped). The commit hunt, the hunk hunt (`hunkdecide.HunkDecider`)
and the simulators share it, so a search is fed the same way wherever it runs.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, TypeVar

from regressbisect.search.bisect import Measure

__all__ = ["AskTell", "drive"]

Outcome = TypeVar("Outcome")


class AskTell(Protocol):
    """A search fed ask/tell: `CommitSearch`, `hunkdecide.HunkDecider`."""

    def next_batch(self, slots: int = 1) -> list[Measure]: ...

    def record(self, index: int, value: float | None) -> None: ...

    def result(self) -> Any: ...


def drive(search: AskTell, measure: Callable[[Sequence[Measure]], Sequence[Outcome]], *, slots: int = 1,
          value: Callable[[Outcome], float | None] = lambda outcome: outcome,  # type: ignore[assignment,return-value]
          recorded: Callable[[Measure, Outcome], None] | None = None) -> Any:
    """Run `search` to its end, `slots` measures a round; `recorded(measure, outcome)` is called
    after each sample is recorded (the search's state, e.g. its live interval, includes it)."""
    while batch := search.next_batch(slots):
        outcomes = measure(batch)
        if len(outcomes) != len(batch):
            raise ValueError(f"measure returned {len(outcomes)} outcomes for a round of {len(batch)}")
        for m, outcome in zip(batch, outcomes):
            search.record(m.index, value(outcome))
            if recorded is not None:
                recorded(m, outcome)
    return search.result()
