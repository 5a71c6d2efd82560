"""Localisation: the posterior over where one step lies in a bracket, from every sample in it.

Pure (numpy/scipy only). log tok/s = level + step * [index >= first_bad] + noise, a Bayesian
linear model where the level has a flat prior, the step a Gaussian prior (half-Gaussian in the
hunted direction), and the noise sigma a 1/sigma prior integrated numerically; averaged with the
same model plus a linear drift in time (docs/search.md, section 2; docs/experiments/drift_model.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection, Sequence

import numpy as np
from scipy.special import log_ndtr, logsumexp

from regressbisect.search.book import SampleBook

__all__ = ["Posterior", "step_posterior"]


@dataclass(frozen=True)
class Posterior:
    gaps: list[tuple[int, int]]
    probs: np.ndarray          # mass of each gap
    step_hat: np.ndarray       # least-squares step of each gap (log scale)
    p_null: float = 0.0        # mass of 'no step in this interval' (sides only)


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    top = np.max(x, axis=1)
    return top + np.log(np.sum(np.exp(x - top[:, None]), axis=1))


def _coef_log_bf(xx: np.ndarray | float, xr: np.ndarray | float, s2: np.ndarray, tau2: float) -> np.ndarray:
    """Log Bayes factor of a regression coefficient c ~ N(0, tau^2) against c = 0, for the
    (projected) regressor x and residual r with x'x = xx, x'r = xr, noise variance s2:
    -1/2 log(1 + tau^2 x'x / s2) + (x'r)^2 / (2 s2 (x'x + s2/tau^2))."""
    return -0.5 * np.log1p(tau2 * xx / s2) + xr ** 2 / (2 * s2 * (xx + s2 / tau2))


def _sign_log_factor(sign: int, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """What truncating a N(0, .) prior to `sign` adds to a log Bayes factor: log 2 P(sign * c > 0)
    under the coefficient's posterior N(mean, sd^2)."""
    return math.log(2) + log_ndtr(sign * mean / sd)


def _drift_log_bf(t: np.ndarray, r: np.ndarray, ut: np.ndarray, uu: np.ndarray, ur: np.ndarray,
                  s2: np.ndarray, tau2: float, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """Log Bayes factors, against the level alone, of the model with a step and a linear drift
    (coefficients ~ N(0, tau^2) each, independent), per gap and sigma; and of the drift alone.

    t: centred time of each sample, r: centred log tok/s, ut: per gap the sum of t right of it
    (u_s't), uu and ur as in step_posterior. With X = [u_s, t] and Lambda = tau^2 I, the coefficients
    integrate in closed form: -1/2 log det(I + Lambda X'X / s^2) + b'M^-1 b / (2 s^2), with
    b = X'r and M = X'X + s^2 Lambda^-1. A truncated step prior adds _sign_log_factor of the
    step's posterior, as in the step-only model.
    """
    tt, tr = float(t @ t), float(t @ r)
    a11 = uu[:, None] + s2 / tau2
    a12 = ut[:, None]
    a22 = tt + s2 / tau2
    det = a11 * a22 - a12 ** 2
    b1 = ur[:, None]
    quad = (a22 * b1 ** 2 - 2 * a12 * b1 * tr + a11 * tr ** 2) / det
    log_bf = -0.5 * (np.log(det) + 2 * math.log(tau2) - 2 * np.log(s2)) + quad / (2 * s2)
    if sign:
        log_bf = log_bf + _sign_log_factor(sign, (a22 * b1 - a12 * tr) / det, np.sqrt(s2 * a22 / det))
    return log_bf, _coef_log_bf(tt, tr, s2[0], tau2)


def step_posterior(book: SampleBook, points: Sequence[int], vetoed: Collection[tuple[int, int]], *, tau: float,
                   sign: int, null_prior: float = 0.0, drift_prior: float = 0.0) -> Posterior:
    """Posterior over the step position (last_good, first_bad) between the measurable `points`
    (ascending), the `vetoed` gaps left out.

    Bayesian regression y = g + step * s_b + e (flat prior on the level g), step ~ N(0, tau^2)
    (truncated to `sign`), e ~ N(0, sigma^2), p(sigma) ~ 1/sigma on a grid. After projecting the
    level out (r = residual of y, u = residual of s_b) the step integrates in closed form:
    log BF = -1/2 log(1 + tau^2 u'u / s^2) + (u'r)^2 / (2 s^2 (u'u + s^2/tau^2)).
    With drift_prior > 0 this is averaged with the same model plus a linear drift in time
    (`_drift_log_bf`), each weighted by its marginal likelihood (Bayesian model averaging,
    Hoeting et al. 1999). With null_prior > 0 the hypothesis 'no step' (step = 0) competes with
    prior null_prior.
    """
    gaps = [(points[j - 1], points[j]) for j in range(1, len(points)) if (points[j - 1], points[j]) not in vetoed]
    if not gaps:
        return Posterior([], np.zeros(0), np.zeros(0))
    idx, y, tm = [], [], []
    for i in points:
        for v, t in zip(book.raw.get(i, []), book.time.get(i, [])):
            idx.append(i)
            y.append(math.log(v))
            tm.append(t)
    weights = np.array([b - a for a, b in gaps], dtype=float)
    log_prior = np.log(weights / weights.sum())
    n_obs = len(y)
    if n_obs < 2:
        return Posterior(gaps, np.exp(log_prior) * (1 - null_prior), np.full(len(gaps), np.nan), null_prior)
    idx_a, y_a = np.array(idx), np.array(y)
    r = y_a - y_a.mean()
    rr = max(float(r @ r), 1e-12)
    # suffix sums over candidate index: samples with index >= first_bad of each gap
    order = np.argsort(idx_a, kind="stable")
    firsts = np.array([b for _, b in gaps])
    pos = np.searchsorted(idx_a[order], firsts, side="left")
    has = pos < n_obs

    def suffix(values: np.ndarray) -> np.ndarray:
        out = np.zeros(len(gaps))
        out[has] = np.cumsum(values[order][::-1])[::-1][pos[has]]
        return out

    right = suffix(np.ones(n_obs))                 # samples right of each gap
    uu = np.maximum(right - right ** 2 / n_obs, 0.0)
    ur = suffix(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        step_hat = np.where(uu > 1e-12, ur / uu, np.nan)
    # sigma grid (uniform in log sigma = the 1/sigma prior) around the residual sd of y on its
    # mean, wide enough that the integrand is negligible at both ends
    center = 0.5 * math.log(rr / max(n_obs - 1, 1))
    half = 1.5 + 3.0 / math.sqrt(n_obs)
    grid = np.exp(np.linspace(center - half, center + 1.0, 40))
    s2 = grid[None, :] ** 2
    tau2 = tau ** 2
    base = -(n_obs - 1) * np.log(grid) - rr / (2 * s2[0])          # log L0(sigma)
    log_bf = _coef_log_bf(uu[:, None], ur[:, None], s2, tau2)
    if sign:
        denom = uu[:, None] + s2 / tau2
        log_bf = log_bf + _sign_log_factor(sign, ur[:, None] / denom, np.sqrt(s2 / denom))
    log_m1 = _logsumexp_rows(base[None, :] + log_bf)
    log_m0 = float(logsumexp(base))
    pd = drift_prior
    if pd > 0 and len(set(tm)) >= 3:
        # time scaled to the hunt's span, so the drift's prior scale (tau) is the drift over it
        tm_a = np.array(tm, dtype=float)
        t_c = (tm_a - tm_a.mean()) / (tm_a.max() - tm_a.min())
        drift_bf, drift_null_bf = _drift_log_bf(t_c, r, suffix(t_c), uu, ur, s2, tau2, sign)
        log_m1 = np.logaddexp(math.log1p(-pd) + log_m1, math.log(pd) + _logsumexp_rows(base[None, :] + drift_bf))
        log_m0 = float(np.logaddexp(math.log1p(-pd) + log_m0, math.log(pd) + logsumexp(base + drift_null_bf)))
    log_post = log_prior + log_m1
    if null_prior > 0:
        log_null = math.log(null_prior) + log_m0
        log_post = log_post + math.log1p(-null_prior)
        norm = float(np.logaddexp(logsumexp(log_post), log_null))
        return Posterior(gaps, np.exp(log_post - norm), step_hat, math.exp(log_null - norm))
    probs = np.exp(log_post - logsumexp(log_post))
    return Posterior(gaps, probs, step_hat)
