"""Overlapped probes: start-ups run side by side, measured windows run alone.

A PyTorch probe spends most of its wall time starting (imports, model set-up, compile: 13-20 s of
a 15-21 s h200 probe) and holds its GPU idle meanwhile. With `--overlap K` a slot runs up to K
probes at once, each in its own worktree ("lane"), and the probe tells the tool when its measured
window starts and ends through a window gate (the probe contract, docs/design.md "Overlapped
probes"): it connects to the unix socket named by REGRESSBISECT_WINDOW, sends `open`, waits for
`go`, measures, and sends `close` (or exits). The gate

* lets one window at a time run per slot (the slot's GPUs serve one measurement);
* stops (SIGSTOP, the whole process group) every probe of the hunt that is not in its window
  while any window is open, waits WINDOW_SETTLE_S for work they had queued on a GPU to drain,
  then answers `go`; and continues them (SIGCONT) once no window is open. A measured window
  therefore runs with no other probe of the hunt taking CPU or GPU time, as in a sequential hunt;
* does not count the seconds it holds a probe (stopped, or waiting for its window) against the
  probe's timeout (probe/runner.py);
* learns per slot whether the probe uses the gate, from its first probes, which run side by side:
  once a probe of the slot has measured without opening a window, the slot's probes run one at a
  time. A probe that ran beside others of its slot without opening a window (its sample could
  have been disturbed) or that failed beside them (a stopped probe keeps its GPU memory: out of
  memory beside others says nothing of the candidate) is run again alone. When that run alone
  succeeds, the failure was the company's, and the slot runs one probe fewer side by side from
  then on (down to one): `--overlap 3` sized for an H200's 141 GB had 8 of 12 h200-preset probes
  fail beside each other on an 80 GB H100, each run again (docs/results/demo-hunt-h200.md, 2026-12-05).

A hunt killed with -9 cannot continue the probes it stopped: a watchdog process, started with the
gate, kills the process group of every probe still registered once the hunt's end of its pipe
closes. Linux only (SO_PEERCRED names the process that opened a window).
"""
from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from regressbisect.probe.contract import WINDOW_ENV, WINDOW_GO, WINDOW_OPEN

if TYPE_CHECKING:
    from regressbisect.samples import ProbeOutcome

WINDOW_SETTLE_S = 0.25
"""Seconds between stopping the other probes and answering `go`: a stopped process's kernels
already queued on the GPU still run; a training step of the probes this tool was built on queues
tens of milliseconds of work."""
WINDOW_PATIENCE_S = 300.0
"""A window open longer than this (a probe holding the window while it waits for a lock that a
stopped probe holds) lets the stopped probes continue; the report counts it (`overrun`)."""
REGISTER_WAIT_S = 5.0
"""How long an `open` from a process not yet registered waits for its probe's registration (a
probe can reach its window before the thread that started it has registered its process group)."""

_WATCHDOG = r"""
import os, signal, sys
groups = set()
for line in sys.stdin:
    sign, pgid = line[0], int(line[1:])
    (groups.add if sign == "+" else groups.discard)(pgid)
for pgid in groups:   # the hunt is gone (or closed the gate) with these probes still registered
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


@dataclass
class WindowStats:
    """What the report says of overlapped probes (`measurement.overlap`, docs/report-schema.md)."""

    lanes_per_slot: int
    probes: int = 0
    """Probes started with the gate in place."""
    windows: int = 0
    """Measured windows opened through the gate."""
    alone: int = 0
    """Probes run one at a time (the slot's gating not learned yet, or a re-run)."""
    reruns: int = 0
    """Probes that ran beside others without opening a window, or failed beside them, run again alone."""
    stops: int = 0
    """SIGSTOPs sent to probes (each one while another probe's window was open)."""
    stopped_s: float = 0.0
    """Seconds probes spent stopped, summed."""
    gate_wait_s: float = 0.0
    """Seconds probes waited at the gate for another window of their slot to close, summed."""
    overrun: int = 0
    """Windows open past WINDOW_PATIENCE_S, after which the other probes continued."""
    unregistered: int = 0
    """`open`s from a process of no registered probe (answered `go` without a window)."""
    without_window: int = 0
    """Probe runs (re-runs included) that ended without opening a window."""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lanes_per_slot": self.lanes_per_slot, "probes": self.probes, "windows": self.windows,
                "probes_alone": self.alone, "reruns": self.reruns, "stops": self.stops,
                "stopped_s": round(self.stopped_s, 2), "gate_wait_s": round(self.gate_wait_s, 2),
                "overrun": self.overrun, "unregistered": self.unregistered,
                "without_window": self.without_window,
                "notes": list(dict.fromkeys(self.notes))}


@dataclass
class _Probe:
    group: str
    stoppable: bool
    """Runs side by side (its slot not known to measure without the gate); a probe running
    alone is never stopped (it may be measuring without the gate)."""
    opened: bool = False
    company: bool = False
    """Another probe of its slot ran while it ran."""
    stopped_at: float | None = None
    stopped_s: float = 0.0
    """Seconds stopped so far (the current stop not included)."""
    waited_s: float = 0.0
    """Seconds waiting for `go` while not stopped."""

    def held_s(self) -> float:
        """Seconds the gate has held this probe: they do not count against its timeout."""
        now = time.monotonic()
        return self.stopped_s + self.waited_s + (now - self.stopped_at if self.stopped_at is not None else 0.0)


class WindowGate:
    """The gate of one hunt: one socket, one registry of running probes (by process group)."""

    def __init__(self, lanes_per_slot: int, *, settle_s: float = WINDOW_SETTLE_S,
                 patience_s: float = WINDOW_PATIENCE_S):
        self.stats = WindowStats(lanes_per_slot=lanes_per_slot)
        self._settle_s = settle_s
        self._patience_s = patience_s
        self._cond = threading.Condition()
        self._probes: dict[int, _Probe] = {}
        self._holders: dict[str, int] = {}
        """group -> process group whose window is open."""
        self._gated: set[str] = set()
        """Groups (slots) known to use the gate: a probe that does not is run again alone."""
        self._ungated: set[str] = set()
        """Groups whose probe measured without the gate: their probes run one at a time."""
        self._alone: dict[str, int] = {}
        """group -> -1 while a probe runs alone, else how many probes run side by side."""
        self._width: dict[str, int] = {}
        """group -> most probes side by side, once a failure beside others narrowed it (from
        lanes_per_slot; until then the executor's lanes alone bound it)."""
        self._dir = Path(tempfile.mkdtemp(prefix="regressbisect-windows-"))
        self.path = self._dir / "gate.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(64)
        self._closed = False
        self._watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG], stdin=subprocess.PIPE,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True, text=True)
        self._watchdog_lock = threading.Lock()
        threading.Thread(target=self._accept_loop, name="window-gate", daemon=True).start()

    # -- the executor's side ---------------------------------------------------------------

    def env(self) -> dict[str, str]:
        return {WINDOW_ENV: str(self.path)}

    def run(self, group: str,
            run_probe: Callable[[Callable[[int], Callable[[], float]]], "ProbeOutcome"]) -> "ProbeOutcome":
        """Run one probe of slot `group`: `run_probe(on_start)` starts it, calls on_start(pgid)
        once it has a process group (which returns the seconds-held function its timeout
        discounts), waits for it and returns its outcome. Side by side with the slot's other
        probes unless the slot is known to measure without the gate, then alone."""
        with self._cond:
            self.stats.probes += 1
        with self._lane(group) as side_by_side:
            outcome, opened, company = self._run_registered(group, run_probe, stoppable=side_by_side)
        failed = outcome.sample is None
        if company and (failed or not opened):
            # Beside others it measured with no window of its own (their start-ups may have
            # disturbed it), or it failed (the GPU memory the stopped probes hold may be what it
            # lacked): its outcome is the overlap's doing until it is run again, alone.
            with self._cond:
                self.stats.reruns += 1
                self.stats.notes.append(f"a probe that failed beside other probes ({outcome.skip_reason}) was run "
                                        "again alone" if failed else
                                        "a probe measured without opening a window while other probes ran; it was "
                                        "run again alone")
            with self._lane(group, alone=True):
                outcome, opened, _ = self._run_registered(group, run_probe, stoppable=False)
            if failed and outcome.sample is not None:
                self._narrow(group)
        self._learn(group, opened, outcome.sample is None)   # from the run whose outcome counts
        return outcome

    def _narrow(self, group: str) -> None:
        """A probe failed beside others and ran alone: one probe fewer side by side in its slot
        (the card's memory, say, holds fewer than the lanes), never fewer than one."""
        with self._cond:
            before = self._width.get(group, self.stats.lanes_per_slot)
            width = max(1, before - 1)
            if width < before:
                self.stats.notes.append(f"a probe failed beside others and ran alone: from then on at most {width} "
                                        "probe(s) of its slot ran side by side")
            self._width[group] = width
            self._cond.notify_all()

    def _learn(self, group: str, opened: bool, failed: bool) -> None:
        """What the run whose outcome counts tells of its slot's probe: one that opened a window
        uses the gate; one that measured without a window (alone: a run beside others without one
        is run again alone first, as a start-up beside it may have kept its `open` from reaching
        the gate) does not, and its slot's probes then run one at a time. A failure says nothing."""
        with self._cond:
            if opened:
                self._gated.add(group)
                self._ungated.discard(group)
            elif not failed and group not in self._gated:
                self._ungated.add(group)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._continue_all()
        try:
            self._listener.close()
        except OSError:
            pass
        with self._watchdog_lock:
            if self._watchdog.stdin is not None:
                try:
                    self._watchdog.stdin.close()
                except OSError:
                    pass
        try:
            self._watchdog.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._watchdog.kill()
        for p in self._dir.iterdir():
            p.unlink(missing_ok=True)
        self._dir.rmdir()

    @contextmanager
    def _lane(self, group: str, *, alone: bool = False) -> Iterator[bool]:
        """Shared (yields True) unless the slot is known to measure without the gate, or `alone`."""
        with self._cond:
            while True:
                running = self._alone.get(group, 0)
                shared = not alone and group not in self._ungated
                width = self._width.get(group, running + 1)
                if running == 0 or (shared and 0 < running < width):
                    break
                self._cond.wait()
            self._alone[group] = running + 1 if shared else -1
            if not shared:
                self.stats.alone += 1
        try:
            yield shared
        finally:
            with self._cond:
                self._alone[group] = self._alone[group] - 1 if shared else 0
                self._cond.notify_all()

    def _run_registered(self, group: str, run_probe, *, stoppable: bool) -> tuple["ProbeOutcome", bool, bool]:
        """(outcome, whether it opened a window, whether another probe of its slot ran beside it)."""
        pgids: list[int] = []

        def on_start(pgid: int) -> Callable[[], float]:
            pgids.append(pgid)
            probe = _Probe(group, stoppable)
            with self._cond:
                for other in self._probes.values():
                    if other.group == group:
                        other.company = probe.company = True
                self._probes[pgid] = probe
                if self._holders and stoppable:
                    self._stop(pgid)   # a window is open: this one starts when it closes
                self._cond.notify_all()
            self._tell_watchdog(f"+{pgid}")
            return probe.held_s   # the runner's timeout does not count it

        try:
            outcome = run_probe(on_start)
        finally:
            opened = company = False
            for pgid in pgids:
                self._tell_watchdog(f"-{pgid}")
                with self._cond:
                    probe = self._probes.pop(pgid, None)
                    opened = opened or bool(probe and probe.opened)
                    company = company or bool(probe and probe.company)
                    if probe is not None and probe.stopped_at is not None:
                        self.stats.stopped_s += time.monotonic() - probe.stopped_at
                        probe.stopped_at = None
                    if self._holders.get(group) == pgid:
                        self._release(group)
            if pgids and not opened:
                with self._cond:
                    self.stats.without_window += 1
        return outcome, opened, company

    def _tell_watchdog(self, line: str) -> None:
        with self._watchdog_lock:
            try:
                self._watchdog.stdin.write(line + "\n")
                self._watchdog.stdin.flush()
            except (OSError, ValueError):
                pass

    # -- the probes' side --------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return   # closed
            threading.Thread(target=self._serve, args=(conn,), name="window", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                 struct.calcsize("3i")))
                sid = os.getsid(pid)
                word = _read_word(conn)
            except OSError as error:
                with self._cond:
                    self.stats.notes.append(f"a connection to the gate failed before its window: {error}")
                return
            if word != WINDOW_OPEN:
                with self._cond:
                    self.stats.notes.append(f"the gate was sent {word!r} where it expects {WINDOW_OPEN!r}")
                return
            group = self._open(sid, pid)
            try:
                conn.sendall(WINDOW_GO.encode() + b"\n")
                conn.settimeout(self._patience_s)
                try:
                    _read_word(conn)   # "close", or "" when the probe exits with the window open
                except socket.timeout:
                    self._overrun(sid)
                    conn.settimeout(None)
                    _read_word(conn)
                except OSError:
                    pass
            finally:
                if group is not None:
                    with self._cond:
                        if self._holders.get(group) == sid:
                            self._release(group)

    def _open(self, sid: int, pid: int) -> str | None:
        """Wait until the slot's window is free, stop every other probe, settle; the slot, or
        None for a process that is no registered probe (it measures unguarded, as without gate)."""
        deadline = time.monotonic() + REGISTER_WAIT_S
        with self._cond:
            while sid not in self._probes and time.monotonic() < deadline and not self._closed:
                self._cond.wait(timeout=0.05)
            probe = self._probes.get(sid)
            if probe is None or self._closed:
                if not self._closed:
                    self.stats.unregistered += 1
                    self.stats.notes.append(f"a window was asked for by process {pid} of session {sid}, "
                                            "which is no probe of this hunt")
                return None
            group = probe.group
            asked, stopped_before = time.monotonic(), probe.stopped_s
            while self._holders.get(group) not in (None, sid):
                self._cond.wait()
            if sid not in self._probes:
                self.stats.notes.append(f"probe {sid} ended while it waited for its window")
                return None
            self._holders[group] = sid
            probe.opened = True
            self.stats.windows += 1
            if probe.stopped_at is not None:   # stopped by another slot's window, now its turn
                self._continue(sid)
            waited = time.monotonic() - asked
            self.stats.gate_wait_s += waited
            probe.waited_s += max(0.0, waited - (probe.stopped_s - stopped_before))
            stopped_any = False
            for pgid, other in self._probes.items():
                if other.stoppable and other.stopped_at is None and pgid not in self._holders.values():
                    self._stop(pgid)
                    stopped_any = True
        if stopped_any:
            time.sleep(self._settle_s)
        return group

    def _release(self, group: str) -> None:
        """Close the slot's window (lock held): continue every stopped probe once no window is open,
        else stop the closing probe too (it must not disturb the windows still open)."""
        holder = self._holders.pop(group)
        if self._holders:
            closing = self._probes.get(holder)
            if closing is not None and closing.stoppable and closing.stopped_at is None:
                self._stop(holder)
        else:
            self._continue_all()
        self._cond.notify_all()

    def _overrun(self, sid: int) -> None:
        with self._cond:
            self.stats.overrun += 1
            self.stats.notes.append(f"a window stayed open over {self._patience_s:g}s; the other probes "
                                    "continued beside it")
            for pgid, probe in self._probes.items():
                if pgid != sid and probe.stopped_at is not None:
                    self._continue(pgid)

    def _stop(self, pgid: int) -> None:
        try:
            os.killpg(pgid, signal.SIGSTOP)
        except OSError:
            return
        self._probes[pgid].stopped_at = time.monotonic()
        self.stats.stops += 1

    def _continue(self, pgid: int) -> None:
        probe = self._probes[pgid]
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass
        if probe.stopped_at is not None:
            stopped = time.monotonic() - probe.stopped_at
            self.stats.stopped_s += stopped
            probe.stopped_s += stopped
            probe.stopped_at = None

    def _continue_all(self) -> None:
        for pgid, probe in list(self._probes.items()):
            if probe.stopped_at is not None:
                self._continue(pgid)


def _read_word(conn: socket.socket) -> str:
    """One line from the probe, stripped ('' when it closed the connection)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(64)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()
