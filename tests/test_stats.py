"""search/stats.py: summaries, three-way comparisons, pooled sigma and the SPRT, on seeded lognormal data."""
from __future__ import annotations

import math

import numpy as np
import pytest

from regressbisect.search.stats import compare, mixture_log_lr, pooled_log_sigma, sprt, summarize


def lognormal(rng: np.random.Generator, level: float, cv: float, n: int) -> list[float]:
    return list(level * np.exp(rng.normal(0.0, math.sqrt(math.log1p(cv * cv)), n)))


def test_summarize_median_interval_and_cv():
    values = [100.0, 101.0, 99.0, 102.0, 98.0, 100.5, 99.5, 100.2, 99.8, 250.0]   # one outlier
    s = summarize(values)
    assert s.n == 10
    assert s.median == pytest.approx(100.1)
    lo, hi = s.ci95
    # order statistics: the interval is made of sample values and ignores the outlier at n=10
    assert lo in values and hi in values
    assert lo <= s.median <= hi < 250.0
    assert s.cv > 0.3                      # the outlier shows in the CV, not in the median


def test_summarize_small_sample_uses_min_max_and_one_sample_has_zero_cv():
    assert summarize([3.0, 1.0, 2.0]).ci95 == (1.0, 3.0)
    one = summarize([5.0])
    assert one.cv == 0.0 and one.ci95 == (5.0, 5.0)
    with pytest.raises(ValueError):
        summarize([])


def test_order_statistic_interval_covers_the_median_at_least_95_percent():
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(400):
        s = summarize(lognormal(rng, 1000.0, 0.05, 12))
        hits += s.ci95[0] <= 1000.0 <= s.ci95[1]
    assert hits / 400 >= 0.93


def test_compare_detects_a_5pct_slowdown_and_estimates_it():
    rng = np.random.default_rng(1)
    a = lognormal(rng, 1000.0, 0.01, 10)
    b = lognormal(rng, 950.0, 0.01, 10)
    c = compare(a, b, min_effect=0.02)
    assert c.verdict == "different"
    assert c.change == pytest.approx(-0.05, abs=0.01)
    assert c.ci95[0] < c.change < c.ci95[1] < 0
    assert c.p_value < 1e-6


def test_compare_calls_identical_distributions_same_with_enough_samples():
    rng = np.random.default_rng(2)
    a = lognormal(rng, 1000.0, 0.01, 30)
    b = lognormal(rng, 1000.0, 0.01, 30)
    c = compare(a, b, min_effect=0.02)
    assert c.verdict == "same"
    assert -0.02 < c.ci95[0] < c.ci95[1] < 0.02


def test_compare_is_unsure_with_too_few_noisy_samples():
    rng = np.random.default_rng(3)
    c = compare(lognormal(rng, 1000.0, 0.05, 3), lognormal(rng, 970.0, 0.05, 3), min_effect=0.02)
    assert c.verdict == "unsure"


def test_significant_but_below_min_effect_is_not_different():
    rng = np.random.default_rng(4)
    a = lognormal(rng, 1000.0, 0.002, 40)
    b = lognormal(rng, 995.0, 0.002, 40)          # 0.5% slower, very precisely measured
    c = compare(a, b, min_effect=0.02)
    assert c.p_value < 0.001
    assert c.verdict == "same"                    # real, but inside the +-2% band that does not count


def test_pairing_cancels_a_drift_that_hides_the_step_unpaired():
    rng = np.random.default_rng(5)
    n = 12
    drift = np.linspace(1.0, 0.85, n)             # the machine slows 15% over the run
    a = list(1000.0 * drift * np.exp(rng.normal(0, 0.005, n)))
    b = list(970.0 * drift * np.exp(rng.normal(0, 0.005, n)))   # 3% slower, measured interleaved
    paired = compare(a, b, min_effect=0.02, paired=True)
    unpaired = compare(a, b, min_effect=0.02, paired=False)
    assert paired.verdict == "different" and paired.change == pytest.approx(-0.03, abs=0.006)
    assert unpaired.verdict == "unsure"


def test_compare_rejects_bad_values_and_handles_identical_samples():
    with pytest.raises(ValueError):
        compare([1.0, -2.0], [1.0, 1.0], min_effect=0.01)
    c = compare([100.0] * 4, [95.0] * 4, min_effect=0.02)
    assert c.change == pytest.approx(-0.05)
    assert c.verdict == "different" and c.ci95 == pytest.approx((-0.05, -0.05))
    one = compare([100.0], [90.0], min_effect=0.02)
    assert one.verdict == "unsure" and one.p_value == 1.0


def test_pooled_log_sigma_recovers_the_noise():
    rng = np.random.default_rng(6)
    groups = [lognormal(rng, level, 0.03, 8) for level in (900.0, 1000.0, 1100.0, 1200.0)]
    sigma, df = pooled_log_sigma(groups + [[5.0]])      # a single value adds no degree of freedom
    assert df == 28
    assert sigma == pytest.approx(0.03, rel=0.3)


def test_sprt_accepts_a_real_step_rejects_none_and_waits_when_unclear():
    rng = np.random.default_rng(8)
    sigma = 0.02 * math.sqrt(2)
    step = list(rng.normal(-0.05, sigma, 12))
    null = list(rng.normal(0.0, sigma, 12))
    assert sprt(step, sigma=sigma, delta=-0.05, alpha=0.05, beta=0.05) == "H1"
    assert sprt(null, sigma=sigma, delta=-0.05, alpha=0.05, beta=0.05) == "H0"
    assert sprt(null[:1], sigma=sigma, delta=-0.01, alpha=0.05, beta=0.05) == "continue"
    assert sprt([], sigma=sigma, delta=-0.05, alpha=0.05, beta=0.05) == "continue"


def _paths_crossing(diff: float, alpha: float, test: str, paths: int = 2000, looks: int = 150) -> float:
    """Share of paths on which a test of two growing samples (one new pair per look, sigma 1)
    ever rejects 'no difference' at level alpha over `looks` looks."""
    rng = np.random.default_rng(11)
    x = rng.normal(diff, math.sqrt(2.0), (paths, looks)).cumsum(axis=1)   # sum of pair differences
    n = np.arange(1, looks + 1)
    est = x / n
    se = math.sqrt(2.0) / np.sqrt(n)
    if test == "mixture":
        crossed = np.array([[mixture_log_lr(e, s, 0.5) >= math.log(1 / alpha) for e, s in zip(row, se)]
                            for row in est[:, 2:]])
    else:   # the same z test repeated at every look
        crossed = np.abs(est[:, 2:] / se[2:]) >= 1.959963984540054
    return float(crossed.any(axis=1).mean())


def test_mixture_test_keeps_its_false_starts_below_alpha_however_often_it_looks():
    # the side check looks again at every new pair: a test repeated per look rejects a flat side
    # far more often than its level says, the mixture SPRT does not (Robbins 1970)
    assert _paths_crossing(0.0, 0.05, "z per look") > 0.2
    assert _paths_crossing(0.0, 0.05, "mixture") <= 0.05


def test_mixture_test_still_finds_a_real_difference():
    assert _paths_crossing(0.5, 0.05, "mixture") >= 0.9
    assert mixture_log_lr(0.0, 0.1, 0.5) < 0 < mixture_log_lr(1.0, 0.1, 0.5)
    with pytest.raises(ValueError):
        mixture_log_lr(0.1, 0.0, 0.5)


def test_pooled_t_e_value_is_rouders_t_bayes_factor_for_one_sample():
    from regressbisect.search.stats import NoisePool, _t_mixture_log_bf, pooled_t_log_bf
    x = np.array([0.3, 0.1, 0.25, 0.4, 0.2])
    n = len(x)
    t = x.mean() / (x.std(ddof=1) / math.sqrt(n))
    noise = NoisePool(float(((x - x.mean()) ** 2).sum()), n - 1)
    assert pooled_t_log_bf(x.mean(), 1 / n, noise, priors=(10.0,)) == pytest.approx(_t_mixture_log_bf(t, n, 10.0))
    # the half-normal prior doubles the evidence of an estimate far on its side, and has little
    # for one on the other side
    one_sided = pooled_t_log_bf(x.mean(), 1 / n, noise, sign=1, priors=(10.0,))
    assert one_sided == pytest.approx(_t_mixture_log_bf(t, n, 10.0) + math.log(2), abs=0.05)
    assert pooled_t_log_bf(-x.mean(), 1 / n, noise, sign=1, priors=(10.0,)) < 0


@pytest.mark.parametrize("sign", [0, -1])
def test_pooled_t_e_value_under_no_difference_rarely_ever_crosses_with_a_look_at_every_pair(sign):
    # 200 sequences of 40 pairs with no difference, the noise also learnt from two other groups
    # sampled between the pairs (as the hunt's other commits are), looked at after every pair:
    # Ville's inequality bounds the share that ever reaches 1/alpha by alpha, whatever sigma is
    # (a t test at every look crosses its 5% far more often)
    from regressbisect.search.stats import NoisePool, pooled_t_log_bf
    rng = np.random.default_rng(7)
    alpha, crossed, t_crossed = 0.05, 0, 0
    for _ in range(200):
        sigma = float(rng.choice([0.005, 0.03, 0.15]))
        a, b, others = [], [], [[], []]
        hit = t_hit = False
        for k in range(40):
            a.append(rng.normal(0, sigma))
            b.append(rng.normal(0, sigma))
            others[k % 2].append(rng.normal(1.0, sigma))
            if k < 1:
                continue
            x, y = np.array(a), np.array(b)
            if not hit:   # (each test is looked at until it first crosses: that is what is counted)
                ss = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
                noise = NoisePool(ss, 2 * len(a) - 2).plus(NoisePool.of([np.exp(o) for o in others if len(o) > 1]))
                est = float(y.mean() - x.mean())
                hit = pooled_t_log_bf(est, 2 / len(a), noise, sign=sign) >= math.log(1 / alpha)
            if k >= 2 and not t_hit:
                t_hit = compare(np.exp(x), np.exp(y), min_effect=1e-6, alpha=alpha).p_value < alpha
        crossed += hit
        t_crossed += t_hit
    assert crossed / 200 <= alpha
    assert t_crossed / 200 > 2 * alpha


def test_the_tails_read_from_scipys_kernels_are_scipy_stats_numbers():
    """stats.t_cdf, t_ppf, chi2_ppf and f_ppf skip scipy.stats' per-call dispatch (a fifth of a
    simulated hunt's time); they must give its numbers, bit for bit, where the search asks."""
    from scipy import stats as st

    from regressbisect.search.stats import chi2_ppf, f_ppf, t_cdf, t_ppf
    for df in (1, 2, 3, 5, 9, 30, 200):
        for q in (0.005, 0.05, 0.1, 0.9, 0.95, 0.975, 0.995):
            assert t_ppf(q, df) == float(st.t.ppf(q, df))
            assert chi2_ppf(q, df) == float(st.chi2.ppf(q, df))
            for dfd in (1, 4, 30, 64):
                assert f_ppf(q, df, dfd) == float(st.f.ppf(q, df, dfd))
        for x in (-3.0, -0.4, 0.0, 1.7, 6.0):
            assert t_cdf(x, df) == float(st.t.cdf(x, df))
