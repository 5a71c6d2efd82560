"""Run times with a second mode: the machine's (the same share at every commit, read apart as
interference) and a commit's own (a stall every few steps: a change of shape is a change).
docs/search.md, section 1, "Runs far off their level" and "A change of shape"."""
from __future__ import annotations

import math

import numpy as np
import pytest

from regressbisect.search.bisect import SearchSettings
from regressbisect.search.book import SampleBook
from regressbisect.search.control import ControlArm
from regressbisect.search.interference import interfered_runs
from regressbisect.search.simulate import FakeHistory, Interference, simulate, step_levels
from regressbisect.search.verdicts import Verdict

FAST_MODE = (Interference(0.30, 1.4),)
"""A third of the runs in a second mode 1.4x faster than the rest (a frequency boost, a cache
that sometimes stays warm): the machine's, at every commit."""


def _mode(rng, level: float, runs: int, cv: float, fast: int, offset: float = math.log(1.4)) -> list[float]:
    """Log tok/s of `runs` runs at `level`, the first `fast` of them moved by `offset`."""
    x = math.log(level) + rng.normal(0.0, cv, runs)
    x[:fast] += offset
    return list(x)


@pytest.mark.parametrize("first, seed", [(23, 1351500838), (17, 2130974438), (15, 120029545)])
def test_a_second_faster_mode_at_every_commit_names_the_one_step(first, seed):
    # 32 commits, a 15% step, 3% noise and 30% of the runs at 1.4x: these hunts named a commit at
    # the new level beside one whose few runs all fell in the fast mode (-27% to -40%, owning
    # 120-190% of the gap), or an extra step beside the right one
    history = FakeHistory(step_levels(32, {first: -0.15}), 0.03, interference=FAST_MODE)
    run = simulate(history, SearchSettings(), seed=seed)
    assert [c.first_bad for c in run.result.culprits] == [first]


def test_an_a_a_range_with_a_second_mode_names_nothing():
    history = FakeHistory(step_levels(32, {}), 0.03, interference=FAST_MODE)
    run = simulate(history, SearchSettings(), seed=1908358306)
    assert run.result.culprits == () and not run.result.reproduced


def test_runs_of_a_commit_all_in_the_second_mode_are_not_read_as_a_level_between_the_others():
    # GOOD at 1000 and BAD at 850, a third of their runs at 1.4x: the robust scale reads 1.8x the
    # typical spread there, and a commit whose three runs all fell in the fast mode of BAD's level
    # (about 1190) lay within 4.5 of those sigmas of GOOD's level: read at a level of its own
    # there, it made a phantom step beside its neighbour
    rng = np.random.default_rng(24)
    logs = {0: _mode(rng, 1000.0, 24, 0.03, 8), 31: _mode(rng, 850.0, 24, 0.03, 7),
            20: _mode(rng, 850.0, 6, 0.03, 2), 12: _mode(rng, 1000.0, 6, 0.03, 2)}
    logs[8] = [math.log(850.0 * 1.4) - 0.03, math.log(850.0 * 1.4) - 0.04, math.log(850.0 * 1.4) - 0.05]
    assert interfered_runs(logs)[8] == [True, True, True]


def test_a_level_is_where_most_of_a_commits_runs_are():
    # a commit sampled at a step, 9 of its 17 runs in the fast mode: its level is not read there
    # (its 8 runs at the level then made a 'slow kind', and the kind made other commits read the
    # same way: 147 of 262 runs of one hunt were read as interfered)
    rng = np.random.default_rng(9)
    logs = {0: _mode(rng, 1000.0, 24, 0.03, 7), 31: _mode(rng, 850.0, 24, 0.03, 7),
            7: _mode(rng, 850.0, 17, 0.03, 9)}
    flags = interfered_runs(logs)
    assert not any(flags[7][9:])                   # its runs at the level are not set apart
    for end in (0, 31):
        assert flags[end] == [True] * 7 + [False] * 17


def _arm_with_a_stall(seed: int, stall: float, pairs: int) -> tuple[ControlArm, Verdict | None]:
    """A control arm where BAD sends `stall` of its runs to 0.7x (a stall every few steps) and
    GOOD does not, both at 1000 with 2% noise, fed until it decides (its verdict) or `pairs` run
    out (None)."""
    rng = np.random.default_rng(seed)
    settings = SearchSettings()
    book = SampleBook(settings.pair_window, read_interference=True)
    arm = ControlArm(book, settings, 0, 1)
    for when in range(2 * pairs):
        verdict = arm.decide()
        if verdict is not None:
            return arm, verdict
        (end,) = arm.next_samples(1)
        value = 1000.0 * math.exp(rng.normal(0.0, 0.02))
        if end == 1 and rng.random() < stall:
            value *= 0.7
        book.add(end, value, tag=arm.tag, when=when)
    return arm, None


@pytest.mark.parametrize("seed", range(4))
def test_a_commit_that_makes_a_share_of_its_runs_slow_is_a_regression(seed):
    # 40% of BAD's runs at 0.7x is a mean 14% slower, what a training run gets; read apart as
    # interference its typical runs sit at GOOD's level and the arm said "no regression ... a
    # slowdown of 2.0% or more is ruled out"
    arm, verdict = _arm_with_a_stall(seed, 0.40, 96)
    assert verdict == Verdict.REPRODUCED
    assert arm.shape is not None and arm.shape.side == -1
    assert arm.shape.good_share == 0 and 0.2 < arm.shape.bad_share < 0.6
    assert 0.65 < arm.shape.factor < 0.75 and -0.25 < arm.shape.change < -0.05
    assert arm.comparison is not None and arm.comparison.change < -0.05
    assert not arm.book.read_interference          # the hunt reads every run from now on


def test_an_arm_whose_end_is_read_as_interfered_throughout_stops_at_its_cap():
    # every run of GOOD read as interfered (its level could not be told) made it the lagging end
    # for ever: the arm sampled GOOD past the cap without end
    settings = SearchSettings(max_samples=12)
    book = SampleBook(settings.pair_window, read_interference=True)
    book.reader = lambda logs: {i: [i == 0] * len(v) for i, v in logs.items()}
    arm = ControlArm(book, settings, 0, 1)
    rng = np.random.default_rng(0)
    verdict = None
    for when in range(200):
        if (verdict := arm.decide()) is not None:
            break
        (end,) = arm.next_samples(1)
        book.add(end, 1000.0 * math.exp(rng.normal(0.0, 0.02)), tag=arm.tag, when=when)
    assert verdict == Verdict.UNDECIDED and book.run_count(0) == settings.max_samples


def test_a_commit_that_stalls_is_named_and_the_change_of_shape_reported():
    history = FakeHistory(step_levels(16, {}), 0.02, stalls=((6, Interference(0.40, 0.7)),))
    run = simulate(history, SearchSettings(), seed=11)
    assert [c.first_bad for c in run.result.culprits] == [6]
    shape = run.result.shape
    assert shape is not None and shape.good_share == 0 and shape.bad_share > 0.2


def test_the_report_names_the_change_of_shape():
    from regressbisect.render import facts
    from regressbisect.render.report_json import shape_json
    from regressbisect.search.control import ShapeChange

    shape = shape_json(ShapeChange(side=-1, good_share=0.0, bad_share=0.38, factor=0.70, change=-0.139, moved=-0.13))
    assert shape == {"side": "below", "good_share": 0.0, "bad_share": 0.38, "factor": 0.7, "mean_change_pct": -13.9}
    line = facts.shape_line({"shape_change": shape})
    assert "38.0% of BAD's runs slow at 0.70x (GOOD: 0.0%)" in line and "-13.9%" in line
    assert facts.shape_line({"shape_change": None}) is None


def test_a_hunk_hunts_gap_is_read_on_every_run_of_an_end_read_as_interfered_throughout():
    from regressbisect.search.hunks.prefix import end_gap
    from regressbisect.search.bisect import CommitSearch
    from regressbisect.search.stats import NoisePool

    search = CommitSearch(3, SearchSettings())
    search.book.reader = lambda logs: {i: [i == 0] * len(v) for i, v in logs.items()}
    for when, (index, value) in enumerate([(0, 1000.0), (2, 900.0), (0, 1010.0), (2, 905.0)]):
        search.book.add(index, value, tag=None, when=when)
    gap, se = end_gap(search, NoisePool.of([[1000.0, 1010.0], [900.0, 905.0]]))
    assert math.isclose(gap, math.log(902.5 / 1005.0), abs_tol=0.005) and se > 0
