"""Where probes run: `local` (subprocesses of this machine) or `slurm` (one Slurm job each).

See base.py for the interface, docs/cluster.md for the Slurm design.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from regressbisect.config import Executor, HuntConfig
from regressbisect.git.history import History
from regressbisect.git.worktrees import pool_root
from regressbisect.samples import ProbeOutcome
from regressbisect.probe.executors.base import ExecutedProbe, ProbeCancelled, ProbeExecutor
from regressbisect.probe.executors.local import LocalExecutor
from regressbisect.probe.runner import run_probe

__all__ = ["ExecutedProbe", "ProbeCancelled", "ProbeExecutor", "LocalExecutor", "make_executor",
           "shared_work_root", "work_root"]


def work_root(config: HuntConfig, history: History) -> Path:
    """Where the worktree pool (and, with Slurm, the job files) live.

    Inside the git dir by default; with `shared_dir` set, a per-repository directory under it
    (two repositories pointed at one shared_dir must not share slots)."""
    if config.executor == Executor.SLURM and config.slurm.shared_dir:
        return shared_work_root(config.slurm.shared_dir, history)
    return pool_root(history)


def shared_work_root(shared_dir: str, history: History) -> Path:
    """This repository's directory under a shared_dir: `<shared_dir>/<repo name>-<id>`."""
    repo_id = hashlib.sha1(str(history.common_dir.resolve()).encode()).hexdigest()[:10]
    return Path(shared_dir).expanduser().resolve() / f"{history.root.name}-{repo_id}"


LOCAL_RUNNER: Callable[..., ProbeOutcome] = run_probe
"""The local executor's runner when the hunt names none: `run_probe`, one process per probe.
The CLI's end-to-end tests of verdicts, reports and exit codes put an in-process fake here
(hyperfine's mock executor: tests/conftest.py `fake_probes`, regressbisect/testing/benchrepo.py)."""


def make_executor(config: HuntConfig, history: History, *, progress=None,
                  probe_runner: Callable[..., ProbeOutcome] = run_probe) -> ProbeExecutor:
    """The executor a hunt's config asks for; `probe_runner` is the local executor's runner."""
    if config.executor == Executor.LOCAL:
        # A setup step may reinstall the very stack a preload server would hold (docs/setup.md).
        preload = "off" if config.probe.setup is not None else config.preload
        runner = LOCAL_RUNNER if probe_runner is run_probe else probe_runner
        return LocalExecutor(runner, preload=preload, overlap=config.overlap)
    from regressbisect.probe.executors.slurm import SlurmExecutor
    return SlurmExecutor(config.slurm, work_root(config, history), probe_timeout_s=config.probe.timeout_s,
                         on_event=None if progress is None else progress.job_event)
