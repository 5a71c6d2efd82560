"""The prefix search: the commit search over BASE + the first k groups of hunks in file order."""
from __future__ import annotations

import math
from dataclasses import replace
from itertools import accumulate
from typing import Sequence

import numpy as np

from regressbisect.search.bisect import CommitSearch, Measure, MeasureTag, SearchResult, SearchSettings
from regressbisect.search.hunks.context import HuntContext
from regressbisect.search.hunks.runnable import Needs, Purpose
from regressbisect.search.interference import Reader
from regressbisect.search.phases import Batch, Phase
from regressbisect.search.stats import NoisePool

__all__ = ["HUNK_SIDE_PAIRS", "END_NAMES", "PrefixSearch", "prefix_groups", "prefixes", "search_prefixes", "end_gap"]

HUNK_SIDE_PAIRS = 8
"""`SearchSettings.side_pairs` of the hunk hunt's prefix searches: a side check sized for about
eight fresh pairs, a smaller further step left to the search of the rest (`rest.py`). At 8-15%
noise the hunts cost 18-41% fewer probes with the same answers (docs/results/hunks.md, "Side
checks sized by the noise in the hunk hunt")."""

END_NAMES = ("BASE", "BASE + all hunks")
"""What a prefix search's reasons call its two ends."""


def prefix_groups(hunk_ids: Sequence[str], groups=None, needs: Needs | None = None) -> list[frozenset]:
    """The ordered list the prefix search walks: hunks in file order (the finest level of `groups`:
    files in path order, hunks in line order), each in one group with every hunk it needs or that
    needs it (transitively), the group placed where its first hunk is. A prefix of the list then
    never holds a hunk without one it needs."""
    order = [h for g in groups[-1] for h in g] if groups else list(hunk_ids)
    if sorted(order) != sorted(hunk_ids):
        raise ValueError("the finest level of `groups` must be a partition of the hunk ids")
    root = {h: h for h in order}

    def find(h: str) -> str:
        while root[h] != h:
            root[h] = root[root[h]]
            h = root[h]
        return h

    for hunk, required in (needs or {}).items():
        if hunk not in root or not set(required) <= root.keys():
            raise ValueError(f"needs of {hunk!r} name a hunk that is not in the list")
        for other in required:
            root[find(hunk)] = find(other)
    members: dict[str, list[str]] = {}
    for hunk in order:
        members.setdefault(find(hunk), []).append(hunk)
    return [frozenset(g) for g in members.values()]


def prefixes(order: Sequence[frozenset]) -> list[frozenset]:
    """BASE (the empty set), BASE + the first group, ..., BASE + every group of `order`."""
    return list(accumulate(order, frozenset.union, initial=frozenset()))


class PrefixSearch:
    """The commit search over BASE + each candidate subset, as the hunk hunt runs it: side checks
    sized for HUNK_SIDE_PAIRS fresh pairs, its ends called BASE and BASE + all hunks, and two
    things only the hunk hunt's search for what a step needs asks for:

    * one_step: the search ends at its first named step, its sides unchecked (a further need
      shows in the next alone test);
    * `carry_control_pairs`: pairs of its two ends measured before it (the alone test's BASE and
      prefix arms), its control arm's first.

    It holds a `CommitSearch` (`search`) and hands on what the hunk hunt reads of it.
    """

    def __init__(self, n: int, settings: SearchSettings, *, one_step: bool = False,
                 noise_prior: NoisePool | None = None, reader: Reader | None = None):
        # stall_share 0: its ends' 'not reproduced' and its steps steer the hunk hunt, whose own
        # arm (BASE against every hunk) says "no regression" and whose alone tests name hunks on
        # their own fresh pairs; the waits for a stall that may not have shown are theirs
        self.search = CommitSearch(n, replace(settings, side_pairs=HUNK_SIDE_PAIRS, stall_share=0.0),
                                   noise_prior=noise_prior, reader=reader, one_step=one_step)
        self.n, self.book, self.control, self.gate = n, self.search.book, self.search.control, self.search.gate

    def carry_control_pairs(self, good: Sequence[float], bad: Sequence[float]) -> None:
        """`CommitSearch.carry_control_pairs`: its control arm goes on from these pairs."""
        self.search.carry_control_pairs(good, bad)

    def next_batch(self, slots: int = 1) -> list[Measure]:
        return self.search.next_batch(slots)

    def record(self, index: int, value: float | None) -> None:
        self.search.record(index, value)

    def samples(self, index: int) -> tuple[float, ...]:
        return self.search.samples(index)

    def result(self, end_names: tuple[str, str] = END_NAMES) -> SearchResult:
        return self.search.result(end_names)


def search_prefixes(ctx: HuntContext, candidates: Sequence[frozenset], *, first: Purpose, rest: Purpose,
                    one_step: bool = False, carried: tuple[list[float], list[float]] | None = None) -> Phase:
    """(A coroutine phase returning the PrefixSearch.) The commit search over BASE + each
    candidate subset, in order (`PrefixSearch`), run to its end, each of its rounds as many
    measures as the hunt has slots (`HuntContext.slots`), as it runs a commit range; its samples
    join the hunt's pooled noise. first, rest: the purpose of its control arm's samples and of the
    others'. carried: `PrefixSearch.carry_control_pairs`."""
    search = PrefixSearch(len(candidates), ctx.settings, one_step=one_step, noise_prior=ctx.noise_prior,
                          reader=ctx.reader(candidates))
    if carried:
        search.carry_control_pairs(*carried)
    while batch := search.next_batch(ctx.slots):
        values = yield Batch(tuple((candidates[m.index], first if m.reason is MeasureTag.CONTROL_ARM else rest)
                                   for m in batch))
        for m, value in zip(batch, values):
            search.record(m.index, value)
    ctx.learn([search.samples(i) for i in range(len(candidates))])
    return search


def end_gap(search: PrefixSearch, noise: NoisePool) -> tuple[float, float]:
    """Log tok/s of BASE + all hunks less BASE's from every sample of the two, and its standard
    error from the pooled noise. An end whose every run was read as interfered is read on every
    run (with a second mode of 30% of the runs at 1.4x, BASE's were, and this divided by zero)."""
    base, full = (search.samples(i) or tuple(v for v, _, _ in search.book.runs.get(i, ())) for i in (0, search.n - 1))
    se = noise.sigma * math.sqrt(1 / len(base) + 1 / len(full)) if noise.df else math.inf
    return float(np.mean(np.log(full)) - np.mean(np.log(base))), se
