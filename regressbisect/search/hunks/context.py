"""What every phase of a hunk hunt receives: one explicit context instead of shared state."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from regressbisect.search.bisect import SearchSettings
from regressbisect.search.control import PAIRS_TO_DECIDE
from regressbisect.search.ddmin import DdminSettings
from regressbisect.search.interference import HuntReading, Reader
from regressbisect.search.hunks.runnable import Purpose, Runnable
from regressbisect.search.levels import LevelRule
from regressbisect.search.naming import AlphaSpender, fresh_pairs_to_tell_a_mode
from regressbisect.search.phases import Batch, Phase
from regressbisect.search.stats import NoisePool, paired_log_diffs, sign_log_e

__all__ = ["HuntContext"]


@dataclass
class HuntContext:
    """One hunk hunt's settings and rules, and the two things its phases share as it runs: the
    pooled noise of every sample so far and the leave-one-out tests' alpha spender. Every sample
    is asked for through `measure` or `measure_all` (phases are coroutines: `phases.Phase`; a
    subset known not to run is no probe)."""

    settings: SearchSettings
    rule: LevelRule
    ddmin: DdminSettings
    runs: Runnable
    """Which subsets run (needs, the skip rule); measures them."""
    ids: list[str]
    """Every hunk id."""
    groups: object
    """group_hunks' levels (files, functions, hunks), for delta debugging."""
    order: list[frozenset]
    """The groups the prefix search walks (`prefix.prefix_groups`)."""
    on_phase: Callable[[str], None]
    """Tells the progress display what the hunt does now."""
    leave_out_alphas: AlphaSpender
    """The k-th leave-one-out test that measures gets name_alpha / (2 k (k + 1)) for each of its
    two answers (`members.py`): the naming gate's spending, of name_alpha / 2."""
    slots: int = 1
    """Measures the driver takes side by side (its latest `next_batch(slots)`): the prefix searches'
    rounds are this size, as the commit hunt's."""
    noise_prior: NoisePool | None = None
    """Noise pooled before the hunt (`run --drill`: the commit hunt's), the prefix searches'
    remembered noise (`CommitSearch`'s noise_prior); None for a hunt of its own."""
    noise: NoisePool = field(default_factory=NoisePool)
    """The hunt's pooled noise: every arm's spread about its own typical runs so far (`learn`)."""
    capped: bool = False
    """Whether the hunt's probe cap (`SearchSettings.max_probes`, over every phase) may stop the
    phases now: set once the first prefix search, which stops at its own cap, is done."""
    reading: HuntReading = field(default_factory=HuntReading)
    """Every run of each subset so far, whichever test took it (`record`): which runs were
    interfered is read on them (search/interference.py), for every test of the hunt."""

    def record(self, subset: frozenset, value: float | None) -> None:
        """A run of BASE + subset (tok/s; None: skipped), as the driver records it."""
        if value is not None and self.settings.read_interference:
            self.reading.add(subset, math.log(value))

    def typical(self, subsets: Sequence[frozenset], arms: Sequence[Sequence[float]]) -> list[list[float]]:
        """Each arm (runs of BASE + subsets[i], tok/s) less the runs read as interfered (all of
        them when the reading is off: `SearchSettings.read_interference`)."""
        if not self.settings.read_interference:
            return [list(arm) for arm in arms]
        out = []
        for subset, arm in zip(subsets, arms):
            off = self.reading.interfered(subset, [math.log(v) for v in arm])
            out.append([v for v, far in zip(arm, off) if not far])
        return out

    def typical_pairs(self, subsets: tuple[frozenset, frozenset],
                      pairs: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
        """Side-by-side pairs of two subsets' runs less every pair of which a run was read as
        interfered (the pair's difference then holds the interference)."""
        if not self.settings.read_interference:
            return list(pairs)
        first = self.reading.interfered(subsets[0], [math.log(a) for a, _ in pairs])
        second = self.reading.interfered(subsets[1], [math.log(b) for _, b in pairs])
        return [p for p, x, y in zip(pairs, first, second) if not (x or y)]

    def least_runs(self) -> int:
        """Typical runs of each arm before a test may answer: the control arm's PAIRS_TO_DECIDE
        once the hunt has read a run as interfered (two runs of a subset can both be: a quarter of
        the runs off makes that one arm in 16, and two alike read as its level), else one."""
        return PAIRS_TO_DECIDE if self.settings.read_interference and self.reading.seen() else 1

    def runs_to_name(self, alpha: float, step: float = 0.0) -> int:
        """Typical runs of each arm before a test that names (a subset reproduced against BASE, a
        hunk needed or not) may answer at level `alpha`, its arms `step` apart (log): where a mode
        of up to `--stall-share` of the runs may not have shown, the runs in which one arm's all
        fell in one mode and the other's in the other are rarer than alpha
        (`naming.fresh_pairs_to_tell_a_mode`, the commit search's naming floor); where the step
        has the size of a kind of interference the hunt has seen, the runs that tell it from that
        kind (`HuntReading.runs_to_tell`, as the commit search's gate asks of its book). A 30%
        mode at 1.4x: BASE's four runs all at the fast mode beside a harmless hunk's four at the
        level read -29%, and the hunk was named. At least `least_runs`."""
        seen = self.reading.runs_to_tell(step, alpha) if self.settings.read_interference and step else 0
        return max(self.least_runs(), fresh_pairs_to_tell_a_mode(alpha, self.settings.stall_share), seen)

    def near_a_kind(self, step: float, alpha: float) -> bool:
        """A step (log) of the size of a kind of interference the hunt has seen
        (`HuntReading.runs_to_tell`): its arms may be one shape, each read at another mode."""
        return bool(self.settings.read_interference and step and self.reading.runs_to_tell(step, alpha))

    def signs_show(self, before: Sequence[float], after: Sequence[float], step: float, alpha: float, sign: int) -> bool:
        """Where a test's step (log) has the size of a kind of the hunt's interference
        (`near_a_kind`), the signs of every pair of its arms (`before`, `after`: every run, read
        as interfered or not, paired by round) show it too (`stats.sign_log_e` at alpha, a fair
        coin's martingale whatever the runs' shape, as the commit search's gate and control arm
        ask where runs sit at the other level); True elsewhere. The hunt's kinds read a mode of
        half the runs at a share of a sixth (many subsets read their level at it), and a harmless
        hunk's five runs at 0.7x beside BASE's five at the level were named -31% (1 in 1,024 a test
        where half the runs are slow, with the runs read apart more often)."""
        if not self.near_a_kind(step, alpha):
            return True
        return sign_log_e(paired_log_diffs(before, after), sign or (1 if step > 0 else -1)) >= math.log(1 / alpha)

    def reader(self, subsets: Sequence[frozenset]) -> Reader | None:
        """A sample book's reader of interference for candidates BASE + subsets[i]: the hunt's."""
        return self.reading.reader(subsets) if self.settings.read_interference else None

    def measure(self, subset: frozenset, purpose: Purpose) -> Phase:
        """One sample of BASE + subset (None: skipped, or known not to run, then without a probe)."""
        (value,) = yield Batch(((subset, purpose),))
        return value

    def measure_all(self, requests: Sequence[tuple[frozenset, Purpose]], stop_after_skip: int | None = None) -> Phase:
        """One sample of each (subset, purpose), independent of each other: side by side where
        there are slots (`phases.Batch`). Returns the values in order."""
        return list((yield Batch(tuple(requests), stop_after_skip)))

    def learn(self, samples: Sequence[Sequence[float]]) -> None:
        """Join these arms' spread (each about its own mean) to the hunt's pooled noise."""
        self.noise = self.noise.plus(NoisePool.of(samples))

    def noise_with(self, samples: Sequence[Sequence[float]]) -> NoisePool:
        """The hunt's pooled noise with these arms' spread, for a test that reads them."""
        return self.noise.plus(NoisePool.of(samples))

    def effect_prior(self, change: float) -> tuple[float, ...] | None:
        """The e-value's effect prior for tests whose answer is a difference of a step of `change`
        (a culprit's, a prefix step's): its log size in units of the hunt's pooled noise, both read
        before those tests measure (so the prior does not look at their data: the e-value stays
        valid, as the naming gate's does); None, the default mixture, without a step or a noise."""
        step = abs(math.log1p(change)) if change > -1 else math.nan
        if not (self.noise.df and self.noise.sigma > 0 and math.isfinite(step) and step > 0):
            return None
        return ((step / self.noise.sigma) ** 2,)
