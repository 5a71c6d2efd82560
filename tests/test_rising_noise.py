"""A machine that gets busy after the control arm (scripts/sim_rising_noise.py): GOOD and BAD
sampled again at the new noise leave the gap's point estimate far off, and a confirmed step must
not be refused for 'owning' more than the gap when the gap's own interval allows it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from regressbisect.search.bisect import CommitSearch, SearchSettings
from regressbisect.search.commit.context import Bracket
from regressbisect.search.driver import drive
from regressbisect.search.simulate import step_levels


def busy_after(executions: int, seed: int, n: int = 24, step_at: int = 12):
    """A hunt of n commits, -19% at step_at, 2% noise for `executions` runs, then 15%."""
    levels = step_levels(n, {step_at: -0.19})
    rng = np.random.default_rng(seed)
    runs = 0

    def one(index: int) -> float:
        nonlocal runs
        cv = 0.15 if runs >= executions else 0.02
        runs += 1
        return levels[index] * float(np.exp(rng.normal(0.0, math.sqrt(math.log1p(cv * cv)))))

    search = CommitSearch(n, SearchSettings())
    return search, drive(search, lambda batch: [one(m.index) for m in batch])


@pytest.mark.parametrize("seed", [3001, 3011, 3032])
def test_a_step_confirmed_after_the_machine_got_busy_is_named(seed):
    search, result = busy_after(10, seed)        # busy from the run after the control arm's five pairs
    gap, gap_se = search.rule.end_difference()
    assert abs(gap) < math.log(1 / 0.81) and gap_se > 0.04      # the ends read a smaller, uncertain gap
    assert result.verdict == "culprits" and [c.first_bad for c in result.culprits] == [12]


def test_an_intervals_budget_is_priced_at_the_recent_noise():
    # 100 quiet rounds over many commits, then 40 noisy ones of two: the pooled sigma still
    # reads the quiet start, the recent window the machine as it is now
    search = CommitSearch(24, SearchSettings())
    rng = np.random.default_rng(0)
    for k in range(100):
        search.book.add(k % 12, 1000 * math.exp(rng.normal(0, 0.02)), tag=None, when=k + 1)
    for k in range(100, 140):
        search.book.add(12 + k % 2, 900 * math.exp(rng.normal(0, 0.15)), tag=None, when=k + 1)
    search.ctx.round, search.ctx.tau = 140, math.log(1 / 0.81)    # the control arm's -19% gap
    pooled, _ = search.book.pooled_sigma()
    recent = search.book.recent_sigma(140 - 40)
    assert recent > 1.5 * pooled
    assert search.ctx.samples_per_decision(recent=True) > 2 * search.ctx.samples_per_decision()


def test_a_larger_max_samples_raises_an_intervals_budget():
    # what the continue command of an undecided hunt relies on: its doubled --max-samples lets a
    # bracket that ran over its budget go on
    default, doubled = CommitSearch(24, SearchSettings()), CommitSearch(24, SearchSettings(max_samples=192))
    for search in (default, doubled):
        search.ctx.probes = 150
    bracket = Bracket(0, 23, checked=True)
    assert default.ctx.over_budget(bracket) and not doubled.ctx.over_budget(bracket)
