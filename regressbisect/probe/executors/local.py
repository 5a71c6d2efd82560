"""The local executor: each probe is a subprocess of this machine (probe/runner.py), or a fork
of a per-slot preload server where the probe command allows it (probe/preload.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from regressbisect.samples import ProbeOutcome
from regressbisect.probe.executors.base import ExecutedProbe
from regressbisect.machine.fingerprint import environment_fingerprint
from regressbisect.probe.preload import PreloadServers
from regressbisect.probe.runner import ProbeSpec, run_probe


class LocalExecutor:
    """The probe is a process group of this machine.

    Cancelling is the runner's own business: a KeyboardInterrupt in the waiting thread kills the
    probe's process group, so `cancel_all` has nothing to do.
    """

    name = "local"

    def __init__(self, probe_runner: Callable[..., ProbeOutcome] = run_probe, *, preload: str = "off"):
        self._probe_runner = probe_runner  # a fake runner in unit tests (hyperfine's mock)
        # A fake runner starts no process, so nothing can be forked for it.
        self.preload = PreloadServers(preload if probe_runner is run_probe else "off")

    def fingerprint(self) -> tuple[str, dict]:
        return environment_fingerprint()

    def run(self, spec: ProbeSpec, worktree: Path, extra_env: Mapping[str, str], *,
            label: str = "") -> ExecutedProbe:
        return ExecutedProbe(self.preload.run(spec, worktree, extra_env, self._probe_runner))

    def cancel_all(self) -> None:
        return None

    def close(self) -> None:
        """Stop the preload servers; called when the hunt ends."""
        self.preload.close()

    def preload_stats(self) -> dict:
        """The report's `measurement.preload` (docs/report-schema.md)."""
        return self.preload.stats.to_json()
