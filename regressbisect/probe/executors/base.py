"""What runs a probe: the interface between the sample source and a place where processes run.

The sample source (hunts/sampling.py) asks an executor to run one probe spec in one worktree with one
extra environment and gets back the ProbeOutcome plus the fingerprint of the machine that ran it.
Where that happens (a subprocess here, a Slurm job on some node) changes nothing above this line:
the search, the store and the reports see the same outcomes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol

from regressbisect.samples import ProbeOutcome
from regressbisect.probe.interrupts import ProbeCancelled
from regressbisect.probe.runner import ProbeSpec

__all__ = ["ExecutedProbe", "JobListener", "ProbeCancelled", "ProbeExecutor"]


@dataclass(frozen=True)
class ExecutedProbe:
    """One probe's outcome and where it ran."""

    outcome: ProbeOutcome
    fingerprint: str | None = None
    """Machine fingerprint of the node that ran it; None: the machine of the hunt itself."""
    facts: Mapping[str, object] = field(default_factory=dict)
    """The facts behind `fingerprint` (hostname, GPUs, ...), for messages and reports."""


JobListener = Callable[[str], None]
"""Receives one line per job event (submitted, running, done, re-queued ...)."""


class ProbeExecutor(Protocol):
    """Runs probes; `run` is called from up to `slots` threads at once.

    The executors subclass it, so the three optional parts below have their defaults: an
    executor that keeps no such figures (Slurm's, the tests' fakes) says nothing of them."""

    name: str

    def fingerprint(self) -> tuple[str, dict]:
        """(hash, facts) of the machines this executor runs probes on; keys stored samples."""

    def run(self, spec: ProbeSpec, worktree: Path, extra_env: Mapping[str, str], *,
            label: str = "") -> ExecutedProbe:
        """Run one probe and wait for it; raises ProbeCancelled after cancel_all()."""

    def cancel_all(self) -> None:
        """Cancel every probe in flight (pending or running); their `run` raise ProbeCancelled."""

    def close(self) -> None:
        """The hunt is over: release what the executor keeps between probes."""

    def count_build(self, *, reused: bool) -> None:
        """A setup step ran (`reused` False) or a probe runs on a worktree that already holds its
        candidate built (True); the sample source says so (docs/setup.md). Only the cost meter
        (hunts/cost.py) counts them; by default nothing."""
        return None

    def preload_stats(self) -> dict | None:
        """The report's `measurement.preload` (docs/report-schema.md); None: no probe is forked
        from a preload server (probe/preload.py) by this executor."""
        return None

    def overlap_stats(self) -> dict | None:
        """The report's `measurement.overlap`; None: probes are not overlapped (probe/windows.py)."""
        return None
