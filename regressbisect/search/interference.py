"""Which runs were interfered with: the runs far off their candidate's level, read apart.

Pure (numpy/scipy only). Run times on a shared machine are not lognormal: most runs sit within a few
percent of their level, and a minority sit far off it (a busy neighbour, a frequency change, a
straggler rank, a pulsing pipeline), 20-40% slow or, more rarely, fast. Every test of the search
reads log tok/s through a Gaussian model (pooled t, e-values on means), and a few such runs
inflate its sigma: each test then pays about (sigma / effect)^2 pairs, hundreds at a 12% CV whose
typical run is within 2% of its level.

So the sample book reads a run as *interfered* when it lies more than REJECT robust sigmas from
its candidate's level, and every test reads the other runs (docs/search.md, section 1, "Runs far
off their level"). This is the Hampel identifier (Hampel 1974; Davies and Gather 1993, "The
identification of multiple outliers", JASA 88), with three choices that fit a hunt:

* the scale is the hunt's, pooled over candidates (the spread is the machine's): the first
  quartile of the absolute differences of two runs of one candidate, Rousseeuw and Croux's
  Q_n estimator (JASA 88, 1993) pooled over groups, at its upper confidence bound. It stays
  finite while fewer than half of those differences involve an interfered run (a quarter of the
  runs interfered makes 44% of them so), where a standard deviation or a MAD about the mean is
  pulled along; a candidate whose own Q_n is far larger keeps its own (`OWN_SCALE`);
* the level is the one of largest likelihood under the hunt's kinds of interference (offset and
  share, by direction: `interference_kinds`, `_level`), so that a candidate half of whose runs
  were slowed keeps its level; where two levels come close, none of its runs is read until more
  come;
* a candidate whose runs sit together, off every level the hunt knows and at one of them moved
  by a kind, is read as interfered until its runs are too many for that (`_off_every_level`).

On lognormal noise alone a run is read as interfered with probability about 7e-6 (REJECT = 4.5),
so the tests see what they saw before. A run read as interfered is kept in the store and shown in
the report; it informs no test. The guarantee of each test is its own, on the runs it reads: a
Gaussian sample trimmed at 4.5 sigma is Gaussian to within 7e-6 of its mass.
"""
from __future__ import annotations

import math
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np
from scipy.stats import binom

from regressbisect.search.stats import chi2_ppf

__all__ = ["REJECT", "MIN_DIFFERENCES", "robust_scale", "own_scale", "interference_kinds", "interfered_runs",
           "hunt_scale", "machine_runs", "more_than_the_machines",
           "provisional_kinds", "runs_to_tell_from_a_kind", "level_in_doubt", "Reader", "HuntReading"]

REJECT = 4.5
"""Robust sigmas from the level beyond which a run is read as interfered (a lognormal run lies
that far with probability 7e-6; the robust scales read high where a quarter of the runs are off,
so interference at 30% is caught at 2-3% noise). At 4, one lognormal run of 1,662 at 5% noise
was set apart, and that hunt's path cost 1,662 executions instead of 320."""

OWN_SCALE = 2.5
"""A candidate whose own Q_n is this many times the hunt's scatters on its own scale (a
host-bound or flaky commit), and is read on it."""

MIN_DIFFERENCES = 6
"""Within-candidate differences the scale needs before any run is read as interfered."""

_QN_QUARTILE = 0.4506
"""First quartile of |X - Y| for X, Y independent N(0, 1): sqrt(2) * z_0.625 (Q_n's constant)."""


def robust_scale(groups: Sequence[Sequence[float]]) -> float:
    """Sigma of one run's log tok/s from the first quartile of |x_i - x_j| within each group
    (every pair of runs of one candidate), over all groups, at its 90% upper confidence bound
    (chi-square on the groups' degrees of freedom, as `SampleBook.pooled_sigma` bounds a small
    pool): a scale read low by chance early in a hunt set typical runs apart (BAD's run 7% off at
    2% noise, the scale read at 1.4%, sent one hunt down a side it did not need). nan with fewer
    than MIN_DIFFERENCES differences."""
    diffs: list[np.ndarray] = []
    for g in groups:
        x = np.asarray(g, dtype=float)
        if x.size >= 2:
            d = np.abs(x[:, None] - x[None, :])
            diffs.append(d[np.triu_indices(x.size, 1)])
    if not diffs:
        return math.nan
    every = np.concatenate(diffs)
    if every.size < MIN_DIFFERENCES:
        return math.nan
    df = sum(len(g) - 1 for g in groups if len(g) >= 2)
    return float(np.quantile(every, 0.25)) / _QN_QUARTILE * math.sqrt(df / chi2_ppf(0.10, df))


_QN_SMALL = {2: 0.399, 3: 0.994, 4: 0.512, 5: 0.844, 6: 0.611, 7: 0.857, 8: 0.669, 9: 0.872}
"""Small-sample factors of Q_n (Croux and Rousseeuw 1992, "Time-efficient algorithms for two
highly robust estimators of scale"), as R's robustbase applies them."""


def own_scale(x: Sequence[float]) -> float:
    """Q_n of one candidate's runs: 2.2219 c_n times the k-th smallest |x_i - x_j|, k = C(h, 2),
    h = n // 2 + 1 (Rousseeuw and Croux 1993): a sigma that half the runs far off cannot move,
    from three runs on (of three, the closest two set it); nan below."""
    v = np.sort(np.asarray(x, dtype=float))
    n = v.size
    if n < 3:
        return math.nan
    d = np.sort(np.abs(v[:, None] - v[None, :])[np.triu_indices(n, 1)])
    h = n // 2 + 1
    small = _QN_SMALL.get(n, n / (n + 1.4) if n % 2 else n / (n + 3.8))
    return 2.2219 * small * float(d[h * (h - 1) // 2 - 1])


UNKNOWN_SHARE = (0.25, 0.02)
"""Weights of the broad components below and above the level before any kind is known: a
quarter of the runs may be slow (interference slows a run: a busy neighbour, a straggler), a
few fast."""

AMBIGUOUS = (math.log(20.0), math.log(1000.0))
"""Log likelihood by which a candidate's level must beat a level of another cluster of its runs,
with the hunt's kinds of interference known and before: closer, which runs are off cannot be
told, and none of the candidate's runs is read until more come. Before any kind is known, a
level below a cluster of runs needs three of its runs for each run above it."""


def interference_kinds(logs: Mapping[int, Sequence[float]], sigma: float, *, provisional: bool = False,
                       prior: tuple[float, float] = UNKNOWN_SHARE) -> list[tuple[float, float]]:
    """The hunt's kinds of interference, (log offset from the level, share of runs), one per
    direction seen at least twice: the runs off the level of each candidate whose level is clear
    before any kind is known (`_level` with the default components), summarised by their median
    offset and their share of the runs of such candidates. A machine property, shared by every
    candidate. provisional: a direction seen once gives a kind too, at UNKNOWN_SHARE's share (the
    prior before any kind is known)."""
    offsets: list[float] = []
    counted = 0
    for values in logs.values():
        x = np.asarray(values, dtype=float)
        if x.size < 2:
            continue
        level = _level(x, sigma, (), prior) if np.ptp(x) > REJECT * sigma else float(np.median(x))
        if level is None:
            continue
        d = x - level
        far = np.abs(d) > REJECT * sigma
        if 2 * np.sum(far) > x.size:
            # the shape is read where the level holds most of the runs: interference is the
            # minority of a machine's runs, and a commit read at its minority's level (9 runs in
            # a fast mode taken for the level, 8 at it for a 'slow kind') made the next commit
            # read the same way
            continue
        offsets.extend(d[far])
        counted += x.size
    kinds = []
    for side, prior in zip((-1, 1), UNKNOWN_SHARE):
        mine = [o for o in offsets if o * side > 0]
        if len(mine) >= 2:
            kinds.append((float(np.median(mine)), min(max(len(mine) / counted, 0.02), 0.45)))
        elif mine and provisional:
            kinds.append((float(mine[0]), prior))
    return kinds


def unknown_shares(logs: Mapping[int, Sequence[float]], sigma: float) -> tuple[float, float]:
    """The weights of runs far below and far above a level before any kind is known:
    UNKNOWN_SHARE (a quarter slow, few fast), turned round where the hunt's runs say its second
    mode is the faster one: a third of the runs 1.4x fast were read as GOOD's level (a quarter of
    slow runs likelier than a few fast ones), its other runs as slowed. Each candidate whose runs
    lie in two clusters (split at their widest gap, more than REJECT sigma) counts its runs in
    each, and the prior turns round where the lower clusters read as levels (the upper ones at
    the prior's quarter) are AMBIGUOUS[1] (1,000 to 1) likelier than the prior's reading: seven
    more runs below than above. One commit's runs do not turn it (BAD's six of nine runs at 0.7x,
    one in a hundred where a quarter of the runs are: read at the slow mode, an A/A range named
    BAD)."""
    lower = upper = 0
    for values in logs.values():
        x = np.sort(np.asarray(values, dtype=float))
        if x.size < 2 or not sigma > 0:
            continue
        gaps = np.diff(x)
        cut = int(np.argmax(gaps))
        if gaps[cut] > REJECT * sigma:
            lower += cut + 1
            upper += x.size - cut - 1
    slow, fast = UNKNOWN_SHARE
    if (lower - upper) * math.log((1.0 - slow - fast) / slow) >= AMBIGUOUS[1]:
        return fast, slow
    return UNKNOWN_SHARE


BROAD_SHARE = 0.01
"""Weight of the broad component (any other run far off, uniform over a unit of log tok/s) once
the hunt's kinds of interference are known."""

def _mixture_scores(x: np.ndarray, sigma: float, kinds: Sequence[tuple[float, float]],
                    prior: tuple[float, float] = UNKNOWN_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """The levels a candidate's runs propose (its runs, and its runs less each kind's offset) and
    the log likelihood of its runs at each under the hunt's mixture (`_level`)."""
    below, above = (BROAD_SHARE, BROAD_SHARE) if kinds else prior
    typical = max(1.0 - sum(w for _, w in kinds) - max(below, above), 0.05)
    levels = np.concatenate([x] + [x - off for off, _ in kinds])
    norm = sigma * math.sqrt(2 * math.pi)

    # every candidate level at once: rows are levels, columns runs
    d = x[None, :] - levels[:, None]
    dens = typical * np.exp(-0.5 * (d / sigma) ** 2)
    for off, w in kinds:
        dens = dens + w * np.exp(-0.5 * ((d - off) / sigma) ** 2)
    broad = np.where(d < 0, below, above)
    return levels, np.sum(np.log(dens / norm + broad), axis=1)


def _interference_fits_better(x: np.ndarray, sigma: float, mine: float, kinds: Sequence[tuple[float, float]]) -> bool:
    """Whether a candidate's wide spread is the hunt's interference rather than a scatter of its
    own: its runs are likelier under the hunt's mixture at the hunt's scale (a level, the kinds'
    offsets, the broad component) than under one lognormal at its own scale (a likelihood ratio
    of the two fitted models). A commit most of whose runs sit within the hunt's scale, with the
    rest at the kinds and scattered below, is interfered; a host-bound commit's runs, spread
    evenly over its own scale, are not. Only once the hunt knows a kind."""
    if not kinds:
        return False
    _, scores = _mixture_scores(x, sigma, kinds)
    centre = float(np.median(x))
    own = float(np.sum(-0.5 * ((x - centre) / mine) ** 2)) - x.size * math.log(mine * math.sqrt(2 * math.pi))
    return float(np.max(scores)) > own


def _level(x: np.ndarray, sigma: float, kinds: Sequence[tuple[float, float]],
           prior: tuple[float, float] = UNKNOWN_SHARE) -> float | None:
    """The level of one candidate's runs under the hunt's interference: the value among its runs
    (and its runs less each kind's offset) of the largest mixture likelihood, typical runs
    N(level, sigma^2), interfered ones N(level + offset, sigma^2) at the kind's share, and broad
    components for runs off by other amounts (`UNKNOWN_SHARE` before any kind is known); None
    when a level of another cluster comes within AMBIGUOUS of it."""
    levels, scores = _mixture_scores(x, sigma, kinds, prior)
    best = int(np.argmax(scores))
    rivals = np.abs(levels - levels[best]) > REJECT * sigma
    if np.any(rivals) and scores[best] - float(np.max(scores[rivals])) < AMBIGUOUS[0 if kinds else 1]:
        return None
    return float(np.median(x[np.abs(x - levels[best]) <= REJECT * sigma]))


REWEIGHT = 2.5
"""Robust sigmas (of the first scale) within which a run counts towards the typical runs' scale
(`typical_scale`): the reweighting cut-off of Rousseeuw and Leroy's reweighted estimators. Beyond
2.5 sigma a lognormal run lies with probability 1.2%, which the scale loses little to; a second
mode 4.5 of those sigmas away (the first scale reads high where a third of the runs are in it) is
within REJECT of them and would count."""


def interfered_runs(logs: Mapping[int, Sequence[float]], scale: float | None = None, *,
                    subsets: bool = False) -> dict[int, list[bool]]:
    """Per candidate, for each of its runs (log tok/s, in order), whether it is read as interfered.

    `scale`: the robust sigma (default: `robust_scale` of these groups, reweighted once on the
    runs it reads as typical where their spread is smaller, `typical_scale`; a candidate's own,
    from three runs on, where that is OWN_SCALE times larger). A run is interfered when it lies more than REJECT * scale
    from its candidate's level (`_level`: the hunt's kinds of
    interference, `interference_kinds`, tell a level from the runs off it, so that a candidate
    whose runs were half interfered keeps its level). Where the level cannot be told (two runs far
    apart that no kind explains, or half a candidate's runs off before any kind is known), none of
    its runs is read: all wait for more. Runs of a commit that sit together are read against the
    other commits' levels, a step's (`_off_every_level`).

    A candidate whose own Q_n is OWN_SCALE times the hunt's keeps the hunt's scale where its runs
    are the hunt's interference: in a commit search where the hunt's mixture fits them better than
    one lognormal at their own scale (`_interference_fits_better`: a quarter of the runs at half
    their level and a few anywhere between, as a real bimodal bench gives, put a commit's Q_n at 9
    times the hunt's, and read as a scatter of its own it was named a culprit).

    subsets: the candidates are a hunk hunt's subsets (`HuntReading`), read two ways apart:
    a subset keeps the hunt's scale where the kinds explain each of its runs (`_explained`: its
    arms are a few runs each, where half of them interfered is common); and only a subset's single
    run is read against the other subsets' levels (subsets are sums of any of the hunt's culprits,
    and their scale, over a few runs each, reads low by chance early: a "kind" read from it set a
    whole subset's runs apart)."""
    return _read_runs(logs, scale if scale is not None else hunt_scale(logs, subsets=subsets), subsets)


def hunt_scale(logs: Mapping[int, Sequence[float]], *, subsets: bool = False) -> float:
    """The robust sigma `interfered_runs` reads at: `robust_scale` of these groups, reweighted once
    on the runs it reads as typical where their spread is smaller (`typical_scale`)."""
    first = robust_scale(list(logs.values()))
    typical = typical_scale(logs, _read_runs(logs, first * REWEIGHT / REJECT, subsets))
    return min(first, typical) if typical > 0 else first


MACHINE_SHARE_LEVEL = 0.01
"""Where a candidate holds more runs at a kind of GOOD's than that kind's share allows (binomial,
one-sided, at this level), its runs there are its own change of shape, not the machine's
(`machine_runs`)."""


def _at_kind(d: np.ndarray, off: float, sigma: float) -> np.ndarray:
    """Which offsets `d` (log, from a level, each beyond REJECT sigma of it) lie at kind `off`."""
    return (d * off > 0) & (np.abs(d - off) <= REJECT * sigma)


def _beyond_its_share(near: int, runs: int, share: float) -> bool:
    """`near` runs of `runs` at a kind of this share are more than it holds (binomial, one-sided,
    at MACHINE_SHARE_LEVEL)."""
    return near > 0 and float(binom.sf(near - 1, runs, share)) < MACHINE_SHARE_LEVEL


def more_than_the_machines(offsets: Sequence[float], runs: int, sigma: float, kinds: Sequence[tuple[float, float]]) -> bool:
    """Whether `offsets` (log, from a candidate's level), among its `runs`, hold more runs at one
    of the hunt's kinds than the kind's share allows: then they are the candidate's own shape,
    not the machine's. Runs at no kind are left to whoever asks (a spread of the machine's, 0.6x
    to 0.97x, matches no kind's one offset)."""
    d = np.asarray(offsets, dtype=float)
    return any(_beyond_its_share(int(_at_kind(d, off, sigma).sum()), runs, share) for off, share in kinds)


MACHINE_KIND_MOST = UNKNOWN_SHARE[0]
"""The largest share of a machine's kind whose runs stay apart after a change of shape
(`machine_runs`): at a quarter of the runs a commit's few runs still show its level; at half,
a commit whose runs fell mostly in the mode reads its level there, 10 of 12 at 0.7x beside its
neighbour's typical runs at 1.0x, and a phantom -27% step was named."""


def machine_runs(logs: Mapping[int, Sequence[float]], good: int, bad: int) -> dict[int, list[bool]]:
    """Per candidate, whether each run sits at one of the machine's kinds of interference, once a
    change of shape is read (`SampleBook.read_every_run`): the kinds read on GOOD's runs alone
    (interference is the machine's, the same at every commit; what GOOD shows is it), of a share up
    to MACHINE_KIND_MOST, and not held by BAD beyond that share (`MACHINE_SHARE_LEVEL`: a stall at
    the machine's own depth is the commit's, and the kind is then read nowhere); at every
    candidate, the runs further than REJECT sigma from its level under those kinds (`_level`) and
    within REJECT sigma of a kind's offset. The rule is one for every candidate, so two commits of
    one shape lose the same share of their runs. The rest, a commit's own stall among them, is
    read as it is: the tests then read one shape shifted where the machine's tail would widen
    every one (a stall of 40% of the runs at 0.7x beside the machine's 10% at 0.6x at both ends:
    every run's spread 0.24, without the machine's runs 0.18)."""
    if good not in logs or bad not in logs or len(logs[good]) < 2:
        return {}
    sigma = hunt_scale(logs)
    kinds = [(off, share) for off, share in (interference_kinds({good: logs[good]}, sigma) if sigma > 0 else [])
             if share <= MACHINE_KIND_MOST]
    bad_at = _runs_at_kinds(np.asarray(logs[bad], dtype=float), sigma, kinds)
    kinds = [(off, share) for k, (off, share) in enumerate(kinds)
             if bad_at is None or not _beyond_its_share(int(bad_at[1][k].sum()), len(logs[bad]), share)]
    if not kinds:
        return {}
    out: dict[int, list[bool]] = {}
    for i, values in logs.items():
        read = _runs_at_kinds(np.asarray(values, dtype=float), sigma, kinds)
        if read is not None and 2 * int(read[0].sum()) <= len(values):
            out[i] = [bool(f) for f in read[0]]
    return out


def _runs_at_kinds(x: np.ndarray, sigma: float, kinds: Sequence[tuple[float, float]]) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """(runs at any kind, runs at each kind) of one candidate's runs, off its level under `kinds`
    beyond REJECT sigma; None where its level is not clear or there are no kinds."""
    level = _level(x, sigma, kinds) if kinds and x.size >= 2 else None
    if level is None:
        return None
    d = x - level
    each = [(np.abs(d) > REJECT * sigma) & _at_kind(d, off, sigma) for off, _ in kinds]
    return np.logical_or.reduce(each), each


def typical_scale(logs: Mapping[int, Sequence[float]], flags: Mapping[int, Sequence[bool]]) -> float:
    """Sigma of one run's log tok/s from the runs read as typical alone: each candidate's spread
    about its own mean, pooled, at its 90% upper confidence bound (as `robust_scale`); nan below
    MIN_DIFFERENCES degrees of freedom. One reweighting step of the robust scale (Rousseeuw and
    Leroy 1987, the reweighted estimators): Q_n stays finite while a quarter of the runs are far
    off, but reads high there (a third of the runs in a second mode 1.4x away put it at 1.8 times
    the typical spread, and a commit whose few runs all fell in that mode then lay within 4.5 of
    those sigmas of the other mode's level: its level was read there, and the next commit's made a
    phantom step)."""
    groups = [[v for v, far in zip(values, flags.get(i, ())) if not far] for i, values in logs.items()]
    groups = [g for g in groups if len(g) >= 2]
    df = sum(len(g) - 1 for g in groups)
    if df < MIN_DIFFERENCES:
        return math.nan
    ss = sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2)) for g in groups)
    return math.sqrt(ss / df) * math.sqrt(df / chi2_ppf(0.10, df))


def _read_runs(logs: Mapping[int, Sequence[float]], sigma: float, subsets: bool) -> dict[int, list[bool]]:
    """`interfered_runs` at the scale `sigma`."""
    prior = unknown_shares(logs, sigma)
    kinds = interference_kinds(logs, sigma, prior=prior) if sigma > 0 else []
    out: dict[int, list[bool]] = {}
    levels: dict[int, float] = {}     # the levels of candidates of three runs or more, where clear
    together: list[int] = []          # candidates whose runs sit together (no run off their level)
    for i, values in logs.items():
        x = np.asarray(values, dtype=float)
        # a candidate noisier than the rest (host-bound, flaky) scatters on its own scale: its
        # spread is its own, for the noisier-commit rules to see (search/book.py), not interference
        mine = own_scale(x) if x.size >= 3 else math.nan
        own = mine if mine > OWN_SCALE * sigma and not (
            _explained(x, sigma, kinds) if subsets else _interference_fits_better(x, sigma, mine, kinds)) else sigma
        if not (own > 0) or x.size < 2 or np.ptp(x) <= REJECT * own:
            out[i] = [False] * x.size
            if own > 0:
                together.append(i)
                if x.size >= 3:
                    levels[i] = float(np.median(x))
            continue
        level = _level(x, own, kinds, prior)
        out[i] = [True] * x.size if level is None else [bool(v) for v in np.abs(x - level) > REJECT * own]
        if level is not None and x.size >= 3:
            levels[i] = level
    for i in together:
        others = [level for j, level in levels.items() if j != i]
        if (not subsets or len(logs[i]) == 1) and _off_every_level(np.asarray(logs[i], dtype=float), others, sigma, kinds):
            out[i] = [True] * len(logs[i])
    return out


def _explained(x: np.ndarray, sigma: float, kinds: Sequence[tuple[float, float]]) -> bool:
    """Whether a candidate's spread is the hunt's interference, not a scatter of its own: each of its
    runs within REJECT sigma of its level or of its level moved by a kind's offset. Half its runs
    interfered puts its own Q_n at the offset (the estimator breaks down at half), where a
    noisier commit's runs scatter across it."""
    if not kinds:
        return False
    level = _level(x, sigma, kinds)
    if level is None:
        return False
    near = np.abs(x - level) <= REJECT * sigma
    for off, _ in kinds:
        near |= np.abs(x - level - off) <= REJECT * sigma
    return bool(np.all(near))


def _off_every_level(x: np.ndarray, levels: Sequence[float], sigma: float,
                     kinds: Sequence[tuple[float, float]]) -> bool:
    """A candidate whose runs sit together, read against the levels of the other candidates (a
    step moves a commit to another commit's level): interfered, all of them, when they lie more
    than REJECT sigma from each of those levels and within it of one of them moved by a kind of
    interference, while they are too few to tell a level of their own there from runs that were
    all interfered: the kind's share w makes n such runs ((1 - w) / w)^n times likelier a level
    of their own, and that must reach AMBIGUOUS's before-kinds margin (1,000: seven runs at a
    quarter, ten at a third). A bisection's single run at 0.7x of GOOD otherwise reads as a level
    of its own (a step before it), and so do four runs in a row at 0.7x at the naming gate's fresh
    pairs (one in 256 at a quarter). Only where the hunt knows a kind; until the runs are that
    many, more runs of the candidate come."""
    if not (sigma > 0 and levels and kinds):
        return False
    known = np.asarray(levels)
    typical = 1.0 - sum(w for _, w in kinds) - BROAD_SHARE

    def best_at(offset: float, share: float) -> float:
        # log likelihood of the runs all at one known level moved by `offset`, at that share
        z = (x[:, None] - offset - known[None, :]) / sigma
        return float(np.max(-0.5 * np.sum(z * z, axis=0))) + x.size * math.log(share)

    at_a_level = best_at(0.0, typical)
    for off, share in kinds:
        if np.any(np.all(np.abs(x[:, None] - off - known[None, :]) <= REJECT * sigma, axis=0)):
            # likelier a known level moved by the kind than a known level itself: runs 5.7 sigmas
            # above GOOD's level and at BAD's moved by a fast kind lie within REJECT of the former
            if best_at(off, share) > at_a_level and x.size * math.log((1 - share) / share) < AMBIGUOUS[1]:
                return True
    return False


def provisional_kinds(logs: Mapping[int, Sequence[float]]) -> tuple[float, list[tuple[float, float]]]:
    """The hunt's robust scale and its kinds of interference, a direction seen once among them
    (`interference_kinds(..., provisional=True)`): what `runs_to_tell_from_a_kind` reads."""
    sigma = robust_scale(list(logs.values()))
    return sigma, (interference_kinds(logs, sigma, provisional=True) if sigma > 0 else [])


def runs_to_tell_from_a_kind(step: float, sigma: float, kinds: Sequence[tuple[float, float]], alpha: float) -> int:
    """The runs at a step's far level that tell it from runs that were all interfered, at level
    alpha: where the step (log) lies within REJECT sigma of a kind of interference the hunt knows
    (`provisional_kinds`), in its direction, n runs of a kind's share w are all interfered with
    probability w^n, so n >= log(alpha) / log(w); elsewhere none. A commit whose first runs all
    came slowed by the hunt's interference reads at a level of its own there (seven of seven at
    0.48-0.70x, with a kind at 0.49x: the naming gate's fresh pairs named a -48% step of an A/A
    commit). Before a direction has a kind (two runs off), a single run read off in it stands for
    one at UNKNOWN_SHARE's share: BAD's runs five of six at 0.7x, one of GOOD's read off at 0.68x,
    and the gate named BAD a -30% culprit of an A/A range on three fresh pairs."""
    for off, share in kinds:
        if off * step > 0 and abs(step - off) <= REJECT * sigma:
            return math.ceil(math.log(alpha) / math.log(share))
    return 0


def level_in_doubt(typical: int, beyond: int, side: int) -> bool:
    """Whether a candidate with `typical` runs at its level and `beyond` runs read off on `side` of
    it (+1 above, -1 below) may as well sit at those runs' level, its typical runs then interfered
    the other way: the two readings' weights under the shares before any kind is known
    (UNKNOWN_SHARE: a quarter of the runs slow, 2% fast, the rest typical) come within
    AMBIGUOUS[0] (20 to 1). The hunt's kinds cannot judge it, their shares being read on these same
    runs: GOOD's 12 of 17 runs at 0.7x read as its level made its 5 others a 'fast kind' at 1.43x
    with a share of its own, and a real 10% slowdown a clear speed-up; 5 runs fast at 2% against
    12 slow at a quarter is 1 to 170 for that reading."""
    slow, fast = UNKNOWN_SHARE
    usual = math.log(1.0 - slow - fast)
    share = {-1: math.log(slow), 1: math.log(fast)}
    read = typical * usual + beyond * share[side]
    other = beyond * usual + typical * share[-side]
    return other - read > -AMBIGUOUS[0]


Reader = Callable[[Mapping[int, Sequence[float]]], "dict[int, list[bool]]"]
"""What a sample book asks which runs are interfered: log tok/s by candidate in, a flag per run
out (`interfered_runs` reads the book's own runs; `HuntReading.reader` the hunt's)."""


class HuntReading:
    """The interference of a hunt whose tests each keep a few runs of their own (the hunk hunt's
    subset tests, leave-one-out rounds, alone tests): every run of each subset, whichever test
    took it, read together, so that a test of two or three runs an arm reads them against the
    subset's level over the hunt and the machine's scale and kinds of interference (a machine
    property, `interference_kinds`), which its own runs seldom show. A subset's level and the
    scale are read on its last WINDOW runs (a hunt of hours drifts); a run that leaves the window
    keeps its last reading."""

    WINDOW = 64

    def __init__(self) -> None:
        self._runs: dict[Hashable, list[float]] = {}
        self._off: dict[Hashable, set[float]] = {}
        self._read_at = -1
        self._count = 0
        self._kinds: tuple[int, tuple[float, list[tuple[float, float]]]] | None = None

    def add(self, key: Hashable, log_value: float) -> None:
        """One run (log tok/s) of `key`."""
        self._runs.setdefault(key, []).append(log_value)
        self._count += 1

    def seen(self) -> bool:
        """Whether any run of the hunt was read as interfered."""
        self._read()
        return any(self._off.values())

    def interfered(self, key: Hashable, log_values: Sequence[float]) -> list[bool]:
        """For each of these runs of `key` (log tok/s, among those added), whether it is read as
        interfered. A run's reading depends on its value alone, given its key's level."""
        self._read()
        off = self._off.get(key, ())
        return [v in off for v in log_values]

    def runs_to_tell(self, step: float, alpha: float) -> int:
        """Runs a test's far arm needs before a step of this size (log) may be named at level
        alpha, where it has the size of a kind of the hunt's interference
        (`runs_to_tell_from_a_kind` on the kinds of every subset's recent runs: the machine's,
        which a test's few runs an arm do not show). Half the runs at 0.7x: a harmless hunk's five
        runs all slowed beside BASE's five at the level read -31% and the hunk was named."""
        if self._kinds is None or self._kinds[0] != self._count:
            recent = {k: runs[-self.WINDOW:] for k, runs in enumerate(self._runs.values())}
            self._kinds = (self._count, provisional_kinds(recent))
        sigma, kinds = self._kinds[1]
        return runs_to_tell_from_a_kind(step, sigma, kinds, alpha)

    def reader(self, keys: Sequence[Hashable]) -> Reader:
        """A sample book's `Reader` whose candidate i is keys[i]."""
        return lambda logs: {i: self.interfered(keys[i], values) for i, values in logs.items()}

    def _read(self) -> None:
        if self._read_at == self._count:
            return
        recent = {key: runs[-self.WINDOW:] for key, runs in self._runs.items()}
        keys = list(recent)
        flags = interfered_runs({k: recent[key] for k, key in enumerate(keys)}, subsets=True)
        for k, key in enumerate(keys):
            off = self._off.setdefault(key, set())
            for value, far in zip(recent[key], flags[k]):
                (off.add if far else off.discard)(value)
        self._read_at = self._count
