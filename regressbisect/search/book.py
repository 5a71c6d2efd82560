"""The samples of one search and what every decision reads from them: pairs and the pooled noise.

Pure (numpy/scipy only). Each sample of a candidate keeps the round it was taken in and its
pairing tag (the control arm's pairs carry one), so that every rule of the search (bisect.py)
reads the same two facts: which samples pair (taken at most `pair_window` rounds apart, drift
cancels in each), and how noisy the machine is (the pure-error spread of every candidate, with a
remembered scale from earlier hunts joined while it fits).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from regressbisect.search.interference import (REJECT, Reader, interfered_runs, machine_runs, more_than_the_machines, provisional_kinds,
                                              runs_to_tell_from_a_kind)
from regressbisect.search.stats import NoisePool, chi2_ppf, f_ppf

__all__ = ["NOISE_PRIOR_DF", "NOISIER_LEVEL", "RECENT_DF", "SampleBook", "SideBySide", "unmeasurable_by_skips"]

NOISE_PRIOR_DF = 10
"""Most degrees of freedom a remembered noise scale counts for: it starts the estimate (two pairs
can then decide a 10% step at 0.5% noise), and ten samples of the hunt's own outweigh it."""

NOISIER_LEVEL = 0.99
"""Level of the F test that finds the commits a test compares noisier than the rest of the hunt
(`SampleBook.noise`); their spread is then the test's alone."""


RECENT_DF = 8
"""Fewest degrees of freedom of a recent window's spread (`SampleBook.recent_sigma`) before it
counts: below, it is too rough to raise a budget by."""

OUTLIER_LEVEL = 0.9999
"""Level of the F test that finds a commit noisier than all the others (`noisier_commits`): the
tests of other commits leave its spread out of their pool. Strict, because it is asked at every
look of every test: at 99.9% a chance flag of an ordinary commit cost one simulated hunk hunt in
100 about 700 probes, while a host-bound or flaky commit (10-900x the variance) is found at
either level."""


def unmeasurable_by_skips(skips: int, samples: int, *, one_sample_settles: bool = False) -> bool:
    """The skip rule, for a commit and for a hunk hunt's subset: skipped twice, and more often
    than measured (a crash is usually deterministic, one skip may be a flake).

    one_sample_settles: a candidate measured once is never unmeasurable, whatever it skips after
    (the hunk hunt's rule for a subset, `search/hunks/runnable.py`); the commit search counts
    skips against samples to the end. A later change is to make the two one rule."""
    if one_sample_settles and samples:
        return False
    return skips >= 2 and skips > samples


class SampleBook:
    """tok/s per candidate in recording order, the round and pairing tag of each, and the skips."""

    def __init__(self, pair_window: int, noise_prior: NoisePool | None = None, *,
                 read_interference: bool = False, reader: Reader | None = None):
        """noise_prior: a remembered noise scale (the spread of earlier hunts' samples on this
        machine and probe config), counted for at most NOISE_PRIOR_DF degrees of freedom.
        read_interference: runs far off their candidate's level are set apart from every test
        (search/interference.py, `SearchSettings.read_interference`); `reader` reads them (default:
        on this book's runs alone, `interfered_runs`; a hunk hunt's tests: on the hunt's,
        `HuntReading.reader`)."""
        self.pair_window = pair_window
        self.read_interference = read_interference
        self.reads_every_run = False
        """Set once every run is read (`read_every_run`): a change of shape, or culprits that contradicted the gap."""
        self.machine_of: tuple[int, int] | None = None
        """Once every run is read: (GOOD, BAD), the ends whose runs tell the machine's kinds, whose
        runs stay apart at every candidate (`interference.machine_runs`)."""
        self.reader: Reader = reader or interfered_runs
        self.runs: dict[int, list[tuple[float, int, str | None]]] = {}
        """Every run of each candidate, (tok/s, round, pairing tag), interfered ones included."""
        self.skips: dict[int, int] = {}
        self._typical: tuple[int, _Typical] | None = None     # `_view` at the runs recorded then
        self._pairs: tuple[tuple[int, int], SideBySide] | None = None    # `pairs` at `_state()`
        self._outliers: tuple[tuple[int, int], frozenset[int]] | None = None   # `noisier_commits`, likewise
        self._kinds: tuple[tuple[int, int], tuple[float, list[tuple[float, float]]]] | None = None   # `runs_to_tell_from_interference`
        self.noise_prior = noise_prior.capped(NOISE_PRIOR_DF) if noise_prior and noise_prior.df else None
        self._all_order: list[tuple[int, int]] = []   # (candidate, its run number), as recorded

    def add(self, index: int, value: float | None, *, tag: str | None, when: int) -> None:
        """One sample of `index` taken in round `when` (None: its run was skipped)."""
        if value is None:
            self.skips[index] = self.skips.get(index, 0) + 1
            return
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"tok/s must be finite and positive, got {value!r}")
        self._all_order.append((index, len(self.runs.get(index, []))))
        self.runs.setdefault(index, []).append((float(value), when, tag))

    # -- the runs every test reads: those not read as interfered (search/interference.py) --------

    @property
    def raw(self) -> dict[int, list[float]]:
        """tok/s of each candidate's typical runs, in recording order."""
        return self._view().raw

    @property
    def time(self) -> dict[int, list[int]]:
        """The round of each of `raw`."""
        return self._view().time

    @property
    def tags(self) -> dict[int, list[str | None]]:
        """The pairing tag of each of `raw`."""
        return self._view().tags

    @property
    def order(self) -> list[tuple[int, int]]:
        """(candidate, its number in `raw`) of the typical runs, as recorded."""
        return self._view().order

    def interfered(self) -> dict[int, list[float]]:
        """tok/s of the runs read as interfered, by candidate (none: {})."""
        return self._view().interfered

    def run_count(self, i: int, tag: str | None = None) -> int:
        """Runs of `i` that gave a sample (with pairing tag `tag`), interfered ones included: what
        a cap counts."""
        runs = self.runs.get(i, [])
        return len(runs) if tag is None else sum(1 for _, _, t in runs if t == tag)

    def runs_per_typical_run(self) -> float:
        """Runs over typical runs, over every candidate (1.0 when none is read as interfered):
        what a run that informs a test costs in runs."""
        typical = sum(len(v) for v in self.raw.values())
        every = typical + sum(len(v) for v in self.interfered().values())
        return every / typical if typical else 1.0

    def _view(self) -> "_Typical":
        """The typical runs: all but those read as interfered, unless the machine changed during
        the hunt (`drifting`, on every run): then a candidate's runs sit at the levels of the
        machine's states, which the side-by-side pairs cancel, and none is read as interfered."""
        if self._typical is not None and self._typical[0] == len(self._all_order):
            return self._typical[1]
        every = self._runs_view({})
        view = every
        reading = (self.reader if self.read_interference
                   else functools.partial(machine_runs, good=self.machine_of[0], bad=self.machine_of[1])
                   if self.machine_of is not None else None)
        if reading is not None and not self._drifting(every):
            off = reading(self._logs())
            if any(any(flags) for flags in off.values()):
                view = self._runs_view(off)
        self._typical = (len(self._all_order), view)
        return view

    def read_every_run(self, machine: tuple[int, int] | None = None) -> None:
        """From now on every test reads every run: the runs far off their level were found to be a
        commit's (a change of shape, `ControlArm.decide`), not the machine's alone, which reading
        them apart assumes. machine: (GOOD, BAD), whose runs tell the machine's own kinds; the runs
        at those kinds stay apart at every candidate (`interference.machine_runs`), so the tests
        read the commit's shape without the machine's tail (None: none stays apart)."""
        self.read_interference = False
        self.reads_every_run = True
        self.machine_of = machine
        self._typical = self._pairs = self._outliers = self._kinds = None

    def _logs(self) -> dict[int, list[float]]:
        """Log tok/s of every run of each measurable candidate, interfered ones included: what
        the interference is read on."""
        return {i: [math.log(v) for v, _, _ in runs] for i, runs in self.runs.items()
                if not self.unmeasurable_after(i, len(runs))}

    def runs_to_tell_from_interference(self, step: float, alpha: float) -> int:
        """Pairs a step of this size needs before its fresh pairs can name it at level alpha, where
        it has the size of the hunt's interference (`runs_to_tell_from_a_kind`); 0 where runs are
        not read as interfered, or are read on a hunk hunt's runs (`HuntReading`: its kinds are the
        hunt's, which this book's few runs an arm do not show). The scale and kinds are kept until
        a sample or a skip is added (the gate asks at every look)."""
        if not self.read_interference or self.reader is not interfered_runs:
            return 0
        sigma, kinds = self._hunt_kinds()
        return runs_to_tell_from_a_kind(step, sigma, kinds, alpha)

    def _hunt_kinds(self) -> tuple[float, list[tuple[float, float]]]:
        """The hunt's scale and kinds of interference (`provisional_kinds`), kept until a sample or
        a skip is added."""
        state = self._state()
        if self._kinds is None or self._kinds[0] != state:
            self._kinds = (state, (0.0, []) if self.drifting() else provisional_kinds(self._logs()))
        return self._kinds[1]

    def _runs_view(self, off: dict[int, list[bool]]) -> "_Typical":
        """The runs not flagged in `off` (by candidate, per run), and those flagged apart."""
        view = _Typical({}, {}, {}, [], {})
        number: dict[tuple[int, int], int] = {}
        for i, runs in self.runs.items():
            flags = off.get(i) or [False] * len(runs)
            for k, ((value, when, tag), far) in enumerate(zip(runs, flags)):
                if far:
                    view.interfered.setdefault(i, []).append(value)
                    continue
                number[(i, k)] = len(view.raw.get(i, []))
                view.raw.setdefault(i, []).append(value)
                view.time.setdefault(i, []).append(when)
                view.tags.setdefault(i, []).append(tag)
        view.order.extend((i, number[(i, k)]) for i, k in self._all_order if (i, k) in number)
        return view

    def values(self, i: int, tag: str | None = None) -> list[float]:
        """Every typical sample of `i`, or only those with pairing tag `tag`."""
        raw = self.raw.get(i, [])
        if tag is None:
            return raw
        return [v for v, t in zip(raw, self.tags.get(i, [])) if t == tag]

    def unmeasurable(self, i: int) -> bool:
        """The skip rule (`unmeasurable_by_skips`) on candidate i's skips and runs (a candidate never
        skipped is measurable: its runs need no count, on every look of the search)."""
        return i in self.skips and self.unmeasurable_after(i, self.run_count(i))

    def unmeasurable_after(self, i: int, runs: int) -> bool:
        """The skip rule on candidate i's skips and `runs` runs."""
        return unmeasurable_by_skips(self.skips.get(i, 0), runs)

    def retry_wanted(self, i: int) -> bool:
        return 0 < self.skips.get(i, 0) and not self.unmeasurable(i)

    def paired_diffs(self, a: int, b: int, since: int = -1, *, every_run: bool = False) -> list[float]:
        """log(b) - log(a) of the samples of a and b taken at most pair_window rounds apart (and
        after round `since`); every_run: of every run, those read as interfered included.

        Two pointers over both time-ordered sample lists; each sample is used in one pair at most.
        """
        if every_run:
            ta, tb = ([w for _, w, _ in self.runs.get(i, [])] for i in (a, b))
            ya, yb = ([v for v, _, _ in self.runs.get(i, [])] for i in (a, b))
        else:
            ta, tb = self.time.get(a, []), self.time.get(b, [])
            ya, yb = self.raw.get(a, []), self.raw.get(b, [])
        if since >= 0:
            ka, kb = int(np.searchsorted(ta, since, side="right")), int(np.searchsorted(tb, since, side="right"))
            ta, ya, tb, yb = ta[ka:], ya[ka:], tb[kb:], yb[kb:]
        i = j = 0
        out = []
        w = self.pair_window
        while i < len(ta) and j < len(tb):
            if abs(ta[i] - tb[j]) <= w:
                out.append(math.log(yb[j]) - math.log(ya[i]))
                i += 1
                j += 1
            elif ta[i] < tb[j]:
                i += 1
            else:
                j += 1
        return out

    def runs_at_the_other_level(self, a: int, b: int, sigma: float) -> bool:
        """A run of `a` or `b` read off its level sits at the other's level (within REJECT
        `sigma` of it): the two may then be one shape whose runs split between two levels, each
        read at the level most of its runs hold, and their typical runs show a step that is not
        one (the naming gate and the control arm then ask the signs of every pair too), unless
        another commit has a run as far off its own level: a kind the machine's, at every commit
        (a third of the runs at 1.3x beside a 15% step sit at the other level too), and the commit
        holds no more such runs than the hunt's share of that kind allows
        (`interference.more_than_the_machines`). Every run counts, those before a step's pick
        too: they show the commit's shape as well as fresh ones. After a stall at 13, commit 15's
        runs 8 of 10 at 0.7x beside commit 14's 6 of 6 at 1.0x: 15's two at 1.0x were read off,
        and the fresh typical pairs named 14->15 a -28% step. Half the runs at 0.7x at every
        commit, 15 read at 1.0x (4 of 12 off) and 16 at 0.7x (6 of 17 off, at a 'fast kind' of the
        5% share the hunt's level readings left): 16 was named a -30% culprit of an A/A range."""
        off = self.interfered()
        levels = {i: float(np.median(np.log(runs))) for i, runs in self.raw.items() if runs}
        if a not in levels or b not in levels or not sigma > 0:
            return False

        def elsewhere(i: int, offset: float) -> bool:
            # a run this far off its level at another commit too: the machine's kind, which
            # `runs_to_tell_from_interference` weighs
            return any(abs(math.log(u) - levels[j] - offset) <= REJECT * sigma
                       for j, runs in off.items() if j != i and j in levels for u in runs)

        for i, other in ((a, b), (b, a)):
            at_other = [math.log(v) - levels[i] for v in off.get(i, []) if abs(math.log(v) - levels[other]) <= REJECT * sigma]
            if at_other and (not all(elsewhere(i, d) for d in at_other)
                             or more_than_the_machines(at_other, len(self.runs.get(i, [])), *self._hunt_kinds())):
                return True
        return False

    # -- the noise ------------------------------------------------------------------------------

    def noise(self, split: dict[int, int] | None = None, of: Sequence[int] = ()) -> NoisePool:
        """The hunt's pure-error noise with the remembered prior (`with_prior`).

        of: the commits a test compares (the naming gate's, a side check's ends). The spread is
        pooled because it is mostly the machine's, but a commit can be noisier than the rest
        (host-bound, flaky): pooled with quiet commits it borrows their quiet, and a test of it
        reads its own scatter as a step (docs/search.md, section 1, "A commit noisier than the
        rest"). So when their spread is larger than the rest's (an F test at NOISIER_LEVEL, on their
        own degrees of freedom however few), the test reads their spread alone. The other way
        round, a commit far noisier than all the others (`noisier_commits`) leaves the pool of a
        test that does not compare it: one 15% commit among 0.5% ones made every side check
        beside it pay for its scatter. As with the remembered prior, which pool a look reads is
        chosen on sums of squares only, independent of the means under the normal model. Without
        `of` (the paired SPRT, a culprit's interval) the pool is every commit's.
        """
        if not of:
            return self.with_prior(self.own_noise(split))
        skip = self.noisier_commits() - set(of)
        return self._tested_or_pooled(self.own_noise(split, skip=skip), self.own_noise(split, only=of))

    def noisier_commits(self) -> frozenset[int]:
        """Candidates whose spread is larger than the rest's at OUTLIER_LEVEL (an F test, each
        against all the others). Kept until a sample or a skip is added."""
        state = self._state()
        if self._outliers is not None and self._outliers[0] == state:
            return self._outliers[1]
        groups = {i: NoisePool.of([v]) for i, v in self.raw.items() if len(v) >= 2 and not self.unmeasurable(i)}
        total = NoisePool(sum(g.ss for g in groups.values()), sum(g.df for g in groups.values()))
        out = frozenset(i for i, g in groups.items()
                        if self.noisier(g, NoisePool(max(total.ss - g.ss, 0.0), total.df - g.df), OUTLIER_LEVEL))
        self._outliers = (state, out)
        return out

    def pair_noise(self, of: Sequence[int] = (), since: int | None = None) -> NoisePool:
        """The spread within side-by-side pairs (`pairs`), per sample, with the remembered prior.

        A test of paired differences has this variance; the within-candidate pool (`noise`) also
        holds the machine's changes between the times a candidate was sampled, which pairs cancel
        (scripts/pair_noise.py). `of`: as in `noise`, the tested pair's own spread where it is
        larger than the rest's; `since`: its pairs up to that round and after it are two groups of
        their own (so that the spread is independent of the fresh pairs' mean)."""
        pairs = self.pairs()
        groups: dict[tuple, list[float]] = dict(pairs.diffs)
        if of and since is not None and (key := (min(of), max(of))) in groups:
            diffs, rounds = groups.pop(key), pairs.rounds[key]
            groups[key] = [d for d, t in zip(diffs, rounds) if t <= since]
            groups[(*key, "fresh")] = [d for d, t in zip(diffs, rounds) if t > since]
        tested = NoisePool.of_ratios(d for key, d in groups.items() if key[0] in of and key[1] in of) if of else None
        return self._tested_or_pooled(NoisePool.of_ratios(groups.values()), tested)

    def _tested_or_pooled(self, own: NoisePool, tested: NoisePool | None) -> NoisePool:
        """`tested` (the compared commits' part of `own`) alone where it is noisier than the rest,
        else all of `own` with the remembered prior (`noise`)."""
        if tested is not None:
            rest = self.with_prior(NoisePool(max(own.ss - tested.ss, 0.0), own.df - tested.df))
            if self.noisier(tested, rest):
                return tested
        return self.with_prior(own)

    def drifting(self) -> bool:
        """The machine changed during the hunt: on the samples that pair, their spread within
        candidates is larger than within the pairs at NOISIER_LEVEL (an F test, the pairs with 3
        degrees of freedom or more). On the same samples, a commit noisier than the rest widens
        both alike; what pairs cancel and candidates do not is the machine's change between the
        times a candidate was sampled. A machine property, so both are of the whole hunt."""
        return self._drifting(self._view())

    def _drifting(self, view: "_Typical") -> bool:
        pairs = self._pairs_of(view)
        within = NoisePool.of([[view.raw[i][k] for k in ks] for i, ks in pairs.samples.items()])
        paired = NoisePool.of_ratios(pairs.diffs.values())
        return paired.df >= 3 and self.noisier(within, paired)

    def pairs(self) -> "SideBySide":
        """The hunt's side-by-side pairs: every sample, in the order recorded, pairs with the next
        one when that is another candidate's taken within pair_window rounds; each sample is in one
        pair at most. Kept until a sample or a skip is added (the gate reads them at every look)."""
        state = self._state()
        if self._pairs is not None and self._pairs[0] == state:
            return self._pairs[1]
        out = self._pairs_of(self._view())
        self._pairs = (state, out)
        return out

    def _pairs_of(self, view: "_Typical") -> "SideBySide":
        out = SideBySide({}, {}, {})
        pending: tuple[int, int] | None = None
        for index, k in view.order:
            if self.unmeasurable(index):
                continue
            if pending is not None and pending[0] != index and \
                    abs(view.time[index][k] - view.time[pending[0]][pending[1]]) <= self.pair_window:
                (a, ka), (b, kb) = sorted([pending, (index, k)])
                out.diffs.setdefault((a, b), []).append(math.log(view.raw[b][kb]) - math.log(view.raw[a][ka]))
                out.rounds.setdefault((a, b), []).append(max(view.time[a][ka], view.time[b][kb]))
                out.samples.setdefault(a, []).append(ka)
                out.samples.setdefault(b, []).append(kb)
                pending = None
            else:
                pending = (index, k)
        return out

    def _state(self) -> tuple[int, int]:
        """(samples, skips) recorded so far: what `pairs` and `noisier_commits` are kept by."""
        return len(self._all_order), sum(self.skips.values())

    @staticmethod
    def noisier(tested: NoisePool, rest: NoisePool, level: float = NOISIER_LEVEL) -> bool:
        """`tested`'s spread is larger than `rest`'s at `level` (F test)."""
        if not (tested.df and rest.df and rest.ss > 0):
            return False
        return tested.sigma ** 2 > rest.sigma ** 2 * f_ppf(level, tested.df, rest.df)

    def own_noise(self, split: dict[int, int] | None = None, only: Sequence[int] | None = None,
                  skip: frozenset[int] = frozenset()) -> NoisePool:
        """Every measurable candidate's spread about its own mean (`only`: of those candidates;
        `skip`: but these). `split` {index: round} makes the samples of a candidate up to that
        round and after it two groups of their own."""
        groups: list[Sequence[float]] = []
        for i, vals in self.raw.items():
            if len(vals) < 2 or self.unmeasurable(i) or (only is not None and i not in only) or i in skip:
                continue
            if split and i in split:
                times = self.time.get(i, [])
                groups.append([v for v, t in zip(vals, times) if t <= split[i]])
                groups.append([v for v, t in zip(vals, times) if t > split[i]])
            else:
                groups.append(vals)
        return NoisePool.of(groups)

    def with_prior(self, own: NoisePool) -> NoisePool:
        """`own` joined by the remembered noise prior, unless this hunt's own spread is larger than
        the prior's at 95% (an F test, once it has 3 degrees of freedom): a machine noisier today
        must not borrow yesterday's quiet. The prior's weight is capped (NOISE_PRIOR_DF), so the
        hunt's own spread dominates once it has a few samples."""
        return own.plus(self.noise_prior) if self.prior_fits(own) else own

    def prior_fits(self, own: NoisePool) -> bool:
        prior = self.noise_prior
        if prior is None:
            return False
        return own.df < 3 or own.sigma ** 2 <= prior.sigma ** 2 * f_ppf(0.95, own.df, prior.df)

    def noise_prior_report(self) -> dict | None:
        """The remembered noise scale and whether the hunt's noise now uses it (None: no prior)."""
        if self.noise_prior is None:
            return None
        return {"sigma": self.noise_prior.sigma, "df": self.noise_prior.df,
                "used": self.prior_fits(self.own_noise())}

    def recent_sigma(self, since: int) -> float:
        """Noise sigma (log scale) of the samples taken after round `since` alone, each
        candidate's about its own mean in that window, without the remembered prior: what the
        machine is like now (the hunt's budgets, `SearchContext.over_budget`). nan below
        RECENT_DF degrees of freedom."""
        groups = [[v for v, t in zip(vals, self.time.get(i, [])) if t > since]
                  for i, vals in self.raw.items() if not self.unmeasurable(i)]
        noise = NoisePool.of(groups)
        return noise.sigma if noise.df >= RECENT_DF else math.nan

    def pooled_sigma(self, of: Sequence[int] = ()) -> tuple[float, int]:
        """Noise sigma (log scale) pooled over candidates (`noise`, the prior included; `of`: the
        compared commits, as there); below 10 degrees of freedom, its 90% upper confidence bound,
        so that a lucky small spread early on does not fake certainty."""
        noise = self.noise(of=of)
        sigma, df = noise.sigma, noise.df
        if df == 0 or not sigma > 0:
            return math.nan, 0
        return (sigma * math.sqrt(df / chi2_ppf(0.10, df)) if df < 10 else sigma), df


@dataclass(frozen=True)
class SideBySide:
    """Side-by-side pairs (`SampleBook.pairs`): log(b / a) by the two candidates (a < b), each
    pair's round (its later sample's), and each candidate's sample numbers that are in a pair."""

    diffs: dict[tuple[int, int], list[float]]
    rounds: dict[tuple[int, int], list[int]]
    samples: dict[int, list[int]]


@dataclass(frozen=True)
class _Typical:
    """The runs not read as interfered (`SampleBook.raw`, `time`, `tags`, `order`), and those read
    so (`interfered`)."""

    raw: dict[int, list[float]]
    time: dict[int, list[int]]
    tags: dict[int, list[str | None]]
    order: list[tuple[int, int]]
    interfered: dict[int, list[float]]
