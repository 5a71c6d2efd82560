"""Delta debugging over hunks: which uncommitted hunks carry the slowdown. Pure: no git, no I/O.

The method is Zeller & Hildebrandt's ddmin ("Simplifying and Isolating Failure-Inducing
Input", IEEE TSE 28(2), 2002), made hierarchical as in Misherghi & Su's HDD (ICSE 2006): it
runs first over files, then over the functions of the files it kept, then over single hunks,
so a local culprit costs about 2*log2(#hunks) tests instead of a walk over every hunk.

A test applies a subset of the hunks on the base commit and measures it; the oracle answers
    'bad'        as slow as base + all hunks (within tolerance),
    'partial'    measurably slower than base, clearly less than the whole gap,
    'good'       as fast as base,
    'unresolved' does not apply / crashes / does not import: neither fast nor slow.
'unresolved' is the paper's "?" outcome: a subset or complement that is unresolved never
reduces the search (it only makes ddmin try a finer split), and is never read as good or bad.

Culprits are found by peeling:
 1. ddmin(remaining, fails = {'partial', 'bad'}) gives a 1-minimal subset C with a measurable
    slowdown: every hunk of C is needed for it (removing any one makes it good/unresolved).
    A dependent cluster (A defines a name B uses: A alone good, B alone unresolved, only A+B
    slow) comes out as ONE culprit {A, B}.
 2. remaining -= C; test `remaining`: 'good' -> no other culprit; 'partial'/'bad' -> peel again.
    Two independent 5% hunks of a 10% gap (each alone 'partial') are thus two culprits
    {A}, {B}: the leave-one-out verdict of the minimal bad set {A, B} is 'partial' both ways.
    If `remaining` is unresolved (some hunk of it needs C), its partitions are tried instead.
 3. Completeness: test the union U of the culprits. If U is not 'bad', some hunks without an
    effect of their own are needed for the whole gap (leave-one-out of {A, B} gives 'good' for
    A: B only slows things down together with A). ddmin over the rest with the test U+S being
    'bad' finds the minimal such S. If S alone is slow, it is a culprit the remainder test of
    step 2 missed (a noisy 'good'): it is added and step 3 repeats. Otherwise, with one
    culprit, S joins that culprit's cluster (B is needed, and has no effect without A); with
    several, it is reported in `interactions`.

Noise: a verdict is a statistical decision and can be wrong. With DdminSettings.confirm each
culprit is measured once more, and so is each of its leave-one-out subsets that was 'good'
(one noisy 'partial' would invent a culprit, one noisy 'good' would add a hunk to one); a
culprit that is not slow the second time is dropped and ddmin takes another path (the fresh
verdict replaces the cached one). A union that is not 'bad' is measured again before step 3.

The orchestrator drives the search as a state machine: `next_subset()` -> measure ->
`record(subset, verdict)`, until `next_subset()` is None; then `result()`. Verdicts are cached
per subset; the empty set is 'good' and the full set 'bad' by assumption (the control arm has
measured both endpoints before the search starts). A subset asked for a second time
(`confirming` is True) is a confirmation: measure it with fresh samples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generator, Iterable, Sequence
from regressbisect.enums import WordEnum


class SubsetVerdict(WordEnum):
    """What a test of one subset of the hunks answers (the oracle above; levels.subset_verdict
    gives the first three from its pairs)."""

    GOOD = "good"
    BAD = "bad"
    PARTIAL = "partial"
    UNRESOLVED = "unresolved"
    UNDECIDED = "undecided"
    """Measured, but the samples ran out before a verdict: like 'unresolved' it never reduces the
    search, but a remainder that is undecided is not split up to look for a slow part (each part
    would cost as much and is likelier still to end undecided)."""


GOOD, BAD, PARTIAL, UNRESOLVED, UNDECIDED = SubsetVerdict    # the names the search below reads
VERDICTS = frozenset(SubsetVerdict)
_SLOW = frozenset({PARTIAL, BAD})     # a measurable slowdown: what peeling looks for
_WHOLE_GAP = frozenset({BAD})         # the whole regression: what completeness looks for

Subset = frozenset[str]
# The search is a generator: it yields the subset it wants measured and receives its verdict.
_Search = Generator[Subset, str, None]


@dataclass(frozen=True)
class DdminSettings:
    """Knobs of the hunk search."""

    max_tests: int = 150
    """Most subsets the search asks to measure; past it the search stops, complete=False."""
    start_granularity: int = 2
    """ddmin's first n at every level: the kept units are split into n parts (2 = halves)."""
    complements_first: bool = True
    """Try removing one part (complement) before keeping one part (subset). Complements are
    large, so they are less often 'unresolved' when hunks depend on each other."""
    max_culprits: int = 8
    """Stop peeling after this many culprits (the rest is then reported as not searched)."""
    confirm: bool = True
    """Re-measure each culprit, and its leave-one-out subsets that were 'good', once before
    reporting it; also the union of the culprits when it is not 'bad'. Costs about one test
    per culprit; guards against a single noisy verdict."""
    search_unresolved_remainder: bool = True
    """When the hunks left after removing the culprits do not apply together, look for more
    culprits in their parts (costs tests); False stops and reports the remainder unresolved."""

    def __post_init__(self) -> None:
        if self.max_tests < 1:
            raise ValueError("max_tests must be >= 1")
        if self.start_granularity < 2:
            raise ValueError("start_granularity must be >= 2")
        if self.max_culprits < 1:
            raise ValueError("max_culprits must be >= 1")


@dataclass(frozen=True)
class DdminResult:
    """What the hunk search found."""

    culprits: tuple[frozenset[str], ...]
    """Each a 1-minimal set of hunks with a measurable slowdown; several ids = a cluster that
    only acts together. In the order found."""
    tests: int
    """Subsets measured (cache hits and the assumed endpoints not counted)."""
    unresolved: tuple[frozenset[str], ...]
    """Subsets whose verdict was 'unresolved', in the order tested."""
    undecided: tuple[frozenset[str], ...] = ()
    """Subsets whose samples ran out before a verdict, in the order tested."""
    interactions: tuple[frozenset[str], ...] = ()
    """Hunk sets with no slowdown of their own that the culprits need for the whole gap,
    when there are several culprits (with one culprit they are merged into it)."""
    explained: bool = False
    """True when base + all culprits (+ interactions) measured 'bad': they carry the whole gap."""
    remainder_verdict: str | None = None
    """Verdict of all hunks minus the culprits: 'good' means nothing else is slow."""
    complete: bool = True
    """False when max_tests (or max_culprits) stopped the search early."""
    verdicts: tuple[tuple[frozenset[str], str], ...] = ()
    """Every measured subset and its verdict, in test order."""


class _OutOfTests(Exception):
    """max_tests reached: unwinds the search generator."""


class HunkSearch:
    """Hierarchical ddmin over hunk ids, driven by the caller's measurements."""

    def __init__(self, hunk_ids: Sequence[str], groups: list[list[list[str]]] | None = None,
                 settings: DdminSettings = DdminSettings()):
        self.ids: tuple[str, ...] = tuple(dict.fromkeys(hunk_ids))
        if len(self.ids) != len(hunk_ids):
            raise ValueError("HunkSearch: duplicate hunk ids")
        if not self.ids:
            raise ValueError("HunkSearch: no hunks")
        self.settings = settings
        self.levels = _levels(self.ids, groups)
        self.everything: Subset = frozenset(self.ids)
        self._order = {hunk: i for i, hunk in enumerate(self.ids)}
        self._cache: dict[Subset, str] = {frozenset(): GOOD, self.everything: BAD}
        self._assumed = frozenset(self._cache)  # the endpoints: never measured by the search
        self._confirming = False
        self._history: list[tuple[Subset, str]] = []
        self._culprits: list[Subset] = []
        self._interactions: list[Subset] = []
        self._explained = False
        self._remainder_verdict: str | None = None
        self._complete = True
        self._pending: Subset | None = None
        self._finished = False
        self._search = self._run()

    # -- the caller's side ------------------------------------------------------------------

    def next_subset(self) -> frozenset[str] | None:
        """The next subset to apply on base and measure; None when the search is done.

        Calling it again before `record` returns the same subset.
        """
        if self._pending is not None:
            return self._pending
        if self._finished:
            return None
        self._advance(None)
        return self._pending

    def record(self, subset: frozenset[str], verdict: str) -> None:
        """The verdict of the subset `next_subset` returned."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {sorted(VERDICTS)}, got {verdict!r}")
        if self._pending is None or frozenset(subset) != self._pending:
            raise ValueError("record() must get the subset next_subset() returned")
        key, self._pending = self._pending, None
        self._cache[key] = verdict
        self._history.append((key, verdict))
        self._advance(verdict)

    def result(self) -> DdminResult:
        """What is known so far (complete=False while the search has not finished)."""
        return DdminResult(
            culprits=tuple(self._culprits), tests=len(self._history),
            unresolved=tuple(s for s, v in self._history if v == UNRESOLVED),
            undecided=tuple(s for s, v in self._history if v == UNDECIDED),
            interactions=tuple(self._interactions), explained=self._explained,
            remainder_verdict=self._remainder_verdict,
            complete=self._finished and self._complete, verdicts=tuple(self._history))

    @property
    def done(self) -> bool:
        """True once next_subset() has returned None."""
        return self._finished

    @property
    def confirming(self) -> bool:
        """True when the pending subset was measured before: measure it again with fresh
        samples (a confirmation), do not answer it from the stored ones alone."""
        return self._pending is not None and self._confirming

    def _advance(self, verdict: str | None) -> None:
        try:
            if verdict is None:
                subset = next(self._search)
            else:
                subset = self._search.send(verdict)
        except StopIteration:
            self._finished = True
            return
        except _OutOfTests:
            self._finished = True
            self._complete = False
            return
        self._pending = subset

    # -- the search ---------------------------------------------------------------------------

    def _test(self, subset: Iterable[str], fresh: bool = False) -> Generator[Subset, str, str]:
        """The verdict of `subset`: from the cache, or by asking the caller to measure it.

        fresh=True asks again even when cached (a confirmation); the new verdict replaces the
        old one, since the oracle answers it with more samples.
        """
        key = frozenset(subset)
        if key in self._cache and not (fresh and key not in self._assumed):
            return self._cache[key]
        if len(self._history) >= self.settings.max_tests:
            raise _OutOfTests
        self._confirming = fresh and key in self._cache
        verdict = yield key
        return verdict

    def _run(self) -> _Search:
        remaining = self.everything
        doubted = 0  # culprits that a confirmation showed to be noise
        while True:
            remaining_verdict = (yield from self._test(remaining)) if remaining else GOOD
            if remaining_verdict in _SLOW:
                start: Subset | None = remaining
            elif remaining_verdict == UNRESOLVED and self.settings.search_unresolved_remainder:
                start = yield from self._find_slow_part(remaining)
            else:
                start = None
            if start is None:
                break
            if len(self._culprits) >= self.settings.max_culprits:
                self._complete = False
                break
            culprit = yield from self._confirmed_minimal(start)
            if culprit is None:
                doubted += 1
                if doubted > self.settings.max_culprits:
                    self._complete = False
                    break
                continue  # the cache now holds the fresh verdict: ddmin takes another path
            self._culprits.append(culprit)
            remaining = remaining - culprit
        self._remainder_verdict = remaining_verdict
        yield from self._complete_the_gap()

    def _confirmed_minimal(self, start: Subset) -> Generator[Subset, str, Subset | None]:
        """A 1-minimal slow subset of `start`, confirmed; None if its slowness was noise.

        Confirmation (DdminSettings.confirm) re-measures the culprit, and every leave-one-out
        subset of it that was 'good': one noisy 'good' would otherwise add a hunk to the
        culprit, one noisy 'partial' would invent a culprit. 'unresolved' is not re-measured
        (a crash is not noise).
        """
        culprit = yield from self._hddmin(start, _identity, _SLOW)
        if not self.settings.confirm:
            return culprit
        for _ in range(len(culprit)):  # every round shrinks the culprit or returns
            if (yield from self._test(culprit, fresh=True)) not in _SLOW:
                return None
            smaller = None
            for hunk in sorted(culprit, key=self._order.__getitem__):
                rest = culprit - {hunk}
                if rest and self._cache.get(rest) == GOOD:
                    if (yield from self._test(rest, fresh=True)) in _SLOW:
                        smaller = rest
                        break
            if smaller is None:
                return culprit
            culprit = yield from self._hddmin(smaller, _identity, _SLOW)
        return culprit

    def _complete_the_gap(self) -> _Search:
        """Find hunks the culprits need for the whole gap (amplifiers, or a missed culprit)."""
        for _ in range(self.settings.max_culprits):
            if not self._culprits:
                return
            union = frozenset().union(*self._culprits, *self._interactions)
            verdict = yield from self._test(union)
            if verdict not in _WHOLE_GAP and self.settings.confirm:
                verdict = yield from self._test(union, fresh=True)
            if verdict in _WHOLE_GAP:
                self._explained = True
                return
            rest = self.everything - union
            # test(union + rest) = test(everything) = bad: ddmin's precondition holds.
            needed = yield from self._hddmin(rest, lambda s, union=union: union | s, _WHOLE_GAP)
            if (yield from self._test(needed)) in _SLOW:
                # Slow on its own: a culprit the remainder test missed (a noisy 'good').
                culprit = yield from self._confirmed_minimal(needed)
                if culprit is not None:
                    self._culprits.append(culprit)
                    continue
            if len(self._culprits) == 1:
                self._culprits[0] = self._culprits[0] | needed
            else:
                self._interactions.append(needed)
            self._explained = True  # union + needed measured 'bad' inside the ddmin above
            return

    def _hddmin(self, start: Subset, probe: Callable[[Subset], Subset],
                fails: frozenset[str]) -> Generator[Subset, str, Subset]:
        """A 1-minimal S within `start` whose probe(S) verdict is in `fails` (probe(start) is).

        ddmin runs level by level (files, functions, hunks) on the units of the kept hunks.
        """
        kept = start
        for level in self.levels:
            units = [unit for unit in (frozenset(g) & kept for g in level) if unit]
            units = yield from self._ddmin(units, probe, fails)
            kept = frozenset().union(*units)
        return kept

    def _ddmin(self, units: list[Subset], probe: Callable[[Subset], Subset],
               fails: frozenset[str]) -> Generator[Subset, str, list[Subset]]:
        """Zeller & Hildebrandt's ddmin over units, 'unresolved' counted as neither outcome."""
        n = min(self.settings.start_granularity, len(units))
        while len(units) >= 2:
            parts = _split(units, n)
            reduced = False
            for keep_part, index in self._order_of_tries(len(parts)):
                if keep_part:
                    candidate = parts[index]
                else:
                    candidate = [u for j, part in enumerate(parts) if j != index for u in part]
                verdict = yield from self._test(probe(frozenset().union(*candidate)))
                if verdict in fails:
                    units = candidate
                    # Paper: reduce to a subset -> n = 2; to a complement -> n = max(n - 1, 2).
                    n = 2 if keep_part else max(n - 1, 2)
                    reduced = True
                    break
            if not reduced:
                if n >= len(units):
                    break  # 1-minimal at this level
                n = min(2 * n, len(units))
            n = min(n, len(units))
        return units

    def _order_of_tries(self, n: int) -> list[tuple[bool, int]]:
        """(keep the part?, part index) in the order ddmin tries them at granularity n."""
        subsets = [(True, i) for i in range(n)]
        # With n == 2 the complement of one half is the other half: test only the subsets.
        complements = [(False, i) for i in range(n)] if n > 2 else []
        return complements + subsets if self.settings.complements_first else subsets + complements

    def _find_slow_part(self, remaining: Subset) -> Generator[Subset, str, Subset | None]:
        """A slow subset of an unresolved `remaining`: its ddmin partitions, coarse to fine."""
        for level in self.levels:
            units = [unit for unit in (frozenset(g) & remaining for g in level) if unit]
            if len(units) < 2:
                continue
            n = 2
            while True:
                parts = _split(units, n)
                for keep_part, index in self._order_of_tries(len(parts)):
                    candidate = parts[index] if keep_part else [
                        u for j, part in enumerate(parts) if j != index for u in part]
                    subset = frozenset().union(*candidate)
                    if subset != remaining and (yield from self._test(subset)) in _SLOW:
                        return subset
                if n >= len(units):
                    break
                n = min(2 * n, len(units))
        return None


def _identity(subset: Subset) -> Subset:
    return subset


def _split(units: list[Subset], n: int) -> list[list[Subset]]:
    """n contiguous parts of near-equal size (ddmin's partition; units keep file order)."""
    size, extra = divmod(len(units), n)
    parts, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        parts.append(units[start:end])
        start = end
    return [p for p in parts if p]


def _levels(ids: tuple[str, ...], groups: list[list[list[str]]] | None) -> list[list[list[str]]]:
    """The partitions ddmin walks, coarse to fine; single hunks are always the last one."""
    everything = set(ids)
    levels: list[list[list[str]]] = []
    for level in groups or []:
        flat = [hunk for group in level for hunk in group]
        if len(flat) != len(set(flat)) or set(flat) != everything:
            raise ValueError("every level of `groups` must be a partition of the hunk ids")
        if levels and len(level) <= len(levels[-1]):
            continue  # no finer than the previous level: nothing to gain
        levels.append([list(g) for g in level if g])
    # Single hunks in the order of the finest grouping, so a function's hunks stay adjacent.
    singles = [[hunk] for group in (levels[-1] if levels else [list(ids)]) for hunk in group]
    if not levels or len(levels[-1]) < len(singles):
        levels.append(singles)
    return levels
