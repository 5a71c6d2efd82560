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
from regressbisect.search.interference import interfered_runs, machine_runs, more_than_the_machines
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
    from regressbisect.render.report_json import shape_part
    from regressbisect.render.report_load import load_report
    from regressbisect.search.control import ShapeChange

    shape = shape_part(ShapeChange(side=-1, good_share=0.0, bad_share=0.38, factor=0.70, change=-0.139, moved=-0.13))
    assert shape.to_json() == {"side": "below", "good_share": 0.0, "bad_share": 0.38, "factor": 0.7,
                               "mean_change_pct": -13.9}
    line = facts.shape_line(load_report({"kind": "commits", "shape_change": shape.to_json()}))
    assert "38.0% of BAD's runs slow at 0.70x (GOOD: 0.0%)" in line and "-13.9%" in line
    assert facts.shape_line(load_report({"kind": "commits", "shape_change": None})) is None


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


STALL = Interference(0.40, 0.7)
"""A culprit's stall: 40% of its runs (and every later commit's) at 0.7x, a mean 14% slower."""


def test_a_stall_whose_first_runs_all_stalled_is_named_not_called_a_fluke():
    # BAD's first three runs all stalled: the arm said 'go' at -30% on typical runs, BAD's later
    # runs at GOOD's level were read apart, and the hunt ended "the control arm's start was a
    # fluke" (not reproduced); read over the whole hunt the ends' shapes differ, and the search
    # goes on over every run
    history = FakeHistory(step_levels(16, {}), 0.02, stalls=((4, STALL),))
    run = simulate(history, SearchSettings(), seed=885026303)
    assert [c.first_bad for c in run.result.culprits] == [4]
    assert run.result.shape is not None and run.result.shape.bad_share > 0.2


@pytest.mark.parametrize("stall_share, pairs", [(0.3, 15), (0.0, 3)])
def test_no_regression_waits_for_runs_enough_to_have_seen_a_stall(stall_share, pairs):
    # three quick pairs at 0.5% noise rule a 2% slowdown out on the runs seen; a stall of 40% of
    # BAD's runs shows in none of them one time in 5 (four at 1% noise: 24 hunts in 100 of a stall
    # of 30%): 'no regression' waits for the stall e-value, 15 quiet pairs at 30%
    settings = SearchSettings(stall_share=stall_share)
    book = SampleBook(settings.pair_window, read_interference=True)
    arm = ControlArm(book, settings, 0, 1)
    rng = np.random.default_rng(0)
    k = 0
    while (verdict := arm.decide()) is None:
        for end in arm.next_samples(2):
            book.add(end, 1000.0 * math.exp(rng.normal(0.0, 0.005)), tag=arm.tag, when=k)
        k += 1
    assert verdict == Verdict.NOT_REPRODUCED and arm.pairs() == pairs
    assert arm.quiet_pairs_to_rule_out_a_stall() == (15 if stall_share else 0)
    # a subset's arm inside a hunk hunt steers, and does not wait
    assert ControlArm(book, settings, 0, 1, ends_a_hunt=False).quiet_pairs_to_rule_out_a_stall() == 0


def test_the_stall_e_value_holds_its_level_where_a_stall_holds_the_share():
    from regressbisect.search.stats import stall_log_e

    # BAD's run stalls (GOOD's never) in exactly 30% of the pairs: at most alpha of the hunts may
    # ever rule the stall out, however long they look (Ville)
    rng = np.random.default_rng(7)
    ever = 0
    for _ in range(1000):
        scores = (rng.random(150) < 0.30).astype(float)
        ever += any(stall_log_e(scores[:n], 0.3) >= math.log(100) for n in range(1, 151))
    assert ever <= 10 + 3 * math.sqrt(10)
    # one distribution, any shape: ruled out, on more pairs the more runs the machine sends below
    # the level (10% at both ends: 96 pairs rule it out in 99 ranges of 100); 15 with none
    ruled_out = 0
    for _ in range(100):
        scores = (rng.random(96) < 0.10).astype(float) - (rng.random(96) < 0.10).astype(float)
        ruled_out += stall_log_e(scores, 0.3) >= math.log(100)
    assert ruled_out >= 95
    assert stall_log_e([0.0] * 14, 0.3) < math.log(100) <= stall_log_e([0.0] * 15, 0.3)


def test_a_stall_not_ruled_out_at_the_cap_is_undecided_not_no_regression():
    # 40% of the runs at 0.7x from commit 7 on, beside the machine's 10% at 0.6x at both ends:
    # GOOD drew 16 of its 73 runs at 0.6x, twice its share, and at the cap every run's mean read
    # -3.8% for a true -12%: "+0.2% ... is not a slowdown". Its pairs never ruled the stall out
    history = FakeHistory(step_levels(16, {}), 0.02, interference=(Interference(0.10, 0.6),),
                          stalls=((7, STALL),))
    run = simulate(history, SearchSettings(), seed=924748605)
    assert run.result.verdict == Verdict.UNDECIDED
    assert "stall in 30% of the runs (--stall-share) is not ruled out" in run.result.reason


def test_a_stall_whose_typical_runs_read_alike_at_the_cap_is_reproduced_on_every_run():
    # 40% of BAD's runs at 0.7x beside the machine's own 10% at 0.6x at both ends: the arm's
    # e-value on every run did not come by the cap, and its last look read the typical runs,
    # alike: "not a slowdown" after 158 runs. At the cap every run of the arm is read
    history = FakeHistory(step_levels(16, {}), 0.02, interference=(Interference(0.10, 0.6),),
                          stalls=((10, STALL),))
    run = simulate(history, SearchSettings(), seed=1943446346)
    assert run.result.reproduced and run.result.shape is not None
    assert run.result.verdict != Verdict.NOT_REPRODUCED


def test_a_commit_whose_runs_split_between_two_levels_is_not_named_on_its_typical_runs():
    # after a stall at 13, commit 14's six runs all missed it and 15's caught it eight times in
    # ten: read at the level most of its runs hold, 15's two runs at 14's level were set apart,
    # and the fresh typical pairs named 14->15 a -28% step. A run read off at the other
    # commit's level makes the gate ask the signs of every fresh pair too
    history = FakeHistory(step_levels(16, {}), 0.02, stalls=((13, STALL),))
    run = simulate(history, SearchSettings(), seed=49577017)
    assert [c.first_bad for c in run.result.culprits] in ([13], [])


def test_a_mode_of_half_the_runs_makes_no_culprit_of_an_a_a_range():
    # half the runs at 0.7x at every commit: commit 9's runs six of eight at the slow mode beside
    # 8's two at the fast one, 9's two fast ones set apart, and one fresh typical pair named 8->9
    # a -31% step of an A/A range
    history = FakeHistory(step_levels(32, {}), 0.02, interference=(Interference(0.50, 0.7),))
    run = simulate(history, SearchSettings(), seed=1907361422)
    assert run.result.culprits == ()


def test_the_sign_e_value_is_a_fair_coins_martingale():
    from regressbisect.search.stats import sign_log_e

    rng = np.random.default_rng(0)
    # under 'one distribution' the signs are fair coins: ever past 1/alpha at most alpha (Ville)
    crossed = 0
    for _ in range(2000):
        signs = rng.choice([-1.0, 1.0], size=60)
        crossed += any(sign_log_e(signs[:k], -1) >= math.log(100) for k in range(1, 61))
    assert crossed / 2000 <= 0.01
    assert sign_log_e([-0.3] * 14, -1) >= math.log(2000) > sign_log_e([-0.3] * 13, -1)
    assert sign_log_e([0.3] * 12, -1) < 0


@pytest.mark.parametrize("levels, cv, modes, seed, right", [
    # a 40% mode at 1.4x: GOOD read at its fast mode by the end (+13% after the arm's -12%), and a
    # -27% step at 16->17 named with an interval across zero; read again on every run: 27
    (step_levels(32, {27: -0.12}), 0.03, (Interference(0.40, 1.4),), 863386289, [27]),
    # half the runs at 0.7x: an end with every run read off left no gap, and 5->6 was named -30%
    # beside the real 17->18
    (step_levels(32, {18: -0.10}), 0.02, (Interference(0.50, 0.7),), 496887119, [18]),
])
def test_culprits_named_against_the_gap_they_explain_are_read_again_on_every_run(levels, cv, modes, seed, right):
    run = simulate(FakeHistory(levels, cv, interference=modes), SearchSettings(), seed=seed)
    assert [c.first_bad for c in run.result.culprits] in (right, [])


def test_a_clean_looking_step_between_two_commits_of_one_stalled_shape_needs_five_fresh_pairs():
    from regressbisect.search.naming import alpha_share, fresh_pairs_to_tell_a_mode

    # the stall at 7 sends 40% of the runs to 0.7x beside the machine's 10% at 0.6x; BAD's first
    # runs all stalled, commit 10's all quick and 11's all stalled: no run off any level in the
    # whole hunt (17 runs), and the gate named 10->11 a -30% step on three fresh pairs
    history = FakeHistory(step_levels(16, {}), 0.02, interference=(Interference(0.10, 0.6),),
                          stalls=((7, STALL),))
    run = simulate(history, SearchSettings(), seed=1558693503)
    assert [c.first_bad for c in run.result.culprits] in ([7], [])
    assert [fresh_pairs_to_tell_a_mode(alpha_share(0.001, k), 0.3) for k in (1, 2, 3)] == [5, 6, 7]
    assert fresh_pairs_to_tell_a_mode(0.0005, 0.0) == 0


def test_a_cap_below_the_naming_floor_ends_undecided_and_says_which_floor():
    # a clean 50% step at 1% noise capped at 6 samples a commit: its step stops short of the five
    # fresh pairs that tell it from one stalled shape; the reason names the floor and its knob
    # (it said only "the sample cap or the budget ran out"), and the cap it asks for names the step
    history = FakeHistory(step_levels(6, {3: -0.5}), 0.01)
    short = simulate(history, SearchSettings(max_samples=6), seed=3)
    assert short.result.verdict == Verdict.UNDECIDED and not short.result.culprits
    assert "named on 5" in short.result.reason and "--stall-share" in short.result.reason
    assert SearchSettings().pairs_to_name_a_step() == 7 and SearchSettings(stall_share=0).pairs_to_name_a_step() == 0
    for settings in (SearchSettings(max_samples=7), SearchSettings(max_samples=6, stall_share=0)):
        assert [c.first_bad for c in simulate(history, settings, seed=3).result.culprits] == [3]


def test_at_the_cap_every_run_close_to_a_slowdown_is_undecided_not_ruled_out():
    # the stall at 1 beside the machine's 10% at 0.6x: at the cap the typical runs read alike
    # (-0.5%) and every run of the arm -7.9% at p=0.0053, just short of 'reproduced': it was "a
    # slowdown smaller than --min-effect", it is a question left open, read on every run
    history = FakeHistory(step_levels(16, {}), 0.02, interference=(Interference(0.10, 0.6),),
                          stalls=((1, STALL),))
    result = simulate(history, SearchSettings(), seed=1051193408).result
    assert result.verdict == Verdict.UNDECIDED and result.control.change < -0.05
    assert "more --max-samples would tell" in result.reason


def test_a_stall_read_as_a_fluke_on_typical_runs_is_searched_on_every_run():
    # 30% of the runs at 0.5x from 11 on, 1% noise: the arm's 'go' came on BAD's stalled runs
    # (-50%), the typical runs then read alike and too few runs of the ends showed the shares
    # apart; the mean of every run still differs by more than min_effect, and the search on every
    # run names 11
    history = FakeHistory(step_levels(32, {}), 0.01, stalls=((11, Interference(0.30, 0.5)),))
    run = simulate(history, SearchSettings(), seed=1381529315)
    assert [c.first_bad for c in run.result.culprits] == [11]


def test_a_stall_beside_the_machines_tail_is_not_ruled_out_when_their_counts_swap():
    # the stall at 4 (40% at 0.7x) beside the machine's 10% at 0.6x at both ends: at 14 pairs GOOD
    # had 5 of 19 runs at 0.6x and BAD 5 of 20 at 0.7x, every run's mean alike, and the typical
    # runs ruled 2% out. BAD's runs at 0.7x are a kind GOOD has none of: the arm takes more pairs
    history = FakeHistory(step_levels(16, {}), 0.02, interference=(Interference(0.10, 0.6),),
                          stalls=((4, STALL),))
    result = simulate(history, SearchSettings(), seed=433411592).result
    assert result.verdict != Verdict.NOT_REPRODUCED
    assert [c.first_bad for c in result.culprits] in ([4], [])


@pytest.mark.parametrize("first, seed", [(26, 1699380241), (7, 1887821540), (27, 1372484445), (18, 1313470930)])
def test_a_bracket_where_half_the_runs_are_read_apart_is_budgeted_in_typical_pairs(first, seed):
    # half the runs at 0.7x: a pair is typical at a quarter, and a budget priced in runs gave the
    # 10% step's bracket up ("the budget ran out with 0-1 fresh pairs") after 115-140 runs
    history = FakeHistory(step_levels(32, {first: -0.10}), 0.02, interference=(Interference(0.50, 0.7),))
    run = simulate(history, SearchSettings(), seed=seed)
    assert [c.first_bad for c in run.result.culprits] == [first]


def test_runs_per_typical_run_counts_the_runs_read_apart():
    book = SampleBook(pair_window=2, read_interference=True)
    assert book.runs_per_typical_run() == 1.0
    rng = np.random.default_rng(5)
    for when in range(40):
        for i in (0, 1):
            slow = rng.random() < 0.25
            book.add(i, 1000.0 * (0.5 if slow else 1.0) * math.exp(rng.normal(0, 0.01)), tag=None, when=when)
    read_apart = sum(len(v) for v in book.interfered().values())
    assert read_apart > 0
    assert book.runs_per_typical_run() == pytest.approx(80 / (80 - read_apart))


@pytest.mark.parametrize("stall_share, pairs_to_go", [(0.3, 5), (0.0, 3)])
def test_four_pairs_split_between_the_modes_of_one_shape_do_not_reproduce(stall_share, pairs_to_go):
    # half the runs at 0.7x at both ends: GOOD's first runs all quick and BAD's all slow (one hunt
    # in 64 at three pairs) read a -30% step at p = 0.001, and an A/A range was searched; at four
    # pairs (one in 256) three A/A ranges of 300 reproduced
    settings = SearchSettings(stall_share=stall_share)
    book = SampleBook(settings.pair_window, read_interference=True)
    arm = ControlArm(book, settings, 0, 1)
    rng = np.random.default_rng(3)
    verdicts = []
    for when in range(2 * 5):
        (end,) = arm.next_samples(1)
        book.add(end, (1000.0 if end == 0 else 700.0) * math.exp(rng.normal(0.0, 0.02)), tag=arm.tag, when=when)
        verdicts.append(arm.decide())
    first = next((k // 2 + 1 for k, v in enumerate(verdicts) if v == Verdict.REPRODUCED), None)
    assert first == pairs_to_go
    assert arm.pairs_to_reproduce() == (5 if stall_share else 0)


def test_an_a_a_arm_read_as_a_change_of_shape_needs_the_signs_of_its_far_pairs():
    # half the runs at 0.7x at both ends (an A/A range): GOOD's first seven all quick beside BAD's
    # runs six of seven slow read as a change of shape, and every run's mean said -27% (the
    # e-value of one normal spread): an A/A range was searched. Seven pairs one way are short of
    # the signs' 1 / reproduce_alpha
    runs = {0: [1026, 1019, 1000, 990, 986, 1023, 978, 1004, 701, 996],
            1: [670, 704, 981, 722, 693, 662, 737, 972, 985, 993, 691, 997, 702, 1003]}
    settings = SearchSettings()
    book = SampleBook(settings.pair_window, read_interference=True)
    arm = ControlArm(book, settings, 0, 1)
    verdicts = []
    for when in range(len(runs[0]) + len(runs[1])):
        (end,) = arm.next_samples(1)
        if not runs[end]:
            break
        book.add(end, float(runs[end].pop(0)), tag=arm.tag, when=when)
        verdicts.append(arm.decide())
    assert Verdict.REPRODUCED not in verdicts


def test_the_signs_of_far_pairs_hold_their_level_whatever_the_cut():
    from regressbisect.search.stats import sign_log_e

    rng = np.random.default_rng(1)
    crossed = 0
    for _ in range(2000):
        # one shape at both ends: a third of the runs at 0.7x, 2% noise; the cut read from sizes
        x = np.log(np.where(rng.random((2, 60)) < 0.3, 0.7, 1.0)) + rng.normal(0.0, 0.02, (2, 60))
        d = x[1] - x[0]
        cut = 3 * float(np.quantile(np.abs(d), 0.25)) / 0.3186
        crossed += any(sign_log_e(d[:k], -1, beyond=cut) >= math.log(100) for k in range(1, 61))
    assert crossed / 2000 <= 0.01
    # pairs of two typical runs are ties: only the far ones bet
    assert sign_log_e([-0.3] * 14 + [0.01] * 20, -1, beyond=0.1) == pytest.approx(sign_log_e([-0.3] * 14, -1))


def test_a_stall_is_named_by_the_signs_of_its_far_pairs_where_every_runs_mean_is_slow_to_tell():
    # the stall at 9 (40% at 0.7x) beside the machine's 10% at 0.6x at both ends: read on every
    # run, the e-value of the mean (sigma about 0.18) stayed short of naming 8->9 at the cap; the
    # pairs with one run far off go BAD's way nine times in ten, and their signs name it
    history = FakeHistory(step_levels(16, {}), 0.02, interference=(Interference(0.10, 0.6),),
                          stalls=((9, STALL),))
    result = simulate(history, SearchSettings(), seed=1589446920).result
    assert [c.first_bad for c in result.culprits] == [9]


def test_the_signs_of_far_pairs_bet_only_on_pairs_beyond_min_effect_and_three_pair_sigmas():
    from regressbisect.search.stats import far_pairs_sign_log_e, sign_log_e

    typical = [0.01, -0.012, 0.008, -0.02, 0.015, -0.005, 0.011, -0.009]
    stalled = [-0.36] * 9
    assert far_pairs_sign_log_e(typical + stalled, -1, 0.02) == pytest.approx(sign_log_e(stalled, -1))
    assert far_pairs_sign_log_e(typical, -1, 0.02) == 0.0


def test_an_a_a_range_whose_commits_fall_on_either_mode_names_nothing():
    # half the runs at 0.7x at every commit: 15 read at 1.0x (4 of 12 runs off) and 16 at 0.7x
    # (6 of 17 off). 16's runs at 15's level were taken for the machine's 'fast kind', seen at
    # other commits, though the hunt read that kind at a 5% share: 16 was named a -30% culprit
    history = FakeHistory(step_levels(32, {}), 0.02, interference=(Interference(0.50, 0.7),))
    run = simulate(history, SearchSettings(), seed=934021200)
    assert run.result.culprits == ()


def test_after_a_change_of_shape_the_machines_own_tail_stays_apart():
    # a stall of 40% of the runs at 0.7x beside the machine's 10% at 0.6x at every commit: once
    # the change of shape was read, every test read every run, the machine's tail too (spread
    # 0.24 where the stall's runs alone are 0.18), and these hunts ended at the cap undecided.
    # The kinds GOOD shows are the machine's: their runs stay apart at every commit
    history = FakeHistory(step_levels(16, {}), 0.02, interference=(Interference(0.10, 0.6),),
                          stalls=((9, STALL),))
    result = simulate(history, SearchSettings(), seed=26128236).result
    assert [c.first_bad for c in result.culprits] == [9]


def test_the_machines_runs_are_those_at_goods_kinds_within_their_share():
    rng = np.random.default_rng(4)

    def runs(n: int, *modes: tuple[int, float]) -> list[float]:
        x = rng.normal(0.0, 0.02, n)
        k = 0
        for count, factor in modes:
            x[k:k + count] += math.log(factor)
            k += count
        return list(x)
    good = runs(40, (4, 0.6))                      # the machine's 10% at 0.6x
    stalled = runs(40, (16, 0.7), (4, 0.6))         # a stall of 40% at 0.7x beside it
    deep = runs(40, (16, 0.6))                      # a stall at the machine's own depth
    flags = machine_runs({0: good, 1: stalled, 2: deep}, good=0, bad=1)
    assert sum(flags[0]) == 4 and flags[1] == [False] * 16 + [True] * 4 + [False] * 20
    # BAD holds 16 of 40 at the machine's kind, more than a 10% kind does: the kind is the
    # commit's too, and no run is set apart anywhere (one rule for every commit)
    assert machine_runs({0: good, 1: stalled, 2: deep}, good=0, bad=2) == {}
    # half of GOOD's runs in a mode: a commit's few runs do not show its level there
    assert machine_runs({0: runs(40, (20, 0.7)), 1: stalled}, good=0, bad=1) == {}
    assert more_than_the_machines([math.log(0.6)] * 16, 40, 0.02, [(math.log(0.6), 0.1)])
    assert not more_than_the_machines([math.log(0.6)] * 5, 40, 0.02, [(math.log(0.6), 0.1)])
    assert not more_than_the_machines([math.log(1.4)], 40, 0.02, [(math.log(0.6), 0.1)])   # at no kind: not this rule's


def test_runs_spread_over_the_machines_range_match_no_kind_and_stay_the_machines():
    # the measured shape (a quarter of the runs at 0.42-0.55x, a fifth anywhere in 0.6-0.97x):
    # runs at the other commit's level that matched no kind's one offset were taken for the
    # commit's own shape, the arm waited for signs a spread never gives, and ended "not
    # reproduced" for a 13% step at its cap
    history = FakeHistory(step_levels(16, {12: -0.13}), 0.015,
                          interference=(Interference(0.25, 0.42, 0.55), Interference(0.19, 0.6, 0.97)))
    result = simulate(history, SearchSettings(), seed=1022133761).result
    assert [c.first_bad for c in result.culprits] == [12]
