"""The busy-machine guard: other load per sample, the rule, waiting for quiet, exit 8.

Unit tests inject fake /proc readers and clocks. The real-load tests start a busy-loop process
and scope the guard's view of the machine to that process and the hunt (the test machine is
shared with other jobs, whose load would otherwise decide the outcome): real CPU burnt, read
from the real /proc, so the marking, the wait message, exit 8 and the re-take are exercised
end to end.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode
from regressbisect.machine import contention as ct
from regressbisect.machine.contention import (BusyRule, ContentionGuard, HuntCpu, Load, MachineBusy, WaitCancelled,
                                            _Proc, foreign_gpu_load, read_gpu_apps, read_proc_stat)

pytestmark = pytest.mark.contention

RULE = BusyRule(cpus=0.5, share=0.10, gpu=0.10)


def load(other: float, ncpus: int, hunt: float = 1.0, gpu: float | None = None, siblings: float = 0.0) -> Load:
    return Load(seconds=10.0, other_cpus=other, hunt_cpus=hunt, ncpus=ncpus, other_gpu=gpu, sibling_cpus=siblings)


# -- readers ----------------------------------------------------------------------------------

def test_proc_stat_counts_busy_jiffies_and_cpus(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 10 50 1000 30 5 5 20 0 0\ncpu0 50 5 25 500 15 2 2 10 0 0\n"
                    "cpu1 50 5 25 500 15 3 3 10 0 0\nintr 1 2 3\n")
    busy, cpus = read_proc_stat(str(stat))
    assert cpus == 2
    assert busy == pytest.approx((100 + 10 + 50 + 5 + 5 + 20) / ct.CLK_TCK)  # idle, iowait excluded


def test_hunt_cpu_counts_descendants_and_keeps_vanished_orphans_of_probe_sessions(monkeypatch):
    me, my_sid = os.getpid(), os.getsid(0)
    monkeypatch.setattr(ct.os, "times", lambda: os.times_result((1.0, 0.5, 2.0, 0.5, 0.0)))
    procs = [
        _Proc(pid=me, ppid=1, session=my_sid, start=1, cpu=99.0),          # ourselves: os.times
        _Proc(pid=501, ppid=me, session=501, start=5, cpu=3.0),            # a probe (own session)
        _Proc(pid=502, ppid=501, session=501, start=6, cpu=1.0),           # its child
        _Proc(pid=503, ppid=1, session=501, start=7, cpu=0.7),             # its orphan
        _Proc(pid=900, ppid=1, session=900, start=2, cpu=50.0),            # someone else's job
        _Proc(pid=901, ppid=1, session=my_sid, start=3, cpu=8.0),          # our shell's sibling
    ]
    cpu = HuntCpu(scan=lambda: list(procs))
    assert cpu.total() == pytest.approx(4.0 + 3.0 + 1.0 + 0.7)
    assert {me, 501, 502, 503} <= cpu.pids and 900 not in cpu.pids and 901 not in cpu.pids
    procs[3] = _Proc(pid=503, ppid=1, session=501, start=7, cpu=1.2)
    cpu.total()
    del procs[3]  # the orphan died (killed with the probe's group): its CPU stays ours
    assert cpu.total() == pytest.approx(4.0 + 3.0 + 1.0 + 1.2)


def test_gpu_readings_split_utilisation_by_memory_and_skip_without_nvidia_smi():
    outputs = {
        "--query-gpu=uuid,utilization.gpu": "GPU-a, 90\nGPU-b, 80\n",
        "--query-compute-apps=pid,gpu_uuid,used_memory": "10, GPU-a, 3000\n77, GPU-a, 1000\n88, GPU-b, 500\n",
    }
    reading = read_gpu_apps(lambda args: outputs[args[0]])
    assert reading == ({"GPU-a": 0.9, "GPU-b": 0.8}, [(10, "GPU-a", 3000.0), (77, "GPU-a", 1000.0),
                                                      (88, "GPU-b", 500.0)])
    assert foreign_gpu_load(reading, ours={10}) == pytest.approx(0.9 * 1000 / 4000)
    assert foreign_gpu_load(reading, ours={12345}) is None   # none of ours on a GPU: CPU probe
    assert read_gpu_apps(lambda args: None) is None          # no nvidia-smi


# -- the rule ---------------------------------------------------------------------------------

def test_rule_on_a_two_core_machine():
    assert RULE.reason(load(0.3, 2)) is None
    assert "0.6 CPUs > 0.5" in RULE.reason(load(0.6, 2))


def test_rule_on_a_128_core_node_depends_on_what_the_hunt_uses():
    assert RULE.reason(load(2.0, 128, hunt=8.0)) is None            # free cores for everyone
    assert "oversubscribed" in RULE.reason(load(2.0, 128, hunt=127.0))  # probe uses every core
    assert "> 12.8" in RULE.reason(load(13.0, 128, hunt=1.0))        # a tenth of the node


def test_the_hunts_own_other_probes_are_load_where_they_oversubscribe_the_cores():
    nine_on_two = load(0.0, 2, hunt=2.0, siblings=1.8)        # --slots 9 on 2 cores: a ninth each
    assert "the hunt's other probes used 1.8 CPUs" in RULE.reason(nine_on_two)
    assert RULE.by_the_hunt(nine_on_two)                       # no wait for quiet would end it
    # 8 GPU slots on a 128-core node: the other slots' CPU is company, not contention
    assert RULE.reason(load(0.2, 128, hunt=16.0, siblings=14.0)) is None
    # another job's load is the machine's: waited out, as before, whatever the siblings did
    foreign = load(1.0, 2, hunt=1.0, siblings=0.5)
    assert RULE.reason(foreign).startswith("other load") and not RULE.by_the_hunt(foreign)


def test_rule_on_gpu():
    assert RULE.reason(load(0.1, 2, gpu=0.05)) is None
    assert "GPU" in RULE.reason(load(0.1, 2, gpu=0.4))


# -- the guard --------------------------------------------------------------------------------

class FakeMachine:
    """A /proc/stat and hunt-CPU pair driven by the test: `other` CPUs of other load."""

    def __init__(self, other: float, ncpus: int = 2):
        self.other, self.ncpus, self.now, self.busy, self.hunt = other, ncpus, 0.0, 0.0, 0.0

    def advance(self, seconds: float, hunt_cpus: float = 0.0) -> None:
        self.now += seconds
        self.busy += (self.other + hunt_cpus) * seconds
        self.hunt += hunt_cpus * seconds

    def guard(self, **kw) -> ContentionGuard:
        hunt = HuntCpu(scan=lambda: [])
        hunt.total = lambda: self.hunt  # type: ignore[method-assign]
        return ContentionGuard(RULE, proc_stat=lambda: (self.busy, self.ncpus), hunt_cpu=hunt,
                               gpu_reader=lambda: None, clock=lambda: self.now,
                               sleep=lambda s: self.advance(s), **kw)


def test_window_load_is_machine_busy_time_minus_the_hunts_own():
    machine = FakeMachine(other=0.8)
    guard = machine.guard(max_wait_s=10)
    window = guard.start()
    machine.advance(4.0, hunt_cpus=1.0)
    measured = guard.finish(window)
    assert measured.other_cpus == pytest.approx(0.8)
    assert measured.hunt_cpus == pytest.approx(1.0)
    assert measured.machine_share == pytest.approx(0.4)


def test_the_time_a_scan_of_the_hunt_takes_is_not_read_as_other_load():
    # Reading the hunt's CPU scans every process (tens of ms, more on a loaded machine) while the
    # hunt's probes run on: the machine's window and the hunt's must be read in the same order at
    # both ends, or the machine's is the longer by two scans and the hunt's own CPU in them reads
    # as other load (0.5 CPUs of it flagged samples of an oversubscribed hunt on 2 cores)
    machine = FakeMachine(other=0.0)
    guard = machine.guard(max_wait_s=10)

    def slow_scan() -> float:
        machine.advance(0.15, hunt_cpus=1.6)   # the probes run on while the scan reads them
        return machine.hunt

    guard._hunt_cpu.total = slow_scan  # type: ignore[method-assign]
    window = guard.start()
    machine.advance(1.0, hunt_cpus=1.6)
    measured = guard.finish(window)
    assert measured.other_cpus == pytest.approx(0.0, abs=1e-9)
    assert measured.hunt_cpus == pytest.approx(1.6)


def test_a_window_counts_the_other_probes_cpu_but_not_its_own_probes():
    machine = FakeMachine(other=0.0)
    me, other_slot = threading.get_ident(), -1
    guard = machine.guard(max_wait_s=10, probe_groups=lambda: {101: me, 202: other_slot, 303: other_slot})
    cpu = guard._hunt_cpu
    cpu.sessions = {202: 5.0}                     # another slot's probe, running before ours
    window = guard.start()
    machine.advance(4.0, hunt_cpus=2.0)
    cpu.sessions = {101: 3.9, 202: 5.0 + 2.4, 303: 2.4}   # ours; 202 went on; 303 started meanwhile
    measured = guard.finish(window)
    assert measured.sibling_cpus == pytest.approx((2.4 + 2.4) / 4.0)
    assert measured.hunt_cpus == pytest.approx(2.0) and measured.other_cpus == pytest.approx(0.0)
    # a quiet check runs no probe of its own: what the hunt runs meanwhile is not its siblings
    quiet = guard.measure(2.0)
    assert quiet.sibling_cpus == 0.0


def test_hunt_cpu_sees_a_probe_session_to_its_end_between_two_scans(tmp_path):
    proc = tmp_path / "proc"

    def stat(pid: int, start: int, ticks: int) -> None:
        (proc / str(pid)).mkdir(parents=True, exist_ok=True)
        fields = ["S", "1", str(pid), str(pid)] + ["0"] * 7 + [str(ticks), "0", "0", "0"] + ["0"] * 4 + [str(start)]
        (proc / str(pid) / "stat").write_text(f"{pid} (python) " + " ".join(fields) + "\n")

    cpu = HuntCpu(scan=lambda: [])
    stat(700, start=42, ticks=int(2 * ct.CLK_TCK))           # a probe started after the last scan
    cpu.refresh_sessions([700], proc=str(proc))
    assert cpu.sessions[700] == pytest.approx(2.0)
    stat(700, start=42, ticks=int(3 * ct.CLK_TCK))
    cpu.refresh_sessions([700], proc=str(proc))
    assert cpu.sessions[700] == pytest.approx(3.0)
    (proc / "700" / "stat").unlink()                          # it ended: its last reading stays
    cpu.refresh_sessions([], proc=str(proc))
    assert cpu.sessions[700] == pytest.approx(3.0)


def test_wait_quiet_reports_progress_and_returns_when_the_load_stops():
    machine = FakeMachine(other=1.8)
    messages: list[str] = []

    def on_wait(message: str) -> None:
        messages.append(message)
        if len(messages) == 3:
            machine.other = 0.1  # the other job ends

    waited = machine.guard(max_wait_s=600, on_wait=on_wait).wait_quiet()
    assert waited == pytest.approx(8.0)  # four 2 s windows, the last one quiet
    assert messages[0] == "machine busy: other processes use 1.8 of 2 CPUs; waiting (2 s of --max-wait 600)"


def test_wait_quiet_gives_up_with_exit_8_after_max_wait():
    machine = FakeMachine(other=1.8)
    with pytest.raises(MachineBusy) as raised:
        machine.guard(max_wait_s=6).wait_quiet(what="before re-taking abc")
    assert raised.value.exit_code == ExitCode.MACHINE_BUSY == 8
    assert "\n" not in raised.value.message
    assert "1.8 of 2 CPUs for 6 s before re-taking abc" in raised.value.message
    assert "--max-wait" in raised.value.message


def test_a_cancelled_wait_ends_at_once_instead_of_after_max_wait():
    # a slot thread waiting for quiet while the hunt stops (Ctrl-C, another slot failed) must not
    # hold the hunt up for --max-wait; the next round waits again
    machine = FakeMachine(other=1.8)
    guard = machine.guard(max_wait_s=600, on_wait=lambda message: guard.cancel())
    with pytest.raises(WaitCancelled, match="before re-taking abc"):
        guard.wait_quiet(what="before re-taking abc")
    assert machine.now == pytest.approx(2.0)   # one window, not 600 s
    guard.resume()
    guard.on_wait = lambda message: setattr(machine, "other", 0.1)
    assert guard.wait_quiet() == pytest.approx(4.0)


def test_the_wait_names_the_processes_that_keep_the_machine_busy():
    # two foreign processes burn 1.5 and 0.3 CPUs; one barely runs and is not named
    machine = FakeMachine(other=1.8)
    procs = {901: 0.0, 902: 0.0, 903: 0.0}
    rates = {901: 1.5, 902: 0.3, 903: 0.01}
    names = {901: "python train.py --big", 902: "make -j1", 903: "sshd"}

    def scan() -> list[_Proc]:
        return [_Proc(pid=pid, ppid=1, session=pid, start=1, cpu=cpu, name=names[pid]) for pid, cpu in procs.items()]

    def advance(seconds: float) -> None:
        machine.advance(seconds)
        for pid in procs:
            procs[pid] += rates[pid] * seconds

    messages: list[str] = []
    hunt = HuntCpu(scan=scan, command_line=lambda pid: None)   # no /proc: the names above
    guard = ContentionGuard(RULE, max_wait_s=4, proc_stat=lambda: (machine.busy, machine.ncpus), hunt_cpu=hunt,
                            gpu_reader=lambda: None, clock=lambda: machine.now, sleep=advance,
                            on_wait=messages.append)
    with pytest.raises(MachineBusy) as raised:
        guard.wait_quiet()
    for line in (messages[0], raised.value.message):
        assert "python train.py --big (pid 901, 1.5 CPUs)" in line, line
        assert "make -j1 (pid 902, 0.3 CPUs)" in line and "sshd" not in line
        assert line.index("pid 901") < line.index("pid 902")


def test_a_real_busy_process_is_named_by_its_command_line():
    # started through a shell that exits at once: not a child of ours, someone else's job
    started = subprocess.run(["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True)
    loop = int(started.stdout.strip())
    try:
        measured = ContentionGuard(RULE, max_wait_s=10, gpu_reader=lambda: None).measure(1.5)
    finally:
        os.kill(loop, signal.SIGKILL)
    named = {pid: name for pid, name, _ in measured.busiest}
    assert loop in named and "while True: pass" in named[loop], measured.busiest
    assert f"pid {loop}" in measured.describe()


# -- real load --------------------------------------------------------------------------------

def _busy_loop() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)


def _process_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / ct.CLK_TCK


@pytest.fixture
def scoped_machine(monkeypatch):
    """The guard's machine = the busy loops this test starts + the hunt (see module doc)."""
    loops: list[subprocess.Popen] = []
    burnt = {"dead": 0.0}
    ours = HuntCpu()

    def proc_stat() -> tuple[float, int]:
        return burnt["dead"] + sum(_process_cpu(p.pid) for p in loops) + ours.total(), 2

    def stop_loops() -> None:
        for p in loops:
            burnt["dead"] += _process_cpu(p.pid)
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        loops.clear()

    monkeypatch.setattr(ct, "read_proc_stat", proc_stat)
    yield loops, stop_loops
    stop_loops()


def _bench(tmp_path):
    from regressbisect.testing.benchrepo import make_bench_repo

    shas = make_bench_repo(tmp_path / "repo", [1000.0, 1000.0, 700.0])
    args = ["run", "-C", str(tmp_path / "repo"), "--cmd", f"{sys.executable} bench.py",
            "--tokens", "1000", "--env", f"BENCH_STATE={tmp_path / 'state'}", "--env", "BENCH_SLEEP=0.5",
            "--instrument", "off", "--busy-cpus", "0.2", "--json", str(tmp_path / "r.json"),
            shas[0], shas[-1]]
    return shas, args


@pytest.mark.slow
def test_busy_loop_marks_the_sample_and_max_wait_exits_8(tmp_path, scoped_machine, capsys):
    from tests.cli import run_cli

    loops, _ = scoped_machine
    loops.append(_busy_loop())
    shas, args = _bench(tmp_path)
    code = run_cli(args + ["--max-wait", "3"])
    err = capsys.readouterr().err
    assert code == ExitCode.MACHINE_BUSY
    assert "machine busy: other processes use" in err and "waiting (" in err  # progress message
    last = err.strip().splitlines()[-1]
    assert last.startswith("regressbisect: error: machine busy: other processes use"), last
    assert "--max-wait" in last
    store = tmp_path / "repo" / ".git" / "regressbisect" / "store.sqlite"
    with sqlite3.connect(store) as conn:
        arms = conn.execute("SELECT arm FROM samples").fetchall()
        contended = conn.execute("SELECT contended, other_cpus FROM sample_loads").fetchall()
    assert arms == [("flagged",)]  # the contended sample is kept, apart, and nothing else
    assert contended[0][0].startswith("other load") and contended[0][1] > 0.2


@pytest.mark.slow
def test_load_that_stops_during_the_wait_gives_a_re_taken_sample_and_the_answer(tmp_path, scoped_machine,
                                                                                capsys):
    from tests.cli import run_cli

    loops, stop_loops = scoped_machine
    loops.append(_busy_loop())
    shas, args = _bench(tmp_path)
    # The load stops during the first wait: once the first contended sample is stored, plus more
    # than one quiet-check window (so the wait sees the load at least once), whatever the speed
    # of the machine the test runs on.
    store = tmp_path / "repo" / ".git" / "regressbisect" / "store.sqlite"
    done = threading.Event()

    def stop_during_the_first_wait() -> None:
        while not done.wait(0.2):
            try:
                with sqlite3.connect(store, timeout=1) as conn:
                    flagged = conn.execute("SELECT COUNT(*) FROM samples WHERE arm = 'flagged'").fetchone()[0]
            except sqlite3.Error:
                continue
            if flagged:
                done.wait(5.0)  # > 2 of the guard's quiet-check windows (2 s each)
                stop_loops()
                return

    watcher = threading.Thread(target=stop_during_the_first_wait, daemon=True)
    watcher.start()
    try:
        code = run_cli(args + ["--max-wait", "120"])
    finally:
        done.set()
        watcher.join(timeout=5)
    err = capsys.readouterr().err
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    retakes = report["measurement"]["contention"]["retakes"]
    assert report["measurement"]["contention"]["retaken"] == len(retakes) >= 1
    assert all(r["reason"].startswith("other load") for r in retakes)
    assert "machine busy: other processes use" in err
    store = tmp_path / "repo" / ".git" / "regressbisect" / "store.sqlite"
    with sqlite3.connect(store) as conn:
        flagged = conn.execute("SELECT COUNT(*) FROM samples WHERE arm = 'flagged'").fetchone()[0]
        main = conn.execute("SELECT COUNT(*) FROM samples s JOIN sample_loads l ON l.sample_id = s.id"
                            " WHERE s.arm = 'main' AND l.contended IS NULL").fetchone()[0]
    assert flagged == len(retakes)
    # Every evidence sample has its load recorded, none contended; `probes` counts every
    # execution, the contended ones included.
    assert main + flagged == report["probes"]


@pytest.mark.slow
def test_slots_oversubscribing_the_cores_stop_the_hunt_with_one_line_instead_of_poisoned_samples(
        tmp_path, monkeypatch, capsys):
    from tests.cli import run_cli

    # The guard's machine: the hunt alone on one CPU (the test machine's other jobs are not ours
    # to see). Its busy time is a reading of the hunt's CPU, and the guard's own reading of the
    # hunt right after it returns that same value: two scans of the process tree, tens of ms apart
    # while three probes run, read 0.2-0.5 CPUs of the hunt's own time as other load in about one
    # run in seven, and flagged a sample for it.
    ours = HuntCpu()
    scan_of_this_thread = threading.local()
    real_total = ct.HuntCpu.total

    def machine() -> tuple[float, int]:
        scan_of_this_thread.value = real_total(ours)
        return scan_of_this_thread.value, 1

    def total(self) -> float:
        value = real_total(self)      # the guard's own scan still updates its sessions and orphans
        if self is not ours and getattr(scan_of_this_thread, "value", None) is not None:
            value, scan_of_this_thread.value = scan_of_this_thread.value, None
        return value

    monkeypatch.setattr(ct, "read_proc_stat", machine)
    monkeypatch.setattr(ct.HuntCpu, "total", total)
    shas, args = _bench(tmp_path)
    code = run_cli(args + ["--slots", "3", "--env", "BENCH_STARTUP=1.5", "--max-wait", "600"])
    err = capsys.readouterr().err
    assert code == ExitCode.USER_ERROR, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("regressbisect: error: the hunt's own probes oversubscribe this machine"), last
    assert "--slots" in last and "machine busy" not in err      # stopped at once, no wait
    store = tmp_path / "repo" / ".git" / "regressbisect" / "store.sqlite"
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT s.arm, l.contended FROM samples s"
                            " JOIN sample_loads l ON l.sample_id = s.id").fetchall()
    flagged = [r for r in rows if r[0] == "flagged"]
    assert flagged and all(r[1].startswith("the hunt's other probes used") for r in flagged)


def test_busy_settings_come_from_pyproject_and_flags_and_bad_values_are_one_line_errors():
    from regressbisect.config import build_config
    from regressbisect.errors import UserError

    config = build_config({"cmd": "x", "busy_cpus": 1, "busy_share": 0.25, "max_wait": 30}, {"busy_check": False})
    assert (config.busy_cpus, config.busy_share, config.max_wait_s, config.busy_check) == (1.0, 0.25, 30.0, False)
    for bad in ({"max_wait": -1.0}, {"busy_share": 0.0}, {"busy_cpus": -0.5}):
        with pytest.raises(UserError) as raised:
            build_config({"cmd": "x"}, bad)
        assert "\n" not in raised.value.message
    with pytest.raises(UserError, match="busy_cpus .* must be a float"):
        build_config({"cmd": "x", "busy_cpus": "lots"}, {})


def test_known_orphans_are_re_read_cheaply_and_a_reused_pid_is_not_mistaken_for_one(tmp_path, monkeypatch):
    me = os.getpid()
    procs = [_Proc(pid=501, ppid=me, session=501, start=5, cpu=0.0),
             _Proc(pid=503, ppid=1, session=501, start=7, cpu=0.5)]
    cpu = HuntCpu(scan=lambda: list(procs))
    cpu.total()

    def stat(pid: int, start: int, ticks: int) -> None:
        # pid (comm) state ppid pgrp session ... utime(14) stime(15) cutime cstime ... starttime(22)
        fields = ["S", "1", "501", "501"] + ["0"] * 7 + [str(ticks), "0", "0", "0"] + ["0"] * 4 + [str(start)]
        (tmp_path / str(pid)).mkdir(exist_ok=True)
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (python (x)) " + " ".join(fields) + "\n")

    stat(503, 7, 2 * ct.CLK_TCK)
    cpu.refresh_orphans(str(tmp_path))
    assert cpu._orphans[(503, 7)] == pytest.approx(2.0)
    stat(503, 99, 9 * ct.CLK_TCK)  # the orphan died and its pid went to an unrelated process
    cpu.refresh_orphans(str(tmp_path))
    assert cpu._orphans[(503, 7)] == pytest.approx(2.0)


def test_a_process_that_reaps_a_long_busy_child_is_named_with_the_windows_cpu_only(tmp_path):
    """`timeout` (or a shell) that reaps its job inside the window gets the child's whole lifetime
    of CPU added to its own children time at once: that is not CPU used in the window."""
    started = tmp_path / "started"
    burn = tmp_path / "burn.py"
    burn.write_text(f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\n"
                    "end = time.monotonic() + 8\nwhile time.monotonic() < end: pass\n")
    parent = subprocess.run(   # not a child of ours (its shell exits at once): someone else's job
        ["sh", "-c", f"sh -c '{sys.executable} {burn}; sleep 30' >/dev/null 2>&1 & echo $!"],
        capture_output=True, text=True, check=True)
    reaper = int(parent.stdout.strip())
    try:
        deadline = time.monotonic() + 10
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists()
        time.sleep(6.5)    # the child has used seconds of CPU; it ends (and is reaped) in the window
        measured = ContentionGuard(RULE, max_wait_s=10, gpu_reader=lambda: None).measure(2.5)
    finally:
        os.kill(reaper, signal.SIGKILL)   # the child has ended by now (8 s)
    named = {pid: cpus for pid, _, cpus in measured.busiest}
    # the child is single-threaded: it used at most one CPU of the window, its parent none of its own
    assert named.get(reaper, 0.0) <= 1.05, measured.busiest
    assert all(cpus <= measured.ncpus + 0.05 for cpus in named.values()), measured.busiest
