"""The Slurm executor: one probe = one Slurm job, submitted with submitit (docs/cluster.md).

submitit pickles a call of `node_probe` and runs it on the node under the hunt's own interpreter
(`sys.executable`); the function runs the probe with `runner.run_probe` there, so the protocol
parsing, the timeout and the process-group kill are the ones of a local probe. Its ProbeOutcome and
the node's fingerprint come back in submitit's result file.

The job's state is read from the scheduler by `SubmititSlurm.state` (scontrol, then sacct), not by
submitit: submitit asks sacct only, which reports nothing on clusters without accounting storage
and lags on busy ones; scontrol knows a job while it is queued, running and for MinJobAge seconds
after it ended, with the scheduler's reason.

Faults are data: a job that ends in any state but COMPLETED (failed, preempted, timed out,
cancelled by the scheduler or an operator, node failure) is submitted once more; a second fault
is a skip whose reason names both jobs, their states and the scheduler's reasons. Jobs are
submitted with --no-requeue so that the scheduler does not requeue them behind our back: one
retry, ours, visible in the progress and the reason.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from regressbisect.config import SlurmConfig
from regressbisect.errors import UserError
from regressbisect.samples import ProbeOutcome
from regressbisect.probe.executors.base import ExecutedProbe, ProbeCancelled, ProbeExecutor
from regressbisect.probe.interrupts import INTERRUPTS
from regressbisect.machine.fingerprint import environment_fingerprint
from regressbisect.probe.runner import ProbeSpec, run_probe

JOB_NAME_PREFIX = "rb-"
"""Every job of ours is named rb-<label>, so `squeue -n`/`scancel -n` can find them."""
PREFLIGHT_LABEL = "preflight"
RESULT_WAIT_S = 30.0
"""How long a COMPLETED job's result file may take to appear (attribute caches of NFS)."""
PREFLIGHT_TIME_MIN = 5

PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                            "RESV_DEL_HOLD", "SUSPENDED", "SUBMITTED"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"})
"""Anything else is an end state; only COMPLETED is a success."""
NEVER_STARTS = frozenset({"BadConstraints", "InvalidAccount", "InvalidQOS", "PartitionConfig",
                          "PartitionTimeLimit"})
"""Pending reasons of a job the scheduler will not start as submitted: a settings error, which
every probe job would hit, not a fault of one job."""


# -- on the node ----------------------------------------------------------------------------------

def node_fingerprint() -> tuple[str, dict]:
    """(hash, facts) of this node's type: the machine fingerprint without the hostname.

    Nodes of one type (same CPU model, GPU models and count, Python, torch) are interchangeable
    for a comparison; two hosts of one type must not split a hunt's samples.
    """
    _, facts = environment_fingerprint()
    node_type = {k: v for k, v in facts.items() if k != "hostname"}
    digest = hashlib.sha1(json.dumps(node_type, sort_keys=True).encode()).hexdigest()[:16]
    return "node-" + digest, facts


def _pin_to_allocation(gpus_per_probe: int) -> None:
    """Slurm sets CUDA_VISIBLE_DEVICES for the GPUs it allocated; a value inherited from the
    submitting shell (sbatch exports its environment) describes another machine: drop it."""
    if gpus_per_probe == 0:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)


def node_probe(spec: ProbeSpec, worktree: str, extra_env: Mapping[str, str],
               gpus_per_probe: int) -> dict[str, Any]:
    """Runs in the Slurm job: the probe, as a local probe, and the node's fingerprint."""
    _pin_to_allocation(gpus_per_probe)
    fingerprint, facts = node_fingerprint()
    outcome = run_probe(spec, Path(worktree), extra_env=dict(extra_env))
    return {"outcome": outcome, "fingerprint": fingerprint, "facts": facts}


def node_preflight(marker: str, token: str, gpus_per_probe: int) -> dict[str, Any]:
    """Runs in the preflight job: can the node read the hunt's marker file? Its fingerprint."""
    _pin_to_allocation(gpus_per_probe)
    fingerprint, facts = node_fingerprint()
    try:
        seen = Path(marker).read_text().strip() == token
    except OSError:
        seen = False
    if seen:
        Path(marker + ".seen").write_text(socket.gethostname())
    return {"seen": seen, "fingerprint": fingerprint, "facts": facts,
            "filesystem": filesystem_type(Path(marker).parent)}


def filesystem_type(path: Path) -> str:
    """The filesystem type of the mount holding `path` (e.g. 'nfs4', 'lustre', 'ext4', 'tmpfs')."""
    path = path.resolve()
    best, kind = "", "unknown"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mount_point = left.split()[4].replace("\\040", " ")
                inside = str(path) == mount_point or str(path).startswith(mount_point.rstrip("/") + "/")
                if inside and len(mount_point) >= len(best):
                    best, kind = mount_point, right.split()[0]
    except (OSError, IndexError):
        pass
    return kind


# -- the scheduler ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobState:
    """One look at a job in the scheduler."""

    state: str
    """Slurm's JobState (PENDING, RUNNING, COMPLETED, CANCELLED, PREEMPTED, TIMEOUT ...)."""
    reason: str = ""
    """The scheduler's reason (pending reason, failure reason); '' when it gives none."""
    node: str = ""
    exit_code: str = ""

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def ended(self) -> bool:
        return not (self.pending or self.running)

    def describe(self) -> str:
        details = [d for d in (self.reason and f"reason: {self.reason}",
                               self.exit_code and self.exit_code != "0:0" and f"exit {self.exit_code}",
                               self.node and f"node {self.node}") if d]
        return self.state + (f" ({', '.join(details)})" if details else "")


class Scheduler(Protocol):
    """What the executor needs of a batch scheduler; SubmititSlurm is the real one."""

    def submit(self, function: Callable[..., Any], args: tuple, *, name: str, time_min: int) -> Any:
        """Submit one job; returns a handle with a `job_id` attribute."""

    def state(self, job: Any) -> JobState: ...

    def result(self, job: Any) -> Any:
        """The function's return value of a COMPLETED job; raises when it did not produce one."""

    def cancel(self, job: Any) -> None: ...

    def log_tail(self, job: Any) -> str: ...


class SubmititSlurm:
    """Submission and results through submitit; states from scontrol (sacct as a fallback)."""

    def __init__(self, config: SlurmConfig, folder: Path):
        try:
            import submitit
        except ImportError:  # pragma: no cover - the extra is missing
            raise UserError("--executor slurm needs submitit: pip install 'regressbisect[slurm]'") from None
        if shutil.which("sbatch") is None:
            raise UserError("--executor slurm: sbatch is not on PATH; run the hunt on a machine that "
                            "can submit Slurm jobs (a login node)")
        self.config = config
        self._executor = submitit.SlurmExecutor(folder=str(folder), python=_quoted(sys.executable))
        self._lock = threading.Lock()  # one sbatch at a time: submitit's executor is shared

    def _parameters(self, name: str, time_min: int) -> dict[str, Any]:
        c = self.config
        extra: dict[str, Any] = {"no-requeue": True}
        for arg in c.sbatch_args:
            key, sep, value = arg[2:].partition("=")
            extra[key] = value if sep else True
        params: dict[str, Any] = {"job_name": name, "time": time_min, "nodes": 1, "ntasks_per_node": 1,
                                  "cpus_per_task": c.cpus_per_probe, "additional_parameters": extra,
                                  "stderr_to_stdout": False}
        optional = {"partition": c.partition, "account": c.account, "qos": c.qos, "mem": c.mem,
                    "constraint": c.constraint, "gpus_per_node": c.gpus_per_probe or None}
        params.update({k: v for k, v in optional.items() if v is not None})
        return params

    def submit(self, function, args, *, name, time_min):
        with self._lock:
            self._executor.update_parameters(**self._parameters(name, time_min))
            try:
                return self._executor.submit(function, *args)
            except Exception as exc:  # sbatch refused: a bad partition, account, qos ...
                line = _last_line(str(exc)) or type(exc).__name__
                raise UserError(f"sbatch refused the probe job: {line} (check [tool.regressbisect.slurm])") from None

    def state(self, job) -> JobState:
        job_id = str(job.job_id)
        shown = _run(["scontrol", "show", "job", "-o", job_id])
        if shown is not None and "JobState=" in shown:
            fields = _scontrol_fields(shown)
            reason = fields.get("Reason", "")
            return JobState(state=fields.get("JobState", "UNKNOWN").split()[0],
                            reason="" if reason in ("None", "(null)") else reason,
                            node="" if fields.get("NodeList") in (None, "(null)") else fields["NodeList"],
                            exit_code=fields.get("ExitCode", ""))
        accounted = _run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode,NodeList"])
        if accounted and accounted.strip():
            state, exit_code, node = (accounted.strip().splitlines()[0].split("|") + ["", ""])[:3]
            return JobState(state=state.split()[0], reason=state.partition(" ")[2], node=node,
                            exit_code=exit_code)
        # Neither knows it: it ended more than MinJobAge ago and there is no accounting. The
        # result file, if any, tells whether it completed.
        if Path(job.paths.result_pickle).exists():
            return JobState(state="COMPLETED")
        return JobState(state="UNKNOWN", reason="the controller forgot the job and sacct has no record")

    def result(self, job):
        deadline = time.monotonic() + RESULT_WAIT_S
        result_file = Path(job.paths.result_pickle)
        while not result_file.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        if not result_file.exists():
            raise RuntimeError(f"no result file {result_file} (is {result_file.parent} on a filesystem "
                               f"the nodes share?)")
        value = job.result()
        # A completed job's files have served; a faulty job's stay, with their logs, for a person.
        for path in Path(job.paths.folder).glob(f"{job.job_id}_*"):
            path.unlink(missing_ok=True)
        return value

    def cancel(self, job) -> None:
        _run(["scancel", str(job.job_id)])

    def log_tail(self, job) -> str:
        for path in (job.paths.stderr, job.paths.stdout):
            try:
                lines = Path(path).read_text(errors="replace").strip().splitlines()
            except OSError:
                continue
            if lines:
                return lines[-1][:300]
        return ""


def _quoted(path: str) -> str:
    import shlex
    return shlex.quote(path)


def _run(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _scontrol_fields(line: str) -> dict[str, str]:
    """`scontrol show job -o` is Key=Value separated by spaces; values of a few keys hold spaces."""
    fields: dict[str, str] = {}
    key = None
    for token in line.strip().split(" "):
        name, sep, value = token.partition("=")
        if sep and name and name[0].isupper():
            key = name
            fields[key] = value
        elif key is not None:
            fields[key] += " " + token
    return fields


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


# -- the executor ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobEvent:
    """A change of one job, with the whole picture for a progress display."""

    job_id: str
    label: str
    status: str
    """'queued', 'running', 'done', 'fault', 'cancelled'."""
    detail: str
    queued: tuple[str, ...]
    running: tuple[str, ...]
    done: int


class SlurmExecutor(ProbeExecutor):
    """Runs each probe as one Slurm job; up to `slots` threads call `run` at once."""

    name = "slurm"

    def __init__(self, config: SlurmConfig, work_dir: Path, *, probe_timeout_s: float,
                 scheduler: Scheduler | None = None,
                 on_event: Callable[[JobEvent], None] | None = None):
        self.config = config
        self.work_dir = work_dir
        """Shared directory: the worktree pool's root; job files go to its `slurm-jobs/`."""
        self.time_min = config.time_limit(probe_timeout_s)
        self.scheduler = scheduler or SubmititSlurm(config, work_dir / "slurm-jobs")
        self.on_event = on_event
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._in_flight: dict[str, Any] = {}
        self._status: dict[str, str] = {}
        self._labels: dict[str, str] = {}
        self._cancelling: set[str] = set()
        self._done = 0
        self._fingerprint: tuple[str, dict] | None = None
        self.jobs_submitted: list[str] = []

    # -- the interface ---------------------------------------------------------------------------

    def fingerprint(self) -> tuple[str, dict]:
        """The node type probes will run on, from one short preflight job (once per executor).

        The same job checks that the worktree directory is shared: it must read a marker file
        written here, and writes one back."""
        if self._fingerprint is None:
            self._fingerprint = self._preflight()
        return self._fingerprint

    def run(self, spec: ProbeSpec, worktree: Path, extra_env: Mapping[str, str], *,
            label: str = "") -> ExecutedProbe:
        faults: list[str] = []
        for attempt in (1, 2):
            args = (spec, str(worktree), dict(extra_env), self.config.gpus_per_probe)
            job, final = self._submit_and_wait(node_probe, args, label, self.time_min)
            if final.state == "COMPLETED":
                try:
                    value = self.scheduler.result(job)
                except Exception as exc:  # the job ended but our function did not return
                    final = JobState(state="FAILED", reason=_last_line(str(exc)) or type(exc).__name__)
                else:
                    self._finish(job, "done", "")
                    return ExecutedProbe(value["outcome"], value["fingerprint"], value["facts"])
            fault = f"job {job.job_id} {final.describe()}"
            tail = self.scheduler.log_tail(job) if final.state != "CANCELLED" else ""
            faults.append(fault + (f": {tail}" if tail else ""))
            self._finish(job, "fault", fault + ("; submitting it once more" if attempt == 1 else "; skipped"))
        return ExecutedProbe(ProbeOutcome(sample=None, exit_code=None, wall_seconds=0.0,
                                          skip_reason="slurm: " + "; then ".join(faults)))

    def cancel_all(self) -> None:
        """scancel every job in flight; the threads waiting on them raise ProbeCancelled."""
        self._cancelled.set()
        with self._lock:
            jobs = list(self._in_flight.values())
        for job in jobs:
            self._cancel(job)

    def close(self) -> None:
        """Nothing is kept between jobs."""

    # -- internals ---------------------------------------------------------------------------------

    def _submit_and_wait(self, function, args, label: str, time_min: int) -> tuple[Any, JobState]:
        if self._stopped():
            raise ProbeCancelled(label)
        job = self.scheduler.submit(function, args, name=JOB_NAME_PREFIX + label, time_min=time_min)
        job_id = str(job.job_id)
        with self._lock:
            self._in_flight[job_id] = job
            self._labels[job_id] = label
            self.jobs_submitted.append(job_id)
        self._event(job, label, "queued", "(submitted)")
        if self._stopped():  # cancel_all, or the hunt's stop, came while sbatch was running
            self._cancel(job)
            raise ProbeCancelled(label)
        try:
            while True:
                state = self.scheduler.state(job)
                if state.ended:
                    return job, state
                if state.pending and state.reason in NEVER_STARTS:
                    raise UserError(f"Slurm will not start job {job_id} as submitted (pending, reason "
                                    f"{state.reason}): check partition, account, qos, constraint and "
                                    "time limit in [tool.regressbisect.slurm]")
                status = "running" if state.running else "queued"
                if self._status.get(job_id) != status:
                    self._event(job, label, status, f"on {state.node}" if state.running and state.node
                                else f"(reason: {state.reason})" if state.reason else "")
                if self._cancelled.wait(self.config.poll_s) or INTERRUPTS.stopping:
                    raise ProbeCancelled(label)
        except BaseException:
            # Ctrl-C in this thread, or cancel_all: never leave the job behind in the queue.
            self._cancel(job)
            raise

    def _stopped(self) -> bool:
        """cancel_all ran, or the hunt is stopping (whose unwinding calls cancel_all, which ends
        the waits at once: probe/interrupts.py)."""
        return self._cancelled.is_set() or INTERRUPTS.stopping

    def _preflight(self) -> tuple[str, dict]:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(8)
        marker = self.work_dir / f"shared-check-{token}"
        marker.write_text(token)
        here = filesystem_type(self.work_dir)
        try:
            job, final = self._submit_and_wait(node_preflight, (str(marker), token, self.config.gpus_per_probe),
                                               PREFLIGHT_LABEL, PREFLIGHT_TIME_MIN)
            value = None
            if final.state == "COMPLETED":
                try:
                    value = self.scheduler.result(job)
                except Exception as exc:
                    final = JobState(state="FAILED", reason=_last_line(str(exc)))
            if value is None:
                tail = self.scheduler.log_tail(job)
                self._finish(job, "fault", f"job {job.job_id} {final.describe()}")
                raise UserError(f"the Slurm preflight job {job.job_id} ended {final.describe()}"
                                + (f": {tail}" if tail else "")
                                + f"; {self.work_dir} ({here}) must be on a filesystem the nodes share "
                                  "(set shared_dir in [tool.regressbisect.slurm] or --slurm-shared-dir), "
                                  "and the nodes need this Python with regressbisect: " + sys.executable)
            self._finish(job, "done", "")
            if not value["seen"]:
                raise UserError(f"{self.work_dir} is not shared with the Slurm nodes: node "
                                f"{value['facts'].get('hostname')} cannot read a file written here "
                                f"({here} here, {value['filesystem']} there); point the worktrees at a "
                                "shared filesystem (NFS, Lustre, GPFS) with --slurm-shared-dir or "
                                "shared_dir in [tool.regressbisect.slurm]")
            return value["fingerprint"], dict(value["facts"])
        finally:
            for path in (marker, Path(str(marker) + ".seen")):
                path.unlink(missing_ok=True)

    def _event(self, job, label: str, status: str, detail: str) -> None:
        job_id = str(job.job_id)
        with self._lock:
            self._status[job_id] = status
            if status in ("done", "fault", "cancelled"):
                self._in_flight.pop(job_id, None)
                self._status.pop(job_id, None)
                self._done += 1
            queued = tuple(j for j, s in self._status.items() if s == "queued")
            running = tuple(j for j, s in self._status.items() if s == "running")
            event = JobEvent(job_id=job_id, label=label, status=status, detail=detail,
                             queued=queued, running=running, done=self._done)
        if self.on_event is not None:
            self.on_event(event)

    def _cancel(self, job) -> None:
        """scancel `job` once, whoever asks first (cancel_all or the thread waiting on it)."""
        with self._lock:
            if str(job.job_id) not in self._in_flight or str(job.job_id) in self._cancelling:
                return
            self._cancelling.add(str(job.job_id))
        self.scheduler.cancel(job)
        self._finish(job, "cancelled", "cancelled (the hunt was interrupted)")

    def _finish(self, job, status: str, detail: str) -> None:
        job_id = str(job.job_id)
        with self._lock:
            if job_id not in self._in_flight:
                return  # already reported (cancel_all and the waiting thread both get here)
            label = self._labels.get(job_id, "")
        self._event(job, label, status, detail)
