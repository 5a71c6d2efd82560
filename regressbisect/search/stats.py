"""Statistics on tok/s samples: summaries, three-way comparisons, and the small tests the search uses.

Pure (numpy/scipy only). Throughput noise is multiplicative (a slow node, a busy PCIe link scale
the whole run), so every test works on log(tok/s): a ratio of tok/s is a difference of logs, and
lognormal noise becomes Gaussian there. Methods, with the reason for each:

* ``summarize``: median with a distribution-free 95% interval from binomial order statistics
  (the interval [x_(k), x_(n-k+1)] covers the median with probability >= 95%; Hahn & Meeker,
  *Statistical Intervals*, 1991, sec. 5.2). No bootstrap: with 3-10 samples a bootstrap interval
  is too narrow and not reproducible without a seed.
* ``compare``: Student t on log ratios (Welch's unequal-variance t when unpaired; the one-sample t
  on the log differences when paired). Rank tests (Mann-Whitney / Wilcoxon, with the
  Hodges-Lehmann estimate) are distribution-free but cannot reach p < 0.05 with fewer than 4+4
  unpaired or 6 paired samples, which is the regime a hunt lives in; the t test on logs is exact
  for lognormal noise and its interval is what we report.
* three-way verdict: 'different' when the change is significant at ``alpha`` and at least
  ``min_effect`` in size; 'same' by equivalence (TOST, Schuirmann 1987: the (1 - 2 alpha)
  interval lies inside +-min_effect); otherwise 'unsure' (take more samples).
* ``sprt``: Wald's sequential probability ratio test (Wald 1945) on paired log differences with
  a known (pooled) sigma: the search uses it to confirm one step with the fewest pairs.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy import stats as _st
from scipy.special import fdtri as _fdtri, gammaincinv as _gammaincinv, log_ndtr as _log_ndtr, stdtr as _stdtr, stdtrit as _stdtrit
from regressbisect.enums import WordEnum

__all__ = [
    "Summary", "summarize", "Comparison", "compare", "pooled_log_sigma", "sprt", "SprtDecision",
    "mixture_log_lr", "mixture_half_width", "log_threshold", "t_confidence_sequence", "t_cs_multiplier",
    "NoisePool", "pooled_t_log_bf", "EFFECT_PRIORS", "t_cdf", "t_sf", "t_ppf", "chi2_ppf", "f_ppf", "sign_log_e",
]


# -- Student t, chi-square, F and normal tails: scipy.stats' own kernels (t._cdf is special.stdtr,
# t._ppf special.stdtrit, chi2._ppf 2 special.gammaincinv(df / 2, q), f._ppf special.fdtri,
# norm.logcdf special.log_ndtr), without the per-call argument dispatch that made them a fifth of
# a simulated hunt's time; for finite arguments and df >= 1, the same numbers.

def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with df degrees of freedom."""
    return float(_stdtr(df, x))


def t_sf(x: float, df: float) -> float:
    """P(T > x)."""
    return float(_stdtr(df, -x))


def t_ppf(q: float, df: float) -> float:
    """The q quantile."""
    return float(_stdtrit(df, q))


def chi2_ppf(q: float, df: float) -> float:
    """The q quantile of chi-square with df degrees of freedom."""
    return float(2 * _gammaincinv(df / 2, q))


def f_ppf(q: float, dfn: float, dfd: float) -> float:
    """The q quantile of F with (dfn, dfd) degrees of freedom."""
    return float(_fdtri(dfn, dfd, q))


@dataclass(frozen=True)
class Summary:
    """Location and spread of the samples of one candidate."""

    n: int
    """Number of samples."""
    median: float
    """Median tok/s."""
    ci95: tuple[float, float]
    """Distribution-free interval of the median from binomial order statistics: >= 95% coverage
    when n >= 6; below that the widest one possible, (min, max), which covers with 1 - 2**(1-n)."""
    cv: float
    """Coefficient of variation (sample standard deviation / mean); 0.0 with one sample."""


def _order_statistic_rank(n: int, level: float = 0.95) -> int:
    """Largest k (1-based) with P(x_(k) <= median <= x_(n-k+1)) >= level, or 1 if none."""
    best = 1
    for k in range(1, n // 2 + 1):
        # coverage = P(k <= Binomial(n, 1/2) <= n - k)
        coverage = _st.binom.cdf(n - k, n, 0.5) - _st.binom.cdf(k - 1, n, 0.5)
        if coverage >= level:
            best = k
        else:
            break
    return best


def summarize(values: Sequence[float]) -> Summary:
    """Median, its order-statistic 95% interval and the CV of positive tok/s values."""
    x = np.sort(np.asarray(list(values), dtype=float))
    if x.size == 0:
        raise ValueError("summarize needs at least one value")
    n = int(x.size)
    k = _order_statistic_rank(n)
    cv = float(np.std(x, ddof=1) / np.mean(x)) if n > 1 else 0.0
    return Summary(n=n, median=float(np.median(x)), ci95=(float(x[k - 1]), float(x[n - k])), cv=cv)


@dataclass(frozen=True)
class Comparison:
    """How b differs from a, with an interval and a three-way verdict."""

    change: float
    """b relative to a, median(b)/median(a) - 1, estimated as exp(mean log difference) - 1 (for
    lognormal noise the ratio of medians is the ratio of geometric means); -0.05 is 5% slower."""
    ci95: tuple[float, float]
    """(1 - alpha) interval of `change` (95% at the default alpha); (-1, inf) when not estimable."""
    p_value: float
    """Two-sided p value of 'no change' (Welch t, or paired t on log differences)."""
    verdict: str
    """'different' (significant and |change| >= min_effect), 'same' (TOST equivalence within
    +-min_effect), or 'unsure' (neither: more samples needed)."""


def log_threshold(min_effect: float) -> float:
    """A relative change of min_effect as a distance on the log scale."""
    return math.log1p(abs(min_effect))


def log_step(before: Sequence[float], after: Sequence[float]) -> float:
    """The difference of two arms' mean log tok/s (0 where either has no run)."""
    if len(before) == 0 or len(after) == 0:
        return 0.0
    return float(np.mean(np.log(after)) - np.mean(np.log(before)))


def paired_log_diffs(before: Sequence[float], after: Sequence[float]) -> np.ndarray:
    """log(after / before) of two arms' runs paired in order, as many as the shorter arm has."""
    pairs = min(len(before), len(after))
    return np.log(np.asarray(after[:pairs], dtype=float)) - np.log(np.asarray(before[:pairs], dtype=float))


def _logs(values: Iterable[float], name: str) -> np.ndarray:
    x = np.asarray(list(values), dtype=float)
    if np.any(~np.isfinite(x)) or np.any(x <= 0):
        raise ValueError(f"{name}: tok/s values must be finite and positive")
    return np.log(x)


def compare(a: Sequence[float], b: Sequence[float], *, min_effect: float, alpha: float = 0.05,
            paired: bool = False) -> Comparison:
    """Compare tok/s samples b against a (see module docstring for the tests and the verdict).

    paired=True pairs the i-th value of a with the i-th of b (samples taken interleaved, so a
    slow drift of the machine cancels in each difference); extra unpaired values are ignored.
    """
    if not 0 < alpha < 0.5:
        raise ValueError("alpha must be in (0, 0.5)")
    la, lb = _logs(a, "a"), _logs(b, "b")
    if paired:
        m = min(la.size, lb.size)
        d = lb[:m] - la[:m]
        mean = float(np.mean(d)) if m else 0.0
        df = float(m - 1)
        se = float(np.std(d, ddof=1) / math.sqrt(m)) if m > 1 else math.inf
    else:
        mean = float(np.mean(lb) - np.mean(la)) if la.size and lb.size else 0.0
        if la.size < 2 or lb.size < 2:
            se, df = math.inf, 0.0
        else:
            va, vb = np.var(la, ddof=1) / la.size, np.var(lb, ddof=1) / lb.size
            se = float(math.sqrt(va + vb))
            # Welch-Satterthwaite degrees of freedom
            df = float((va + vb) ** 2 / (va ** 2 / (la.size - 1) + vb ** 2 / (lb.size - 1))) if se > 0 else float(la.size + lb.size - 2)
    return _verdict(mean, se, df, min_effect=min_effect, alpha=alpha)


def _verdict(mean: float, se: float, df: float, *, min_effect: float, alpha: float) -> Comparison:
    """Three-way verdict from a log-scale estimate, its standard error and degrees of freedom."""
    change = math.expm1(mean)
    if not (df >= 1) or not math.isfinite(se):
        return Comparison(change=change, ci95=(-1.0, math.inf), p_value=1.0, verdict="unsure")
    margin = log_threshold(min_effect)
    if se == 0.0:  # identical samples: the interval is the point
        p = 1.0 if mean == 0.0 else 0.0
        lo = hi = lo90 = hi90 = mean
    else:
        t = mean / se
        p = 2 * t_sf(abs(t), df)
        half = t_ppf(1 - alpha / 2, df) * se
        half_tost = t_ppf(1 - alpha, df) * se
        lo, hi = mean - half, mean + half
        lo90, hi90 = mean - half_tost, mean + half_tost
    if p < alpha and abs(mean) >= margin:
        verdict = "different"
    elif -margin < lo90 and hi90 < margin:
        verdict = "same"
    else:
        verdict = "unsure"
    return Comparison(change=change, ci95=(math.expm1(lo), math.expm1(hi)), p_value=p, verdict=verdict)


def pooled_log_sigma(groups: Iterable[Sequence[float]]) -> tuple[float, int]:
    """Pooled within-group standard deviation of log(values) and its degrees of freedom.

    'Pure error' of a one-way layout: it does not depend on any model of how the groups differ;
    a drift of the machine inflates it, which only makes the tests that use it more cautious.
    """
    pool = NoisePool.of(groups)
    return pool.sigma, pool.df


class SprtDecision(WordEnum):
    """What `sprt` decides after the pairs so far."""

    H1 = "H1"
    """Accept a step of about delta."""
    H0 = "H0"
    """Accept no step."""
    CONTINUE = "continue"
    """Neither yet: take another pair."""


def sprt(diffs: Sequence[float], *, sigma: float, delta: float, alpha: float, beta: float) -> SprtDecision:
    """Wald's SPRT of H0 'mean 0' against H1 'mean delta' for Gaussian differences of known sd.

    `diffs` are paired log differences (each with sd `sigma`). Returns H1 (accept a step of
    about `delta`), H0 (no step) or CONTINUE. Error rates are about alpha (false H1) and
    beta (false H0) whatever the stopping time (Wald 1945).
    """
    if not diffs:
        return SprtDecision.CONTINUE
    if not (sigma > 0) or delta == 0:
        raise ValueError("sprt needs sigma > 0 and delta != 0")
    d = np.asarray(diffs, dtype=float)
    # log LR of N(delta, s^2) vs N(0, s^2), summed over pairs
    llr = float(np.sum(delta * d - delta ** 2 / 2) / sigma ** 2)
    if llr >= math.log((1 - beta) / alpha):
        return SprtDecision.H1
    if llr <= math.log(beta / (1 - alpha)):
        return SprtDecision.H0
    return SprtDecision.CONTINUE


def mixture_half_width(s2: float, n: float, scale: float, alpha: float = 0.05) -> float:
    """Half width of Robbins' normal-mixture (1 - alpha) confidence sequence for the mean of n
    values of variance s2, two-sided, its prior scale `scale` (Robbins 1970; Howard, Ramdas,
    McAuliffe and Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences",
    Ann. Statist. 49). It covers at any stopping time, however the stop was chosen, as long as the
    scale was fixed before the values: a culprit's size read off the pairs that named it (the
    naming gate's, `NamingGate.own_size`; a hunk's alone test, search/hunks/subsets.py). n may be
    an effective count (two arms of nb and na runs: 2 / (1/nb + 1/na) with s2 twice a run's)."""
    r = s2 / (scale * scale)
    return math.sqrt(s2 * (n + r) / (n * n) * (2 * math.log(1 / alpha) + math.log((n + r) / r)))


def mixture_log_lr(estimate: float, se: float, scale: float) -> float:
    """Log likelihood ratio of 'a difference ~ N(0, scale^2)' against 'no difference' for an
    estimate with standard error `se` (the normal-mixture SPRT, mSPRT).

    Robbins (1970): under no difference the ratio is a martingale, so the chance that it ever
    reaches 1/alpha, however often it is looked at as samples come in, is at most alpha
    (Johari, Pekelis, Walsh 2017, "Always valid inference"). A t test repeated at every new pair
    has no such bound: its false starts grow with the number of looks.
    """
    if not (se > 0) or not (scale > 0):
        raise ValueError("mixture_log_lr needs se > 0 and scale > 0")
    v, t2 = se ** 2, scale ** 2
    return 0.5 * math.log(v / (v + t2)) + t2 * estimate ** 2 / (2 * v * (v + t2))


# -- anytime-valid interval for a mean of unknown variance ---------------------------------------

CS_PRIOR_SCALE = 100.0
"""g of the t mixture below: prior variance of the effect size mean/sigma. Large, because the
intervals it serves (the shim's overhead at GPU noise) sit many sigmas away from their bound."""


def _t_mixture_log_bf(t: float, n: int, g: float) -> float:
    """Log Bayes factor of 'mean/sigma ~ N(0, g)' against 'mean 0' for a one-sample t statistic
    of n values (Rouder et al. 2009, eq. 1 with its prior scale fixed; sigma under the right
    Haar prior 1/sigma)."""
    nu = n - 1
    u = 1.0 + n * g
    return (-0.5 * math.log(u) + 0.5 * (nu + 1) * (math.log1p(t * t / nu) - math.log1p(t * t / (u * nu))))


def t_confidence_sequence(values: Sequence[float], *, alpha: float = 0.05,
                          g: float = CS_PRIOR_SCALE) -> tuple[float, float]:
    """Running-intersection (1 - alpha) confidence sequence for the mean of Gaussian values of
    unknown variance, evaluated after each value: the interval at the last one.

    The t-mixture Bayes factor with the right Haar prior on sigma is a nonnegative martingale
    under any fixed mean in the filtration of scale-invariant statistics (Lai 1976; Perez-Ortiz
    et al. 2022, "E-statistics, group invariance and anytime-valid testing"), so by Ville's
    inequality the mean leaves the set {m : BF(m) < 1/alpha} at some time with probability at
    most alpha: the interval may be looked at after every value (a t test may not). Needs two
    values; before that, (-inf, inf). With unknown variance no such interval is finite in
    fewer than three values unless the values are many sigmas from a bound: n=2 needs t > ~40.
    """
    x = np.asarray(list(values), dtype=float)
    lo, hi = -math.inf, math.inf
    for n in range(2, x.size + 1):
        head = x[:n]
        mean = float(head.mean())
        multiplier = t_cs_multiplier(n, alpha=alpha, g=g)
        if math.isfinite(multiplier):
            half = multiplier * float(head.std(ddof=1) / math.sqrt(n))
            lo, hi = max(lo, mean - half), min(hi, mean + half)
    return lo, hi


@functools.lru_cache(maxsize=4096)
def t_cs_multiplier(n: int, *, alpha: float = 0.05, g: float = CS_PRIOR_SCALE) -> float:
    """c such that mean +- c * se is the interval of t_confidence_sequence after n values
    (inf when no finite interval exists at n). The Bayes factor grows with |t|: bisect for
    BF = 1/alpha (200 steps; cached, as every interval of a hunt asks for n = 2, 3, ...)."""
    threshold = math.log(1.0 / alpha)
    if n < 2 or _t_mixture_log_bf(1e6, n, g) < threshold:
        return math.inf
    a, b = 0.0, 1e6
    for _ in range(200):
        mid = 0.5 * (a + b)
        if _t_mixture_log_bf(mid, n, g) < threshold:
            a = mid
        else:
            b = mid
    return b


# -- anytime-valid test of a difference, with the noise pooled over the whole hunt ---------------

EFFECT_PRIORS = (1.0, 10.0, 100.0, 1000.0)
"""Prior variances g of the effect size (difference / sigma) that `pooled_t_log_bf` mixes, each
with weight 1/4: a 3% step at 3% noise is an effect of ~1, a 10% step at 0.5% noise one of ~20.
A mixture of e-processes with fixed weights is one (it costs at most log 4 against the best g)."""


@dataclass(frozen=True)
class NoisePool:
    """Pure-error sum of squares of log tok/s with its degrees of freedom: the noise of a hunt.

    The spread of a probe is a property of the machine and the probe, shared by every commit (their
    levels differ, their spread mostly does not): each group of samples with one mean (a commit,
    or a commit's samples before and after a test began) adds its squared deviations from its own
    mean and its size less one. A remembered scale from earlier hunts joins the same way
    (`with_prior`), as pseudo-observations."""

    ss: float = 0.0
    df: int = 0

    @staticmethod
    def of(groups: Iterable[Sequence[float]]) -> "NoisePool":
        ss, df = 0.0, 0
        for g in groups:
            x = np.log(np.asarray(list(g), dtype=float))
            if x.size > 1:
                ss += float(np.sum((x - x.mean()) ** 2))
                df += x.size - 1
        return NoisePool(ss, df)

    @staticmethod
    def of_ratios(groups: Iterable[Sequence[float]]) -> "NoisePool":
        """Per sample, from groups of log ratios of side-by-side pairs: each group's squared
        deviations from its own mean, halved (a ratio has twice a sample's variance), and its size
        less one."""
        ss, df = 0.0, 0
        for g in groups:
            d = np.asarray(list(g), dtype=float)
            if d.size > 1:
                ss += float(np.sum((d - d.mean()) ** 2)) / 2
                df += d.size - 1
        return NoisePool(ss, df)

    def plus(self, other: "NoisePool") -> "NoisePool":
        return NoisePool(self.ss + other.ss, self.df + other.df)

    def capped(self, df: int) -> "NoisePool":
        """The same spread counted as at most `df` degrees of freedom."""
        return self if self.df <= df else NoisePool(self.ss * df / self.df, df)

    @property
    def sigma(self) -> float:
        return math.sqrt(self.ss / self.df) if self.df else math.nan


def _log_integrate_log_sigma(log_f: np.ndarray, step: float) -> float:
    """log of the integral over log sigma (trapezoid on a uniform grid) of exp(log_f)."""
    top = float(np.max(log_f))
    w = np.exp(log_f - top)
    return top + math.log(max(float(np.sum(w) - 0.5 * (w[0] + w[-1])) * step, 1e-300))


def pooled_t_log_bf(estimate: float, c: float, noise: NoisePool, *, sign: int = 0,
                    priors: Sequence[float] = EFFECT_PRIORS) -> float:
    """Log e-value against 'no difference' of an `estimate` whose variance is c * sigma^2, with
    sigma unknown and learnt from `noise` (a sum of squares independent of the estimate).

    The Bayes factor of 'difference / sigma ~ N(0, g)' (halved to `sign` when sign != 0: a
    half-normal, still a proper prior) against 'difference 0', with the right Haar prior 1/sigma
    on the noise and a flat one on each group's level, mixed over `priors`. Such a Bayes factor is
    the likelihood ratio of the scale-invariant statistics, a nonnegative martingale under 'no
    difference' whatever sigma is (Perez-Ortiz, Lardy, de Heide, Grunwald 2024, "E-statistics,
    group invariance and anytime-valid testing", Ann. Statist. 52), so by Ville's inequality it
    ever reaches 1/alpha with probability at most alpha, looked at after every sample, and
    samples of other commits that only tell the noise sharpen it without a floor of pairs. With
    sign = 0 it is Rouder et al. (2009)'s t Bayes factor with the extra sum of squares; with a
    sign, the integral over sigma is numeric.
    """
    if not (c > 0) or noise.df < 1 or not noise.ss > 0:
        return 0.0   # no noise estimate yet: no evidence
    nu = noise.df
    z2 = estimate * estimate / c
    out = []
    if sign == 0:
        for g in priors:
            u = 1.0 + g / c
            out.append(-0.5 * math.log(u) + 0.5 * (nu + 1) * (math.log(noise.ss + z2) - math.log(noise.ss + z2 / u)))
        return float(np.logaddexp.reduce(out) - math.log(len(out)))
    # integrate over log sigma: H1 with the half-normal effect, H0 with none (the grid, the noise
    # part and H0 do not depend on the prior g, so they are computed once)
    centre = 0.5 * math.log((noise.ss + z2) / (nu + 1))
    grid = np.linspace(centre - 6.0, centre + 4.0, 600)
    step = float(grid[1] - grid[0])
    sig2 = np.exp(2 * grid)
    sigma = np.sqrt(sig2)
    base = -nu * grid - noise.ss / (2 * sig2)                  # the noise part, both hypotheses
    log_h0 = _log_integrate_log_sigma(base - grid - z2 / (2 * sig2), step)   # estimate ~ N(0, c sigma^2)
    for g in priors:
        u = 1.0 + g / c
        h1 = base - grid - 0.5 * math.log(u) - z2 / (2 * sig2 * u)
        post_mean = estimate * g / (sigma * (g + c))
        post_sd = math.sqrt(g * c / (g + c))
        h1 = h1 + math.log(2.0) + _log_ndtr(sign * post_mean / post_sd)
        out.append(_log_integrate_log_sigma(h1, step) - log_h0)
    return float(np.logaddexp.reduce(out) - math.log(len(out)))


SIGMA_FROM_SIZES = 0.3186
"""The lower quartile of |d| over the sigma of d, for normal differences: read from the smallest
quarter, the sigma of a pair's difference holds while up to three quarters of the pairs have a
run far off."""


def far_pairs_sign_log_e(diffs: Sequence[float], sign: int, min_effect: float) -> float:
    """`sign_log_e` on the pairs far apart: those whose runs differ by more than min_effect and
    three pair sigmas, that sigma read from the quarter of smallest |d| (SIGMA_FROM_SIZES). The
    cut is read from the sizes alone, so the signs stay fair coins under 'one distribution'
    whatever the shape; a stall at one end sends its far pairs one way while the pairs of two
    typical runs, which only dilute the signs, bet nothing."""
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        return 0.0
    spread = float(np.quantile(np.abs(d), 0.25)) / SIGMA_FROM_SIZES
    return sign_log_e(d, sign, beyond=max(log_threshold(min_effect), 3 * spread))


SIGN_BETS = (0.5, 0.75, 0.9)
"""The bets of the sign e-process (`sign_log_e`), averaged: 0.9 gains most where every sign is
right (1.9 a pair), 0.5 loses least where a quarter are wrong."""


STALL_BETS = ((1.0, 0.5), (0.75, 0.25), (0.5, 0.25))
"""(fraction of the largest bet, weight) of the bettors `stall_log_e` averages: the one all in
makes a quiet arm's 15 pairs, the others outlive a pair whose BAD run alone stalled (a plug-in of
the Kelly bet, aGRAPA, took a third more pairs at 40-60 where the machine sends 10-25% of the runs
off)."""


def stall_log_e(scores: Sequence[float], share: float) -> float:
    """Log e-value against 'b's runs stall beyond a's in at least `share` of the pairs', on each
    pair's score D = (b's run stalled) - (a's run stalled), in {-1, 0, 1}. Where both ends are one
    distribution E[D] = 0 whatever the shape; a slow mode in a share w of b's runs makes it about w
    (about w (1 - 2p) beside a tail of the machine's at both ends in a share p of the runs, deeper
    than the mode). Against E[D] >= share the wealth prod(1 + lambda (share - D)) is a nonnegative
    supermartingale for any bet lambda in [0, 1 / (1 - share)] (Waudby-Smith and Ramdas 2023,
    "Estimating means of bounded random variables by betting"), as is an average of such bettors
    (`STALL_BETS`); so it ever reaches 1/alpha with probability at most alpha (Ville). Pairs with
    no run stalled multiply the bettor all in by 1 / (1 - share): 15 at 0.3 reach 1/100 (its weight
    of 1/2 costs two pairs over the 13 of (1 - share)^n alone)."""
    d = np.asarray(scores, dtype=float)
    if d.size == 0 or share <= 0:
        return 0.0
    most = 1 / (1 - share)
    wealth = sum(weight * float(np.prod(1 + fraction * most * (share - d))) for fraction, weight in STALL_BETS)
    return math.log(wealth) if wealth > 0 else -math.inf


def sign_log_e(diffs: Sequence[float], sign: int, *, beyond: float = 0.0) -> float:
    """Log e-value of the signs of paired differences against 'a and b are one distribution':
    under it each pair's two runs are exchangeable, so each sign is a fair coin whatever the runs'
    shape, and the product of (1 + lambda x_i) (x_i = +1 for a difference in direction `sign`,
    -1 otherwise; a tie 0) is a nonnegative martingale for each bet lambda, as is their average
    (Shafer and Vovk's betting martingale; Ramdas et al. 2023, "Game-theoretic statistics and
    safe anytime-valid inference"). A pair gains at most a factor 1.9; with the bets averaged,
    14 pairs all one way reach 1/2000.

    beyond: only pairs whose difference is larger than this (log) bet, the others are ties. The
    signs are fair coins independent of the sizes |d|, so a cut read from the sizes alone (never
    from the signs) keeps the martingale: where a share of one end's runs stall, the pairs with
    one run stalled carry the evidence and the pairs of two typical runs only dilute it."""
    d = np.asarray(diffs, dtype=float)
    x = np.where(np.abs(d) > beyond, np.sign(d), 0.0) * (1 if sign >= 0 else -1)
    if x.size == 0:
        return 0.0
    growth = [float(np.prod(1 + lam * x)) for lam in SIGN_BETS]
    mean = float(np.mean(growth))
    return math.log(mean) if mean > 0 else -math.inf
