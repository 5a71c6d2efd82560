"""The Slurm executor's state machine against a fake scheduler (no Slurm needed): a job that
completes, a fault re-submitted once, two faults skipped with the scheduler's reasons, cancel,
the shared-filesystem preflight; and the sample source refusing a node of another type."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from regressbisect.config import SlurmConfig, build_config
from regressbisect.errors import UserError
from regressbisect.samples import Candidate, ProbeOutcome, Sample, SampleKey
from regressbisect.hunts.sampling import Request, SampleSource
from regressbisect.probe.executors.base import ExecutedProbe, ProbeCancelled, ProbeExecutor
from regressbisect.probe.executors.slurm import JobState, SlurmExecutor, node_preflight
from regressbisect.probe.runner import ProbeSpec
from regressbisect.store import Store

SPEC = ProbeSpec(command="true", tokens=10, timeout_s=60)


def outcome(tok_s: float) -> ProbeOutcome:
    return ProbeOutcome(sample=Sample(tok_s=tok_s, tokens=10, seconds=10 / tok_s), skip_reason=None,
                        exit_code=0, wall_seconds=0.1)


@dataclass
class FakeJob:
    job_id: str
    function: object
    args: tuple
    states: list[JobState]


@dataclass
class FakeScheduler:
    """Each submitted job walks through the next script of states; COMPLETED returns `value`."""

    scripts: list[list[JobState]]
    value: dict = field(default_factory=lambda: {"outcome": outcome(100.0), "fingerprint": "node-a",
                                                 "facts": {"hostname": "n1"}})
    submitted: list[FakeJob] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    def submit(self, function, args, *, name, time_min):
        job = FakeJob(str(100 + len(self.submitted)), function, args, list(self.scripts.pop(0)))
        self.submitted.append(job)
        return job

    def state(self, job):
        if job.job_id in self.cancelled:
            return JobState("CANCELLED")
        return job.states.pop(0) if len(job.states) > 1 else job.states[0]

    def result(self, job):
        if job.function is node_preflight:
            return node_preflight(*job.args)  # runs "on the node": here
        return self.value

    def cancel(self, job):
        self.cancelled.append(job.job_id)

    def log_tail(self, job):
        return ""


PENDING = JobState("PENDING", reason="Resources")
RUNNING = JobState("RUNNING", node="n1")
DONE = JobState("COMPLETED", node="n1")


def executor(tmp_path: Path, scheduler: FakeScheduler, events: list | None = None) -> SlurmExecutor:
    return SlurmExecutor(SlurmConfig(poll_s=0.01), tmp_path, probe_timeout_s=60, scheduler=scheduler,
                         on_event=None if events is None else events.append)


def test_a_completed_job_returns_the_nodes_outcome_and_fingerprint(tmp_path):
    events: list = []
    scheduler = FakeScheduler([[PENDING, RUNNING, DONE]])
    executed = executor(tmp_path, scheduler, events).run(SPEC, tmp_path, {}, label="abc")
    assert executed.outcome.sample.tok_s == 100.0
    assert executed.fingerprint == "node-a"
    assert [e.status for e in events] == ["queued", "running", "done"]
    assert events[1].running == ("100",) and events[-1].done == 1


def test_a_preempted_job_is_submitted_once_more(tmp_path):
    events: list = []
    scheduler = FakeScheduler([[RUNNING, JobState("PREEMPTED", node="n1")], [RUNNING, DONE]])
    executed = executor(tmp_path, scheduler, events).run(SPEC, tmp_path, {}, label="abc")
    assert executed.outcome.sample is not None
    assert len(scheduler.submitted) == 2
    fault = [e for e in events if e.status == "fault"]
    assert len(fault) == 1 and "job 100 PREEMPTED" in fault[0].detail and "once more" in fault[0].detail


def test_two_faults_are_a_skip_with_both_jobs_and_the_schedulers_reasons(tmp_path):
    scheduler = FakeScheduler([[JobState("TIMEOUT", reason="TimeLimit")],
                               [JobState("NODE_FAIL", reason="NodeDown", node="n7")]])
    executed = executor(tmp_path, scheduler).run(SPEC, tmp_path, {}, label="abc")
    assert executed.outcome.sample is None
    reason = executed.outcome.skip_reason
    assert reason.startswith("slurm: job 100 TIMEOUT (reason: TimeLimit)")
    assert "then job 101 NODE_FAIL (reason: NodeDown, node n7)" in reason
    assert len(scheduler.submitted) == 2  # once more, not forever


def test_a_job_slurm_will_never_start_stops_the_hunt_and_leaves_the_queue(tmp_path):
    scheduler = FakeScheduler([[JobState("PENDING", reason="BadConstraints")]])
    with pytest.raises(UserError, match="will not start job 100.*BadConstraints.*constraint"):
        executor(tmp_path, scheduler).run(SPEC, tmp_path, {}, label="abc")
    assert scheduler.cancelled == ["100"]


def test_a_completed_job_without_a_result_is_a_fault(tmp_path):
    class NoResult(FakeScheduler):
        def result(self, job):
            raise RuntimeError("no result file /x/123_result.pkl")
    scheduler = NoResult([[DONE], [DONE]])
    executed = executor(tmp_path, scheduler).run(SPEC, tmp_path, {}, label="abc")
    assert "FAILED (reason: no result file" in executed.outcome.skip_reason


def test_cancel_all_scancels_the_jobs_in_flight_and_stores_nothing(tmp_path):
    scheduler = FakeScheduler([[PENDING]])
    ex = executor(tmp_path, scheduler)
    raised: list[BaseException] = []

    def wait():
        try:
            ex.run(SPEC, tmp_path, {}, label="abc")
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            raised.append(exc)
    thread = threading.Thread(target=wait)
    thread.start()
    while not scheduler.submitted:
        pass
    ex.cancel_all()
    thread.join(5)
    assert scheduler.cancelled == ["100"]
    assert len(raised) == 1 and isinstance(raised[0], ProbeCancelled)
    with pytest.raises(ProbeCancelled):  # nothing new is submitted after a cancel
        ex.run(SPEC, tmp_path, {}, label="def")
    assert len(scheduler.submitted) == 1


def test_preflight_gives_the_node_type_and_passes_on_a_shared_directory(tmp_path):
    ex = executor(tmp_path, FakeScheduler([[DONE]]))
    fingerprint, facts = ex.fingerprint()
    assert fingerprint.startswith("node-") and "hostname" in facts
    assert not list(tmp_path.glob("shared-check-*"))  # the marker is cleaned up
    # A second host of the same type has the same fingerprint: the hostname is not part of it.
    import regressbisect.machine.fingerprint as machine
    original = machine.socket.gethostname
    try:
        machine.socket.gethostname = lambda: "another-host"
        assert node_preflight(str(tmp_path / "none"), "t", 0)["fingerprint"] == fingerprint
    finally:
        machine.socket.gethostname = original


def test_preflight_refuses_a_directory_the_node_cannot_see(tmp_path):
    class Elsewhere(FakeScheduler):
        def result(self, job):  # the node has its own /tmp: the marker is not there
            return node_preflight(str(tmp_path / "not-shared" / "marker"), job.args[1], 0)
    ex = executor(tmp_path, Elsewhere([[DONE]]))
    with pytest.raises(UserError, match="not shared with the Slurm nodes.*--slurm-shared-dir"):
        ex.fingerprint()


def test_a_failed_preflight_says_what_the_nodes_need(tmp_path):
    ex = executor(tmp_path, FakeScheduler([[JobState("FAILED", exit_code="1:0")]]))
    with pytest.raises(UserError, match="preflight job 100 ended FAILED.*filesystem the nodes share"):
        ex.fingerprint()


class _Pool:
    def __init__(self, path: Path):
        self.path = path

    def checkout(self, slot, commit, patch=None):
        return self.path


class _Executor(ProbeExecutor):
    """Slot 0 runs on the hunt's node type, slot 1 on another one."""

    name = "fake"

    def __init__(self):
        self.cancelled = False

    def fingerprint(self):
        return "node-a", {}

    def run(self, spec, worktree, extra_env, *, label=""):
        return ExecutedProbe(outcome(100.0 if label == "aaaaaaaaaa" else 90.0),
                             "node-a" if label == "aaaaaaaaaa" else "node-b", {"hostname": "n9"})

    def cancel_all(self):
        self.cancelled = True

    def close(self):
        pass


def test_a_sample_from_another_node_type_is_stored_apart_and_stops_the_hunt(tmp_path):
    def key_for(candidate):
        return SampleKey(tree=candidate.commit, patch_hash=None, config_hash="c", env_fingerprint="node-a")
    with Store(tmp_path / "s.sqlite") as store:
        source = SampleSource(store=store, pool=_Pool(tmp_path), spec=SPEC, env_fingerprint="node-a",
                              hunt_id=None, key_for=key_for, slot_env=({}, {}), executor=_Executor())
        a, b = Candidate("a" * 40), Candidate("b" * 40)
        with pytest.raises(UserError, match="another type.*node-b.*--slurm-constraint"):
            source.draw_many([Request(a), Request(b)])
        # Both came back and both are kept; b's under its own node type, never with the hunt's.
        assert [s.tok_s for s in store.samples(key_for(a), instrumented=False, arm="main")] == [100.0]
        assert store.samples(key_for(b), instrumented=False, arm="main") == []
        other = SampleKey(tree="b" * 40, patch_hash=None, config_hash="c", env_fingerprint="node-b")
        assert [s.tok_s for s in store.samples(other, instrumented=False, arm="main")] == [90.0]


def test_slurm_settings_merge_pyproject_and_flags_and_are_validated():
    table = {"cmd": "x", "executor": "slurm",
             "slurm": {"partition": "gpu", "gpus_per_probe": 8, "sbatch_args": ["--exclusive"]}}
    config = build_config(table, {"slurm": {"partition": "h200", "gpus_per_probe": None}})
    assert config.slurm.partition == "h200" and config.slurm.gpus_per_probe == 8
    assert config.slurm.sbatch_args == ("--exclusive",)
    assert config.slurm.time_limit(600) == 15
    with pytest.raises(UserError, match="unknown key 'gpus'.*slurm"):
        build_config({"cmd": "x", "slurm": {"gpus": 8}}, {})
    with pytest.raises(UserError, match="sbatch argument 'exclusive'"):
        build_config({"cmd": "x", "slurm": {"sbatch_args": ["exclusive"]}}, {})
    with pytest.raises(UserError, match="--executor must be one of local, slurm"):
        build_config({"cmd": "x"}, {"executor": "ray"})
    with pytest.raises(UserError, match="--slot-devices does not go with --executor slurm"):
        build_config({"cmd": "x"}, {"executor": "slurm", "slots": 2, "slot_devices": ["0", "1"]})


def test_once_the_hunt_is_stopping_no_job_is_submitted(tmp_path):
    """The executor consults the hunt's stop (probe/interrupts.py) before it submits: between the
    signal and the unwinding that cancels the round, a slot thread must not queue a new job."""
    from regressbisect.probe.interrupts import INTERRUPTS

    scheduler = FakeScheduler([[DONE]])
    ex = executor(tmp_path, scheduler)
    with pytest.raises(KeyboardInterrupt):
        with INTERRUPTS.hunt():
            INTERRUPTS.stop()
            with pytest.raises(ProbeCancelled):
                ex.run(SPEC, tmp_path, {}, label="abc")
            raise KeyboardInterrupt
    assert scheduler.submitted == []
    assert ex.run(SPEC, tmp_path, {}, label="abc").outcome.sample is not None   # the next hunt's
