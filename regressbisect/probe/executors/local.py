"""The local executor: each probe is a subprocess of this machine (probe/runner.py), or a fork
of a per-slot preload server where the probe command allows it (probe/preload.py); with
`--overlap K`, up to K probes of a slot at once, their measured windows one at a time
(probe/windows.py)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Mapping

from regressbisect.samples import ProbeOutcome
from regressbisect.probe.executors.base import ExecutedProbe, ProbeExecutor
from regressbisect.machine.fingerprint import environment_fingerprint
from regressbisect.probe.preload import PreloadServers
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.probe.windows import WindowGate


class LocalExecutor(ProbeExecutor):
    """The probe is a process group of this machine.

    Cancelling is the runner's own business: a stop of the hunt (probe/interrupts.py) kills every
    running probe's process group, and a KeyboardInterrupt in the waiting thread kills its own, so
    `cancel_all` has nothing to do.
    """

    name = "local"

    def __init__(self, probe_runner: Callable[..., ProbeOutcome] = run_probe, *, preload: str = "off",
                 overlap: int = 1):
        self._probe_runner = probe_runner  # a fake runner in unit tests (hyperfine's mock)
        real = probe_runner is run_probe
        # A fake runner starts no process, so nothing can be forked, stopped or continued.
        self.preload = PreloadServers(preload if real else "off")
        self.gate = WindowGate(overlap) if overlap > 1 and real and sys.platform.startswith("linux") else None

    def fingerprint(self) -> tuple[str, dict]:
        return environment_fingerprint()

    def run(self, spec: ProbeSpec, worktree: Path, extra_env: Mapping[str, str], *,
            label: str = "") -> ExecutedProbe:
        if self.gate is None:
            return ExecutedProbe(self.preload.run(spec, worktree, extra_env, self._probe_runner))
        env = {**extra_env, **self.gate.env()}
        group = extra_env.get("CUDA_VISIBLE_DEVICES", "")   # the lanes of one slot share its devices
        outcome = self.gate.run(group, lambda on_start: self.preload.run(
            spec, worktree, env, self._probe_runner, on_start=on_start))
        return ExecutedProbe(outcome)

    def cancel_all(self) -> None:
        return None

    def close(self) -> None:
        """Stop the preload servers and the window gate; called when the hunt ends."""
        self.preload.close()
        if self.gate is not None:
            self.gate.close()

    def preload_stats(self) -> dict:
        """The report's `measurement.preload` (docs/report-schema.md)."""
        return self.preload.stats.to_json()

    def overlap_stats(self) -> dict | None:
        """The report's `measurement.overlap`; None without overlap."""
        return None if self.gate is None else self.gate.stats.to_json()
