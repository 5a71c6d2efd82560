"""Stopping a hunt: the one owner of SIGINT/SIGTERM, of the stop, and of the probes it kills.

Ctrl-C (SIGINT) or `kill` (SIGTERM) of a hunt:

* kills the process group of every probe running now, the other slots' threads' included (or the
  hunt would wait for them), and starts no probe from then on;
* stores nothing of a probe it killed: the kill is the stop's doing, not the candidate's, and a
  stored skip would be reused by the resumed hunt as the candidate's own failure (its thread
  gets ProbeCancelled instead of an outcome);
* cancels what the round in flight registered (`on_stop`: the executor's jobs, Slurm's in its
  queue, and the busy-machine guard's waits), once the main thread unwinds;
* unwinds with KeyboardInterrupt; every sample stored before stays, and the CLI prints the resume
  line and exits 130 (ExitCode.INTERRUPTED).

The runner registers each probe's process group (`started`/`ended`) and asks `stopping` before
it starts one; the Slurm executor asks `stopping` before it submits and while it waits; the
hunts install the handlers for their run (`hunt`), the CLI SIGTERM for the whole command (a
`kill` of any command unwinds like Ctrl-C). One instance per process, INTERRUPTS: signals, like
the threads that run the probes, are the process's.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator


class ProbeCancelled(Exception):
    """The probe was cancelled by us (Ctrl-C, SIGTERM of the hunt): no outcome, nothing to store."""


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a hunt."""


def signal_group(pgid: int, signum: int) -> None:
    """Send `signum` to a process group that may be gone already."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Interrupts:
    """The stop of this process's hunt, and the probes it must kill."""

    def __init__(self) -> None:
        # Reentrant: the signal handler runs in the main thread, which may hold the lock then.
        self._lock = threading.RLock()
        self._stopping = False
        self._running: dict[int, int] = {}
        """Process group of each probe running now -> the thread waiting for it."""
        self._killed: set[int] = set()
        """Process groups the stop killed."""
        self._on_stop: list[Callable[[], None]] = []

    # -- what the runner and the executors consult --------------------------------------------------

    @property
    def stopping(self) -> bool:
        """The hunt is stopping: no probe may start."""
        return self._stopping

    def refuse_if_stopping(self) -> None:
        """ProbeCancelled once the hunt is stopping (before a probe would start)."""
        if self._stopping:
            raise ProbeCancelled("the hunt is stopping")

    def started(self, pgid: int) -> None:
        """A probe's process group exists (its thread waits for it); killed at once when the stop
        came while it started, and did not see it."""
        with self._lock:
            self._running[pgid] = threading.get_ident()
            if self._stopping:
                self._killed.add(pgid)
                signal_group(pgid, signal.SIGKILL)

    def ended(self, pgid: int) -> bool:
        """The probe's thread is done waiting for it; True when the stop killed it (its outcome is
        the stop's, not its candidate's)."""
        with self._lock:
            self._running.pop(pgid, None)
            return pgid in self._killed

    def running_groups(self) -> dict[int, int]:
        """{process group: thread ident} of the probes running now: the busy-machine guard tells a
        probe's own processes from the hunt's other probes by them (machine/contention.py)."""
        with self._lock:
            return dict(self._running)

    # -- the stop -------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the hunt: kill every running probe's process group, start none from now on, and
        cancel what is registered (`on_stop`). Called as the hunt unwinds, never from a signal
        handler: a cancel may block (scancel) or take a lock the interrupted thread holds."""
        self._halt()
        with self._lock:
            cancels = list(self._on_stop)
        for cancel in cancels:
            cancel()

    def _halt(self) -> None:
        """What a signal handler may do: set the flag, SIGKILL the groups (no wait, no lock of
        anyone else's)."""
        with self._lock:
            self._stopping = True
            groups = list(self._running)
            self._killed.update(groups)
        for pgid in groups:
            signal_group(pgid, signal.SIGKILL)

    def allow(self) -> None:
        """A hunt starts, or a stopped one has unwound: probes may run again in this process."""
        with self._lock:
            self._stopping = False
            self._killed.clear()

    @contextlib.contextmanager
    def on_stop(self, cancel: Callable[[], None]) -> Iterator[None]:
        """While the block runs, a stop also calls `cancel` (a round's jobs and waits in flight)."""
        with self._lock:
            self._on_stop.append(cancel)
        try:
            yield
        finally:
            with self._lock:
                self._on_stop.remove(cancel)

    # -- the signals ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def signals(self, signums: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
        """While the block runs, each of `signums` stops the hunt's probes and raises
        KeyboardInterrupt in the main thread; the previous handlers come back after. Installed
        whatever the inherited disposition: a hunt started from a background script inherits
        SIGINT as ignored, and Python then never raises KeyboardInterrupt on its own. Outside the
        main thread (no handler can be installed there) it does nothing."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def interrupt(signum, frame):
            self._halt()
            raise KeyboardInterrupt(signal.Signals(signum).name)

        previous = {signum: signal.signal(signum, interrupt) for signum in signums}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    @contextlib.contextmanager
    def hunt(self) -> Iterator[None]:
        """A hunt's run: probes allowed at its start, SIGINT and SIGTERM stop it, and once it has
        unwound (its threads are done) the process may run probes again (the demo runs `run`, then
        `hunks`; a test suite runs many hunts)."""
        self.allow()
        try:
            with self.signals():
                yield
        finally:
            self.allow()


INTERRUPTS = Interrupts()
"""This process's one owner of stopping."""
