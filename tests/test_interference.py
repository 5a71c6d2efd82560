"""Runs far off their level (search/interference.py) and the search that sets them apart."""
from __future__ import annotations

import math

import numpy as np
import pytest

from regressbisect.search.bisect import SearchSettings
from regressbisect.search.book import SampleBook
from regressbisect.search.interference import interfered_runs, level_in_doubt, own_scale, robust_scale
from regressbisect.search.simulate import FakeHistory, Interference, simulate, step_levels


def _logs(rng, levels: dict[int, float], n: int, cv: float, off: dict[int, list[int]] | None = None,
          factor: float = 0.7) -> dict[int, list[float]]:
    out = {}
    for i, level in levels.items():
        x = math.log(level) + rng.normal(0.0, cv, n)
        for k in (off or {}).get(i, []):
            x[k] += math.log(factor)
        out[i] = list(x)
    return out


def test_runs_far_off_their_level_are_read_as_interfered_and_lognormal_runs_are_not():
    rng = np.random.default_rng(3)
    logs = _logs(rng, {i: 1000.0 * (0.9 if i > 4 else 1.0) for i in range(8)}, 6, 0.02, off={2: [1, 4], 6: [0]})
    flags = interfered_runs(logs)
    assert {(i, k) for i, f in flags.items() for k, far in enumerate(f) if far} == {(2, 1), (2, 4), (6, 0)}
    # lognormal noise alone: nothing set apart over 200 candidates of 6 runs
    quiet = _logs(rng, {i: 1000.0 for i in range(200)}, 6, 0.02)
    assert not any(any(f) for f in interfered_runs(quiet).values())


def test_the_scales_read_through_a_quarter_of_runs_off():
    rng = np.random.default_rng(5)
    logs = _logs(rng, {i: 1000.0 for i in range(20)}, 8, 0.02, off={i: [0, 3] for i in range(20)})
    sd = float(np.mean([np.std(x, ddof=1) for x in logs.values()]))
    assert sd > 0.1                                       # the standard deviation is the interference's
    assert 0.015 < robust_scale(list(logs.values())) < 0.05
    assert 0.01 < own_scale([0.0, 0.02, -0.01, math.log(0.7)]) < 0.06


def test_a_candidate_half_of_whose_runs_were_slowed_keeps_its_level_once_the_kind_is_known():
    rng = np.random.default_rng(11)
    logs = _logs(rng, {i: 1000.0 for i in range(6)}, 6, 0.02, off={1: [2], 3: [0], 4: [5]})
    logs[0] = list(math.log(1000.0) + rng.normal(0.0, 0.02, 6))
    for k in (0, 2, 4):                     # three of GOOD's six runs at 0.7x
        logs[0][k] += math.log(0.7)
    flags = interfered_runs(logs)
    assert flags[0] == [True, False, True, False, True, False]


def test_runs_that_sit_together_at_a_known_level_moved_by_a_kind_are_read_as_interfered_until_they_are_many():
    # GOOD at 1000 and BAD at 900, a quarter of their runs at 0.7x (the kind is known); a commit
    # whose four runs all came at 0.7x of GOOD (one in 256) is no level of its own yet: it was
    # named a culprit on such runs at the naming gate. Seven such runs (3^7 > 1,000) stand, as
    # do runs at BAD's level.
    rng = np.random.default_rng(7)
    logs = _logs(rng, {0: 1000.0, 31: 900.0}, 12, 0.02, off={0: [1, 5, 9], 31: [2, 6, 10]})
    for runs, read in ((1, True), (4, True), (7, False)):
        at_kind = _logs(rng, {19: 700.0}, runs, 0.02)
        assert interfered_runs({**logs, **at_kind})[19] == [read] * runs, runs
    assert interfered_runs({**logs, **_logs(rng, {20: 900.0}, 4, 0.02)})[20] == [False] * 4


def test_a_noisier_commit_keeps_its_scatter_for_the_noisier_commit_rules():
    rng = np.random.default_rng(2)
    logs = _logs(rng, {i: 1000.0 for i in range(10)}, 6, 0.005)
    logs[4] = list(math.log(1000.0) + rng.normal(0.0, 0.15, 8))       # host-bound: 15% noise
    assert not any(interfered_runs(logs)[4])


def test_a_machine_that_changed_speed_is_not_read_as_interference():
    # two candidates sampled side by side while the machine ran at 1.0 and then at 0.8: the pairs
    # cancel it (SampleBook.drifting), so no run is set apart
    book = SampleBook(pair_window=1, read_interference=True)
    rng = np.random.default_rng(0)
    when = 0
    for state in [1.0] * 4 + [0.8] * 4:
        for i, level in ((0, 1000.0), (1, 900.0)):
            when += 1
            book.add(i, level * state * math.exp(rng.normal(0, 0.01)), tag=None, when=when)
    assert book.drifting()
    assert book.interfered() == {}
    assert len(book.raw[0]) == 8


def test_a_run_set_apart_stays_in_the_book_and_counts_towards_the_cap():
    book = SampleBook(pair_window=2, read_interference=True)
    rng = np.random.default_rng(1)
    for k in range(12):
        for i in range(3):
            value = 1000.0 * math.exp(rng.normal(0, 0.01)) * (0.7 if (i, k) in {(1, 3), (2, 8)} else 1.0)
            book.add(i, value, tag=None, when=3 * k + i)
    assert {i: len(v) for i, v in book.interfered().items()} == {1: 1, 2: 1}
    assert len(book.raw[1]) == 11 and book.run_count(1) == 12
    plain = SampleBook(pair_window=2)
    for i, runs in book.runs.items():
        for value, when, tag in runs:
            plain.add(i, value, tag=tag, when=when)
    assert plain.interfered() == {} and len(plain.raw[1]) == 12     # off by default


@pytest.mark.parametrize("seed", range(6))
def test_a_ten_percent_step_is_found_where_a_quarter_of_the_runs_are_thirty_percent_slow(seed):
    # Without the reading, this noise made the search miss the step ('no regression
    # reproduced'), end undecided, or pay 200-600 executions (bench_accuracy.py --interference)
    rng = np.random.default_rng([seed, 32])
    first = int(rng.integers(1, 32))
    history = FakeHistory(step_levels(32, {first: -0.10}), 0.02, interference=(Interference(0.25, 0.7),))
    run = simulate(history, SearchSettings(read_interference=True), seed=int(rng.integers(2 ** 31)))
    assert [c.first_bad for c in run.result.culprits] == [first]
    assert run.executions < 150
    off = [v for v in run.result.candidates if v.interfered]        # the report names them
    assert off and all(x < 0.8 * 1000 for v in off for x in v.interfered)


def test_four_runs_half_of_them_at_the_hunts_kind_of_interference_keep_their_level_not_a_scatter_of_their_own():
    """Two of four runs at 0.7x put the candidate's own Q_n at the offset (it breaks down at half):
    read as a noisier commit, the arm's mean sat 24% below BASE for a 10% step (a hunk named at
    249% of the gap). The hunt's kind explains each run: its level stands, the two are set apart."""
    rng = np.random.default_rng(11)
    logs = _logs(rng, {i: 1000.0 for i in range(10)}, 8, 0.02, off={i: [i % 8, (i + 3) % 8] for i in range(10)})
    logs[10] = [math.log(v) for v in (8890.0, 8653.0, 6499.0, 6351.0)]
    assert interfered_runs(logs, subsets=True)[10] == [False, False, True, True]
    # a commit search too: the hunt's mixture fits them better than one lognormal at their own scale
    assert interfered_runs(logs)[10] == [False, False, True, True]


def test_a_commit_whose_runs_fit_the_hunts_interference_better_than_a_scatter_of_its_own_keeps_its_level():
    """The shape measured on a real bimodal bench: a quarter of the runs at about half their level
    and some anywhere between. A commit with 5 of 16 runs at 0.41-0.54x and two at 0.64x and 0.82x
    had an own Q_n 9 times the hunt's; read as a scatter of its own, none of its runs was set apart,
    its mean sat 17% below its neighbour's typical runs, and the naming gate named it a culprit
    (bench_accuracy.py --interference, the measured shape, trial 38). The hunt's mixture (its level,
    the kind at 0.47x, a broad rest) fits its runs better than one lognormal at its own scale."""
    rng = np.random.default_rng(5)
    logs = _logs(rng, {i: 1000.0 for i in range(6)}, 12, 0.015, off={i: [i % 12, (i + 5) % 12, (i + 9) % 12] for i in range(6)},
                 factor=0.47)
    commit = [989, 456, 818, 444, 934, 1001, 1024, 986, 985, 997, 459, 1012, 542, 538, 635, 410]
    logs[6] = [math.log(v) for v in commit]
    flags = interfered_runs(logs)[6]
    assert [v for v, far in zip(commit, flags) if not far] == [989, 934, 1001, 1024, 986, 985, 997, 1012]
    # a host-bound commit scattering evenly at 20% beside the same hunt keeps its own scale
    for seed in range(5):
        logs[7] = list(math.log(1000.0) + np.random.default_rng(seed).normal(0.0, 0.20, 16))
        assert not any(interfered_runs(logs)[7])


def test_a_hunk_hunts_tests_read_interference_on_every_run_of_each_subset():
    """The hunk hunt's tests keep two or three arms of a few runs: read on their own, no kind of
    interference and no level is clear in them (bench_hunks.py --interference 0.25@0.7, 2% rows:
    50-70% right). `HuntReading` reads each subset's runs, whichever test took them, together."""
    from regressbisect.search.hunkdecide import decide_hunks
    from regressbisect.testing.hunkdiff import SimulatedDiff

    right = wrong = 0
    for trial in range(10):
        rng = np.random.default_rng([7, trial])
        culprit = f"h{int(rng.integers(10)):03d}"
        diff = SimulatedDiff(10, effects={culprit: 0.10}, per_function=2, base_tok_s=10_000.0)

        def measure(subset, purpose, diff=diff, rng=rng):
            value = diff.tok_s(subset) * math.exp(rng.normal(0.0, 0.02))
            return value * 0.7 if rng.random() < 0.25 else value

        named = {c.hunks for c in decide_hunks(diff.ids, diff.groups(), measure, SearchSettings()).culprits}
        right += named == {frozenset({culprit})}
        wrong += bool(named and set().union(*named) - {culprit})
    assert wrong == 0 and right >= 9


def test_runs_read_fast_can_be_a_level_long_after_runs_read_slow_could():
    """`level_in_doubt` weighs a level at the runs read off against the level read, at the shares
    before any kind is known (a quarter slow, 2% fast): runs above a level are rare, so five of
    them beside twelve typical runs are likelier the level (GOOD's 12 of 17 runs at 0.7x); runs
    below it are common, and five of them beside twelve are interference."""
    assert level_in_doubt(12, 5, +1) and not level_in_doubt(12, 5, -1)
    # one run above stays in doubt up to six typical runs, not at seven
    assert level_in_doubt(6, 1, +1) and not level_in_doubt(7, 1, +1)
    # runs below come into doubt only when they outnumber the typical ones: eight beside three
    assert not level_in_doubt(3, 7, -1) and level_in_doubt(3, 8, -1)
