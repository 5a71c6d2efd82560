"""Which subsets of hunks run, and what each run of a hunk hunt is for (`Purpose`); the phases' `Batch`
and the runner that asks for them are search/phases.py's, the commit search's too."""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from regressbisect.search.book import unmeasurable_by_skips
from regressbisect.search.phases import Batch, Phase
from regressbisect.enums import WordEnum

__all__ = ["Measure", "Needs", "Purpose", "Runnable"]


class Purpose(WordEnum):
    """What a run of the hunk hunt is for: its progress note, and its share of the cost
    (scripts/bench_hunks.py --phases)."""

    CONTROL = "control"
    """BASE and BASE + every hunk: does the slowdown reproduce (the hunt stops when either does not run)."""
    PREFIX = "prefix"
    """The prefix searches: BASE + the first k hunk groups, bisected."""
    NEEDS = "needs"
    """What a group needs to run, or to be slow."""
    NAME = "name"
    """Fresh pairs that name a group or hunk (alone against BASE, or a member left out)."""
    REMAINDER = "remainder"
    """The gap the named culprits leave."""
    DDMIN = "ddmin"
    """Delta debugging's subsets."""
    CONFIRM = "confirm"
    """Delta debugging's confirmation of a subset."""


Measure = Callable[[frozenset, Purpose], "float | None"]
"""(subset of hunk ids, purpose) -> tok/s of one run of BASE + subset, or None (skipped)."""
Needs = Mapping[str, Iterable[str]]
"""hunk id -> the hunk ids it cannot run without."""


class Runnable:
    """Which subsets run: those that hold every hunk their hunks need (known without a probe), less
    the ones seen not to run (the commit search's skip rule, `book.unmeasurable_by_skips`, with a
    subset that ran once settled: it runs). A request for one of those is answered None without a
    probe (`admit`)."""

    def __init__(self, needs: Needs | None = None):
        self._needs = {h: frozenset(r) for h, r in (needs or {}).items()}
        self._skips: dict[frozenset, int] = {}
        self._samples: dict[frozenset, int] = {}

    def __call__(self, subset: frozenset) -> bool:
        if not all(self._needs.get(h, frozenset()) <= subset for h in subset):
            return False
        return not unmeasurable_by_skips(self._skips.get(subset, 0), self._samples.get(subset, 0),
                                         one_sample_settles=True)

    def admit(self, subset: frozenset) -> bool:
        """Whether to run BASE + subset now; False counts it skipped, without a probe."""
        if not self(subset):
            self._skips.setdefault(subset, 2)
            return False
        return True

    def note(self, subset: frozenset, value: float | None) -> None:
        """What a run of BASE + subset gave."""
        if value is None:
            self._skips[subset] = self._skips.get(subset, 0) + 1
        else:
            self._samples[subset] = self._samples.get(subset, 0) + 1

    def settle(self, subset: frozenset, purpose: Purpose) -> Phase:
        """Whether BASE + subset runs, probing it when that is not known yet (at most the skip
        rule's two tries; a crash is a probe that ends at once)."""
        while self(subset) and subset not in self._samples:
            yield Batch(((subset, purpose),))
        return self(subset)

    @property
    def did_not_run(self) -> frozenset:
        """Subsets asked for that never gave a sample (known not to run, or skipped)."""
        return frozenset(s for s in self._skips if s not in self._samples)
