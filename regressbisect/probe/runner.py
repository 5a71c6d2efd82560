"""Run one probe command in one worktree: environment, budget, timeout, process-group kill.

One probe = one process (pyperf style): the parent never imports the code it measures. Exit
codes follow `git bisect run`: 0 measured, 125 skip, anything else (a crash, a timeout, a kill,
no metric line) is a skip with the reason kept - a crash is never read as "slow".

Output goes to temporary files, not pipes: no pipe can fill up and deadlock the probe, and a
grandchild that keeps a descriptor open cannot hang the parent.

On Linux the probe's parent is a reaper (probe/reaper.py), a child subreaper: once the probe
has ended, every process it started is killed, a daemon that left its session included, and
the outcome names those that were still running (`ProbeOutcome.leftovers`).
"""
from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from regressbisect.samples import ProbeOutcome, Sample
from regressbisect.probe.contract import (IMPORTS_DIR_ENV, INSTRUMENT_ENV, INSTRUMENT_ON, LMHEAD_ENV, MARKER_ENV,
                                          PREFIX, TOKENS_ENV, WORK_ENV, WORK_ON)
from regressbisect.probe.interrupts import INTERRUPTS, ProbeCancelled
from regressbisect.probe.interrupts import signal_group as _signal_group  # setup_step uses it too
from regressbisect.probe.protocol import DEFAULT_METRIC_REGEX, ProtocolError, parse_output

if TYPE_CHECKING:
    from regressbisect.config import HuntConfig

SHIM_DIR = Path(__file__).resolve().parent / "shim"
"""The probe's `sitecustomize` directory (counters, import record) put first on its PYTHONPATH."""
REAPER_SCRIPT = Path(__file__).resolve().parent / "reaper.py"
"""The probe's parent that kills what the probe leaves behind (Linux)."""
TAIL_LINES = 40
"""How many trailing output lines a ProbeOutcome keeps."""
KILL_GRACE_S = 5.0
"""Seconds between SIGTERM and SIGKILL to the probe's process group (time to flush, free the GPU)."""
SKIP_EXIT_CODE = 125
"""The exit code by which a probe asks to skip a candidate (as `git bisect run`)."""
NO_METRIC_REASON = f'no metric line in output (print "{PREFIX}{{...}}" or pass --metric-regex)'


@dataclass(frozen=True)
class ProbeSpec:
    """How to run one probe process; part of the store key through the config hash."""

    command: str
    """Shell command (run by bash); `{tokens}` is replaced by the token budget."""
    tokens: int
    """Token budget of the measured stage; also exported as REGRESSBISECT_TOKENS."""
    timeout_s: float
    """Wall-clock limit of one probe process; past it the whole process group is killed."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for the probe (over the parent's environment)."""
    instrument: bool = False
    """Load the counters shim: its directory goes first on PYTHONPATH, REGRESSBISECT_INSTRUMENT=1."""
    work: bool = False
    """The counting arm (with `instrument`): REGRESSBISECT_WORK=1, the shim also counts the work
    per step (probe/work.py). Never a source of tok/s."""
    metric_regex: str | None = DEFAULT_METRIC_REGEX
    """Fallback when the probe prints no protocol line: one group capturing tok/s; None disables it."""

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise ValueError("ProbeSpec.command is empty")
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens <= 0:
            raise ValueError(f"ProbeSpec.tokens must be a positive int, got {self.tokens!r}")
        if not self.timeout_s > 0:
            raise ValueError(f"ProbeSpec.timeout_s must be > 0, got {self.timeout_s!r}")
        object.__setattr__(self, "env", {str(k): str(v) for k, v in dict(self.env).items()})

    def render_command(self) -> str:
        # str.replace, not str.format: shell commands are full of braces (${VAR}, JSON).
        return self.command.replace("{tokens}", str(self.tokens))


def probe_spec(config: HuntConfig) -> ProbeSpec:
    """The runner's view of the probe config (the commit, hunk and nightly hunts and doctor's
    import check share it)."""
    env = dict(config.probe.env)
    if config.probe.lm_head_min_out is not None:
        env[LMHEAD_ENV] = str(config.probe.lm_head_min_out)
    return ProbeSpec(command=config.probe.cmd, tokens=config.probe.tokens,
                     timeout_s=config.probe.timeout_s, env=env, metric_regex=config.probe.metric_regex)


def run_probe(spec: ProbeSpec, cwd: Path, extra_env: Mapping[str, str] | None = None,
              *, kill_grace_s: float = KILL_GRACE_S, on_start=None) -> ProbeOutcome:
    """Run the probe once in `cwd`; the outcome's sample is the FIRST run the probe reported.

    Use :func:`run_probe_all` to get every sample of a probe that measures several runs.
    """
    return run_probe_all(spec, cwd, extra_env, kill_grace_s=kill_grace_s, on_start=on_start)[0]


def run_probe_all(spec: ProbeSpec, cwd: Path, extra_env: Mapping[str, str] | None = None,
                  *, kill_grace_s: float = KILL_GRACE_S, start=None,
                  on_start=None) -> tuple[ProbeOutcome, list[Sample]]:
    """Run the probe once in `cwd`: (outcome, every sample it printed, in order).

    The outcome carries the first sample (or the skip reason); the list is empty on a skip.
    `extra_env` is layered over `spec.env` (e.g. CUDA_VISIBLE_DEVICES of a GPU slot).
    A KeyboardInterrupt kills the probe's whole process group and is re-raised; once the hunt
    is stopping (probe/interrupts.py) no probe starts, and one the stop killed raises
    ProbeCancelled.
    `start(out_file, err_file)` starts the probe some other way than `bash -c` (a fork of a
    preload server, probe/preload.py) and returns what Popen would: pid (its process group),
    poll(), wait(timeout) and returncode. `on_start(pgid)` is called once the probe's process
    group exists (the window gate registers it: probe/windows.py); it may return a function
    giving the seconds the probe has been held so far (stopped, or waiting for its window), which
    do not count against the timeout.
    """
    env = probe_environment(spec, extra_env)
    INTERRUPTS.refuse_if_stopping()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        started_at = time.time()
        started = time.perf_counter()
        if start is not None:
            process = start(out_file, err_file)
        else:
            process = start_reaped(spec.render_command(), cwd, env, out_file, err_file)
        running = time.perf_counter()   # the timeout is the probe's: its starter's start-up is not in it
        INTERRUPTS.started(process.pid)
        timed_out = False
        try:
            held = on_start(process.pid) if on_start is not None else None
            try:
                _wait(process, spec.timeout_s, running, held)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(process, kill_grace_s)
        except BaseException:  # KeyboardInterrupt, SystemExit: leave no probe running
            _kill_group(process, min(kill_grace_s, 2.0))
            raise
        finally:
            killed_by_stop = INTERRUPTS.ended(process.pid)
        if killed_by_stop:   # a probe that ended before the stop keeps its outcome
            raise ProbeCancelled(f"probe {process.pid} was killed because the hunt is stopping")
        wall_seconds = time.perf_counter() - started
        # Stragglers the probe left behind would compete with the next sample: kill them (the
        # reaper or preload server already killed every process below it, and named them).
        _signal_group(process.pid, signal.SIGKILL)
        leftovers = tuple(getattr(process, "leftovers", ()))
        stdout = _read(out_file)
        stderr = _read(err_file)
    return finished_probe(spec, process.returncode, stdout, stderr, timed_out=timed_out,
                          wall_seconds=wall_seconds, started_at=started_at, leftovers=leftovers)


def finished_probe(spec: ProbeSpec, code: int | None, stdout: str, stderr: str, *, timed_out: bool = False,
                   wall_seconds: float, started_at: float | None = None,
                   leftovers: tuple[str, ...] = ()) -> tuple[ProbeOutcome, list[Sample]]:
    """What a finished probe's exit status and output say: (outcome, every sample it printed).
    One reading for the runner and for the in-process fake of the CLI's end-to-end tests
    (regressbisect/testing/benchrepo.py), so the fake's skips and samples are the runner's."""
    tail = _tail(stdout, stderr)

    def skip(reason: str) -> tuple[ProbeOutcome, list[Sample]]:
        return ProbeOutcome(sample=None, skip_reason=reason, exit_code=code, wall_seconds=wall_seconds,
                            output_tail=tail, started_at=started_at, leftovers=leftovers), []

    if timed_out:
        return skip(timeout_reason(spec.timeout_s))
    if code != 0:
        return skip(_failure_reason(code, stderr, spec.render_command()))
    try:
        samples = _parse_streams(stdout, stderr, spec)
    except ProtocolError as error:
        return skip(str(error))
    if not samples:
        return skip(NO_METRIC_REASON)
    return ProbeOutcome(sample=samples[0], skip_reason=None, exit_code=code, wall_seconds=wall_seconds,
                        output_tail=tail, started_at=started_at, leftovers=leftovers), samples


def start_reaped(command: str, cwd: Path, env: Mapping[str, str], stdout, stderr):
    """Start `bash -c command` in `cwd` with exactly `env`, in a session (and process group) of
    its own, so that a timeout kills torchrun's workers too; on Linux as the child of a reaper
    (probe/reaper.py) that kills whatever it leaves behind. Returns what Popen would (pid: the
    process group; poll, wait, returncode); the setup step starts its command the same way."""
    argv = ["bash", "-c", command]
    if not sys.platform.startswith("linux"):   # no subreaper: the process group is all we hold
        return subprocess.Popen(argv, cwd=str(cwd), env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=stderr, start_new_session=True)
    ours, theirs = socket.socketpair()
    try:
        # -I -S: the reaper runs with the tool's environment and sees nothing of the project's
        # (its PYTHONPATH could shadow the standard library); the probe gets `env` exactly.
        parent = subprocess.Popen([sys.executable, "-I", "-S", str(REAPER_SCRIPT), str(theirs.fileno())],
                                  cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                  pass_fds=(theirs.fileno(),), start_new_session=True)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    try:
        ours.sendall(json.dumps({"argv": argv, "env": dict(env)}).encode() + b"\n")
        return ReportedProcess(ours, "bash -c", parent=parent, starter="the reaper")
    except BaseException:
        ours.close()
        parent.kill()
        parent.wait()
        raise


class ReportedProcess:
    """A probe started by a process of ours that reports on it over a socket: the reaper
    (probe/reaper.py) or a preload server (probe/preload.py). JSON lines: {"pid": N} once it
    runs, then {"status": S, "leftovers": [...]} once it has ended and every process it left
    was killed. Has the subprocess.Popen calls the runner makes (pid, poll, wait, returncode)."""

    PARENT_GONE = 255
    """Exit status reported when the process reporting went away before the probe's status came."""

    def __init__(self, conn: socket.socket, what: str, *, parent: subprocess.Popen | None = None,
                 starter: str = "the preload server", start_timeout_s: float = 300.0):
        self._conn = conn
        self._buffer = b""
        self._parent = parent
        self.args = what
        self.returncode: int | None = None
        self.leftovers: list[str] = []
        """'PID COMMAND' of each process the probe left running, killed when it ended."""
        message = self._message(timeout=start_timeout_s)
        if message is None or "pid" not in message:
            self._done()
            raise OSError(f"{starter} did not start the probe")
        self.pid = int(message["pid"])

    def poll(self) -> int | None:
        if self.returncode is None:
            self._status(timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._status(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def _status(self, timeout: float | None) -> bool:
        message = self._message(timeout)
        if message is None:
            return False
        self.returncode = int(message.get("status", self.PARENT_GONE))
        self.leftovers = [str(line) for line in message.get("leftovers", ())]
        self._done()
        return True

    def _done(self) -> None:
        self._conn.close()
        if self._parent is not None:   # the reaper exits once it has reported
            try:
                self._parent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._parent.kill()
                self._parent.wait()

    def _message(self, timeout: float | None) -> dict | None:
        """The next JSON line; None on timeout; {} when the connection closed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._conn], [], [], left)
            if not ready:
                return None
            chunk = self._conn.recv(65536)
            if not chunk:
                return {}
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line.decode())


def _wait(process, timeout_s: float, started: float, held) -> None:
    """Wait for the probe; TimeoutExpired once it has run `timeout_s` seconds, not counting the
    seconds `held()` says it was held by the window gate."""
    while True:
        left = timeout_s + (held() if held is not None else 0.0) - (time.perf_counter() - started)
        if left <= 0:
            raise subprocess.TimeoutExpired("probe", timeout_s)
        try:
            process.wait(timeout=left if held is None else min(left, 1.0))
            return
        except subprocess.TimeoutExpired:
            continue


def _parse_streams(stdout: str, stderr: str, spec: ProbeSpec) -> list[Sample]:
    """Protocol and counters lines count on either stream (stdout first: its order is the
    probe's); the regex fallback takes the last match on stdout, else on stderr (where
    `logging` writes)."""
    samples = parse_output(stdout + "\n" + stderr, None, instrumented=spec.instrument)
    if samples or spec.metric_regex is None:
        return samples
    return parse_output(stderr + "\n" + stdout, spec.metric_regex, instrumented=spec.instrument)


def probe_environment(spec: ProbeSpec, extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The probe's environment: the parent's, the contract's variables (probe/contract.py),
    spec.env, then extra_env."""
    env = dict(os.environ)
    env.update({MARKER_ENV: "1", TOKENS_ENV: str(spec.tokens),
                "PYTHONUNBUFFERED": "1"})  # protocol lines must not sit in a buffer at a kill
    env.update(spec.env)
    env.update({str(k): str(v) for k, v in (extra_env or {}).items()})
    if spec.instrument:
        env[INSTRUMENT_ENV] = INSTRUMENT_ON
    else:
        env.pop(INSTRUMENT_ENV, None)  # an instrumented parent must not leak it
    if spec.instrument and spec.work:
        env[WORK_ENV] = WORK_ON
    else:
        env.pop(WORK_ENV, None)
    if spec.instrument or env.get(IMPORTS_DIR_ENV):
        # One sitecustomize does both jobs: counters when instrumented, the import record for
        # the isolation check whenever the caller asked for one (probe/isolation.py).
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SHIM_DIR), env.get("PYTHONPATH")) if p)
    return env


def _failure_reason(code: int, stderr: str, command: str) -> str:
    last = _last_nonempty_line(stderr)
    if code == SKIP_EXIT_CODE:
        return "exit 125 (probe asked to skip)"
    if code == 127:
        match = re.search(r"([^\s:]+): command not found", stderr)
        name = match.group(1) if match else (command.split() or ["?"])[0]
        return f"command not found: {name}"
    # Negative: the shell itself was killed; 128+N: bash reports a child killed by signal N.
    signum = -code if code < 0 else code - 128 if 128 < code <= 128 + 64 else None
    if signum is not None:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        hint = " (out of memory?)" if signum == signal.SIGKILL else f" ({name})"
        return f"killed by signal {signum}{hint}" + (f": {last}" if last and signum != 9 else "")
    return f"exit {code}: {last}" if last else f"exit {code}"


def _kill_group(process: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the probe's process group, then SIGKILL whatever is left after `grace_s`."""
    _signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        process.poll()  # reap the leader, or it keeps the group alive as a zombie
        if process.returncode is not None and not _group_alive(process.pid):
            break
        time.sleep(0.05)
    _signal_group(process.pid, signal.SIGKILL)
    process.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _read(file) -> str:
    file.seek(0)
    return file.read().decode("utf-8", errors="replace")


def _last_nonempty_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


_TIMEOUT = re.compile(r"timeout after ([0-9.]+(?:e[+-]?[0-9]+)?)s")


def timeout_reason(seconds: float) -> str:
    """The skip reason of a run stopped at its time limit (a probe's, or a setup's inside its own)."""
    return f"timeout after {seconds:g}s"


def reusable_failure(reason: str | None, timeout_s: float) -> bool:
    """Whether a stored failure still stands under the limit `timeout_s`: any but a timeout at a
    shorter limit (a resumed hunt given a longer --timeout runs it again)."""
    found = _TIMEOUT.search(reason or "")
    return found is None or float(found.group(1)) >= timeout_s


def _tail(stdout: str, stderr: str) -> str:
    """Last lines of stdout, then of stderr (files are separate, so order across them is lost)."""
    out_lines = stdout.splitlines()
    err_lines = stderr.splitlines()
    keep_err = min(len(err_lines), TAIL_LINES // 2 if len(out_lines) > TAIL_LINES // 2 else
                   TAIL_LINES - len(out_lines))
    keep_out = min(len(out_lines), TAIL_LINES - keep_err)
    parts = out_lines[len(out_lines) - keep_out:]
    if keep_err:
        parts += ["--- stderr ---"] + err_lines[len(err_lines) - keep_err:]
    return "\n".join(parts)
