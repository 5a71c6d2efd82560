"""Which commits of a bracket the localisation measures next, from its posterior (docs/search.md,
section 2): the posterior's quantiles, an end of the bracket when an interior commit has about as
many samples (the level rule), and a binary search past a run of unmeasurable commits.

Pure (numpy only). The commit search holds one `Picker` over its sample book; `capped` says which
candidates are at their sample cap.
"""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from regressbisect.search.book import SampleBook
from regressbisect.search.localise import Posterior

__all__ = ["Bracket", "Picker"]


class Bracket(Protocol):
    """A bracket [lo, hi] searched for one step (the search's interval)."""

    lo: int
    hi: int


class Picker:
    """The localisation's choice of candidates to measure in a bracket."""

    def __init__(self, book: SampleBook, capped: Callable[[int], bool]):
        self.book = book
        self.capped = capped

    def anchor(self, iv: Bracket, picks: list[int]) -> int | None:
        """The end of the bracket to re-measure, if an interior pick has about as many samples."""
        ends = sorted((len(self.book.raw.get(e, [])), e) for e in (iv.lo, iv.hi))
        fewest, end = ends[0]
        densest = max((len(self.book.raw.get(i, [])) for i in picks), default=0)
        return end if densest + 1 >= fewest and end not in picks and not self.capped(end) else None

    def skip_run(self, iv: Bracket, x: int) -> tuple[int, int, int, int] | None:
        """For an untried commit x: (L, first, last, R), L and R the nearest sampled commits (or
        ends) around x and [first, last] the span of the unmeasurable commits between them, taken
        for one run; None when there are none, or x has a sample."""
        book = self.book
        if book.raw.get(x) or not iv.lo < x < iv.hi:
            return None
        lo, hi = x - 1, x + 1
        while lo > iv.lo and not book.raw.get(lo):
            lo -= 1
        while hi < iv.hi and not book.raw.get(hi):
            hi += 1
        skipped = [i for i in range(lo + 1, hi) if book.unmeasurable(i)]
        return (lo, skipped[0], skipped[-1], hi) if skipped else None

    def in_skip_run(self, iv: Bracket, x: int) -> bool:
        """Untried inside a run of unmeasurable commits whose extent is not known yet (an untried
        commit at one of its edges): presumed unmeasurable, measured last."""
        run = self.skip_run(iv, x)
        if run is None:
            return False
        lo, first, last, hi = run
        return first < x < last and (first - 1 > lo or last + 1 < hi)

    def past_skips(self, iv: Bracket, x: int) -> int:
        """Where to measure instead of x, when x is untried and next to a run of unmeasurable commits.

        Unmeasurable commits come in runs (a broken build over a few commits; a hunk prefix that
        holds a hunk without what it needs), so a commit next to one is likely in it. Measuring it
        anyway, as git bisect's `skip` does, walks the run at two probes a commit. Halfway between x
        and the nearest sampled commit on its far side instead: a binary search for where the run
        ends, about log2 of its length in probes."""
        run = self.skip_run(iv, x)
        if run is None:
            return x
        lo, first, last, hi = run
        if x == last + 1:
            return (x + hi) // 2
        if x == first - 1:
            return (lo + x + 1) // 2
        return x

    def quantiles(self, iv: Bracket, post: Posterior, k: int, exclude: set[int]) -> list[int]:
        """Up to k distinct interior commits whose 'first bad <= x' mass is nearest j/(k+1)."""
        if not post.gaps or k <= 0:
            return []
        cum = np.cumsum(post.probs)
        total = cum[-1] if cum[-1] > 0 else 1.0
        # candidate x = the 'last_good' of each gap except the first: P(first_bad <= x)
        xs, qs = [], []
        for j, (a, _) in enumerate(post.gaps):
            if a == iv.lo or a in exclude or self.capped(a):
                continue
            xs.append(a)
            qs.append(float(cum[j - 1] / total) if j > 0 else 0.0)
        if not xs:
            return []
        if any(self.book.unmeasurable(i) for i in self.book.skips):
            keep = [j for j, x in enumerate(xs) if not self.in_skip_run(iv, x)]
            if keep:
                xs, qs = [xs[j] for j in keep], [qs[j] for j in keep]
        xs_a, qs_a = np.array(xs), np.array(qs)
        chosen: list[int] = []
        for j in range(1, k + 1):
            target = j / (k + 1)
            order = np.lexsort((xs_a, np.abs(qs_a - target)))
            for o in order:
                x = self.past_skips(iv, int(xs_a[o]))
                if x not in chosen and x not in exclude:
                    chosen.append(x)
                    break
        # a retry is owed to a candidate skipped once: it comes first if it is among the useful
        return sorted(chosen, key=lambda x: (not self.book.retry_wanted(x), chosen.index(x)))

    @staticmethod
    def central(post: Posterior) -> tuple[int, int]:
        cum = np.cumsum(post.probs) / max(float(np.sum(post.probs)), 1e-300)
        j0 = int(np.searchsorted(cum, 0.025))
        j1 = int(min(np.searchsorted(cum, 0.975), len(post.gaps) - 1))
        return post.gaps[min(j0, j1)][0], post.gaps[j1][1]
