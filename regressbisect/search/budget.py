"""A hunt's budgets: the token budget of `--tokens auto` (from pilot probes of GOOD, how long each
probe measures) and the probe cap of a `run --drill` (`drill_probe_cap`).

Pure (no probe, no store): the commit hunt runs the pilots and feeds them here (docs/cost.md,
section 3).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from regressbisect.samples import Sample

__all__ = ["AUTO_PILOTS", "MAX_AUTO_TOKENS", "FLOOR_FRACTION", "DRILL_PROBES_PER_SEARCH_PROBE", "Pilot",
           "BudgetChoice", "choose_budget", "drill_probe_cap"]

AUTO_PILOTS = 3
"""Pilot probes of GOOD at the initial budget from which the auto budget is chosen."""
MAX_AUTO_TOKENS = 1 << 26
"""Upper bound of an auto budget (whatever the probe's step)."""
FLOOR_FRACTION = 8.0
"""Within-process noise of the window at most min_effect / 8: below it the search is at its floor."""
DRILL_PROBES_PER_SEARCH_PROBE = 10
"""A drill's probe cap, in the probes of the commit search that named its culprit: the drills of
tests/test_drill.py (a 15% hunk in 32) cost 0.4 to 3.7 times their search (12-67 probes against
17-34); a drill of ten hunks of 1.5% spent 1,364 to 1,989 against 18-34 in delta debugging before
a slowdown spread over many hunks ended its hunk search (docs/hunks.md, "Drill")."""


def drill_probe_cap(search_probes: int, max_samples: int) -> int:
    """The most measures a `run --drill` of one culprit may take (its `SearchSettings.max_probes`,
    over every phase of its hunk hunt): DRILL_PROBES_PER_SEARCH_PROBE times the measures of the commit
    search that named the culprit (stored samples included, so a resumed hunt gets the same cap), and
    at least 2 * max_samples, a control arm of BASE and BASE + every hunk at its pair cap. Reached,
    the drill reports what it named before it, the rest in its remainder."""
    return max(DRILL_PROBES_PER_SEARCH_PROBE * search_probes, 2 * max_samples)


@dataclass(frozen=True)
class Pilot:
    """One pilot probe: its wall time and its sample."""

    wall_s: float
    sample: Sample


@dataclass(frozen=True)
class BudgetChoice:
    tokens: int
    reason: str
    facts: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "reason": self.reason, **dict(self.facts)}


def _step_rows(sample: Sample) -> list[Mapping[str, float]]:
    return [r for r in sample.iters if isinstance(r.get("ms"), (int, float)) and r["ms"] > 0]


def _robust_cv(values: Sequence[float]) -> float:
    """MAD-based coefficient of variation (a slow first step does not inflate it)."""
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return 1.4826 * mad / med if med > 0 else 0.0


def choose_budget(pilots: Sequence[Pilot], *, initial_tokens: int, min_effect: float,
                  timeout_s: float) -> BudgetChoice:
    """The token budget for the hunt, from pilot probes of GOOD at `initial_tokens` (docs/cost.md).

    With S the start-up (probe wall - measured window), t the time of one step, w the
    within-process CV of one step and p the between-process CV left once w is averaged out:
      n_floor = (w / (min_effect / 8))^2   steps at which the window's own noise no longer matters
      n_cost  = sqrt(S w^2 / (t p^2))      steps minimising (S + n t)(p^2 + w^2 / n) when the
                                           between-process noise p is what the search pays for
      n = min(n_floor, n_cost), at most S / t (never pay more to measure than to start) and
      at most what fits in half the timeout; at least one step.
    """
    facts: dict[str, Any] = {"initial_tokens": initial_tokens, "pilots": len(pilots)}
    usable = [p for p in pilots if p.sample.seconds is not None and p.sample.tokens is not None]
    if not usable:
        return BudgetChoice(initial_tokens, "kept: the probe reports no measured seconds "
                                            "(metric regex), so start-up cannot be told apart", facts)
    startup = statistics.median(max(0.0, p.wall_s - p.sample.seconds) for p in usable)
    seconds = statistics.median(p.sample.seconds for p in usable)
    tokens = statistics.median(p.sample.tokens for p in usable)
    facts.update(startup_s=round(startup, 3), window_s=round(seconds, 3))
    rows = [_step_rows(p.sample) for p in usable]
    steps_known = all(len(r) >= 1 for r in rows)
    logs = [math.log(p.sample.tok_s) for p in usable]
    between = statistics.stdev(logs) if len(logs) > 1 else 0.0
    if steps_known:
        step_tokens = statistics.median(float(r.get("tokens") or tokens / len(rs))
                                        for rs in rows for r in rs)
        step_s = statistics.median(r["ms"] / 1e3 for rs in rows for r in rs)
        n0 = max(1.0, tokens / step_tokens)
        if all(len(r) >= 3 for r in rows):
            within = statistics.median(_robust_cv([r["ms"] for r in rs]) for rs in rows)
        else:
            # Too few steps per pilot for their own spread (a budget under three steps): take
            # all of the pilots' spread as step noise, the case where more steps help most.
            within = between * math.sqrt(n0)
            facts["within_from_pilot_spread"] = True
    else:  # no per-step rows: the whole window is one "step" of the initial budget
        step_tokens, step_s, within, n0 = float(tokens), seconds, 0.0, 1.0
    facts.update(step_tokens=step_tokens, step_s=round(step_s, 6), within_cv=round(within, 5))
    process_var = max(0.0, between ** 2 - within ** 2 / n0)
    facts.update(between_cv=round(between, 5), process_cv=round(math.sqrt(process_var), 5))

    cap_steps = max(1.0, startup / step_s) if step_s > 0 else 1.0
    timeout_steps = max(1.0, (timeout_s / 2 - startup) / step_s) if step_s > 0 else 1.0
    if not steps_known:
        steps, why = cap_steps, "measured window about the start-up time (no per-step rows to weigh noise)"
    else:
        n_floor = (within / (min_effect / FLOOR_FRACTION)) ** 2
        n_cost = math.sqrt(startup * within ** 2 / (step_s * process_var)) if process_var > 0 else math.inf
        facts.update(n_floor=round(n_floor, 1), n_cost=None if math.isinf(n_cost) else round(n_cost, 1))
        if n_cost < n_floor:
            steps, why = n_cost, (f"between-process noise {math.sqrt(process_var):.1%} dominates: "
                                  f"steps that minimise probe cost x samples needed")
        else:
            steps, why = n_floor, (f"enough steps that the window's own noise ({within:.1%} per step) "
                                   f"is under min_effect/{FLOOR_FRACTION:g}")
        if steps > cap_steps:
            steps, why = cap_steps, why + "; capped at a window as long as the start-up"
    if steps > timeout_steps:
        steps, why = timeout_steps, why + "; capped by half the timeout"
    steps = max(1, math.ceil(steps - 1e-9))
    chosen = int(min(MAX_AUTO_TOKENS, max(1, round(steps * step_tokens))))
    facts["steps"] = steps
    return BudgetChoice(chosen, why, facts)
