"""Change points in a nightly throughput series: on which night did tok/s move to a new level?

Method (docs/nightly.md explains it for users):

1. Work on log(tok/s), so a step is a relative change and lognormal run-to-run noise is additive.
   Scale by a robust noise estimate: the MAD of first differences / sqrt(2) (a step moves one
   difference only, so it barely moves the estimate).
2. Isolated bad nights (a busy machine, a hiccup) are left out: a Hampel identifier (Pearson
   2002) flags a night more than 5 noise-sigmas from the running median of its
   `2*(min_segment-1)+1` neighbours. A new level lasting `min_segment` nights is the majority of
   its windows, so it is never flagged. Flagged nights are dropped, not replaced: replacing them by
   the local median copies a neighbour and made the test below anti-conservative.
3. Binary segmentation with a significance test as the stopping rule, the scheme of E-Divisive
   (Matteson & James 2014, as used by MongoDB's CI and Apache Otava): the best single split of a
   window is found with `ruptures` (Binseg, least-squares cost = the maximum-likelihood location of
   a mean shift), then tested by a permutation test of the *max-type* CUSUM statistic (the
   statistic is maximised over every admissible split of each permutation, so the p-value pays
   for having picked the best split; Antoch & Huskova 2001). Significant splits are kept and both
   sides are searched again; a window stops at the first non-significant split.
   Inside each window the values are winsorised at 3 noise-sigmas around the window's median
   (Huber-style), bounding what any single night can contribute. That is an element-wise map with
   permutation-invariant parameters, so the permutation test stays exact.
4. A split is reported when it is significant (p <= alpha), goes in the requested direction and
   the medians of its two adjacent segments differ by at least `min_magnitude`.

Simulated (30 nights, 2% lognormal noise, defaults): false alarms on a flat series 0.6% ('slower'),
a 5% step is reported in 57% of series after 3 nights at the new level, 86% after 5, 95% after 8
(docs/nightly.md has the table).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import ruptures

from regressbisect.config import CHANGE_ALPHA, CHANGE_MIN_MAGNITUDE, DIRECTION, DIRECTIONS, Direction

# Winsorising at 3 robust sigmas (Huber) touches about 1 in 370 nights of Gaussian noise.
_CLIP_SIGMAS = 3.0
# Hampel identifier threshold (Pearson 2002): an isolated night this far from its neighbours'
# median is left out as a bad night. 5 rather than the usual 3: dropping flagged points makes the
# rest locally smoother, and at 3 sigma that doubled the false-alarm rate of the permutation test
# in simulation (at 5: 1.2% two-sided at alpha=1%); a 20% bad night at 2% noise is 11 sigma.
_OUTLIER_SIGMAS = 5.0
# MAD -> sigma for Gaussian noise.
_MAD_TO_SIGMA = 1.4826
# Permutations are drawn in batches; the test stops early after this many exceedances.
_PERMUTATION_BATCH = 200
_STOP_EXCEEDANCES = 10


@dataclass(frozen=True)
class ChangePoint:
    """One detected step of the series."""

    index: int
    """Position in the series of the first point at the new level."""
    before: float
    """Median of the segment that ends just before `index` (same unit as the series)."""
    after: float
    """Median of the segment that starts at `index`."""
    change: float
    """after / before - 1: -0.05 is a 5% slowdown of a throughput series."""
    p_value: float
    """Permutation p-value of the max-type CUSUM test in the window where the step was found."""


@dataclass(frozen=True)
class ChangePointSettings:
    """How sure and how large a step must be before it is reported."""

    min_magnitude: float = CHANGE_MIN_MAGNITUDE
    """Smallest relative change of the segment medians that is reported (0.02 = 2%)."""
    alpha: float = CHANGE_ALPHA
    """Significance level of the permutation test on each split (family-wise for a flat series)."""
    min_segment: int = 3
    """Points needed on each side of a step. A step is detected after this many nights at the new
    level at the earliest, i.e. reported at most `min_segment - 1` nights after it happened (if the
    evidence is strong enough by then); a shorter excursion is treated as outliers."""
    permutations: int = 1999
    """Permutations of the significance test; the smallest reachable p-value is 1/(permutations+1)."""
    seed: int = 0
    """Seed of the permutation test, so the same series always gives the same answer."""

    def __post_init__(self) -> None:
        if not (0 <= self.min_magnitude < 1):
            raise ValueError(f"min_magnitude must be in [0, 1), got {self.min_magnitude}")
        if not (0 < self.alpha < 1):
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.min_segment < 2:
            raise ValueError(f"min_segment must be >= 2, got {self.min_segment}")
        if self.permutations < 1 / self.alpha:
            raise ValueError(f"permutations={self.permutations} cannot reach p <= alpha={self.alpha}")


def detect(values: Sequence[float], settings: ChangePointSettings = ChangePointSettings(),
           *, direction: Direction = DIRECTION) -> list[ChangePoint]:
    """Steps of a throughput series (oldest first), sorted by index.

    `direction`: 'slower' reports drops of the series, 'faster' rises, 'both' either.
    Fewer than `2 * min_segment` points give no change point (not enough evidence yet).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    raw = np.asarray(values, dtype=float)
    if raw.ndim != 1:
        raise ValueError("values must be a flat sequence")
    if raw.size and (not np.all(np.isfinite(raw)) or np.any(raw <= 0)):
        raise ValueError("values must be finite positive throughputs")
    m = settings.min_segment
    if raw.size < 2 * m:
        return []

    logs = np.log(raw)
    sigma = _robust_noise_sigma(logs)
    # Positions of the nights that take part: isolated outlier nights are left out entirely
    # (replacing them by a local median copies a neighbour and made the test anti-conservative).
    kept = np.flatnonzero(~_isolated_outliers(logs, half_window=m - 1, sigma=sigma))
    if kept.size < 2 * m:
        return []
    z = logs[kept] / sigma
    rng = np.random.default_rng(settings.seed)

    found_kept: dict[int, float] = {}  # split position among kept nights -> p-value
    _segment(z, 0, z.size, settings, rng, found_kept)
    found = {int(kept[j]): p for j, p in found_kept.items()}
    bounds = sorted(found)
    edges = [0, *bounds, raw.size]
    raw_kept = np.full(raw.shape, np.nan)
    raw_kept[kept] = raw[kept]

    points: list[ChangePoint] = []
    for i, index in enumerate(bounds):
        before = float(np.nanmedian(raw_kept[edges[i]:index]))
        after = float(np.nanmedian(raw_kept[index:edges[i + 2]]))
        change = after / before - 1
        wanted = {Direction.SLOWER: change < 0, Direction.FASTER: change > 0, Direction.BOTH: True}[direction]
        if wanted and abs(change) >= settings.min_magnitude and found[index] <= settings.alpha:
            points.append(ChangePoint(index=index, before=before, after=after,
                                      change=change, p_value=found[index]))
    return points


def _robust_noise_sigma(logs: np.ndarray) -> float:
    """Noise sigma from the MAD of first differences (robust to steps and single outliers)."""
    diffs = np.diff(logs)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    sigma = _MAD_TO_SIGMA * mad / math.sqrt(2)
    # A perfectly flat series (synthetic, or a cached metric) has no noise: use a tiny floor so
    # a real step still stands out and nothing divides by zero.
    return max(sigma, 1e-9)


def _isolated_outliers(logs: np.ndarray, half_window: int, sigma: float) -> np.ndarray:
    """Hampel identifier: nights more than 5 sigma from the running median of their
    `2*half_window+1` neighbours. A new level lasting `half_window+1` nights is the majority of
    its windows, so it is never flagged; a single bad night is."""
    n = logs.size
    flags = np.zeros(n, dtype=bool)
    for i in range(n):
        window = logs[max(0, i - half_window): min(n, i + half_window + 1)]
        flags[i] = abs(logs[i] - float(np.median(window))) > _OUTLIER_SIGMAS * sigma
    return flags


def _segment(z: np.ndarray, lo: int, hi: int, settings: ChangePointSettings,
             rng: np.random.Generator, found: dict[int, float]) -> None:
    """Binary segmentation of z[lo:hi]; significant splits go into `found`."""
    m = settings.min_segment
    window = z[lo:hi]
    if window.size < 2 * m or np.ptp(window) == 0:
        return
    center = float(np.median(window))
    window = np.clip(window, center - _CLIP_SIGMAS, center + _CLIP_SIGMAS)
    # ruptures' Binseg with one breakpoint = the least-squares (CUSUM) best split of the window.
    split = ruptures.Binseg(model="l2", min_size=m, jump=1).fit(window).predict(n_bkps=1)[0]
    p_value = _max_cusum_permutation_p(window, split, m, settings.permutations, rng)
    if p_value > settings.alpha:
        return
    found[lo + split] = p_value
    _segment(z, lo, lo + split, settings, rng, found)
    _segment(z, lo + split, hi, settings, rng, found)


def _max_cusum_permutation_p(window: np.ndarray, split: int, min_segment: int,
                             permutations: int, rng: np.random.Generator) -> float:
    """P-value of a mean shift at `split`, corrected for choosing the best split.

    Statistic at split k: |mean(left) - mean(right)| * sqrt(k (n-k) / n) (standardised CUSUM).
    Null distribution: its maximum over all admissible k of randomly permuted windows
    (exchangeable under "no change"), so p is honest although `split` was the best one found.
    """
    n = window.size
    ks = np.arange(min_segment, n - min_segment + 1)

    def cusum(series: np.ndarray) -> np.ndarray:
        prefix = np.cumsum(series, axis=-1)[..., ks - 1]
        total = series.sum(axis=-1, keepdims=True)
        left_mean = prefix / ks
        right_mean = (total - prefix) / (n - ks)
        return np.abs(left_mean - right_mean) * np.sqrt(ks * (n - ks) / n)

    observed = float(cusum(window)[split - min_segment]) * (1 - 1e-12)  # ties count as exceeding
    # Sequential Monte Carlo p-value (Besag & Clifford 1991): stop as soon as _STOP_EXCEEDANCES
    # permutations beat the observed split - the p-value is then clearly large - so a window
    # without a change costs one batch instead of all the permutations.
    exceed = drawn = 0
    while drawn < permutations:
        batch = min(_PERMUTATION_BATCH, permutations - drawn)
        shuffled = rng.permuted(np.broadcast_to(window, (batch, n)), axis=1)
        exceed += int(np.count_nonzero(cusum(shuffled).max(axis=-1) >= observed))
        drawn += batch
        if exceed >= _STOP_EXCEEDANCES:
            return exceed / drawn
    # +1 in both counts: the observed order is one of the permutations (Phipson & Smyth 2010).
    return (exceed + 1) / (permutations + 1)
