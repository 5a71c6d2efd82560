"""Which of two commits to measure next so that their samples form pairs (docs/search.md, section 3).

Pure. A step's two commits and a side's two ends are compared on paired differences
(`SampleBook.paired_diffs` pairs samples of the two taken within `pair_window` rounds of each
other), so that a drift of the machine cancels in each pair. One slot at a time, a fresh unpaired
sample gets its partner next, else the pairs go in ABBA order (which cancels a linear drift
across pairs); several slots alternate the two over the whole round.
"""
from __future__ import annotations

from typing import Callable

from regressbisect.search.book import SampleBook

__all__ = ["Pairing"]


class Pairing:
    """The next samples of a pair (a, b) over one search's sample book; `room(i)` is how many
    samples candidate i may still take (its cap)."""

    def __init__(self, book: SampleBook, pair_window: int, room: Callable[[int], int]):
        self.book = book
        self.pair_window = pair_window
        self.room = room

    def next(self, a: int, b: int, slots: int, last_round: int) -> list[int]:
        """The next sample(s) of a pair after round `last_round`: both when slots allow, else the
        partner of a fresh unpaired sample, else ABBA order."""
        if slots >= 2:
            return [a, b]
        now = last_round + 1
        w = self.pair_window
        la = self.book.time.get(a, [])
        lb = self.book.time.get(b, [])
        n_pairs = len(self.book.paired_diffs(a, b))
        fresh_a = bool(la) and now - la[-1] <= w and (not lb or la[-1] > lb[-1])
        fresh_b = bool(lb) and now - lb[-1] <= w and (not la or lb[-1] > la[-1])
        if fresh_a and len(la) > n_pairs:
            return [b]
        if fresh_b and len(lb) > n_pairs:
            return [a]
        return [a] if n_pairs % 2 == 0 else [b]

    def round_of(self, a: int, b: int, slots: int, last_round: int) -> list[int]:
        """A round of nothing but the pair: `slots` samples alternating between a and b, starting
        with the one `next` would take alone. With an odd number of slots the last sample's
        partner opens the next round, within pair_window, so every slot serves a pair. Never past
        either commit's cap."""
        if slots < 2:
            return self.next(a, b, 1, last_round)
        last_a = self.book.time.get(a, []).count(last_round)
        last_b = self.book.time.get(b, []).count(last_round)
        # the last round's odd sample waits for its partner, which opens this round
        first = b if last_a > last_b else a if last_b > last_a else self.next(a, b, 1, last_round)[0]
        second = b if first == a else a
        room = {a: self.room(a), b: self.room(b)}
        picks = []
        for k in range(slots):
            i = first if k % 2 == 0 else second
            if room[i] > 0:
                picks.append(i)
                room[i] -= 1
        return picks
