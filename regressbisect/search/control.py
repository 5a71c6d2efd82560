"""The control arm: does GOOD -> BAD hold a regression in the hunted direction at all?

Pure (numpy/scipy only). GOOD and BAD are measured in interleaved pairs (ABBA order when one
sample runs at a time) and looked at after every pair with anytime-valid e-values on log tok/s
(docs/search.md, section 1). The commit search runs it first (bisect.py); the hunk hunt holds a
subset against BASE to the same rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np
from scipy.stats import fisher_exact

from regressbisect.search.book import SampleBook
from regressbisect.search.direction import hunted_sign, toward
from regressbisect.search.interference import level_in_doubt
from regressbisect.search.naming import MOST_READ_OFF, fresh_pairs_to_tell_a_mode
from regressbisect.search.stats import EFFECT_PRIORS, Comparison, NoisePool, compare, far_pairs_sign_log_e, log_threshold, paired_log_diffs, pooled_t_log_bf, sign_log_e, stall_log_e
from regressbisect.search.verdicts import Verdict
from regressbisect.enums import WordEnum

if TYPE_CHECKING:
    from regressbisect.config import Direction

__all__ = ["ControlArm", "ControlOutcome", "Look", "ShapeChange", "run_control_arm", "shows_step"]


def shows_step(before: Sequence[float], after: Sequence[float], noise: NoisePool, *, sign: int, alpha: float,
               min_effect: float, priors: Sequence[float] | None = None, least: int = 1) -> bool:
    """The control arm's 'go', for its arms and for the hunk hunt's: `after` differs from `before`
    (tok/s) in the hunted direction `sign` by at least min_effect, with an anytime-valid e-value
    (`stats.pooled_t_log_bf`, the difference of their mean log tok/s, `noise` the spread) of at
    least 1/alpha. priors: the e-value's effect prior (None: the default mixture). least: typical
    runs of each arm before it may answer (PAIRS_TO_DECIDE where runs are interfered)."""
    if len(before) < max(1, least) or len(after) < max(1, least):
        return False
    est = float(np.mean(np.log(after)) - np.mean(np.log(before)))
    c = 1 / len(before) + 1 / len(after)
    return (toward(est, sign) > 0 and abs(est) >= log_threshold(min_effect)
            and pooled_t_log_bf(est, c, noise, sign=sign, priors=priors or EFFECT_PRIORS) >= math.log(1 / alpha))


def rules_out_step(before: Sequence[float], after: Sequence[float], noise: NoisePool, *, sign: int, alpha: float,
                   min_effect: float, least: int = 1) -> bool:
    """The control arm's 'stop', for the hunk hunt's tests: `after` differs from `before` by less
    than min_effect in the hunted direction `sign` (either way for 0), with an e-value against a
    step of exactly min_effect of at least 5/alpha (`ControlArm._beyond_null`)."""
    if len(before) < max(1, least) or len(after) < max(1, least):
        return False
    est = float(np.mean(np.log(after)) - np.mean(np.log(before)))
    c = 1 / len(before) + 1 / len(after)
    margin = log_threshold(min_effect)
    nulls = [-margin, margin] if sign == 0 else [sign * margin]
    return all(ControlArm._beyond_null(est, c, noise, null, math.log(5 / alpha)) for null in nulls)


class Look(WordEnum):
    """What one look of the control arm at its pairs says (`ControlArm._look`)."""

    GO = "go"
    """A regression in the hunted direction."""
    STOP = "stop"
    """None of min_effect."""
    MORE = "more"
    """Neither yet: take another pair."""


PAIRS_TO_DECIDE = 3
"""Typical runs of each end before the arm may answer either way. Two runs of an end can both be
interfered with (one hunt in 16 where a quarter of the runs are 30% slow), and then read alike: a
real step reads as a speed-up, an A/A range as a step. Of three, two alike beside one far off
are told apart (search/interference.py), and three off at once is rarer than the arm's levels."""


SHAPE_LEVEL = 0.01
"""Level at which the ends' shares of runs off their levels differ (`ControlArm._shapes_differ`):
past it the hunt reads every run. A false reading costs executions (every run's spread is
wider), as `--no-interference` does."""


KIND_LEVEL = 0.05
"""Level at which an end's runs off at one depth outnumber the other end's at that depth
(`ControlArm._a_kind_of_its_own`): past it the arm takes more pairs before 'stop' (a false
reading costs pairs up to the cap, never a verdict)."""
KIND_WIDTH = 2.5
"""Runs within this many typical sigmas of a depth are of its kind (99% of one kind's runs): a
stall at 0.7x and a tail at 0.6x lie 0.15 apart in log tok/s, 7.5 sigmas at 2% noise."""


PAIRS_FOR_THE_OTHER_WAY = 12
"""Pairs before the arm ends a hunt on a clear change against the hunted direction where runs are
read as interfered. An end most of whose runs were slowed reads at the interfered level, and a real
slowdown then reads as a clear speed-up (3 of 3 runs of GOOD at 0.7x: one hunt in 64 where a
quarter of the runs are). The other way is where such an end leads; at 12 pairs, 9 of an end's 12
runs off at a quarter is one in 2,500, and by then the hunt's kinds of interference read it. It
waits longer while an end's runs read off could be its level (`_an_end_in_doubt`): GOOD read 12 of
its 17 runs at 0.7x, and at 12 pairs a real 10% step ended 'not reproduced' (trial 93 of
bench_accuracy --interference, 32 commits)."""


@dataclass(frozen=True)
class ShapeChange:
    """The ends' runs differ in shape, not only in level: BAD sends a share of its runs far off
    (a stall every few steps: a recompile, a GC pause, a data loader waiting) where GOOD does
    not, or the other way round. Interference is the machine's, the same at every commit; a change
    of shape is the commit's, and it is judged on every run (`ControlArm.decide`)."""

    side: int
    """Where the runs whose share changed lie: -1 below their end's level (slow), +1 above."""
    good_share: float
    """Share of GOOD's runs read far off its level on `side`, as the reading stood when the
    change was seen."""
    bad_share: float
    """The same of BAD's runs."""
    factor: float
    """The median of those runs at the end with the larger share, over that end's level (0.70:
    they are 30% slow)."""
    change: float
    """Relative change of the mean of every run (geometric, GOOD -> BAD): what a long run gets."""
    moved: float
    """How much more the runs read off move BAD's mean log tok/s than GOOD's (their offsets over
    each end's runs): negative where BAD's stalls slow it."""


class ControlSettings(Protocol):
    min_effect: float
    direction: Direction
    alpha: float
    reproduce_alpha: float
    max_samples: int
    pair_window: int
    read_interference: bool
    stall_share: float


class ControlArm:
    """The pairs of `good` and `bad` (tagged `tag` in the book) and the verdict they reach."""

    def __init__(self, book: SampleBook, settings: ControlSettings, good: int, bad: int, *, ends_a_hunt: bool = True):
        """ends_a_hunt: its 'not reproduced' is a hunt's "no regression" (the commit search's arm, a
        hunk hunt's BASE against every hunk), which waits until no stall is left (`_no_stall_left`); a subset's
        arm inside a hunk hunt steers and does not."""
        self.book = book
        self.settings = settings
        self.ends_a_hunt = ends_a_hunt
        self.good, self.bad = good, bad
        self.tag = f"pair {good} {bad}"
        """Pairing tag of the arm's samples: other samples of GOOD and BAD are not its pairs."""
        self.comparison: Comparison | None = None
        """The last look (paired t on log tok/s), for the report and the reasons."""
        self.shape: ShapeChange | None = None
        """Set where the ends differed in shape (their every run showed the change, their typical
        runs did not): from then on the book reads every run."""
        self.stall_left_at_cap = False
        """Set where the arm ended undecided at its cap only because its pairs had not ruled a
        stall out (`_no_stall_left`): the reason says so."""

    def pairs(self) -> int:
        return min(len(self.book.values(self.good, self.tag)), len(self.book.values(self.bad, self.tag)))

    def decide(self) -> Verdict | None:
        """'reproduced', 'not-reproduced', 'undecided' (out of pairs, close), 'all-skipped' (an end
        cannot be measured), or None: take another pair (`next_samples`)."""
        self.stall_left_at_cap = False
        if self.book.unmeasurable(self.good) or self.book.unmeasurable(self.bad):
            return Verdict.ALL_SKIPPED
        a, b = self.book.values(self.good, self.tag), self.book.values(self.bad, self.tag)
        pairs = min(len(a), len(b))
        s = self.settings
        if pairs < self._pairs_to_decide(a, b) or len(a) != len(b):
            if not self.at_cap():
                return None
            # an end whose runs are all read as interfered lags without end: at the cap its
            # level cannot be read, and the arm's last look is on every run
            self.book.read_every_run()
            a, b = self.book.values(self.good, self.tag), self.book.values(self.bad, self.tag)
            pairs = min(len(a), len(b))
            if pairs == 0:
                return Verdict.UNDECIDED
        cmp = compare(a[:pairs], b[:pairs], min_effect=s.min_effect, alpha=s.alpha, paired=True)
        self.comparison = cmp
        outcome = self._look(a[:pairs], b[:pairs])
        if outcome == Look.GO and (pairs < self.pairs_to_reproduce() or not self._signs_agree(a[:pairs], b[:pairs])
                                   or self.shape is not None and not self._signs_show_the_shape(*self._arm_runs())):
            outcome = Look.MORE
        every = self._every_run()
        if outcome == Look.GO:
            if every is None or not self._shapes_differ():
                return Verdict.REPRODUCED
            # the ends' typical runs differ, but so do their shares of runs off their levels:
            # BAD's level was read at its stalled runs (3 of its first 5 at 0.7x), its other runs
            # then off above it, which none of GOOD's are. The typical runs are not one shape
            # shifted; the hunt reads every run from now on
            self.shape = self._shape(*every)
            self.book.read_every_run(machine=(self.good, self.bad))
            return self.decide()
        if every is not None:
            # A change of shape is a change: read apart as interference, BAD's stalls (a third of
            # its runs slow) left its typical runs at GOOD's level, and the arm ruled the slowdown
            # out. Interference is the machine's, the same at both ends; where every run shows
            # the change and the typical runs do not, the ends differ in shape, and the mean of
            # every run (what a long run's time follows) is what the hunt reads from now on
            shape = self._shape(*every)
            if (shape is not None and self._moves_our_way(shape) and min(map(len, every)) >= self.pairs_to_reproduce()
                    and self._look(*every, read=True) == Look.GO and self._signs_show_the_shape(*every)):
                self.shape = shape
                self.book.read_every_run(machine=(self.good, self.bad))
                self.comparison = compare(*every, min_effect=s.min_effect, alpha=s.alpha, paired=True)
                return Verdict.REPRODUCED
            if outcome == Look.STOP and (self._differs_our_way(*every) or self._a_kind_of_its_own()):
                outcome = Look.MORE    # ruled out on the typical runs, not on every run
        if outcome == Look.STOP and not self._no_stall_left() and not self.at_cap() and not self._the_other_way(cmp):
            outcome = Look.MORE    # a stall in a share of the runs may not have shown yet
        if outcome == Look.STOP:
            if not (self.book.read_interference and self._the_other_way(cmp)
                    and (pairs < PAIRS_FOR_THE_OTHER_WAY or self._an_end_in_doubt())):
                return Verdict.NOT_REPRODUCED
            if not self.at_cap():
                return None
        if self.at_cap() and every is not None and self._every_run_differs(*self._arm_runs()):
            # out of pairs with the typical runs alike and every run not: a change of shape whose
            # e-value did not come (a stall of 40% of the runs beside the machine's own 10% at 0.6x
            # read 'not a slowdown' at the cap in 9 hunts of 100). Every run of the arm, the pairs'
            # and the lagging end's beyond them (BAD's 96 runs beside GOOD's 62)
            shape = self._shape(*every)
            if shape is not None and self._moves_our_way(shape):
                self.shape = shape
                self.book.read_every_run(machine=(self.good, self.bad))
                self.comparison = compare(*every, min_effect=s.min_effect, alpha=s.alpha, paired=True)
                return Verdict.REPRODUCED
        if self.at_cap():
            # out of pairs (runs read as interfered count: the cap bounds the cost): one fixed-sample look, the t test at reproduce_alpha (the e-value
            # pays for looking at every pair; a last look at a known size does not, and with
            # it the chance of 'reproduced' on an A/A range is at most twice reproduce_alpha).
            # A difference of at least min_effect our way whose 95% interval excludes zero (p
            # below alpha) is a question left open ('undecided', with the command that goes on),
            # never 'not reproduced': real hunts of a 13% step on a busy machine ended there at
            # -8.9% (CI -15.6%..-1.7%, p=0.017) and -11.7% (p=0.023). Anything weaker is not
            # reproduced: on a noisy machine an A/A range's estimate is as often beyond
            # min_effect as not
            if self._reproduces(cmp, s.reproduce_alpha):
                return Verdict.REPRODUCED
            if every is not None and self._every_run_differs(*self._arm_runs(), level=s.alpha):
                # every run differs our way, close: not "ruled out", and the reason reads every run
                self.comparison = compare(*self._arm_runs(), min_effect=s.min_effect, alpha=s.alpha)
                return Verdict.UNDECIDED
            if self._reproduces(cmp, s.alpha):
                return Verdict.UNDECIDED
            # a stall the pairs have not ruled out is not 'no regression' at the cap either: 40% of
            # BAD's runs at 0.7x beside 16 of GOOD's 73 at the machine's 0.6x (twice its share, by
            # chance) read every run's mean -3.8% for a true -12%, and the t test ruled it out
            self.stall_left_at_cap = not self._no_stall_left()
            return Verdict.UNDECIDED if self.stall_left_at_cap else Verdict.NOT_REPRODUCED
        return None

    def _no_stall_left(self) -> bool:
        """No slow mode holding `stall_share` of the runs is left at the end the hunted change would
        slow: the stall e-value of every pair of the arm (`stats.stall_log_e`, runs read as
        interfered included) reaches the stop's 5 / alpha, on the hunted side (each side at half of
        it for 'both'). A run is stalled where it is below the ends' common level (the median of
        both ends' typical runs) by min_effect beyond three sigmas: a shallower one is a typical
        run, which the arm's own test reads (a steady -1.2% at 0.4% noise crossed min_effect alone
        in a pair of six), and a run of the machine's fast mode is no stall (scored against its
        pair's other run, a fast GOOD read as a stalled BAD: an A/A range of 30% of the runs at
        1.4x ended 'could not decide' at the cap in 11 of 100). No test of the typical runs rules
        out what the runs not taken may hold: four quick pairs at 1% noise ruled a 15% slowdown out
        whose stalls came one run in three, and a stall of 40% at 0.7x beside the machine's 10% at
        0.6x was ruled out where their counts had swapped by chance (a fixed 13 pairs let it
        through, and at the cap every run's mean read -3.8% for a true -12%). True where it ends no
        hunt (a subset's arm inside a hunk hunt steers) or at stall_share 0."""
        share = self.settings.stall_share
        if not self.ends_a_hunt or share <= 0:
            return True
        a, b = self._arm_runs()
        pairs = min(len(a), len(b))
        typical = self.book.values(self.good) + self.book.values(self.bad)
        if pairs == 0 or not typical:
            return False
        level = float(np.median(np.log(typical)))
        sigma = NoisePool.of([self.book.values(self.good), self.book.values(self.bad)]).sigma
        cut = log_threshold(self.settings.min_effect) + (3 * sigma if sigma > 0 else 0.0)
        x, y = np.log(np.asarray(a[:pairs])) - level, np.log(np.asarray(b[:pairs])) - level
        sides = self._stall_sides()
        return all(stall_log_e((y * side > cut).astype(float) - (x * side > cut).astype(float), share) >= self._stall_level()
                   for side in sides)

    def _stall_sides(self) -> list[int]:
        """The sides a stall is looked for on: the hunted one, or both for 'both'."""
        sign = hunted_sign(self.settings.direction)
        return [sign] if sign else [-1, 1]

    def _stall_level(self) -> float:
        """Log of the e-value `_no_stall_left` needs: the stop's 5 / alpha, split between the sides."""
        return math.log(5 * len(self._stall_sides()) / self.settings.alpha)

    def quiet_pairs_to_rule_out_a_stall(self) -> int:
        """Pairs with no run off before 'not reproduced' (`_no_stall_left`): 15 at 0.3 and 5%; 0
        where it ends no hunt."""
        share = self.settings.stall_share
        if not self.ends_a_hunt or share <= 0:
            return 0
        return next(n for n in range(1, 10_000) if stall_log_e([0.0] * n, share) >= self._stall_level())

    def _signs_agree(self, a: Sequence[float], b: Sequence[float]) -> bool:
        """Where a run of either end read off its level sits at the other end's level
        (`SampleBook.runs_at_the_other_level`), the ends may be one shape whose runs split between
        the two levels; 'go' then needs the signs of every pair of the arm too (`stats.sign_log_e`,
        a fair coin's martingale whatever the shape) at reproduce_alpha. Half the runs at 0.7x at
        both ends: BAD's three typical runs at the slow mode beside GOOD's at the fast one said
        'go' at -30%, and a hunk alone against BASE was named so."""
        sigma = NoisePool.of([a, b]).sigma
        if not self.book.runs_at_the_other_level(self.good, self.bad, sigma):
            return True
        diffs = paired_log_diffs(*self._arm_runs())
        sign = hunted_sign(self.settings.direction) or (1 if float(np.mean(diffs)) > 0 else -1)
        return sign_log_e(diffs, sign) >= math.log(1 / self.settings.reproduce_alpha)

    def _signs_show_the_shape(self, a: Sequence[float], b: Sequence[float]) -> bool:
        """Where the arm reads every run because the ends' shapes differ, 'go' needs the signs of
        its pairs far apart too (`stats.far_pairs_sign_log_e` at reproduce_alpha), valid whatever
        the shape: the test that read a change of shape (Fisher's exact at SHAPE_LEVEL) looks at
        every pair, and the e-value of every run's mean assumes one normal spread. Half the runs
        at 0.7x at both ends: GOOD's first seven all quick beside BAD's six of seven slow read
        -27% and an A/A range was searched (2 hunts in 300)."""
        d = paired_log_diffs(a, b)
        if d.size == 0:
            return False
        sign = hunted_sign(self.settings.direction) or (1 if float(np.mean(d)) > 0 else -1)
        return far_pairs_sign_log_e(d, sign, self.settings.min_effect) >= math.log(1 / self.settings.reproduce_alpha)

    def at_cap(self) -> bool:
        """An end has taken max_samples runs of the arm (runs read as interfered count: the cap
        bounds the cost), though fewer of its pairs may be typical: both ends, or the one the arm
        would take next (the end with fewer typical runs: one whose every run is read as
        interfered lags for ever, and was sampled past the cap without end)."""
        runs = {end: self.book.run_count(end, self.tag) for end in (self.good, self.bad)}
        (lagging,) = self.next_samples(1)
        return min(runs.values()) >= self.settings.max_samples or runs[lagging] >= self.settings.max_samples

    def pairs_to_reproduce(self) -> int:
        """Pairs before 'reproduced' where a mode the same at both ends may not have shown yet: the
        pairs in which all of GOOD's runs fell in one mode and all of BAD's in the other must be
        rarer than half of reproduce_alpha (`naming.fresh_pairs_to_tell_a_mode`), the other half
        left to the arm's tests, so that an A/A range reproduces at most reproduce_alpha in all.
        Priced at a mode of half the runs, the most the reading allows (`interference`), whatever
        --stall-share says: the arm is the hunt's first test and has seen no run off its level
        yet. 5 pairs ((1/4)^5 = 0.1%); at 4, half the runs at 0.7x at both ends reproduced an A/A
        range in 4 of 300 hunts, three of them four pairs of GOOD all quick and BAD all slow
        ((1/4)^4 = 0.4% a range). 0 at stall_share 0 or where the arm ends no hunt (a subset's
        arm steers)."""
        if not self.ends_a_hunt or self.settings.stall_share <= 0:
            return 0
        return fresh_pairs_to_tell_a_mode(self.settings.reproduce_alpha / 2, MOST_READ_OFF)

    def _pairs_to_decide(self, a: Sequence[float], b: Sequence[float]) -> int:
        """PAIRS_TO_DECIDE where runs are read as interfered, or two with a remembered noise scale
        that fits today's runs: it was measured over earlier hunts' runs on this machine,
        interfered ones included, so it prices them already."""
        if not self.book.read_interference or self.book.prior_fits(NoisePool.of([a, b])):
            return 2
        return PAIRS_TO_DECIDE

    def next_samples(self, slots: int) -> list[int]:
        """The lagging end, else both in ABBA order (cancels a linear drift across pairs)."""
        na, nb = len(self.book.values(self.good, self.tag)), len(self.book.values(self.bad, self.tag))
        if na < nb:
            order = [self.good]
        elif nb < na:
            order = [self.bad]
        else:
            order = [self.good, self.bad] if na % 2 == 0 else [self.bad, self.good]
        return order[: max(1, min(2, slots))]

    def _every_run(self) -> tuple[list[float], list[float]] | None:
        """Every run of the arm's pairs (interfered ones included), where some were read as
        interfered; None where the typical runs are every run."""
        if not self.book.read_interference or not self.book.interfered():
            return None
        a, b = self._arm_runs()
        pairs = min(len(a), len(b))
        return a[:pairs], b[:pairs]

    def _arm_runs(self) -> tuple[list[float], list[float]]:
        """Every run the arm took of each end, interfered ones included."""
        good, bad = ([v for v, _, t in self.book.runs.get(end, []) if t == self.tag] for end in (self.good, self.bad))
        return good, bad

    def shape_over_the_hunt(self, *, typical_alike: bool) -> ShapeChange | None:
        """How the ends' shapes differ over every run the hunt took of them (the arm's and the
        search's), where the runs read off move BAD's mean our way and either their shares of
        runs off their levels differ beyond chance (`_shapes_differ`) or, where the ends' typical
        runs read alike (`typical_alike`: the arm's 'go' now looks a fluke), the mean of every
        run still differs by min_effect our way (`_differs_our_way`: the search on every run then
        decides, its tests at their own levels); None otherwise, or where no run is read apart.
        Asked once, as a hunt would end: BAD's first runs all stalled made the arm's 'go' at the
        stall's depth, its later runs at GOOD's level were read apart, and the hunt ended 'the
        control arm's start was a fluke' (a stall of 40% of the runs: 11 hunts in 100)."""
        if not self.book.read_interference or not self.book.interfered():
            return None
        every = [[v for v, _, _ in self.book.runs.get(end, [])] for end in (self.good, self.bad)]
        if not (self._shapes_differ() or typical_alike and self._differs_our_way(*every)):
            return None
        shape = self._shape(*every)
        return shape if shape is not None and self._moves_our_way(shape) else None

    def _every_run_differs(self, a: Sequence[float], b: Sequence[float], *, level: float | None = None) -> bool:
        """The mean log tok/s of every run of the ends (`a`, `b`: interfered ones included)
        differs our way by min_effect with p below `level` (Welch's t; reproduce_alpha by
        default): a fixed-sample look, taken once, at the arm's cap."""
        s = self.settings
        if min(len(a), len(b)) < 2:
            return False
        cmp = compare(a, b, min_effect=s.min_effect, alpha=s.alpha, paired=False)
        return self._reproduces(cmp, s.reproduce_alpha if level is None else level)

    def _a_kind_of_its_own(self) -> bool:
        """The end the hunted change would slow (BAD for a slowdown) has runs read off on that
        side at a depth the other end shows fewer of beyond chance (Fisher's exact, one-sided, at
        KIND_LEVEL): a stall is not the machine's tail, though their counts may swap by chance.
        A stall of 40% at 0.7x beside the machine's 10% at 0.6x at both ends: GOOD 3 of 25 runs
        at 0.6x, BAD 6 of 28 at 0.7x, every run's mean -1% for a true -12%, and the typical runs
        ruled 2% out. Asked only as the arm would stop."""
        sign = hunted_sign(self.settings.direction)
        sides = [(self.bad, self.good, sign)] if sign else [(self.bad, self.good, -1), (self.good, self.bad, 1)]
        sigma = NoisePool.of([self.book.values(self.good), self.book.values(self.bad)]).sigma
        if not sigma > 0:
            return False
        for end, other, side in sides:
            mine, theirs = self._offsets(end), self._offsets(other)
            mine = mine[mine * side > 0]
            if mine.size == 0:
                continue
            depth = float(np.median(mine))
            k = {e: int(np.sum(np.abs(d - depth) <= KIND_WIDTH * sigma)) for e, d in ((end, mine), (other, theirs))}
            runs = {e: self.book.run_count(e) for e in (end, other)}
            table = [[k[end], runs[end] - k[end]], [k[other], runs[other] - k[other]]]
            if fisher_exact(table, alternative="greater")[1] < KIND_LEVEL:
                return True
        return False

    def _differs_our_way(self, a: Sequence[float], b: Sequence[float]) -> bool:
        """The mean of every run differs by min_effect or more in the hunted direction: a change
        that is not ruled out while the shares of runs off their level are part of it."""
        est = float(np.mean(np.log(b)) - np.mean(np.log(a)))
        return toward(est, hunted_sign(self.settings.direction)) >= log_threshold(self.settings.min_effect)

    def _offsets(self, end: int) -> np.ndarray:
        """Log offsets from its level of an end's runs read as interfered."""
        typical = self.book.values(end)
        level = float(np.median(np.log(typical))) if typical else math.nan
        return np.log(np.asarray(self.book.interfered().get(end, []), dtype=float)) - level

    def _shapes_differ(self) -> bool:
        """The ends' shares of runs read off their levels differ on either side beyond chance
        (Fisher's exact test on each side's counts at SHAPE_LEVEL / 2). Interference is the
        machine's, at one share at every commit; a share that changed is the commit's."""
        runs = {end: self.book.run_count(end) for end in (self.good, self.bad)}
        off = {end: self._offsets(end) for end in (self.good, self.bad)}
        for side in (-1, 1):
            k = {end: int(np.sum(off[end] * side > 0)) for end in off}
            table = [[k[self.good], runs[self.good] - k[self.good]], [k[self.bad], runs[self.bad] - k[self.bad]]]
            if (k[self.good] or k[self.bad]) and fisher_exact(table)[1] < SHAPE_LEVEL / 2:
                return True
        return False

    def _moves_our_way(self, shape: ShapeChange) -> bool:
        """The runs off the ends' levels move BAD's mean our way more than GOOD's (more runs off,
        or farther): what a stall does to a slowdown's mean."""
        return toward(shape.moved, hunted_sign(self.settings.direction)) > 0

    def _shape(self, a: Sequence[float], b: Sequence[float]) -> ShapeChange | None:
        """How the ends' shapes differ (`ShapeChange`), read before the book reads every run;
        None where neither end has a run read off its level."""
        runs = {end: max(self.book.run_count(end), 1) for end in (self.good, self.bad)}
        good, bad = self._offsets(self.good), self._offsets(self.bad)
        if not (good.size or bad.size):
            return None
        moved = float(np.sum(bad)) / runs[self.bad] - float(np.sum(good)) / runs[self.good]

        def share(end: int, d: np.ndarray, side: int) -> float:
            return float(np.sum(d * side > 0)) / runs[end]

        # the side whose shares differ most: a stall sends BAD's runs below, fewer stalls GOOD's
        side = max((-1, 1), key=lambda k: abs(share(self.bad, bad, k) - share(self.good, good, k)))
        more = bad if share(self.bad, bad, side) >= share(self.good, good, side) else good
        return ShapeChange(side=side, good_share=share(self.good, good, side), bad_share=share(self.bad, bad, side),
                           factor=math.exp(float(np.median(more[more * side > 0]))) if np.any(more * side > 0) else math.nan,
                           change=math.expm1(float(np.mean(np.log(b)) - np.mean(np.log(a)))), moved=moved)

    def _look(self, a: Sequence[float], b: Sequence[float], *, read: bool = False) -> Look:
        """'go' (regression in the hunted direction), 'stop' (none of min_effect), or 'more'.

        Looked at after every pair, so both answers come from e-values (`stats.pooled_t_log_bf`):
        the difference of the pairs' mean log tok/s, the noise from the two arms' own spread.
        'go' needs the e-value against 'no difference' (its effect prior halved to the hunted
        sign) to reach 1/reproduce_alpha and the point estimate to reach min_effect; 'stop' needs
        the e-value against 'a step of exactly min_effect our way' to reach 5/alpha with the
        estimate on the near side of it (for 'both', against either step). Under either null the
        chance of ever crossing, at any number of pairs, is at most that alpha (Ville), so there
        is no floor of pairs and no look schedule: two or three pairs decide a 10% step at 0.5% noise,
        where the t test at looks of 3, 6, 12, ... pairs (never before 6) took 6.
        """
        s = self.settings
        # every run (`read`): their own spread, the runs far off included; a remembered noise
        # scale prices typical runs
        noise = NoisePool.of([a, b]) if read else self.book.with_prior(NoisePool.of([a, b]))
        sign = hunted_sign(s.direction)
        if shows_step(a, b, noise, sign=sign, alpha=s.reproduce_alpha, min_effect=s.min_effect):
            return Look.GO
        if rules_out_step(a, b, noise, sign=sign, alpha=s.alpha, min_effect=s.min_effect):
            return Look.STOP
        return Look.MORE

    @staticmethod
    def _beyond_null(est: float, c: float, noise: NoisePool, null: float, threshold: float) -> bool:
        """The estimate is on the near-zero side of `null` (a step of min_effect) with an e-value
        against that step of at least exp(threshold)."""
        inward = -1 if null > 0 else 1
        shifted = est - null
        return shifted * inward > 0 and pooled_t_log_bf(shifted, c, noise, sign=inward) >= threshold

    def _the_other_way(self, cmp: Comparison) -> bool:
        """A change of at least min_effect against the hunted direction whose 95% interval
        excludes zero (with direction 'both' there is no other way)."""
        sign = hunted_sign(self.settings.direction)
        lo, hi = cmp.ci95
        big = abs(math.log1p(cmp.change)) >= log_threshold(self.settings.min_effect)
        return bool(sign) and big and (lo > 0 if sign < 0 else hi < 0)

    def _an_end_in_doubt(self) -> bool:
        """An end whose runs read off on the side that would make the change the hunted one (GOOD's
        above its level, BAD's below, for a slowdown) may sit at their level instead
        (`interference.level_in_doubt`): a clear change the other way waits for more pairs."""
        sign = hunted_sign(self.settings.direction)
        off = self.book.interfered()
        for end, side in ((self.good, -sign), (self.bad, sign)):
            typical = self.book.values(end)
            if not typical or end not in off:
                continue
            level = float(np.median(typical))
            beyond = sum(1 for v in off[end] if (v - level) * side > 0)
            if beyond and level_in_doubt(len(typical), beyond, side):
                return True
        return False

    def _reproduces(self, cmp: Comparison, alpha: float) -> bool:
        """A difference our way whose point estimate reaches min_effect and whose two-sided
        p value is below alpha (so the matching interval excludes zero)."""
        ours = toward(cmp.change, hunted_sign(self.settings.direction)) > 0
        big = abs(math.log1p(cmp.change)) >= log_threshold(self.settings.min_effect)
        return ours and big and cmp.p_value < alpha

    def more_pairs_would_tell(self) -> bool:
        """The arm stopped at the pair cap without ruling out a change of min_effect or more in
        the hunted direction (its last look's 95% interval reaches it): more --max-samples would
        tell, and the hunt's report gives the command that goes on from the stored samples."""
        cmp = self.comparison
        return (cmp is not None and self.at_cap()
                and not self._the_other_way(cmp) and self._larger_not_ruled_out(cmp))

    def _larger_not_ruled_out(self, cmp: Comparison) -> bool:
        """The last look's 95% interval reaches a change of min_effect in the hunted direction."""
        lo, hi = cmp.ci95
        sign, m = hunted_sign(self.settings.direction), self.settings.min_effect
        return (lo < -m) if sign < 0 else (hi > m) if sign > 0 else (lo < -m or hi > m)

    def not_reproduced_reason(self, verdict: Verdict, *, out_of_probes: bool,
                              names: tuple[str, str] = ("GOOD", "BAD")) -> str:
        """Why the arm did not say 'reproduced' (its verdict `verdict`), naming the rule it failed:
        a clear change the other way (with the --direction that hunts it), the e-value that ruled
        a change of min_effect out, the last look's t test at the pair cap, or the probe budget.
        names: what it calls the two ends (a hunk hunt's are BASE and BASE + all hunks)."""
        cmp = self.comparison
        assert cmp is not None
        s = self.settings
        lo, hi = cmp.ci95
        pairs = self.pairs()
        text = f"{names[0]}->{names[1]} {cmp.change:+.1%} (95% CI {lo:+.1%}..{hi:+.1%}, {pairs} pairs)"
        sign = hunted_sign(s.direction)
        hunted = "slowdown" if sign < 0 else "speed-up" if sign > 0 else "change"
        big = abs(math.log1p(cmp.change)) >= log_threshold(s.min_effect)
        if self._the_other_way(cmp):
            other = "faster" if sign < 0 else "slower"
            return (f"{text} is a clear {'speed-up' if sign < 0 else 'slowdown'}, and this hunt looks for a "
                    f"{hunted} (--direction {s.direction}): to hunt it, --direction {other} (or both)")
        p_text = f"p={cmp.p_value:.2g}" if math.isfinite(cmp.p_value) else "no p value"
        ours = toward(cmp.change, sign) > 0
        larger = self._larger_not_ruled_out(cmp)
        if verdict == Verdict.UNDECIDED and self.stall_left_at_cap:
            return (f"{text}: at the pair cap (--max-samples {s.max_samples}) a stall in {s.stall_share:.0%} of "
                    f"the runs (--stall-share) is not ruled out by its pairs; more --max-samples would tell")
        if verdict == Verdict.UNDECIDED:
            return (f"{text}: at the pair cap (--max-samples {s.max_samples}) 'reproduced' needs p below "
                    f"{s.reproduce_alpha:g} and this came close ({p_text}); more --max-samples would tell")
        if self.at_cap():
            if not ours:
                why = f"is not a {hunted}"
            elif not big:
                why = f"is a {hunted} smaller than --min-effect {s.min_effect:.1%}"
            else:
                why = (f"did not reach the level 'reproduced' needs at the pair cap (--max-samples "
                       f"{s.max_samples}): {p_text}, not below {s.reproduce_alpha:g}")
            tail = "; a larger one is not ruled out (more --max-samples would tell)" if larger else ""
            return f"{text} {why}{tail}"
        if out_of_probes:
            return f"{text}: the probe budget ran out before a {hunted} could be shown or ruled out"
        return (f"{text}: a {hunted} of {s.min_effect:.1%} or more is ruled out (anytime-valid test at "
                f"the {s.alpha / 5:.0%} level)")


@dataclass(frozen=True)
class ControlOutcome:
    """How a control arm run on its own ended."""

    verdict: Verdict | None
    """ControlArm.decide's verdict; None when `max_measures` ran out first."""
    comparison: Comparison | None
    """The last look."""
    pairs: int
    """Pairs taken."""


def run_control_arm(measure: Callable[[int], float | None], settings: ControlSettings, *,
                    noise_prior: NoisePool | None = None, max_measures: int | None = None) -> ControlOutcome:
    """A control arm on its own (the hunk hunt's test of a subset against BASE): `measure(0)` samples
    the base, `measure(1)` the other (tok/s, or None when its run was skipped), one at a time in
    the arm's order, until it decides. `noise_prior`: the noise known so far, joined as the commit
    search's remembered noise is (SampleBook)."""
    book = SampleBook(settings.pair_window, noise_prior, read_interference=settings.read_interference)
    arm = ControlArm(book, settings, 0, 1)
    taken = 0
    while (verdict := arm.decide()) is None:
        if max_measures is not None and taken >= max_measures:
            break
        (index,) = arm.next_samples(1)
        taken += 1
        book.add(index, measure(index), tag=arm.tag, when=taken)
    return ControlOutcome(verdict, arm.comparison, arm.pairs())
