"""The overhead arm: may tok/s come from the counters shim's runs?

Pure (no probe): GOOD measured plain and shimmed in interleaved pairs, the shim's overhead tested
between rounds, on whole pairs, with an anytime-valid interval, stopped as soon as it is decided (docs/cost.md,
section 1). The commit hunt draws the samples the arm asks for and records them.
"""
from __future__ import annotations

import math
import statistics
from typing import Sequence

from regressbisect.search import stats
from regressbisect.enums import WordEnum

__all__ = ["OverheadArm", "OverheadDecision", "overhead_decision"]


class OverheadDecision(WordEnum):
    """What the overhead arm has decided (`overhead_decision`); the report's
    `instrumentation_overhead_pct.verdict` is one of the first three (render/report_parts.OverheadVerdict)."""

    WITHIN = "within"
    """Proven below the limit: tok/s may come from shimmed runs."""
    BEYOND = "beyond"
    """Proven above the limit."""
    UNDECIDABLE = "undecidable"
    """Neither, and more pairs would not decide it (the safe 'not proven' path)."""
    CONTINUE = "continue"
    """Not yet: take another round."""


class OverheadArm:
    """Plain and shimmed samples of GOOD, the next round to take, and the decision they reach."""

    def __init__(self, *, limit: float, max_pairs: int, at_once: int = 1):
        """limit: the largest overhead (0.01 = 1%) that lets tok/s come from shimmed runs;
        max_pairs: the cap of pairs; at_once: probes run side by side in one round."""
        self.limit, self.max_pairs, self.at_once = limit, max_pairs, at_once
        self.plain: list[float] = []
        self.shimmed: list[float] = []
        self.decision = OverheadDecision.CONTINUE
        """`overhead_decision`'s first part at the last look."""
        self.interval = (-math.inf, math.inf)
        """Anytime-valid 95% interval of log(plain / shimmed) at the last look."""

    def next_round(self) -> list[bool]:
        """The arms of the next round (True: shimmed), [] once decided. The arm looks between
        rounds, when its samples make whole pairs. A round of at least two alternates the arms,
        the one behind first (plain, shimmed, plain; then shimmed, plain, shimmed), so that every
        probe serves a pair; never past max_pairs of either arm."""
        if self.plain and len(self.plain) == len(self.shimmed):
            self.decision, self.interval = overhead_decision(self.plain, self.shimmed, limit=self.limit,
                                                             max_pairs=self.max_pairs)
        if self.decision != OverheadDecision.CONTINUE:
            return []
        taken = [len(self.plain), len(self.shimmed)]
        order: list[bool] = []
        for _ in range(max(2, self.at_once)):
            arm = 0 if taken[0] <= taken[1] else 1
            if taken[arm] >= self.max_pairs:
                break
            order.append(bool(arm))
            taken[arm] += 1
        return order

    def record(self, shimmed: bool, value: float) -> None:
        """One sample (tok/s) of the round asked for."""
        (self.shimmed if shimmed else self.plain).append(value)

    @property
    def pairs(self) -> int:
        return min(len(self.plain), len(self.shimmed))

    def comparison(self) -> stats.Comparison:
        """Shimmed relative to plain (change < 0: the shim slows tok/s), with the arm's interval."""
        n = self.pairs
        mean = sum(math.log(p / q) for p, q in zip(self.plain[:n], self.shimmed[:n])) / n
        lo, hi = self.interval
        return stats.Comparison(change=math.expm1(-mean), ci95=(math.expm1(-hi), math.expm1(-lo)),
                                p_value=math.nan, verdict=self.decision)


def overhead_decision(plain: Sequence[float], shimmed: Sequence[float], *, limit: float,
                      max_pairs: int, alpha: float = 0.05) -> tuple[OverheadDecision, tuple[float, float]]:
    """(`OverheadDecision`, interval of the overhead) after the
    pairs so far. Overhead = log(plain / shimmed) (positive: the shim slows tok/s).

    'within'/'beyond': the anytime-valid interval (stats.t_confidence_sequence) lies below /
    above log(1 + limit); it may be looked at after every pair. 'undecidable': the pairs are
    used up, or the interval projected to `max_pairs` at the noise seen so far would still be
    wider than the bound (stopping for futility only ever leads to the safe 'not proven' path).
    """
    m = min(len(plain), len(shimmed))
    diffs = [math.log(plain[i] / shimmed[i]) for i in range(m)]
    bound = math.log1p(limit)
    lo, hi = stats.t_confidence_sequence(diffs, alpha=alpha)
    if hi < bound:
        return OverheadDecision.WITHIN, (lo, hi)
    if lo > bound:
        return OverheadDecision.BEYOND, (lo, hi)
    if m >= max_pairs:
        return OverheadDecision.UNDECIDABLE, (lo, hi)
    if m >= 2:
        sd = statistics.stdev(diffs)
        projected = _projected_half_width(sd, max_pairs, alpha)
        if projected > 2 * bound:
            return OverheadDecision.UNDECIDABLE, (lo, hi)
    return OverheadDecision.CONTINUE, (lo, hi)


def _projected_half_width(sd: float, n: int, alpha: float) -> float:
    """Half-width of the interval after n values of standard deviation sd (inf: none finite)."""
    return stats.t_cs_multiplier(n, alpha=alpha) * sd / math.sqrt(n)
