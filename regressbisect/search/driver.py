"""The driver loop every hunt runs a commit search with: ask for a round, measure it, record it.

Pure: the caller's `measure` runs the round (probes in a hunt, a fake executor in a simulation)
and returns one outcome per measure, in order; `value` reads the tok/s the search records from an
outcome (None: the run was skipped). The commit hunt, the hunk hunt's prefix searches and the
simulator share it, so a search is fed the same way wherever it runs.
"""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from regressbisect.search.bisect import CommitSearch, Measure, SearchResult

__all__ = ["drive"]

Outcome = TypeVar("Outcome")


def drive(search: CommitSearch, measure: Callable[[Sequence[Measure]], Sequence[Outcome]], *, slots: int = 1,
          value: Callable[[Outcome], float | None] = lambda outcome: outcome,  # type: ignore[assignment,return-value]
          recorded: Callable[[Measure, Outcome], None] | None = None) -> SearchResult:
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
