"""The search's parts on their own: the sample book (pairs, pooled noise, remembered prior) and the
naming gate (fresh pairs only, alpha spent over the steps picked, a culprit's own size)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from regressbisect.search.book import NOISE_PRIOR_DF, SampleBook, unmeasurable_by_skips
from regressbisect.search.bisect import CommitSearch, SearchSettings
from regressbisect.search.confirm import Action, StepConfirmation
from regressbisect.search.culprits import Culprit, CulpritRule, shares_do_not_add_up
from regressbisect.search.hunks.prefix import PrefixSearch
from regressbisect.search.driver import drive
from regressbisect.search.localise import Posterior
from regressbisect.search.picker import Picker
from regressbisect.search.simulate import FakeExecutor, FakeHistory, step_levels
from regressbisect.search.control import ControlArm, Look
from regressbisect.search.naming import AlphaSpender, NamingGate
from regressbisect.search.pairing import Pairing
from regressbisect.search.sides import SideOutcome, SideRule
from regressbisect.search.stats import NoisePool, SprtDecision
from regressbisect.search.verdicts import CandidateCall
from regressbisect.config import Direction, Executor
from regressbisect.search.overhead import OverheadDecision
from regressbisect.search.results import MeasureTag
from regressbisect.search.simulate import simulate


def _book(series: dict[int, list[tuple[int, float]]], prior: NoisePool | None = None) -> SampleBook:
    book = SampleBook(pair_window=2, noise_prior=prior)
    for i, samples in series.items():
        for when, value in samples:
            book.add(i, value, tag=None, when=when)
    return book


def test_pairs_are_samples_at_most_the_window_apart_each_used_once():
    book = _book({0: [(1, 100.0), (2, 100.0), (9, 100.0)], 1: [(1, 90.0), (5, 90.0), (10, 81.0)]})
    diffs = book.paired_diffs(0, 1)
    assert len(diffs) == 2 and diffs[0] == pytest.approx(math.log(0.9)) and diffs[1] == pytest.approx(math.log(0.81))
    assert book.paired_diffs(0, 1, since=2) == pytest.approx([math.log(0.81)])


def test_a_skip_is_counted_and_two_skips_over_the_successes_make_a_candidate_unmeasurable():
    book = _book({0: [(1, 100.0)]})
    book.add(3, None, tag=None, when=1)
    assert book.retry_wanted(3) and not book.unmeasurable(3)
    book.add(3, None, tag=None, when=2)
    assert book.unmeasurable(3) and not book.retry_wanted(3)
    with pytest.raises(ValueError, match="finite and positive"):
        book.add(0, -1.0, tag=None, when=3)


def test_the_remembered_noise_counts_for_a_few_samples_and_is_dropped_when_today_is_noisier():
    prior = NoisePool.of([np.exp(np.random.default_rng(0).normal(0, 0.01, 40))])
    quiet = _book({0: [(1, 100.0), (2, 101.0)], 1: [(1, 90.0), (2, 90.5)]}, prior)
    assert quiet.noise_prior.df == NOISE_PRIOR_DF
    assert quiet.noise().df == 2 + NOISE_PRIOR_DF and quiet.noise_prior_report()["used"]
    rng = np.random.default_rng(1)
    noisy = _book({0: [(k, float(100 * math.exp(rng.normal(0, 0.1)))) for k in range(8)]}, prior)
    assert noisy.noise().df == 7 and not noisy.noise_prior_report()["used"]   # F test: 10x the spread


def _quiet_hunt_and(noisy: dict[int, list[tuple[int, float]]]) -> SampleBook:
    """Ten quiet commits (0.5%, 4 samples each, rounds 1-4) and the samples of `noisy`."""
    rng = np.random.default_rng(3)
    series = {i: [(k, float(1000 * math.exp(rng.normal(0, 0.005)))) for k in range(1, 5)] for i in range(10, 20)}
    return _book({**series, **noisy})


def test_a_commit_noisier_than_the_rest_is_tested_on_its_own_spread_and_a_quiet_one_on_the_pool():
    rng = np.random.default_rng(4)
    flaky = {3: [(k, float(1000 * math.exp(rng.normal(0, 0.10)))) for k in range(5, 9)],
             4: [(k, float(1000 * math.exp(rng.normal(0, 0.005)))) for k in range(5, 9)]}
    book = _quiet_hunt_and(flaky)
    pooled = book.noise()
    tested = book.noise(of=(3, 4))
    assert tested.df == 6 and tested.sigma > 2 * pooled.sigma          # 3's scatter, not the pool's quiet
    # two quiet commits: the pool, less 3's scatter (a test of them does not pay for it)
    quiet = book.noise(of=(4, 10))
    assert book.noisier_commits() == {3}
    assert quiet.df == pooled.df - 3 and quiet.sigma < 0.008 < pooled.sigma


def test_the_gate_names_only_once_the_two_commits_have_shown_their_own_spread():
    # a step picked at round 4; one fresh pair (rounds 5, 6) reads -13%: at the pool's 0.5% noise
    # that is a step by far, but each commit has only one sample before the pick and one after,
    # so nothing says whether they are as quiet as the rest (a flaky commit read low twice)
    book = _quiet_hunt_and({3: [(3, 1000.0), (5, 1000.0)], 4: [(4, 880.0), (6, 878.0)]})
    gate = NamingGate(book, name_alpha=0.001)
    gate.pick(3, 4, when=4, step=math.log(0.88))
    assert len(gate.fresh_pairs(3, 4)) == 1 and not gate.named(3, 4, sign=-1)
    for when, (va, vb) in enumerate([(1001.0, 879.0), (999.0, 881.0)], start=7):
        book.add(3, va, tag=None, when=2 * when)
        book.add(4, vb, tag=None, when=2 * when + 1)
    assert gate.named(3, 4, sign=-1)                  # 2 degrees of freedom of their own, as quiet


def test_a_noisy_commit_beside_the_step_is_not_named_through_the_pools_quiet():
    # 32 commits at 0.5% noise, -10% at #8; the last good commit #7 at 8% of its own. Pooled with
    # the quiet ones its scatter read as a step: #7 was named in 6 of seeds 0-299, these. A hunt
    # may end undecided (#7's own spread can need more pairs than the cap), never on a wrong name
    levels = step_levels(32, {8: -0.10})
    sigma = [math.sqrt(math.log1p((0.08 if i == 7 else 0.005) ** 2)) for i in range(32)]
    found = []
    for seed in (73, 125, 150, 178, 246, 297):
        rng = np.random.default_rng(seed)
        result = drive(CommitSearch(32, SearchSettings()),
                       lambda batch, rng=rng: [levels[m.index] * float(np.exp(rng.normal(0.0, sigma[m.index]))) for m in batch])
        named = [c.first_bad for c in result.culprits]
        assert named in ([8], []) and (named or result.verdict == "undecided"), seed
        found.append(named == [8])
    assert sum(found) >= 5


def _side_by_side(book: SampleBook, a: int, b: int, levels: list[tuple[float, float]], start: int, draw) -> None:
    """Pairs of a and b at these levels, back to back from round `start` (a first)."""
    for k, (level_a, level_b) in enumerate(levels):
        book.add(a, draw(level_a), tag=None, when=start + 2 * k)
        book.add(b, draw(level_b), tag=None, when=start + 2 * k + 1)


def test_a_step_the_size_of_the_hunts_interference_is_named_only_on_runs_that_tell_it_from_interfered_ones():
    """Seven of seven runs of an A/A commit at 0.48-0.70x (a quarter of the hunt's runs at about
    0.49x, some anywhere between): read at a level of their own, their fresh pairs named a -48% step
    (bench_accuracy.py --interference, the measured shape, trial 96). n runs of a kind's share w
    are all interfered with probability w^n: the gate waits for n with w^n below its alpha."""
    rng = np.random.default_rng(3)
    book = SampleBook(pair_window=2, read_interference=True)
    draw = lambda level: float(level * math.exp(rng.normal(0, 0.015)))  # noqa: E731
    _side_by_side(book, 0, 15, [(1000 * (0.49 if k % 4 == 1 else 1.0), 870 * (0.49 if k % 4 == 2 else 1.0))
                                for k in range(16)], 0, draw)
    slowed = [0.70, 0.52, 0.52, 0.63, 0.48, 0.55, 0.56]
    _side_by_side(book, 3, 4, [(1000, 1000 * slowed[0])], 40, draw)
    gate = NamingGate(book, name_alpha=0.001)
    gate.pick(3, 4, when=41, step=math.log(0.55))
    _side_by_side(book, 3, 4, [(1000, 1000 * f) for f in slowed[1:5]], 42, draw)
    assert len(gate.fresh_pairs(3, 4)) == 4 and not gate.named(3, 4, sign=-1)
    _side_by_side(book, 3, 4, [(1000, 1000 * f) for f in slowed[5:] + [0.5] * 4], 52, draw)
    assert gate.named(3, 4, sign=-1)           # a step of that size is named on enough of them


def test_before_any_kind_is_known_a_step_the_size_of_a_run_read_off_waits_as_long_as_for_a_kind():
    """An A/A range: five of BAD's six runs at 0.7x before the hunt knew a kind of interference
    (one run of GOOD read off at 0.68x), and the gate's fresh pairs of 30..31 named BAD a -30%
    culprit (bench_accuracy.py --interference, 32 commits, A/A, trial 86). Before any kind is known
    the runs read off so far stand for one at the prior's share (a quarter of the runs may be slow)."""
    rng = np.random.default_rng(4)
    book = SampleBook(pair_window=2, read_interference=True)
    draw = lambda level: float(level * math.exp(rng.normal(0, 0.02)))  # noqa: E731
    _side_by_side(book, 0, 31, [(1000 * (0.68 if k == 2 else 1.0), 700) for k in range(6)], 0, draw)
    _side_by_side(book, 30, 31, [(1000, 700)], 20, draw)
    gate = NamingGate(book, name_alpha=0.001)
    gate.pick(30, 31, when=21, step=math.log(0.7))
    _side_by_side(book, 30, 31, [(1000, 700)] * 3, 22, draw)
    assert book.interfered() == {0: [pytest.approx(680, rel=0.1)]}
    assert len(gate.fresh_pairs(30, 31)) == 3 and not gate.named(30, 31, sign=-1)
    _side_by_side(book, 30, 31, [(1000, 700)] * 3, 28, draw)
    assert gate.named(30, 31, sign=-1)          # six pairs: 0.25^6 is below the gate's alpha


def _gate_with_pairs(drop: float, pairs: int, noise: float = 0.01, since: int = 0) -> NamingGate:
    rng = np.random.default_rng(7)
    book = SampleBook(pair_window=2)
    for k in range(pairs):
        when = since + 1 + 2 * k
        book.add(3, float(1000 * math.exp(rng.normal(0, noise))), tag=None, when=when)
        book.add(4, float(1000 * (1 - drop) * math.exp(rng.normal(0, noise))), tag=None, when=when + 1)
    return NamingGate(book, name_alpha=0.001)


def test_the_gate_names_a_step_its_fresh_pairs_show_and_not_one_they_do_not():
    gate = _gate_with_pairs(0.10, 4)   # the noise from these pairs alone (6 df)
    gate.pick(3, 4, when=0, step=math.log(0.9))
    assert gate.named(3, 4, sign=-1)
    assert not gate.named(3, 4, sign=1)            # not in the hunted direction
    flat = _gate_with_pairs(0.0, 12)
    flat.pick(3, 4, when=0, step=math.log(0.9))
    assert not flat.named(3, 4, sign=-1)


def _gate_on_a_switching_machine(switching: bool) -> NamingGate:
    """GOOD (0) and BAD (9) -20% in 12 side-by-side pairs while the machine's speed switches
    between 1 and 0.8 every 4 pairs (or not), then step (3, 4) of -3% picked at round 30 and 5
    fresh pairs of it; 1% noise per sample."""
    rng = np.random.default_rng(11)
    book = SampleBook(pair_window=2)
    draw = lambda level: float(level * math.exp(rng.normal(0, 0.01)))  # noqa: E731
    for k in range(12):
        speed = 0.8 if switching and (k // 4) % 2 else 1.0
        book.add(0, draw(1000 * speed), tag=None, when=2 * k)
        book.add(9, draw(800 * speed), tag=None, when=2 * k + 1)
    book.add(3, draw(1000), tag=None, when=25)
    book.add(4, draw(970), tag=None, when=26)
    gate = NamingGate(book, name_alpha=0.001)
    gate.pick(3, 4, when=30, step=math.log(0.97))
    for k in range(5):
        book.add(3, draw(1000), tag=None, when=31 + 2 * k)
        book.add(4, draw(970), tag=None, when=32 + 2 * k)
    return gate


def test_on_a_machine_that_changed_the_gate_reads_the_spread_within_pairs():
    # GOOD's and BAD's samples span both speeds, so the spread within commits is ~10% while a
    # pair's two samples share one: the pooled spread left a 3% step unnamed after 5 fresh pairs
    changed, steady = _gate_on_a_switching_machine(True), _gate_on_a_switching_machine(False)
    assert changed.book.own_noise().sigma > 5 * changed.book.pair_noise().sigma
    assert changed.targets[(3, 4)].paired and not steady.targets[(3, 4)].paired
    assert changed.named(3, 4, sign=-1) and steady.named(3, 4, sign=-1)
    assert not changed.named(3, 4, sign=1)


def test_side_by_side_pairs_use_each_sample_once_and_only_within_the_window():
    book = SampleBook(pair_window=2)
    for index, value, when in [(0, 1000.0, 0), (1, 900.0, 1), (1, 910.0, 2), (0, 1010.0, 3),
                               (2, 800.0, 4), (0, 1020.0, 9), (3, 700.0, 10)]:
        book.add(index, value, tag=None, when=when)
    book.add(3, None, tag=None, when=11)
    book.add(3, None, tag=None, when=12)                       # 3 is now unmeasurable
    pairs = book.pairs()
    # (0, 1) twice in ABBA order; 2 alone (its neighbour 0 at round 9 is 5 rounds later); 3 is out
    assert pairs.diffs == {(0, 1): [pytest.approx(math.log(0.9)), pytest.approx(math.log(910 / 1010))]}
    assert pairs.rounds == {(0, 1): [1, 3]} and pairs.samples == {0: [0, 1], 1: [0, 1]}
    assert book.pair_noise().df == 1 and not book.drifting()


def test_pairs_before_the_pick_do_not_count_and_a_later_pick_gets_a_smaller_share():
    gate = _gate_with_pairs(0.10, 3)
    target = gate.pick(3, 4, when=100, step=math.log(0.9))   # picked after every pair
    assert gate.fresh_pairs(3, 4) == [] and not gate.named(3, 4, sign=-1)
    assert gate.pick(3, 4, when=200, step=0.5) is target      # the first pick stands
    second = gate.pick(5, 6, when=1, step=0.1)
    assert (target.order, second.order) == (1, 2)


def test_a_culprits_own_interval_is_valid_at_any_stop_and_wider_than_a_fixed_n_one():
    gate = _gate_with_pairs(0.10, 6)
    gate.pick(3, 4, when=0, step=math.log(0.9))
    est, half = gate.own_size(3, 4, sigma=0.01)
    assert est - half < est < est + half < 0 and est == pytest.approx(math.log(0.9), abs=0.02)
    assert half > 1.96 * 0.01 * math.sqrt(2 / 6)   # the fixed-n t interval's half width
    assert gate.own_size(3, 4, sigma=math.nan) is None and gate.own_size(5, 6, sigma=0.01) is None


def _side_book(lo_level: float, hi_level: float, fresh_hi: float, n: int = 8, noise: float = 0.01) -> SampleBook:
    """Ends 0 and 5 of a side: n samples each before round 100 at their levels, then n fresh pairs
    with the far end at `fresh_hi`; a third candidate adds noise degrees of freedom."""
    rng = np.random.default_rng(3)
    book = SampleBook(pair_window=2)
    for k in range(n):
        book.add(0, float(lo_level * math.exp(rng.normal(0, noise))), tag=None, when=k)
        book.add(5, float(hi_level * math.exp(rng.normal(0, noise))), tag=None, when=k)
        book.add(9, float(500 * math.exp(rng.normal(0, noise))), tag=None, when=k)
    for k in range(n):
        book.add(0, float(lo_level * math.exp(rng.normal(0, noise))), tag=None, when=101 + 2 * k)
        book.add(5, float(fresh_hi * math.exp(rng.normal(0, noise))), tag=None, when=102 + 2 * k)
    return book


def _rule(book: SampleBook, side_pairs: int | None = None) -> SideRule:
    return SideRule(book, min_effect=0.02, alpha=0.05, side_share=0.2, side_drop=0.1, side_pairs=side_pairs)


def test_a_side_whose_ends_differ_our_way_is_searched_and_a_flat_one_cleared():
    searched = _rule(_side_book(1000.0, 900.0, 900.0)).decide(0, 5, since=100, sign=-1, gap_scale=0.1)
    assert searched[0] == "searched"
    outcome, ruled_out = _rule(_side_book(1000.0, 1000.0, 1000.0)).decide(0, 5, since=100, sign=-1, gap_scale=0.1)
    assert outcome == "cleared" and 0.0196 <= ruled_out < 0.03   # never less than min_effect (as a drop)
    # a speed-up between the ends is no further slowdown: not searched when hunting slowdowns
    assert _rule(_side_book(1000.0, 1100.0, 1100.0)).decide(0, 5, since=100, sign=-1, gap_scale=0.1)[0] == "cleared"


def test_a_flat_side_on_a_noisy_machine_is_cleared_in_about_side_pairs_pairs_down_to_what_they_rule_out():
    """At 14% noise, ruling out a fifth of a 15% gap (3%) takes about 2 (1.28 x 0.14 / 0.03)^2 = 70
    fresh pairs per side: the side checks were 35% of a 5-hunk hunt's probes. The margin is now at
    least what side_pairs pairs rule out (and the cleared side reports what its pairs bound)."""
    book = _side_book(1000.0, 1000.0, 1000.0, n=10, noise=0.14)
    assert _rule(book, side_pairs=8).pairs_margin(*book.pooled_sigma()) > 0.08
    outcome, ruled_out = _rule(book, side_pairs=8).decide(0, 5, since=100, sign=-1, gap_scale=0.15)
    assert outcome == "cleared" and ruled_out >= 0.0198   # never less than min_effect (as a drop)
    # sized by the gap alone (the commit hunt), the same ten pairs leave the check open
    assert _rule(book).decide(0, 5, since=100, sign=-1, gap_scale=0.15) is None
    assert _rule(book).pairs_margin(*book.pooled_sigma()) == 0.0
    # on a quiet machine the margin is a fifth of the gap either way
    quiet = _side_book(1000.0, 1000.0, 1000.0, n=10, noise=0.005)
    assert _rule(quiet, side_pairs=8).pairs_margin(*quiet.pooled_sigma()) < 0.2 * 0.15
    assert _rule(quiet, side_pairs=8).decide(0, 5, since=100, sign=-1, gap_scale=0.15)[1] < 0.035


def test_a_side_is_cleared_only_if_its_fresh_pairs_agree():
    """All samples alike, but the pairs taken after the pick show the far end 5% slower: not
    cleared (the early samples may come from another state of the machine)."""
    book = _side_book(1000.0, 1050.0, 950.0)
    assert _rule(book).decide(0, 5, since=100, sign=-1, gap_scale=0.1) is None
    assert _rule(book).decide(0, 5, since=1000, sign=-1, gap_scale=0.1) is None   # no fresh pairs yet


def _quiet_rest_noisy_ends(noise: float, n: int = 3) -> SampleBook:
    """A side 0..5 whose ends read alike at `noise` (n samples each before round 100, n fresh pairs
    after it), in a hunt of ten other commits at 0.5% (`_quiet_hunt_and`)."""
    rng = np.random.default_rng(12)
    ends: dict[int, list[tuple[int, float]]] = {0: [], 5: []}
    for i in (0, 5):
        ends[i] += [(k, float(1000 * math.exp(rng.normal(0, noise)))) for k in range(1, n + 1)]
    for k in range(n):
        for i in (0, 5):
            ends[i].append((101 + 2 * k + (i == 5), float(1000 * math.exp(rng.normal(0, noise)))))
    return _quiet_hunt_and(ends)


def test_a_side_whose_ends_are_noisier_than_the_rest_is_not_cleared_on_the_pools_quiet():
    """Host-bound ends (5%) in a hunt of GPU-bound commits (0.5%): on the pool's quiet, three fresh
    pairs ruled out a 2% step between them, which their own spread cannot. In a simulated hunt of
    that shape (32 commits, -10% at #8 and every commit from it on at 5%, a second step of -5% at
    #20) the side that held the second step was cleared below 5% in 66 of 1,000 hunts (36 now)."""
    book = _quiet_hunt_and({})
    noisy = _quiet_rest_noisy_ends(0.05)
    assert noisy.noise(of=(0, 5)).sigma > 4 * book.noise().sigma         # the ends' own spread
    assert _rule(noisy).decide(0, 5, since=100, sign=-1, gap_scale=0.1) is None
    # ends as quiet as the rest are cleared on as many pairs
    assert _rule(_quiet_rest_noisy_ends(0.005)).decide(0, 5, since=100, sign=-1, gap_scale=0.1)[0] == "cleared"


def _arm(pairs: list[tuple[float, float]], direction: str = "slower", max_samples: int = 96,
         stall_share: float = SearchSettings().stall_share) -> ControlArm:
    book = SampleBook(pair_window=2)
    arm = ControlArm(book, SearchSettings(direction=direction, max_samples=max_samples, stall_share=stall_share), 0, 7)
    for k, (good, bad) in enumerate(pairs):
        book.add(0, good, tag=arm.tag, when=2 * k + 1)
        book.add(7, bad, tag=arm.tag, when=2 * k + 2)
    return arm


def test_the_control_arm_reproduces_a_clear_slowdown_in_five_pairs_and_stops_on_none():
    rng = np.random.default_rng(5)
    noisy = lambda level: float(level * math.exp(rng.normal(0, 0.005)))  # noqa: E731
    slow = [(noisy(1000), noisy(900)) for _ in range(5)]     # 10% at 0.5% noise
    # three pairs show it; where a mode of up to half the runs may not have shown yet, the fifth
    # is what tells it from one shape split between the ends (`pairs_to_reproduce`: four such
    # pairs are (1/4)^4 = 0.4% at a 50% mode, beside the arm's own 0.5%)
    assert _arm(slow[:3], stall_share=0.0).decide() == "reproduced"
    assert _arm(slow[:4]).decide() is None and _arm(slow).decide() == "reproduced"
    flat = [(noisy(1000), noisy(1000)) for _ in range(40)]
    verdicts = [_arm(flat[:k]).decide() for k in range(1, 41)]
    assert verdicts[0] is None and "not-reproduced" in verdicts and "reproduced" not in verdicts
    # a speed-up is not the slowdown this arm hunts, and the reason names the flag that hunts it
    faster = _arm([(noisy(1000), noisy(1200)) for _ in range(6)])
    assert faster.decide() == "not-reproduced"
    assert "--direction faster" in faster.not_reproduced_reason("not-reproduced", out_of_probes=False)


def test_where_runs_are_read_as_interfered_a_clear_change_the_other_way_ends_the_hunt_only_at_twelve_pairs():
    """GOOD's three runs all at 0.7x (one hunt in 64 where a quarter of the runs are) read a real
    10% slowdown as a +28% speed-up, and the hunt ended 'not reproduced' (bench_accuracy
    --interference, 32 commits, trial 72)."""
    rng = np.random.default_rng(5)
    noisy = lambda level: float(level * math.exp(rng.normal(0, 0.02)))  # noqa: E731

    def arm(pairs):
        book = SampleBook(pair_window=2, read_interference=True)
        arm = ControlArm(book, SearchSettings(), 0, 7)
        for k, (good, bad) in enumerate(pairs):
            book.add(0, good, tag=arm.tag, when=2 * k + 1)
            book.add(7, bad, tag=arm.tag, when=2 * k + 2)
        return arm

    interfered_good = [(noisy(700), noisy(900)) for _ in range(3)]
    assert arm(interfered_good).decide() is None                     # goes on for more pairs
    faster = [(noisy(1000), noisy(1300)) for _ in range(12)]          # a real speed-up still ends it
    assert arm(faster[:11]).decide() is None and arm(faster).decide() == "not-reproduced"


def test_a_clear_change_the_other_way_waits_while_an_end_could_sit_at_the_level_of_its_runs_read_off():
    """GOOD's runs 12 of 17 at 0.7x (bench_accuracy --interference, 32 commits, trial 93): its
    level was read there, its five runs at its real level as a 'fast kind', and at 12 pairs a real
    10% slowdown ended 'not reproduced' as a +28% speed-up. The runs of that arm, in their order."""
    good = [998, 690, 696, 703, 696, 706, 703, 990, 700, 690, 1021, 705, 717, 1010, 986, 708, 676]
    bad = [884, 615, 900, 630, 878, 902, 919, 907, 886, 891, 651, 886, 892, 914, 605, 907]
    book = SampleBook(pair_window=2, read_interference=True)
    arm = ControlArm(book, SearchSettings(), 0, 31)
    for k in range(max(len(good), len(bad))):
        for i, runs in ((0, good), (31, bad)):
            if k < len(runs):
                book.add(i, float(runs[k]), tag=arm.tag, when=2 * k + (i == 31))
    assert arm.decide() is None                                       # goes on for more pairs
    assert arm.pairs() == 12 and arm._the_other_way(arm.comparison)   # at a clear change the other way
    # GOOD's runs then come at its level, as three of four do: the slowdown is reproduced
    rng = np.random.default_rng(93)
    k = len(good)
    while (verdict := arm.decide()) is None and k < 60:
        (i,) = arm.next_samples(1)
        level = 1000 if i == 0 else 900
        book.add(i, float(level * (0.7 if k % 4 == 3 else 1.0) * math.exp(rng.normal(0, 0.02))), tag=arm.tag, when=2 * k)
        k += 1
    assert verdict == "reproduced"


def test_a_control_arm_at_its_cap_with_runs_read_as_interfered_does_not_say_it_ruled_a_slowdown_out():
    """The arm's cap counts every run, its pairs only typical ones: a real hunt of a 13% step
    (bench_bimodal_hunt.py, a busy machine) ended at the cap with 90 typical pairs of 96, 'not
    reproduced' at -8.9% (95% CI -15.6%..-1.7%), and the reason said 'a slowdown of 2.0% or more is
    ruled out (anytime-valid test)', with no command to go on."""
    rng = np.random.default_rng(1)
    book = SampleBook(pair_window=2, read_interference=True)
    arm = ControlArm(book, SearchSettings(max_samples=16, stall_share=0), 0, 7)   # the stall test: below
    for k in range(16):                                    # three runs of each end doubled their work
        book.add(0, float(1000 * (0.5 if k in (3, 9, 13) else 1.0) * math.exp(rng.normal(0, 0.05))), tag=arm.tag, when=2 * k + 1)
        book.add(7, float(965 * (0.5 if k in (1, 6, 11) else 1.0) * math.exp(rng.normal(0, 0.05))), tag=arm.tag, when=2 * k + 2)
    assert arm.decide() == "not-reproduced" and arm.pairs() == 13
    reason = arm.not_reproduced_reason("not-reproduced", out_of_probes=False)
    assert "ruled out (anytime-valid" not in reason and "more --max-samples would tell" in reason
    assert arm.more_pairs_would_tell()
    # at --stall-share 0.3 sixteen pairs with three runs of each end off do not rule a stall out
    stalls = ControlArm(book, SearchSettings(max_samples=16), 0, 7)
    assert stalls.decide() == "undecided"
    assert "(--stall-share) is not ruled out" in stalls.not_reproduced_reason("undecided", out_of_probes=False)


def test_a_control_arm_at_its_cap_whose_interval_shows_a_slowdown_is_undecided_not_not_reproduced():
    """Real hunts of a 13% step on a busy machine ended 'not reproduced' (exit 2) at the arm's cap
    at -8.9% (95% CI -15.6%..-1.7%, p=0.017) and -11.7% (p=0.023): a slowdown beyond --min-effect
    whose interval excludes zero is a question left open, with the command that goes on."""
    rng = np.random.default_rng(1)
    book = SampleBook(pair_window=2, read_interference=True)
    arm = ControlArm(book, SearchSettings(max_samples=16), 0, 7)
    for k in range(16):
        book.add(0, float(1000 * (0.5 if k in (3, 9, 13) else 1.0) * math.exp(rng.normal(0, 0.05))), tag=arm.tag, when=2 * k + 1)
        book.add(7, float(955 * (0.5 if k in (1, 6, 11) else 1.0) * math.exp(rng.normal(0, 0.05))), tag=arm.tag, when=2 * k + 2)
    assert arm.decide() == "undecided"
    assert 0.01 < arm.comparison.p_value < 0.05 and arm.comparison.change < -0.02
    assert "more --max-samples would tell" in arm.not_reproduced_reason("undecided", out_of_probes=False)


def test_the_control_arm_asks_for_pairs_in_abba_order_and_gives_up_on_an_unmeasurable_end():
    arm = _arm([])
    assert arm.next_samples(1) == [0] and arm.next_samples(2) == [0, 7]
    arm.book.add(0, 1000.0, tag=arm.tag, when=1)
    assert arm.next_samples(2) == [7]                       # the lagging end first
    arm.book.add(7, 990.0, tag=arm.tag, when=2)
    assert arm.next_samples(2) == [7, 0]                    # then B A
    arm.book.add(7, None, tag=arm.tag, when=3)
    arm.book.add(7, None, tag=arm.tag, when=4)
    arm.book.add(7, None, tag=arm.tag, when=5)
    assert arm.decide() == "all-skipped"



def test_a_search_goes_on_from_pairs_of_its_ends_measured_before_it():
    # the hunk hunt's search for what a step needs starts from the alone test's BASE and prefix
    # arms: four clear pairs carried, the control arm decides without a probe of its own
    rng = np.random.default_rng(3)
    noisy = lambda level: float(level * math.exp(rng.normal(0, 0.01)))  # noqa: E731
    search = PrefixSearch(8, SearchSettings())
    search.carry_control_pairs([noisy(1000) for _ in range(4)], [noisy(900) for _ in range(4)])
    first = search.next_batch(1)
    assert first and first[0].reason != "control arm" and first[0].index not in (0, 7)
    assert search.control.pairs() == 4
    with pytest.raises(RuntimeError):
        search.carry_control_pairs([1000.0], [900.0])

def test_the_hunk_hunt_calls_the_commit_searchs_rules_with_the_two_places_they_still_differ():
    # one copy of each rule; where the hunk hunt's use differs a parameter says so, until a later
    # change makes them one: the skip rule (a subset that ran once runs) ...
    assert unmeasurable_by_skips(3, 1) and not unmeasurable_by_skips(3, 1, one_sample_settles=True)
    assert unmeasurable_by_skips(2, 0, one_sample_settles=True) and not unmeasurable_by_skips(1, 0)
    # ... and the shares rule (the commit search exempts --direction both, the hunk hunt does not)
    over = [(-0.5, -0.4)]                    # surely more than share_limit of a 10% gap
    gap = math.log1p(-0.10)
    assert shares_do_not_add_up(over, gap, 1.25, direction="slower")
    assert not shares_do_not_add_up(over, gap, 1.25, direction="both")
    assert shares_do_not_add_up(over, gap, 1.25, direction="both", exempt_both=False)
    # the leave-one-out tests spend half of name_alpha on the naming gate's schedule
    spender = AlphaSpender(0.001 / 2)
    assert [spender.next() for _ in range(3)] == [0.001 / (2 * k * (k + 1)) for k in (1, 2, 3)]


# -- the driver loop ----------------------------------------------------------------------------------

def test_the_driver_feeds_every_measure_back_in_order_and_reports_after_each_record():
    executor = FakeExecutor(FakeHistory(step_levels(16, {9: -0.2}), 0.005), 3)
    search = CommitSearch(16, SearchSettings())
    seen: list[tuple[int, int]] = []   # (index, samples of it the search held when told)

    def measure(batch):
        return [(m.index, executor.measure(m.index, 0)) for m in batch]

    result = drive(search, measure, slots=2, value=lambda outcome: outcome[1],
                   recorded=lambda m, outcome: seen.append((m.index, len(search.samples(m.index)))))
    assert [c.first_bad for c in result.culprits] == [9]
    assert len(seen) == executor.executions == result.probes
    # every callback comes after its sample was recorded: the counts it saw grow one by one
    counts: dict[int, int] = {}
    for index, held in seen:
        counts[index] = counts.get(index, 0) + 1
        assert held == counts[index]


def test_the_driver_refuses_a_round_measured_short():
    with pytest.raises(ValueError, match="outcomes for a round of 2"):
        drive(CommitSearch(8, SearchSettings()), lambda batch: [1000.0], slots=2)


# -- what the localisation measures next -----------------------------------------------------------

class _Bracket:
    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi


def _posterior_over(gaps_mass: dict[int, float], lo: int, hi: int):
    gaps = [(a, a + 1) for a in range(lo, hi)]
    probs = np.array([gaps_mass.get(a, 0.0) for a, _ in gaps])
    return Posterior(gaps=gaps, probs=probs / probs.sum(), step_hat=np.zeros(len(gaps)))


def test_the_picker_measures_the_posterior_median_and_its_quantiles_never_a_capped_commit():
    book = SampleBook(2)
    capped: set[int] = set()
    picker = Picker(book, lambda i: i in capped)
    post = _posterior_over({a: 1.0 for a in range(16)}, 0, 16)   # flat over 0..16
    assert picker.quantiles(_Bracket(0, 16), post, 1, exclude=set()) == [8]
    assert picker.quantiles(_Bracket(0, 16), post, 3, exclude=set()) == [4, 8, 12]
    capped.add(8)
    assert picker.quantiles(_Bracket(0, 16), post, 1, exclude=set()) in ([7], [9])


def test_the_picker_re_measures_an_end_once_an_interior_pick_has_about_as_many_samples():
    book = SampleBook(2)
    picker = Picker(book, lambda i: False)
    for t in range(3):
        book.add(0, 1000.0, tag=None, when=t)
        book.add(16, 900.0, tag=None, when=t)
    book.add(8, 950.0, tag=None, when=4)
    assert picker.anchor(_Bracket(0, 16), [8]) is None
    book.add(8, 950.0, tag=None, when=5)
    assert picker.anchor(_Bracket(0, 16), [8]) in (0, 16)   # 2 + 1 >= 3 samples of an end


def test_the_picker_steps_past_a_run_of_unmeasurable_commits_by_halves():
    book = SampleBook(2)
    picker = Picker(book, lambda i: False)
    book.add(0, 1000.0, tag=None, when=0)
    book.add(32, 900.0, tag=None, when=0)
    for i in (10, 11):                 # a broken build over 10..11, found unmeasurable
        book.add(i, None, tag=None, when=1)
        book.add(i, None, tag=None, when=2)
    # 12 is untried and next to the run: halfway between it and the next sampled commit instead
    assert picker.past_skips(_Bracket(0, 32), 12) == (12 + 32) // 2
    assert picker.past_skips(_Bracket(0, 32), 9) == (0 + 9 + 1) // 2
    assert picker.past_skips(_Bracket(0, 32), 20) == 20      # not beside the run


# -- the culprit rule ---------------------------------------------------------------------------------

def test_the_culprit_rule_names_a_real_step_and_keeps_a_step_between_equal_commits_a_suspect():
    rng = np.random.default_rng(5)
    book = SampleBook(2)
    levels = {0: 1000.0, 3: 1000.0, 4: 1000.0, 5: 900.0, 6: 900.0, 9: 900.0}   # the step is 4 -> 5
    for t in range(8):
        for i, level in levels.items():
            book.add(i, level * float(np.exp(rng.normal(0.0, 0.01))), tag=None, when=t)
    rule = CulpritRule(book, SearchSettings(), NamingGate(book, 0.001), n=10)

    def confirmed(a: int, b: int) -> Culprit:
        return Culprit(first_bad=b, last_good=a, step=math.nan, step_ci95=(math.nan, math.nan),
                       step_tok_s=math.nan, share_of_gap=math.nan)

    named, suspects = rule.named_culprits([confirmed(4, 5)])
    assert [c.first_bad for c in named] == [5] and not suspects
    assert named[0].step == pytest.approx(-0.10, abs=0.01) and named[0].share_of_gap == pytest.approx(1.0, abs=0.05)
    # one commit off: the segment fit still shows most of the step, its own two commits do not
    named, suspects = rule.named_culprits([confirmed(5, 6)])
    assert not named and [c.first_bad for c in suspects] == [6]
    gap, se = rule.end_difference()
    assert gap == pytest.approx(np.log(0.9), abs=0.01) and 0 < se < 0.01


# -- pairing and confirmation -----------------------------------------------------------------------

def test_pairs_go_in_abba_order_a_fresh_sample_gets_its_partner_and_slots_alternate_within_the_caps():
    book = SampleBook(2)
    room = {3: 96, 4: 96}
    pairing = Pairing(book, pair_window=2, room=lambda i: room[i])
    assert pairing.next(3, 4, slots=1, last_round=0) == [3]          # no pair yet: a first
    book.add(3, 1000.0, tag=None, when=1)
    assert pairing.next(3, 4, slots=1, last_round=1) == [4]          # its partner, within the window
    book.add(4, 900.0, tag=None, when=2)
    assert pairing.next(3, 4, slots=1, last_round=2) == [4]          # one pair: the second starts with b (ABBA)
    assert pairing.next(3, 4, slots=2, last_round=2) == [3, 4]
    assert pairing.round_of(3, 4, slots=4, last_round=2) == [3, 4, 3, 4]
    book.add(3, 1000.0, tag=None, when=3)                             # an odd sample in the last round
    assert pairing.round_of(3, 4, slots=3, last_round=3)[0] == 4      # its partner opens the round
    room[4] = 1
    assert pairing.round_of(3, 4, slots=4, last_round=3) == [4, 3, 3]   # never past a cap


def _confirmation(drop: float, pairs: int, *, capped=frozenset(), stall_share: float = 0.0):
    """A step 3..4 whose two commits have `pairs` pairs at 1% noise, taken before the pick."""
    rng = np.random.default_rng(3)
    book = SampleBook(pair_window=2)
    for k in range(pairs):
        book.add(3, float(1000 * math.exp(rng.normal(0, 0.01))), tag=None, when=1 + 2 * k)
        book.add(4, float(1000 * (1 - drop) * math.exp(rng.normal(0, 0.01))), tag=None, when=2 + 2 * k)
    settings = SearchSettings()
    gate = NamingGate(book, settings.name_alpha, stall_share)
    is_capped = lambda i: i in capped   # noqa: E731
    picker = Picker(book, is_capped)
    pairing = Pairing(book, settings.pair_window, lambda i: 0 if i in capped else settings.max_samples)
    beside = []
    confirm = StepConfirmation(book, settings, gate, picker, pairing, is_capped,
                               lambda iv, a, b, slots: beside)
    post = _posterior_over({3: 1.0}, 0, 8)   # all the mass on the step 3..4, of the size drawn
    post = Posterior(gaps=post.gaps, probs=post.probs, step_hat=np.full(len(post.gaps), math.log1p(-drop)))
    return confirm, post, book, gate


def test_a_proposed_step_its_pairs_show_is_handed_to_the_gate_and_one_they_do_not_show_is_refuted():
    confirm, post, book, gate = _confirmation(0.10, pairs=4)
    best = post.gaps.index((3, 4))
    last = max(book.time[4])
    step = confirm.decide(_Bracket(0, 8), post, best, slots=1, last_round=last, sign=-1)
    # the SPRT accepts the step on the pairs that picked it; naming it needs pairs taken since
    assert step.action == "measure" and step.picks == ((3, "confirm step 3..4"),)
    assert gate.since(3, 4) == last and gate.fresh_pairs(3, 4) == []
    flat, post, book, _ = _confirmation(0.0, pairs=12)
    assert flat.decide(_Bracket(0, 8), post, best, slots=1, last_round=max(book.time[4]), sign=-1).action is Action.REFUTED


def test_a_step_the_fresh_pairs_show_is_named_and_a_capped_commit_gives_the_bracket_up():
    confirm, post, book, gate = _confirmation(0.10, pairs=4)
    best = post.gaps.index((3, 4))
    last = max(book.time[4])
    confirm.decide(_Bracket(0, 8), post, best, slots=1, last_round=last, sign=-1)   # the pick
    for k in range(2):   # two fresh pairs of a 10% step at 1% noise
        book.add(3, 1000.0 * (1 + 0.005 * k), tag=None, when=last + 1 + 2 * k)
        book.add(4, 900.0, tag=None, when=last + 2 + 2 * k)
    assert confirm.decide(_Bracket(0, 8), post, best, slots=1, last_round=last + 4, sign=-1).action is Action.NAMED
    stuck, post, book, _ = _confirmation(0.10, pairs=4, capped={4})
    assert stuck.decide(_Bracket(0, 8), post, best, slots=1, last_round=max(book.time[4]), sign=-1).action is Action.GIVE_UP


def test_a_commit_at_its_cap_still_takes_a_found_steps_fresh_pairs_up_to_the_gates_floor():
    """The floor of fresh pairs (5 where a mode of 30% may hide) is the price of naming a step
    found: a commit sampled to its cap on the way is no reason to give the step up below it."""
    confirm, post, book, gate = _confirmation(0.10, pairs=4, capped={4}, stall_share=0.3)
    best = post.gaps.index((3, 4))
    last = max(book.time[4])
    step = confirm.decide(_Bracket(0, 8), post, best, slots=1, last_round=last, sign=-1)
    need = gate.fresh_pairs_needed(3, 4)
    assert need == 5 and step.action is Action.MEASURE and step.picks == ((3, "confirm step 3..4"),)
    for k in range(need):   # the floor's pairs, flat: the step is not named on them
        book.add(3, 1000.0, tag=None, when=last + 1 + 2 * k)
        book.add(4, 1000.0, tag=None, when=last + 2 + 2 * k)
    assert confirm.decide(_Bracket(0, 8), post, best, slots=1, last_round=last + 2 * need, sign=-1).action is Action.GIVE_UP



@pytest.mark.parametrize("kind", [SprtDecision, Look, SideOutcome, CandidateCall, Direction, Executor, MeasureTag,
                                  OverheadDecision])
def test_the_searchs_outcomes_read_as_their_strings(kind):
    """Each member equals its value and is written as it: in f-strings, str() and the JSON report."""
    for member in kind:
        assert member == member.value and f"{member}" == str(member) == member.value
        assert json.dumps({"x": member}) == json.dumps({"x": member.value})


def test_the_control_arms_samples_carry_its_tag_and_show_its_words():
    """The prefix search tells the control arm's samples apart by the member (`is`), so the arm
    hands the member itself; the progress display and a sample's note show its value."""
    run = simulate(FakeHistory(step_levels(8, {4: -0.2}), 0.01), seed=1)
    first = run.reasons[0]
    assert first and all(r is MeasureTag.CONTROL_ARM for r in first)
    assert f"#0 {first[0]}" == "#0 control arm"
    assert not any(r is MeasureTag.CONTROL_ARM for r in run.reasons[-1])


def test_a_direction_given_as_its_word_is_held_as_the_member():
    assert SearchSettings(direction="faster").direction is Direction.FASTER
    assert SearchSettings().direction is Direction.SLOWER
    with pytest.raises(ValueError, match="direction must be one of"):
        SearchSettings(direction="sideways")
