"""Immutable value types shared by every layer: what is measured and what a measurement is.

Validation lives in the constructors (as pyperf does), so a bad value fails where it is made,
not three modules later.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Mapping
from regressbisect.enums import WordEnum


class Arm(WordEnum):
    """What a stored sample was taken for (the store's `arm`): only MAIN is evidence of tok/s."""

    MAIN = "main"
    """The runs tok/s comes from (shimmed only where the shim's overhead is within its limit)."""
    INSTRUMENTED = "instrumented"
    """Runs with the counters shim loaded, for the counters (and the shim's overhead arm)."""
    WORK = "work"
    """The counting arm: the work per step counted too (probe/work.py); never a source of tok/s."""
    FLAGGED = "flagged"
    """Taken under contention, or on a night whose machine check failed: kept, never evidence."""


@dataclass(frozen=True)
class Candidate:
    """A commit plus an optional patch: the set of hunk ids applied on top of it."""

    commit: str
    """Full 40-hex sha of the commit checked out."""
    patch: tuple[str, ...] = ()
    """Ids of the hunks applied on top of `commit`, sorted; empty for a plain commit."""

    def __post_init__(self) -> None:
        if len(self.commit) != 40 or any(c not in "0123456789abcdef" for c in self.commit):
            raise ValueError(f"Candidate.commit must be a full sha, got {self.commit!r}")
        if tuple(sorted(set(self.patch))) != self.patch:
            object.__setattr__(self, "patch", tuple(sorted(set(self.patch))))

    @property
    def patch_hash(self) -> str | None:
        """Stable hash of the hunk-id set (None without a patch); part of the store key."""
        if not self.patch:
            return None
        return hashlib.sha1("\n".join(self.patch).encode()).hexdigest()[:16]

    @property
    def short(self) -> str:
        suffix = f"+{len(self.patch)}h" if self.patch else ""
        return self.commit[:10] + suffix


@dataclass(frozen=True)
class SampleKey:
    """What makes two samples interchangeable: identical trees share samples."""

    tree: str
    """Tree hash of the candidate's commit (not the commit hash: a reword shares samples)."""
    patch_hash: str | None
    """Candidate.patch_hash, or None."""
    config_hash: str
    """Hash of the probe configuration: what runs and how its output becomes the stored numbers
    (command, budget, env, metric regex, ...; config.ProbeConfig.config_hash)."""
    env_fingerprint: str
    """Hash of the machine and interpreter the sample was taken on."""


def _finite_positive(name: str, value: float | None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")


@dataclass(frozen=True)
class Sample:
    """One measured run of a probe: a fixed token budget after warm-up."""

    tok_s: float
    """Throughput of the measured stage, tokens per second (all ranks together)."""
    tokens: float | None = None
    """Tokens processed in the measured stage (None when read by --metric-regex)."""
    seconds: float | None = None
    """Wall seconds of the measured stage (None when read by --metric-regex)."""
    iters: tuple[Mapping[str, float], ...] = ()
    """Per-iteration rows: `ms`, `tokens` and counters (lm_head_calls, ...), if reported."""
    counters: Mapping[str, float] = field(default_factory=dict)
    """Per-iteration counters summed over ranks (median over iterations), from the shim."""
    instrumented: bool = False
    """True when the counters shim was loaded: its timings are not trusted for tok/s."""

    def __post_init__(self) -> None:
        _finite_positive("tok_s", self.tok_s)
        _finite_positive("tokens", self.tokens, optional=True)
        _finite_positive("seconds", self.seconds, optional=True)
        object.__setattr__(self, "iters", tuple(dict(r) for r in self.iters))
        object.__setattr__(self, "counters", dict(self.counters))

    def to_json(self) -> dict[str, Any]:
        return {"tok_s": self.tok_s, "tokens": self.tokens, "seconds": self.seconds,
                "iters": [dict(r) for r in self.iters], "counters": dict(self.counters),
                "instrumented": self.instrumented}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Sample":
        return cls(tok_s=d["tok_s"], tokens=d.get("tokens"), seconds=d.get("seconds"),
                   iters=tuple(d.get("iters") or ()), counters=d.get("counters") or {},
                   instrumented=bool(d.get("instrumented", False)))


@dataclass(frozen=True)
class ProbeOutcome:
    """What one probe process gave: a sample, or a reason to skip the candidate."""

    sample: Sample | None
    skip_reason: str | None
    """Why no sample: 'exit 125', 'exit 1: <last stderr line>', 'timeout after 60s', 'no metric line'."""
    exit_code: int | None
    wall_seconds: float
    """Wall time of the whole process (start-up included): the probe's true cost."""
    output_tail: str = ""
    """Last lines of the probe's stdout+stderr, kept for the skip reason and debugging."""
    started_at: float | None = None
    """Unix time the probe process started (None where unknown: a fake runner, an old store)."""
    leftovers: tuple[str, ...] = ()
    """'PID COMMAND' of each process the probe left running when it ended (a daemon, a server it
    started); each was killed then (probe/reaper.py). Not stored."""

    def __post_init__(self) -> None:
        if (self.sample is None) == (self.skip_reason is None):
            raise ValueError("ProbeOutcome needs exactly one of sample and skip_reason")
        if not (self.wall_seconds >= 0):
            raise ValueError("wall_seconds must be >= 0")

    @property
    def skipped(self) -> bool:
        return self.sample is None
