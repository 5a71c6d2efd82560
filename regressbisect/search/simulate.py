"""A fake probe executor for tests and the accuracy benchmark: a scripted history of tok/s levels.

Pure (numpy only). Noise is lognormal with a given coefficient of variation; an optional drift
scales the machine's speed linearly with time (rounds: the samples of one round run side by side
and see the same machine); chosen commits can be unmeasurable (their probe always 'crashes'); a fraction of runs can be interfered
with (`Interference`: a run far off its level, as a busy neighbour, a straggler or a pulsing
pipeline makes it), on top of the lognormal noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from regressbisect.search.bisect import CommitSearch, SearchResult, SearchSettings
from regressbisect.search.driver import drive
from regressbisect.search.stats import NoisePool

__all__ = ["Interference", "FakeHistory", "step_levels", "FakeExecutor", "SimRun", "simulate"]


def step_levels(n: int, steps: Mapping[int, float], base: float = 1000.0) -> tuple[float, ...]:
    """True tok/s of n commits: `base`, times (1 + step) from each first-bad index in `steps` on."""
    levels, level = [], base
    for i in range(n):
        if i in steps:
            level *= 1.0 + steps[i]
        levels.append(level)
    return tuple(levels)


@dataclass(frozen=True)
class Interference:
    """A fraction of runs far off their commit's level: each run, independently, with probability
    `fraction` reads `factor` times what it would have (0.7: 30% slow; 1.3: 30% fast), or, with
    `upto`, a factor drawn uniformly between the two (a continuum of slowed runs, as a real
    machine has beside its doubled ones: docs/results/interference.md, the bimodal bench)."""

    fraction: float
    factor: float
    upto: float | None = None

    @property
    def name(self) -> str:
        spread = f"-{self.upto:g}" if self.upto is not None else ""
        return f"{self.fraction:.0%} at {self.factor:g}{spread}x"

    def draw(self, rng: np.random.Generator) -> float:
        """The factor of one run this kind hits (a uniform draw only where it has a spread, so
        that the fixed kinds keep their random stream)."""
        return self.factor if self.upto is None else float(rng.uniform(self.factor, self.upto))


@dataclass(frozen=True)
class FakeHistory:
    """What a simulated repository measures like."""

    levels: tuple[float, ...]
    """True tok/s of each commit, index 0 = GOOD."""
    cv: float
    """Run-to-run coefficient of variation (lognormal noise)."""
    drift_per_round: float = 0.0
    """Relative change of the machine's speed per round, compounding (-0.001: 0.1% slower each round)."""
    unmeasurable: frozenset[int] = frozenset()
    """Commits whose probe always fails (returns no sample)."""
    interference: tuple[Interference, ...] = ()
    """Runs far off their level (each kind drawn independently per run, the first that hits
    applies): the noise of a shared machine, which lognormal noise alone does not have."""
    stalls: tuple[tuple[int, Interference], ...] = ()
    """A commit's own change of shape: from each index on, its kind hits runs too (a stall every
    few steps: a recompile, a GC pause, a data loader waiting), drawn before the machine's kinds.
    Unlike `interference` it is the code's, and a hunt must find the commit that brought it."""


class FakeExecutor:
    """Draws one sample of a commit at a given round; seeded, so a trial is reproducible."""

    def __init__(self, history: FakeHistory, seed: int):
        self.history = history
        self.rng = np.random.default_rng(seed)
        # sigma of log noise with the requested CV: CV^2 = exp(s^2) - 1
        self.sigma = math.sqrt(math.log1p(history.cv ** 2))
        self.executions = 0

    def measure(self, index: int, round_no: int) -> float | None:
        self.executions += 1
        if index in self.history.unmeasurable:
            return None
        drift = (1.0 + self.history.drift_per_round) ** round_no      # compounding: never reaches 0
        value = self.history.levels[index] * drift * float(np.exp(self.rng.normal(0.0, self.sigma)))
        if self.history.stalls or self.history.interference:
            # drawn only for histories that have it: the i.i.d. cells keep their random stream.
            # Every kind is drawn at every commit (a stall before its commit too), so that the
            # machine's kinds see the same random stream on both sides of a stall
            stalls = [self.rng.random() < kind.fraction and index >= first for first, kind in self.history.stalls]
            machine = [self.rng.random() < kind.fraction for kind in self.history.interference]
            kinds = [kind for _, kind in self.history.stalls] + list(self.history.interference)
            hits = [kind for kind, hit in zip(kinds, stalls + machine) if hit]
            value *= hits[0].draw(self.rng) if hits else 1.0
        return value


@dataclass(frozen=True)
class SimRun:
    """One simulated hunt."""

    result: SearchResult
    """What the search reported."""
    rounds: int
    """next_batch calls that returned measures (wall-clock rounds with concurrent slots)."""
    executions: int
    """Benchmark executions (samples, skips included)."""
    requests: tuple[tuple[int, ...], ...]
    """The indices of every round, in order (to check determinism)."""
    reasons: tuple[tuple[str, ...], ...] = ()
    """The Measure reasons of every round, parallel to `requests` (what each execution was for)."""


def simulate(history: FakeHistory, settings: SearchSettings = SearchSettings(), *, slots: int = 1,
             seed: int = 0, prior_samples: int = 0) -> SimRun:
    """Run a CommitSearch against a FakeHistory until it is done. prior_samples > 0: the search
    gets a remembered noise scale, the spread of that many samples of one earlier commit drawn
    at the history's noise (as an earlier hunt on the machine would have stored)."""
    executor = FakeExecutor(history, seed)
    prior = None
    if prior_samples > 1:
        earlier = np.exp(executor.rng.normal(0.0, executor.sigma, prior_samples))
        prior = NoisePool.of([earlier])
    search = CommitSearch(len(history.levels), settings, noise_prior=prior)
    requests, reasons = [], []

    def measure(batch):
        requests.append(tuple(m.index for m in batch))
        reasons.append(tuple(m.reason for m in batch))
        return [executor.measure(m.index, len(requests)) for m in batch]

    result = drive(search, measure, slots=slots)
    return SimRun(result=result, rounds=len(requests), executions=executor.executions,
                  requests=tuple(requests), reasons=tuple(reasons))
