"""Which subsets of hunks run, and the one place the hunk hunt measures one."""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from regressbisect.search.book import unmeasurable_by_skips

__all__ = ["Measure", "Needs", "Runnable"]

Measure = Callable[[frozenset, str], "float | None"]
"""(subset of hunk ids, purpose) -> tok/s of one run of BASE + subset, or None (skipped)."""
Needs = Mapping[str, Iterable[str]]
"""hunk id -> the hunk ids it cannot run without."""


class Runnable:
    """Which subsets run: those that hold every hunk their hunks need (known without a probe), less
    the ones seen not to run (the commit search's skip rule, `book.unmeasurable_by_skips`, with a
    subset that ran once settled: it runs). `measure` answers those with None without a probe."""

    def __init__(self, measure: Measure, needs: Needs | None = None):
        self._measure = measure
        self._needs = {h: frozenset(r) for h, r in (needs or {}).items()}
        self._skips: dict[frozenset, int] = {}
        self._samples: dict[frozenset, int] = {}

    def __call__(self, subset: frozenset) -> bool:
        if not all(self._needs.get(h, frozenset()) <= subset for h in subset):
            return False
        return not unmeasurable_by_skips(self._skips.get(subset, 0), self._samples.get(subset, 0),
                                         one_sample_settles=True)

    def measure(self, subset: frozenset, purpose: str) -> float | None:
        if not self(subset):
            self._skips.setdefault(subset, 2)
            return None
        value = self._measure(subset, purpose)
        if value is None:
            self._skips[subset] = self._skips.get(subset, 0) + 1
        else:
            self._samples[subset] = self._samples.get(subset, 0) + 1
        return value

    def settle(self, subset: frozenset, purpose: str) -> bool:
        """Whether BASE + subset runs, probing it when that is not known yet (at most the skip
        rule's two tries; a crash is a probe that ends at once)."""
        while self(subset) and subset not in self._samples:
            self.measure(subset, purpose)
        return self(subset)

    @property
    def did_not_run(self) -> frozenset:
        """Subsets asked for that never gave a sample (known not to run, or skipped)."""
        return frozenset(s for s in self._skips if s not in self._samples)
