"""Change points in a nightly throughput series: on which night did tok/s move to a new level?

Method (docs/nightly.md explains it for users):

1. Work on log(tok/s), so a step is a relative change and lognormal run-to-run noise is additive.
   Scale by a robust noise estimate: the MAD of first differences / sqrt(2) (a step moves one
   difference only, so it barely moves the estimate).
2. Binary segmentation with a significance test as the stopping rule, the scheme of E-Divisive
   (Matteson & James 2014, as used by MongoDB's CI and Apache Otava): the best single split of a
   window is found with `ruptures` (Binseg, least-squares cost = the maximum-likelihood location of
   a mean shift), then tested by a permutation test of the *max-type* CUSUM statistic (the
   statistic is maximised over every admissible split of each permutation, so the p-value pays
   for having picked the best split; Antoch & Huskova 2001). Significant splits are kept and both
   sides are searched again; a window stops at the first non-significant split.
   Inside each window the values are winsorised at 3 noise-sigmas around the window's median
   (Huber-style), so one bad night (a busy machine) cannot make a split on its own. This is an
   element-wise map with permutation-invariant parameters, so the permutation test stays exact
   (a running-median Hampel filter does not: it copies neighbours and made the test
   anti-conservative, 1.8% false alarms at alpha=1% in simulation).
3. A split is reported when it is significant (p <= alpha), goes in the requested direction and
   the medians of its two adjacent segments differ by at least `min_magnitude`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import ruptures

# Winsorising at 3 robust sigmas (Huber) touches about 1 in 370 nights of Gaussian noise.
_CLIP_SIGMAS = 3.0
# MAD -> sigma for Gaussian noise.
_MAD_TO_SIGMA = 1.4826
_DIRECTIONS = ("slower", "faster", "both")


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

    min_magnitude: float = 0.02
    """Smallest relative change of the segment medians that is reported (0.02 = 2%)."""
    alpha: float = 0.01
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
           *, direction: str = "slower") -> list[ChangePoint]:
    """Steps of a throughput series (oldest first), sorted by index.

    `direction`: 'slower' reports drops of the series, 'faster' rises, 'both' either.
    Fewer than `2 * min_segment` points give no change point (not enough evidence yet).
    """
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction must be one of {_DIRECTIONS}, got {direction!r}")
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
    z = logs / sigma
    rng = np.random.default_rng(settings.seed)

    found: dict[int, float] = {}  # split index -> p-value
    _segment(z, 0, z.size, settings, rng, found)
    bounds = sorted(found)
    edges = [0, *bounds, raw.size]

    points: list[ChangePoint] = []
    for i, index in enumerate(bounds):
        before = float(np.median(raw[edges[i]:index]))
        after = float(np.median(raw[index:edges[i + 2]]))
        change = after / before - 1
        wanted = {"slower": change < 0, "faster": change > 0, "both": True}[direction]
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

    observed = float(cusum(window)[split - min_segment])
    shuffled = rng.permuted(np.broadcast_to(window, (permutations, n)), axis=1)
    null_max = cusum(shuffled).max(axis=-1)
    # +1 in both counts: the observed order is one of the permutations (Phipson & Smyth 2010).
    exceed = int(np.count_nonzero(null_max >= observed * (1 - 1e-12)))
    return (exceed + 1) / (permutations + 1)
