"""A steady load is measured through, a change of it is not (docs/contention.md).

Unit tests run the sample source over a fake machine (fake /proc readers and clock, a fake
executor whose probes advance that clock): a steady 0.8 CPUs of other load on 2 CPUs contends no
sample and waits for nothing; a spike within one sample of a pair makes that sample contended and
re-taken; a load that moves and stays costs one re-take; the wait for quiet on cores a load
oversubscribes stops at its share of the hunt's wall time. The real-process test starts a niced
loop that uses about 0.8 CPU before a real hunt, with the guard's view of the machine scoped to
that loop and the hunt (the test machine is shared: other jobs' load would decide otherwise).
"""
from __future__ import annotations

import functools
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode
from regressbisect.hunts.judging import SampleJudge
from regressbisect.hunts.sampling import MeasurementParts, Request, SampleSource
from regressbisect.machine import contention as ct
from regressbisect.machine.contention import ContentionGuard, HuntCpu, MachineBusy
from regressbisect.probe.executors.base import ExecutedProbe, ProbeExecutor
from regressbisect.probe.runner import ProbeSpec
from regressbisect.samples import Arm, Candidate, ProbeOutcome, Sample, SampleKey
from regressbisect.store import Store
from tests.fakemachine import FakeMachine

pytestmark = pytest.mark.contention

SPEC = ProbeSpec(command="true", tokens=10, timeout_s=60)
A, B = Candidate("a" * 40), Candidate("b" * 40)




class MachineProbes(ProbeExecutor):
    """Each probe takes `seconds` of the fake machine's time using `hunt_cpus`; the other load is
    `load(i)` from the start of probe number i (from 0) until the next one starts (waits
    included), or the machine's own without `load`."""

    name = "fake"

    def __init__(self, machine: FakeMachine, *, seconds: float = 1.0, hunt_cpus: float = 1.0, load=None):
        self.machine, self.seconds, self.hunt_cpus, self.load = machine, seconds, hunt_cpus, load
        self.runs = 0

    def fingerprint(self):
        return "m", {}

    def run(self, spec, worktree, extra_env, *, label=""):
        if self.load is not None:
            self.machine.other = self.load(self.runs)
        self.runs += 1
        self.machine.advance(self.seconds, hunt_cpus=self.hunt_cpus)
        tok_s = 100.0 if label == A.short else 90.0
        return ExecutedProbe(ProbeOutcome(sample=Sample(tok_s=tok_s, tokens=10, seconds=10 / tok_s),
                                          skip_reason=None, exit_code=0, wall_seconds=self.seconds))

    def cancel_all(self):
        pass

    def close(self):
        pass


class _Pool:
    def __init__(self, path: Path):
        self.path = path

    def checkout(self, slot, commit, patch=None):
        return self.path


def key_for(candidate: Candidate) -> SampleKey:
    return SampleKey(tree=candidate.commit, patch_hash=None, config_hash="c", env_fingerprint="m")


def draw_pairs(tmp_path: Path, machine: FakeMachine, probes: MachineProbes, guard: ContentionGuard,
               pairs: int, store: Store) -> SampleSource:
    """A B B A A B ... as the search takes pairs one slot at a time."""
    source = SampleSource(store=store, pool=_Pool(tmp_path), spec=SPEC, env_fingerprint="m", hunt_id=None,
                          key_for=key_for, executor=probes, parts=MeasurementParts(guard=guard))
    for k in range(pairs):
        for candidate in ((A, B) if k % 2 == 0 else (B, A)):
            source.draw_many([Request(candidate)])
    return source


def flagged(store: Store, candidate: Candidate) -> list[Sample]:
    return store.samples(key_for(candidate), instrumented=False, arm="flagged")


def used(store: Store, candidate: Candidate) -> list[Sample]:
    return store.samples(key_for(candidate), instrumented=False, arm="main")


def test_a_steady_load_on_two_cpus_contends_no_sample_and_waits_for_nothing(tmp_path):
    machine = FakeMachine(other=0.8)
    guard = machine.guard(max_wait_s=600)
    machine.advance(100.0)   # the hunt has run a while: the wait budget has room, and is not used
    jitter = [0.8, 0.85, 0.75, 0.8, 0.85, 0.75, 0.8, 0.8]   # a duty-cycled job reads a little apart
    probes = MachineProbes(machine, hunt_cpus=1.0, load=lambda i: jitter[i % len(jitter)])
    with Store(tmp_path / "s.sqlite") as store:
        source = draw_pairs(tmp_path, machine, probes, guard, pairs=6, store=store)
        assert flagged(store, A) == flagged(store, B) == []
        assert len(used(store, A)) == len(used(store, B)) == 6
        assert source.tally.retakes == [] and guard.waited_s == 0.0 and source.tally.under_load == 0
        assert probes.runs == 12
        contention = source.measurement_json()["contention"]
    assert contention["steady_other_cpus"] == pytest.approx(0.8)
    assert contention["other_cpus_range"] == [pytest.approx(0.75), pytest.approx(0.85)]
    assert contention["waited_s"] == 0.0 and contention["level_changes"] == 0
    assert contention["rule"]["max_wait_share"] == 0.1 and contention["rule"]["change_cpus"] == 0.25


def test_a_spike_within_one_sample_of_a_pair_is_contended_and_re_taken(tmp_path):
    machine = FakeMachine(other=0.8)
    guard = machine.guard(max_wait_s=600)
    # probe 3 is B of the second pair (A B, B A: its first sample); a job runs 0.4 CPUs more meanwhile
    probes = MachineProbes(machine, hunt_cpus=0.5, load=lambda i: 1.2 if i == 2 else 0.8)
    with Store(tmp_path / "s.sqlite") as store:
        source = draw_pairs(tmp_path, machine, probes, guard, pairs=3, store=store)
        assert len(flagged(store, B)) == 1 and flagged(store, A) == []
        assert len(used(store, A)) == len(used(store, B)) == 3     # the re-take took its place
        assert probes.runs == 7
        (retake,) = source.tally.retakes
        assert retake["candidate"] == B.short
        assert retake["reason"].startswith("other load changed: 1.2 CPUs during the sample, 0.8 before")
        assert guard.waited_s == 0.0 and guard.level_changes == 0   # re-taken at once; the level stayed
        loads = store._conn.execute("SELECT other_cpus, contended FROM sample_loads ORDER BY sample_id").fetchall()
    assert [round(other, 2) for other, _ in loads] == [0.8, 0.8, 1.2, 0.8, 0.8, 0.8, 0.8]
    assert [reason is not None for _, reason in loads] == [False, False, True, False, False, False, False]


def test_the_deps_hunt_s_judge_alone_judges_as_a_sample_source_does(tmp_path):
    """The deps hunt runs its probes in the project's directory, with no sample source: it takes
    each through a `SampleJudge`. The same probes on the same machine are judged alike: the
    spiked sample stored apart and re-taken, the same loads stored, the same report."""
    def spiked() -> tuple[FakeMachine, MachineProbes, ContentionGuard]:
        machine = FakeMachine(other=0.8)
        return machine, MachineProbes(machine, hunt_cpus=0.5, load=lambda i: 1.2 if i == 2 else 0.8), \
            machine.guard(max_wait_s=600)

    def loads(store: Store) -> list:
        return store._conn.execute("SELECT other_cpus, contended FROM sample_loads ORDER BY sample_id").fetchall()

    machine, probes, guard = spiked()
    with Store(tmp_path / "source.sqlite") as store:
        source = draw_pairs(tmp_path, machine, probes, guard, pairs=3, store=store)
        by_source = loads(store)
    machine, probes, guard = spiked()
    with Store(tmp_path / "judge.sqlite") as store:
        judge = SampleJudge(guard, store=store, key_for=key_for, hunt_id=None)
        for k in range(3):
            for candidate in ((A, B) if k % 2 == 0 else (B, A)):
                executed, load = judge.take(candidate, functools.partial(probes.run, SPEC, tmp_path, {},
                                                                         label=candidate.short))
                store.add_outcome(key_for(candidate), candidate, executed.outcome, hunt_id=None, arm=Arm.MAIN,
                                  load=load)
        assert len(flagged(store, B)) == 1 and flagged(store, A) == []
        assert probes.runs == 7 and [r["candidate"] for r in judge.tally.retakes] == [B.short]
        assert loads(store) == by_source
    assert judge.contention_json() == source.measurement_json()["contention"]


def test_a_load_that_moves_and_stays_costs_one_re_take(tmp_path):
    machine = FakeMachine(other=0.0)
    guard = machine.guard(max_wait_s=600)
    probes = MachineProbes(machine, hunt_cpus=0.5, load=lambda i: 0.0 if i < 3 else 0.8)   # a job starts
    with Store(tmp_path / "s.sqlite") as store:
        source = draw_pairs(tmp_path, machine, probes, guard, pairs=3, store=store)
        assert [r["reason"].split(":")[0] for r in source.tally.retakes] == ["other load changed"]
        assert guard.level_changes == 1 and guard.waited_s == 0.0
        assert len(used(store, A)) == len(used(store, B)) == 3


def test_waiting_for_quiet_is_capped_at_a_tenth_of_the_wall(tmp_path):
    # a job that fills the cores the probe needs starts after 60 s of hunt and never stops
    machine = FakeMachine(other=0.0)
    guard = machine.guard(max_wait_s=600)
    machine.advance(60.0)
    probes = MachineProbes(machine, seconds=5.0, hunt_cpus=1.0, load=lambda i: 0.0 if i < 2 else 1.2)
    with Store(tmp_path / "s.sqlite") as store:
        source = draw_pairs(tmp_path, machine, probes, guard, pairs=6, store=store)
        assert len(used(store, A)) == len(used(store, B)) == 6
        reasons = [r["reason"] for r in source.tally.retakes]
    assert 0 < guard.waited_s <= 0.1 * guard.wall_s()
    assert any("oversubscribed" in r for r in reasons), reasons
    # once the wait ran out, every sample under this load was used as it is, none waited for
    assert source.tally.under_load >= 8
    contention = source.measurement_json()["contention"]
    assert contention["waited_s"] <= 0.1 * contention["wall_s"]


def test_a_load_that_keeps_changing_stops_the_hunt_with_exit_8(tmp_path):
    machine = FakeMachine(other=0.0)
    guard = machine.guard(max_wait_s=10)
    # 0.6 and 1.0 CPUs by turns after the first probe (it settles after 40 probes, long past max_wait)
    probes = MachineProbes(machine, hunt_cpus=0.5,
                           load=lambda i: 0.0 if i == 0 or i > 40 else (0.6 if i % 2 else 1.0))
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(MachineBusy) as raised:
            draw_pairs(tmp_path, machine, probes, guard, pairs=2, store=store)
        assert len(flagged(store, B)) == 11   # 10 s of re-takes of one second each, and the first
    assert raised.value.exit_code == ExitCode.MACHINE_BUSY
    assert "other load kept changing for 10 s before re-taking bbbbbbbbbb" in raised.value.message


def test_the_wait_share_is_a_setting():
    from regressbisect.config import build_config
    from regressbisect.errors import UserError

    assert build_config({"cmd": "x"}, {}).max_wait_share == 0.1
    assert build_config({"cmd": "x", "max_wait_share": 0.25}, {}).max_wait_share == 0.25
    assert build_config({"cmd": "x"}, {"max_wait_share": 0.0}).max_wait_share == 0.0
    with pytest.raises(UserError, match="--max-wait-share must be >= 0"):
        build_config({"cmd": "x"}, {"max_wait_share": -0.1})


# -- a real load -----------------------------------------------------------------------------

STEADY_LOOP = ("import os, time\nos.nice(19)\nwhile True:\n    end = time.process_time() + 0.08\n"
               "    while time.process_time() < end:\n        pass\n    time.sleep(0.02)\n")
"""About 0.8 CPU: 80 ms of CPU, then 20 ms asleep; niced, as a background job would be."""


def _process_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / ct.CLK_TCK


@pytest.mark.slow
def test_a_hunt_under_a_steady_niced_load_measures_through_it(tmp_path, monkeypatch, capsys):
    from regressbisect.testing.benchrepo import make_bench_repo
    from tests.cli import run_cli

    # The guard's machine: the loop and the hunt. The hunt's part is the guard's own next reading
    # of it (two scans of the process tree tens of ms apart would read the hunt's own CPU between
    # them as other load).
    loop = subprocess.Popen([sys.executable, "-c", STEADY_LOOP], start_new_session=True)
    ours = HuntCpu()
    scan_of_this_thread = threading.local()
    real_total = ct.HuntCpu.total

    def machine() -> tuple[float, int]:
        scan_of_this_thread.value = real_total(ours)
        return _process_cpu(loop.pid) + scan_of_this_thread.value, 2

    def total(self) -> float:
        value = real_total(self)
        if self is not ours and getattr(scan_of_this_thread, "value", None) is not None:
            value, scan_of_this_thread.value = scan_of_this_thread.value, None
        return value

    try:
        monkeypatch.setattr(ct, "read_proc_stat", machine)
        monkeypatch.setattr(ct.HuntCpu, "total", total)
        shas = make_bench_repo(tmp_path / "repo", [1000.0, 1000.0, 700.0])
        time.sleep(0.5)   # the loop runs before the hunt starts
        started, loop_started = time.monotonic(), _process_cpu(loop.pid)
        code = run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", f"{sys.executable} bench.py",
                        "--tokens", "1000", "--env", f"BENCH_STATE={tmp_path / 'state'}",
                        "--env", "BENCH_SLEEP=0.5", "--instrument", "off", "--max-wait", "120",
                        "--json", str(tmp_path / "r.json"), shas[0], shas[-1]])
        wall = time.monotonic() - started
        loop_cpus = (_process_cpu(loop.pid) - loop_started) / wall
    finally:
        os.killpg(loop.pid, signal.SIGKILL)
        loop.wait()
    out, err = capsys.readouterr()
    if loop_cpus < 0.15:   # niced, it yields to every other job of a shared machine
        pytest.skip(f"the niced loop got only {loop_cpus:.2f} CPUs here: no load to measure through")
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    contention = report["measurement"]["contention"]
    assert contention["waited_s"] <= 0.1 * wall
    assert contention["waited_s"] <= 0.1 * contention["wall_s"]
    # the report names the load the loop made (what the niced loop got of the machine's CPU)
    assert contention["steady_other_cpus"] == pytest.approx(loop_cpus, abs=0.2), contention
    (line,) = [line for line in out.splitlines() if line.startswith("Measured under")]
    assert f"{contention['steady_other_cpus']:.1f} CPUs of other load" in line, line
    # every sample used has its load stored, the loop's in it
    store = tmp_path / "repo" / ".git" / "regressbisect" / "store.sqlite"
    with sqlite3.connect(store) as conn:
        loads = [other for (other,) in conn.execute(
            "SELECT l.other_cpus FROM samples s JOIN sample_loads l ON l.sample_id = s.id"
            " WHERE s.arm = 'main' AND l.contended IS NULL")]
    assert len(loads) == report["probes"] - contention["retaken"]
    assert statistics.median(loads) == pytest.approx(contention["steady_other_cpus"], abs=0.01)
