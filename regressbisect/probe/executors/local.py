"""The local executor: each probe is a subprocess of this machine (probe/runner.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

from regressbisect.samples import ProbeOutcome
from regressbisect.probe.executors.base import ExecutedProbe
from regressbisect.machine.fingerprint import environment_fingerprint
from regressbisect.probe.runner import ProbeSpec, run_probe


class LocalExecutor:
    """Today's runner, unchanged: the probe is a process group of this machine.

    Cancelling is the runner's own business: a KeyboardInterrupt in the waiting thread kills the
    probe's process group, so `cancel_all` has nothing to do.
    """

    name = "local"

    def __init__(self, probe_runner: Callable[..., ProbeOutcome] = run_probe):
        self._probe_runner = probe_runner  # a fake runner in unit tests (hyperfine's mock)

    def fingerprint(self) -> tuple[str, dict]:
        return environment_fingerprint()

    def run(self, spec: ProbeSpec, worktree: Path, extra_env: Mapping[str, str], *,
            label: str = "") -> ExecutedProbe:
        return ExecutedProbe(self._probe_runner(spec, worktree, extra_env=extra_env))

    def cancel_all(self) -> None:
        return None
