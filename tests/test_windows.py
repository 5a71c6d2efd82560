"""Overlapped probes (probe/windows.py): start-ups side by side, measured windows alone."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from regressbisect.config import HuntConfig, ProbeConfig, SlurmConfig
from regressbisect.errors import UserError
from regressbisect.hunts import cost as costs
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.probe.windows import WindowGate
from regressbisect.testing.benchrepo import make_bench_repo
from tests.cli import run_cli
from regressbisect.testing.procs import gone

PY = sys.executable

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the gate is Linux only")

# Start-up writes heartbeats (time.time()) to its log; the window is busy work, logged as
# {"window": [start, end]} once it is over. GATED=0 measures without the gate. STARTED: a file
# touched at the start; START_UP_UNTIL: the start-up lasts until that file exists (two probes
# side by side whatever the machine's load).
PROBE = textwrap.dedent("""
    import contextlib, json, os, sys, time
    from pathlib import Path
    from regressbisect.workload.dflash.window import measured_window
    log = Path(os.environ["LOG_DIR"]) / f"{os.getpid()}.jsonl"
    if os.environ.get("STARTED"):
        Path(os.environ["STARTED"]).touch()
    def write(record):
        with log.open("a") as f:
            f.write(json.dumps(record) + "\\n")
    end = time.process_time() + float(os.environ.get("STARTUP", "1"))   # CPU seconds: a stop delays it
    after = os.environ.get("START_UP_UNTIL")   # and, if set, until that file exists
    while time.process_time() < end or (after and not Path(after).exists()):
        write({"beat": time.time()})
        sum(range(20000))
    gated = os.environ.get("GATED", "1") == "1"
    once = os.environ.get("NO_GATE_ONCE")   # this marker's first run measures without the gate
    if once and not Path(once).exists():
        Path(once).touch()
        gated = False
    with (measured_window() if gated else contextlib.nullcontext()):
        start = time.time()
        write({"open": start})
        if os.environ.get("OPENED"):
            Path(os.environ["OPENED"]).touch()
        stop = start + float(os.environ.get("WINDOW", "0.5"))
        while time.time() < stop:
            sum(range(20000))
        end = time.time()
    write({"window": [start, end]})
    print("@regressbisect " + json.dumps({"tokens": 1000, "seconds": end - start, "tok_s": 1000 / (end - start)}))
""")


def _probe_dir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "probe.py").write_text(PROBE)
    (tmp_path / "logs").mkdir()
    return work


def _run(gate: WindowGate, work: Path, logs: Path, timeout_s: float = 60.0, **env: str):
    spec = ProbeSpec(command=f"{PY} probe.py", tokens=1000, timeout_s=timeout_s)
    extra = {**gate.env(), "LOG_DIR": str(logs), **env}
    return gate.run("", lambda on_start: run_probe(spec, work, extra, on_start=on_start))


def _at_once(gate: WindowGate, work: Path, logs: Path, runs: dict[str, dict[str, str]],
             timeouts: dict[str, float] | None = None) -> dict:
    """`runs` (name -> probe environment) started at once, each with its timeout (`timeouts`,
    else 60 s); their outcomes by name."""
    outcomes = {}
    timeouts = timeouts or {}

    def run(name: str, env: dict[str, str]) -> None:
        outcomes[name] = _run(gate, work, logs, timeouts.get(name, 60.0), **env)

    threads = [threading.Thread(target=run, args=(name, env)) for name, env in runs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def _side_by_side(gate: WindowGate, work: Path, logs: Path, runs: dict[str, dict[str, str]],
                  timeouts: dict[str, float] | None = None) -> dict:
    """One gated probe alone first (the gate learns that this slot gates), then `runs` at once;
    their outcomes by name. Closes the gate."""
    try:
        _run(gate, work, logs, STARTUP="0.1", WINDOW="0.1")
        return _at_once(gate, work, logs, runs, timeouts)
    finally:
        gate.close()


def _beside_each_other(tmp_path: Path, env: dict[str, str], names: str = "ab") -> dict[str, dict[str, str]]:
    """Two probes' environments whose start-ups each last until the other has started."""
    first, second = names
    started = {name: str(tmp_path / f"started-{name}") for name in names}
    return {first: {**env, "STARTED": started[first], "START_UP_UNTIL": started[second]},
            second: {**env, "STARTED": started[second], "START_UP_UNTIL": started[first]}}


def _probe_failing_beside_others(tmp_path: Path) -> Path:
    """The probe dir, its probe failing as out of memory at the end of its window when FAIL_BESIDE
    is set and another probe process is alive (a stopped probe holds its GPU memory)."""
    work = _probe_dir(tmp_path)
    alive = tmp_path / "alive"
    alive.mkdir()
    (work / "probe.py").write_text(
        f"from pathlib import Path\nimport atexit, os\nmarker = Path({str(alive)!r}) / str(os.getpid())\n"
        "marker.touch()\natexit.register(marker.unlink)\n" + PROBE.replace(
            "    end = time.time()\n",
            "    end = time.time()\n"
            "    if os.environ.get('FAIL_BESIDE') and len(list(marker.parent.iterdir())) > 1:\n"
            "        sys.exit('RuntimeError: CUDA out of memory (other probes hold the memory)')\n"))
    return work


def _records(logs: Path) -> dict[int, list[dict]]:
    return {int(p.stem): [json.loads(line) for line in p.read_text().splitlines()] for p in logs.glob("*.jsonl")}


def test_start_ups_run_side_by_side_and_each_window_runs_alone(tmp_path):
    work = _probe_dir(tmp_path)
    logs = tmp_path / "logs"
    gate = WindowGate(3, settle_s=0.05)
    try:
        _at_once(gate, work, logs, {str(k): {"STARTUP": "1.0"} for k in range(3)})
    finally:
        gate.close()
    records = _records(logs)
    assert len(records) == 3
    windows = {pid: next(r["window"] for r in rs if "window" in r) for pid, rs in records.items()}
    beats = {pid: [r["beat"] for r in rs if "beat" in r] for pid, rs in records.items()}
    for pid, (start, end) in windows.items():
        for other, times in beats.items():
            inside = [t for t in times if start < t < end]
            assert other == pid or not inside, f"probe {other} ran during probe {pid}'s window"
    # all three side by side from the first (the slot's gating is learned from them)
    spans = sorted((min(b), max(b)) for b in beats.values())
    assert spans[0][1] > spans[2][0], "the three start-ups did not overlap"
    stats = gate.stats
    assert (stats.probes, stats.windows, stats.alone, stats.reruns) == (3, 3, 0, 0)
    assert stats.stops >= 1 and stats.stopped_s > 0


def test_a_probe_that_measured_beside_others_without_a_window_is_run_again_alone(tmp_path):
    work = _probe_dir(tmp_path)
    logs = tmp_path / "logs"
    gate = WindowGate(2, settle_s=0.05)
    outcomes = _side_by_side(gate, work, logs, {"gated": {"STARTUP": "1.5"}, "ungated": {"STARTUP": "0.2", "GATED": "0"}})
    assert all(o.sample is not None for o in outcomes.values())
    assert gate.stats.reruns == 1 and gate.stats.alone == 1 and gate.stats.probes == 3
    assert len(_records(logs)) == 4   # the ungated probe ran twice


def test_a_slot_whose_probes_measure_without_the_gate_runs_them_one_at_a_time(tmp_path):
    """Probes that never open a window: the first ones, side by side, are each run again alone
    (once), and from then on the slot runs one probe at a time."""
    work = _probe_dir(tmp_path)
    logs = tmp_path / "logs"
    gate = WindowGate(2, settle_s=0.05)
    try:
        outcomes = _at_once(gate, work, logs, _beside_each_other(tmp_path, {"STARTUP": "0.5", "GATED": "0"}))
        later = _run(gate, work, logs, STARTUP="0.1", GATED="0")
    finally:
        gate.close()
    assert all(o.sample is not None for o in [*outcomes.values(), later])
    assert (gate.stats.probes, gate.stats.reruns, gate.stats.alone, gate.stats.windows) == (3, 2, 3, 0)
    assert len(_records(logs)) == 5


def test_a_run_beside_others_without_a_window_does_not_make_the_slot_run_alone(tmp_path):
    """Gated probes whose first runs, side by side, measured without a window (their `open` did
    not reach the gate): each is run again alone, opens its window there, and the slot's later
    probes still run side by side."""
    work = _probe_dir(tmp_path)
    logs = tmp_path / "logs"
    gate = WindowGate(2, settle_s=0.05)
    try:
        first = _at_once(gate, work, logs, {k: {**env, "NO_GATE_ONCE": str(tmp_path / k)} for k, env in
                                            _beside_each_other(tmp_path, {"STARTUP": "0.5"}, "ab").items()})
        later = _at_once(gate, work, logs, _beside_each_other(tmp_path, {"STARTUP": "0.5"}, "cd"))
    finally:
        gate.close()
    assert all(o.sample is not None for o in [*first.values(), *later.values()])
    stats = gate.stats
    assert (stats.probes, stats.reruns, stats.alone, stats.windows, stats.without_window) == (4, 2, 2, 4, 2)


def test_a_probe_that_fails_with_no_other_probe_beside_it_is_not_run_again(tmp_path):
    """Alone, a failure is the candidate's: running it again would only pay for it twice."""
    work = _probe_dir(tmp_path)
    (work / "probe.py").write_text("import sys\nsys.exit('ImportError: the candidate is broken')\n")
    gate = WindowGate(2, settle_s=0.05)
    try:
        outcome = _run(gate, work, tmp_path / "logs")
    finally:
        gate.close()
    assert outcome.sample is None and "ImportError" in outcome.skip_reason
    assert (gate.stats.probes, gate.stats.reruns, gate.stats.alone) == (1, 0, 0)


def test_a_killed_hunt_leaves_no_stopped_probe_behind(tmp_path):
    work = _probe_dir(tmp_path)
    logs = tmp_path / "logs"
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import sys, threading
        from pathlib import Path
        from regressbisect.probe.runner import ProbeSpec, run_probe
        from regressbisect.probe.windows import WindowGate
        gate = WindowGate(2, settle_s=0.05)
        spec = ProbeSpec(command="{PY} probe.py", tokens=1000, timeout_s=600)
        def run(**env):
            def started(pgid):   # one write per line: two threads print at once
                sys.stdout.write(f"{{pgid}}\\n")
                sys.stdout.flush()
            extra = {{**gate.env(), "LOG_DIR": {str(logs)!r}, **env}}
            gate.run("", lambda on_start: run_probe(spec, Path({str(work)!r}), extra,
                                                    on_start=lambda p: (started(p), on_start(p))[1]))
        run(STARTUP="0", WINDOW="0")                                  # learns: this slot gates
        threading.Thread(target=run, kwargs={{"STARTUP": "0", "WINDOW": "300"}}).start()
        threading.Thread(target=run, kwargs={{"STARTUP": "300"}}).start()
        threading.Event().wait()
    """))
    hunt = subprocess.Popen([PY, str(driver)], stdout=subprocess.PIPE, text=True)
    try:
        pgids = [int(hunt.stdout.readline()) for _ in range(3)][1:]
        deadline = time.monotonic() + 30   # the window is 300 s long: a stop comes within it
        while True:
            states = [Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] for p in pgids]
            if "T" in states:
                break
            assert time.monotonic() < deadline, "the probe in start-up was not stopped during the other's window"
            time.sleep(0.05)
    finally:
        hunt.send_signal(signal.SIGKILL)   # kill -9: no cleanup code of the hunt runs
        hunt.wait()
    for pgid in pgids:
        assert gone(pgid, wait_s=10), f"probe {pgid} outlived the hunt"


def test_the_gpu_time_of_overlapped_probes_counts_once():
    assert costs.held_seconds([(0.0, 10.0), (2.0, 10.0), (30.0, 5.0)]) == pytest.approx(17.0)
    assert costs.held_seconds([(0.0, 10.0), (None, 4.0)]) == pytest.approx(14.0)
    # one after another: probe wall x GPUs, as before start times were kept
    assert costs.hunt_gpu_seconds([(0.0, 10.0), (10.0, 10.0)], 8) == pytest.approx(160.0)
    # Slurm jobs hold their GPUs only while they run, each its own
    assert costs.hunt_gpu_seconds([(0.0, 10.0), (0.0, 10.0)], 8, jobs=True) == pytest.approx(160.0)
    assert costs.held_gpus([{"CUDA_VISIBLE_DEVICES": "0,1"}, {"CUDA_VISIBLE_DEVICES": "2,3"}], 4) == 4


def test_overlap_is_at_least_one_and_local_only():
    probe = ProbeConfig(cmd="python bench.py")
    assert HuntConfig(probe=probe).overlap == 1 and HuntConfig(probe=probe, overlap=3, slots=2).lanes == 6
    with pytest.raises(UserError, match="--overlap must be at least 1"):
        HuntConfig(probe=probe, overlap=0)
    with pytest.raises(UserError, match="--overlap needs the local executor"):
        HuntConfig(probe=probe, overlap=2, executor="slurm", slurm=SlurmConfig(partition="gpu"))


def test_a_hunt_with_overlapped_probes_finds_the_step(tmp_path):
    """The CLI end to end with --overlap 2: the culprit found, every window through the gate,
    the first probe alone and the rest side by side, the report saying so."""
    speeds = [1000.0] * 4 + [900.0] * 4          # culprit: index 4
    shas = make_bench_repo(tmp_path / "repo", speeds)
    out = tmp_path / "hunt.json"
    code = run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", f"{PY} bench.py", "--tokens", "1000",
                    "--env", f"BENCH_STATE={tmp_path / 'state'}", "--env", "BENCH_GATED=1",
                    "--env", "BENCH_STARTUP=0.2", "--env", "BENCH_NOISE=0.005",   # half the probes of 2% noise
                    "--instrument", "off", "--overlap", "2",
                    "--quiet", "--json", str(out), shas[0], shas[-1]])
    report = json.loads(out.read_text())
    assert code == 0 and [c["commit"] for c in report["culprits"]] == [shas[4]]
    overlap = report["measurement"]["overlap"]
    assert overlap["lanes_per_slot"] == 2 and overlap["probes"] == report["probes"]
    # Every run accounted for: a window, or none (then re-run alone if it had company). On a
    # loaded 2-core CI machine a run beside another has now and then ended without a window; its
    # re-run alone must not make the rest of the hunt run one probe at a time.
    assert overlap["windows"] + overlap["without_window"] == overlap["probes"] + overlap["reruns"], overlap
    assert overlap["without_window"] <= 2 * overlap["reruns"] and overlap["unregistered"] == 0, overlap
    assert overlap["probes_alone"] == overlap["reruns"], overlap   # alone: only re-runs
    assert overlap["reruns"] == 0 or overlap["notes"], overlap   # a re-run always says why
    assert report["settings"]["overlap"] == 2


def test_a_probe_that_failed_beside_others_is_run_again_alone(tmp_path):
    """Out of memory because stopped probes hold theirs says nothing of the candidate: a probe
    that fails beside others is run again alone, and that outcome counts."""
    work = _probe_failing_beside_others(tmp_path)
    logs = tmp_path / "logs"
    gate = WindowGate(2, settle_s=0.05)
    outcomes = _side_by_side(gate, work, logs, {"long": {"STARTUP": "2.0"}, "fails": {"STARTUP": "0.2", "FAIL_BESIDE": "1"}})
    assert gate.stats.reruns == 1 and "failed beside" in gate.stats.notes[0]
    assert "CUDA out of memory" in gate.stats.notes[0]   # why it failed: the user can tell
    assert outcomes["long"].sample is not None and outcomes["fails"].sample is not None
    assert len(list(logs.glob("*.jsonl"))) == 4   # the learning probe, the long one, the failing one twice


def test_a_failure_beside_others_that_runs_alone_narrows_the_slot(tmp_path):
    """A probe that fails beside others and then runs alone failed for want of what its company
    held (an 80 GB card under --overlap 3 sized for 141 GB): the slot runs one probe fewer side by
    side from then on, so the next probes do not fail and run again too."""
    work = _probe_failing_beside_others(tmp_path)
    logs = tmp_path / "logs"
    gate = WindowGate(2, settle_s=0.05)
    try:
        first = _at_once(gate, work, logs, _beside_each_other(tmp_path, {"STARTUP": "0.2", "FAIL_BESIDE": "1"}))
        assert all(o.sample is not None for o in first.values())
        assert gate.stats.reruns == 1   # one failed beside the other; alone it ran
        assert any("at most 1 probe(s)" in note for note in gate.stats.notes)
        later = _at_once(gate, work, logs, {name: {"STARTUP": "0.5", "FAIL_BESIDE": "1"} for name in "cd"})
    finally:
        gate.close()
    assert all(o.sample is not None for o in later.values())
    assert gate.stats.reruns == 1   # the slot ran them one at a time: neither failed beside the other


def test_time_held_by_the_gate_does_not_count_against_the_timeout(tmp_path):
    """Held through another probe's 6 s window, a probe with a 4 s timeout that itself runs for
    well under a second still finishes: only the seconds it ran count. Its start-up lasts until
    the other's window has opened, so it is held whatever the order the two start in; its own
    run may take several times as long on a loaded machine, and counted with the time held it
    would pass the timeout."""
    work = _probe_dir(tmp_path)
    logs = tmp_path / "logs"
    opened = tmp_path / "opened"
    gate = WindowGate(2, settle_s=0.05)
    outcomes = _side_by_side(gate, work, logs, {
        "long window": {"STARTUP": "0.1", "WINDOW": "6.0", "OPENED": str(opened)},
        "held": {"STARTUP": "0.1", "WINDOW": "0.1", "START_UP_UNTIL": str(opened)}}, timeouts={"held": 4.0})
    held = outcomes["held"]
    assert outcomes["long window"].sample is not None
    assert held.sample is not None, held.skip_reason
    assert held.wall_seconds > 6.0   # it was held for the other's window, and not timed out
    assert gate.stats.reruns == 0, gate.stats.notes   # (a timed-out run beside another is run again alone)
