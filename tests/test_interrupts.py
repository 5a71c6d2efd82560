"""The one owner of stopping a hunt (probe/interrupts.py): a stop kills every registered probe's
process group, starts none after it, marks what it killed, runs the round's cancels; a signal
does the same from its handler and unwinds with KeyboardInterrupt; a finished hunt lets the
process probe again. A fresh Interrupts per test (the process's INTERRUPTS stays untouched)."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from regressbisect.probe.interrupts import Interrupts, ProbeCancelled


@pytest.fixture
def groups():
    """Start `sleep` process groups (each its own session, as a probe is); all gone at the end."""
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        process = subprocess.Popen(["sleep", "300"], start_new_session=True)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _killed(process: subprocess.Popen) -> bool:
    return process.wait(timeout=10) == -signal.SIGKILL


def test_a_stop_kills_every_running_probe_and_starts_none_after(groups):
    interrupts = Interrupts()
    first, second = groups(), groups()
    interrupts.started(first.pid)
    interrupts.started(second.pid)
    assert set(interrupts.running_groups()) == {first.pid, second.pid}
    interrupts.stop()
    assert _killed(first) and _killed(second)
    assert interrupts.stopping
    with pytest.raises(ProbeCancelled):
        interrupts.refuse_if_stopping()
    # the stop's kills are the stop's, not the candidates' failures
    assert interrupts.ended(first.pid) and interrupts.ended(second.pid)
    assert interrupts.running_groups() == {}


def test_a_probe_that_starts_while_the_stop_happens_is_killed_at_once(groups):
    interrupts = Interrupts()
    interrupts.stop()
    late = groups()
    interrupts.started(late.pid)   # its thread passed refuse_if_stopping before the stop
    assert _killed(late)
    assert interrupts.ended(late.pid)


def test_a_probe_that_ended_before_the_stop_keeps_its_outcome(groups):
    interrupts = Interrupts()
    done = groups()
    interrupts.started(done.pid)
    assert not interrupts.ended(done.pid)
    interrupts.stop()
    assert done.poll() is None   # no longer registered: the stop does not touch it


def test_a_stop_runs_the_cancels_registered_while_it_happens():
    interrupts = Interrupts()
    calls: list[str] = []
    with interrupts.on_stop(lambda: calls.append("round")):
        interrupts.stop()
    interrupts.stop()   # the round is over: nothing of it is cancelled again
    assert calls == ["round"]


def test_a_signal_kills_the_probes_and_unwinds_with_keyboard_interrupt(groups):
    interrupts = Interrupts()
    running = groups()
    cancels: list[str] = []
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with interrupts.signals((signal.SIGTERM,)), interrupts.on_stop(lambda: cancels.append("x")):
            interrupts.started(running.pid)
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):   # the handler runs between bytecodes
                pass
    assert _killed(running) and interrupts.stopping
    # the handler only kills and raises: a cancel may block or take a lock the main thread holds
    assert cancels == []
    assert signal.getsignal(signal.SIGTERM) is previous


def test_a_hunt_that_was_stopped_lets_the_process_probe_again_once_it_has_unwound():
    interrupts = Interrupts()
    interrupts.stop()   # a hunt before stopped and never unwound in this process
    with pytest.raises(KeyboardInterrupt):
        with interrupts.hunt():
            assert not interrupts.stopping   # a hunt starts with probes allowed
            interrupts.stop()
            with pytest.raises(ProbeCancelled):
                interrupts.refuse_if_stopping()
            raise KeyboardInterrupt
    assert not interrupts.stopping
    interrupts.refuse_if_stopping()
