"""The busy-machine guard: other load per sample, the rule, waiting for quiet, exit 8.

Unit tests inject fake /proc readers and clocks. The real-load tests start a busy-loop process
and scope the guard's view of the machine to that process and the hunt (the test machine is
shared with other jobs, whose load would otherwise decide the outcome): real CPU burnt, read
from the real /proc, so the marking, the wait message, exit 8 and the re-take are exercised
end to end.
"""
from __future__ import annotations

import dataclasses
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
from regressbisect.machine.contention import (ContentionGuard, HuntCpu, Load, MachineBusy, WaitCancelled,
                                            _Proc, foreign_gpu_load, read_gpu_apps, read_proc_stat)
from tests.fakemachine import RULE, FakeMachine

pytestmark = pytest.mark.contention



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
    assert RULE.reason(load(0.8, 2)) is None                # steady load, a core left idle: measured through
    assert "oversubscribed" in RULE.reason(load(1.2, 2))    # the cores were full
    assert RULE.reason(load(0.3, 2, hunt=1.8)) is None      # full, but of the probe's own making
    moved = dataclasses.replace(load(0.8, 2), reference_cpus=0.4)
    assert "other load changed: 0.8 CPUs during the sample, 0.4 before" in RULE.reason(moved)
    assert RULE.reason(dataclasses.replace(load(0.8, 2), reference_cpus=0.6)) is None   # within a quarter CPU


def test_rule_on_a_128_core_node_depends_on_what_the_hunt_uses():
    assert RULE.reason(load(2.0, 128, hunt=8.0)) is None            # free cores for everyone
    assert "oversubscribed" in RULE.reason(load(2.0, 128, hunt=127.0))  # probe uses every core
    assert RULE.reason(load(13.0, 128, hunt=1.0)) is None           # a tenth of the node, steady
    assert RULE.reason(dataclasses.replace(load(13.0, 128, hunt=1.0), reference_cpus=7.0)) is None
    assert "changed" in RULE.reason(dataclasses.replace(load(13.0, 128, hunt=1.0), reference_cpus=6.0))


def test_the_hunts_own_other_probes_are_load_where_they_oversubscribe_the_cores():
    nine_on_two = load(0.0, 2, hunt=2.0, siblings=1.8)        # --slots 9 on 2 cores: a ninth each
    assert "the hunt's other probes used 1.8 CPUs" in RULE.reason(nine_on_two)
    assert RULE.by_the_hunt(nine_on_two)                       # no wait for quiet would end it
    # 8 GPU slots on a 128-core node: the other slots' CPU is company, not contention
    assert RULE.reason(load(0.2, 128, hunt=16.0, siblings=14.0)) is None
    # another job's load is the machine's: waited for, as before, whatever the siblings did
    foreign = load(1.5, 2, hunt=1.0, siblings=0.3)
    assert RULE.reason(foreign).startswith("other load") and not RULE.by_the_hunt(foreign)
    # a steady job beside which only the hunt's own probes fill the cores: fewer probes, no wait
    tipped = load(1.0, 2, hunt=1.0, siblings=0.5)
    assert RULE.by_the_hunt(tipped)


def test_rule_on_gpu():
    assert RULE.reason(load(0.1, 2, gpu=0.05)) is None
    assert "GPU" in RULE.reason(load(0.1, 2, gpu=0.4))


# -- the guard --------------------------------------------------------------------------------



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

    guard = machine.guard(max_wait_s=600, on_wait=on_wait)
    machine.advance(100.0)   # the hunt has run 100 s: up to 10 s of waiting
    waited = guard.wait_quiet(need=1.0)
    assert waited == pytest.approx(8.0)  # four 2 s windows, the last one quiet
    assert messages[0] == ("machine busy: other processes use 1.8 of 2 CPUs; waiting (2 s, at most 10% of the "
                           "hunt's wall time)")


def test_the_wait_for_quiet_stops_at_its_share_of_the_wall_and_the_load_is_measured_through():
    machine = FakeMachine(other=1.8)
    messages: list[str] = []
    guard = machine.guard(max_wait_s=600, on_wait=messages.append)
    machine.advance(60.0)   # 10% of the wall: three 2 s windows (6 s of 66 s), not a fourth
    assert guard.wait_quiet(what="before re-taking abc", need=1.0, level=1.8) == pytest.approx(6.0)
    assert guard.waited_s <= 0.1 * guard.wall_s()
    assert "samples are taken under this load as it is" in messages[-1] and "--max-wait-share" in messages[-1]
    # from now on a sample on cores this load oversubscribes is used as it is, without a wait
    taken = guard.judge(Load(seconds=1.0, other_cpus=1.8, hunt_cpus=1.0, ncpus=2))
    assert RULE.reason(taken) is not None and guard.measured_through(taken)
    # but a change of the load never is
    moved = dataclasses.replace(taken, reference_cpus=0.9)
    assert not guard.measured_through(moved)


def test_a_load_that_keeps_changing_exits_8_after_max_wait():
    machine = FakeMachine(other=0.0)
    guard = machine.guard(max_wait_s=6)
    since = None
    with pytest.raises(MachineBusy) as raised:
        for other in [0.6, 1.0] * 10:
            sample = guard.judge(Load(seconds=1.0, other_cpus=other, hunt_cpus=0.5, ncpus=2))
            machine.advance(1.0)
            if guard.rule.reason(sample) is not None:
                since = guard.before_retake(sample, what="before re-taking abc", since=since)
    assert raised.value.exit_code == ExitCode.MACHINE_BUSY == 8
    assert "\n" not in raised.value.message
    assert "other load kept changing for 6 s before re-taking abc" in raised.value.message
    assert "--max-wait" in raised.value.message
    assert guard.waited_s == 0.0   # a change is re-taken at once: nothing to wait for


def test_a_cancelled_wait_ends_at_once_instead_of_after_max_wait():
    # a slot thread waiting for quiet while the hunt stops (Ctrl-C, another slot failed) must not
    # hold it up for --max-wait; the next round waits again
    machine = FakeMachine(other=1.8)
    guard = machine.guard(max_wait_s=600, on_wait=lambda message: guard.cancel())
    machine.advance(1000.0)
    with pytest.raises(WaitCancelled, match="before re-taking abc"):
        guard.wait_quiet(what="before re-taking abc", need=1.0)
    assert machine.now == pytest.approx(1002.0)   # one window, not 100 s
    guard.resume()
    guard.on_wait = lambda message: setattr(machine, "other", 0.1)
    assert guard.wait_quiet(need=1.0) == pytest.approx(4.0)


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
    advance(100.0)
    guard.wait_quiet(need=1.0)
    line = messages[0]
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
def test_a_load_that_keeps_changing_marks_the_samples_and_exits_8_after_max_wait(tmp_path, monkeypatch, capsys):
    from tests.cli import run_cli

    # The guard's machine: the hunt, plus a load that moves with every probe's window and never
    # settles (0 CPUs in the first, then 0.6 and 1.2 by turns: each reading off the level and off
    # the one before). Real probes, real hunt CPU; the load is made up, since a real one that
    # never settles does not keep to the windows of a probe.
    ours = HuntCpu()
    calls = {"n": 0, "at": time.monotonic(), "burnt": 0.0, "rate": 0.0}

    def machine() -> tuple[float, int]:
        now = time.monotonic()
        calls["burnt"] += calls["rate"] * (now - calls["at"])
        calls["at"] = now
        calls["n"] += 1   # 1: the guard's start; then a probe window's start (even), its end (odd)
        window = calls["n"] // 2
        calls["rate"] = 0.0 if calls["n"] % 2 or window < 2 else (0.6 if window % 2 else 1.2)
        return calls["burnt"] + ours.total(), 2

    monkeypatch.setattr(ct, "read_proc_stat", machine)
    shas, args = _bench(tmp_path)
    code = run_cli(args + ["--max-wait", "3"])
    err = capsys.readouterr().err
    assert code == ExitCode.MACHINE_BUSY, err
    assert "sample taken under contention (other load changed" in err  # progress message
    last = err.strip().splitlines()[-1]
    assert last.startswith("regressbisect: error: machine busy: other load kept changing for"), last
    assert "--max-wait" in last
    store = tmp_path / "repo" / ".git" / "regressbisect" / "store.sqlite"
    with sqlite3.connect(store) as conn:
        arms = [arm for (arm,) in conn.execute("SELECT arm FROM samples ORDER BY id")]
        contended = conn.execute("SELECT contended FROM sample_loads WHERE contended IS NOT NULL").fetchall()
    assert arms[0] == "main" and set(arms[1:]) == {"flagged"} and len(arms) >= 3, arms
    assert all(reason.startswith("other load changed") for (reason,) in contended)


@pytest.mark.slow
def test_a_load_that_starts_mid_hunt_is_re_taken_and_the_answer_stands(tmp_path, scoped_machine, capsys):
    from tests.cli import run_cli

    loops, _ = scoped_machine
    shas, args = _bench(tmp_path)
    # A busy loop starts once the hunt has stored three samples: the sample it starts in, or the
    # next, reads a change of the load and is re-taken; the level then moves and the hunt goes
    # on under the loop, whatever the speed of the machine the test runs on.
    store = tmp_path / "repo" / ".git" / "regressbisect" / "store.sqlite"
    done = threading.Event()

    def start_after_three_samples() -> None:
        while not done.wait(0.1):
            try:
                with sqlite3.connect(store, timeout=1) as conn:
                    stored = conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
            except sqlite3.Error:
                continue
            if stored >= 3:
                loops.append(_busy_loop())
                return

    watcher = threading.Thread(target=start_after_three_samples, daemon=True)
    watcher.start()
    try:
        code = run_cli(args + ["--busy-cpus", "0.5", "--max-wait", "120"])
    finally:
        done.set()
        watcher.join(timeout=5)
    err = capsys.readouterr().err
    assert code == 0, err
    assert loops, "the load never started"
    report = json.loads((tmp_path / "r.json").read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    contention = report["measurement"]["contention"]
    retakes = contention["retakes"]
    assert contention["retaken"] == len(retakes) >= 1
    assert any(r["reason"].startswith("other load changed") for r in retakes), retakes
    assert contention["level_changes"] >= 1
    assert "sample taken under contention" in err
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


def test_a_job_reaped_through_a_shell_that_ended_is_not_its_grandparents_cpu():
    """A runner (a pytest worker, a CI agent) whose shell reaps a long job and is reaped in turn
    gets the job's whole lifetime at once; only what the job used in the window is the runner's."""
    readings = {"now": [ct._Proc(pid=900001, ppid=1, session=900001, start=1, cpu=1.0, name="runner"),
                        ct._Proc(pid=900002, ppid=900001, session=900001, start=2, cpu=0.1, name="sh"),
                        ct._Proc(pid=900003, ppid=900002, session=900001, start=3, cpu=50.0, name="job")]}
    cpu = HuntCpu(scan=lambda: readings["now"], command_line=lambda pid: None)
    cpu.total()
    before = cpu.foreign()
    # in 2 s the job used 0.8 s more and ended; the shell reaped it and ended; the runner reaped the shell
    readings["now"] = [ct._Proc(pid=900001, ppid=1, session=900001, start=1, cpu=1.0 + 0.1 + 50.8, name="runner")]
    cpu.total()
    named = {pid: cpus for pid, _, cpus in cpu.busiest(before, 2.0, at_most=2.0)}
    assert named[900001] == pytest.approx(0.4)


def test_no_process_is_named_with_more_cpu_than_the_machine_showed():
    readings = {"now": [ct._Proc(pid=900011, ppid=1, session=900011, start=1, cpu=0.0, name="x")]}
    cpu = HuntCpu(scan=lambda: readings["now"], command_line=lambda pid: None)
    cpu.total()
    before = cpu.foreign()
    readings["now"] = [ct._Proc(pid=900011, ppid=1, session=900011, start=1, cpu=9.0, name="x")]
    cpu.total()
    assert cpu.busiest(before, 2.0, at_most=1.5) == ((900011, "x", 1.5),)
