"""Against a real Slurm: a one-node cluster on localhost started by scripts/slurm_local.sh
(slurmctld + slurmd + munge from Debian's packages). Every probe below is a Slurm job.

Without Slurm these tests skip with the reason, except in CI (CI=true), where they fail: a CI
that cannot start Slurm has not tested the Slurm executor.
"""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ci import missing
from tests.cli import run_cli
from tests.slurmrepo import make_slurm_repo

# under pytest -n these tests share one worker (--dist loadfile, pyproject.toml): one cluster, its
# queue (each asserts that none of its jobs is left) and the session fixture that starts it
pytestmark = [pytest.mark.slurm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "slurm_local.sh"
SPEEDS = [1000.0] * 5 + [700.0] * 3          # culprit: index 5
PYPROJECT = "[tool.regressbisect.slurm]\npoll_s = 0.1\ncpus_per_probe = 1\n"


@pytest.fixture(scope="session")
def slurm_cluster():
    """Start the local cluster unless it runs already; stop it after, if this fixture started it."""
    was_running = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True).returncode == 0
    if not was_running:
        try:
            started = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True,
                                     timeout=600)
            reason = None if started.returncode == 0 else (
                f"scripts/slurm_local.sh start failed (exit {started.returncode}): "
                + (started.stderr.strip().splitlines() or ["no output"])[-1])
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = f"scripts/slurm_local.sh start failed: {exc}"
        if reason is not None:
            missing(reason)
    yield
    if not was_running:
        subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, timeout=120)


def our_jobs() -> list[str]:
    """Jobs of regressbisect (named rb-...) still in the queue, pending or running."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if " rb-" in line]


def job_name(job_id: str) -> str:
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    return shown.split("JobName=", 1)[1].split()[0]


def hunt_args(repo: Path, state: Path, shas: list[str], *extra: str) -> list[str]:
    return ["run", "-C", str(repo), "--cmd", f"{sys.executable} probe.py", "--env", f"PROBE_STATE={state}",
            "--instrument", "off", "--min-effect", "0.05", "--executor", "slurm", *extra, shas[0], shas[-1]]


def probe_jobs_submitted(stderr: str) -> list[str]:
    """Ids of the probe jobs (not the preflight) a hunt submitted, from its progress lines."""
    return [line.split()[1] for line in stderr.splitlines()
            if line.startswith("job ") and "submitted" in line and "(preflight)" not in line]


def stored(store: Path, table: str) -> list[tuple]:
    with sqlite3.connect(store) as db:
        return db.execute(f"SELECT commit_sha, {'tok_s' if table == 'samples' else 'reason'} FROM {table}").fetchall()


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def hunt_two_slots(repo: Path, state: Path, shas: list[str], report_file: Path, capsys) -> tuple[dict, str]:
    """`run --slots 2` through Slurm; (its report, its stderr), after checking that it found the
    culprit at index 5 and exited 0."""
    code = run_cli(hunt_args(repo, state, shas, "--slots", "2", "--json", str(report_file)))
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    report = json.loads(report_file.read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[5]]
    return report, err


def test_two_slots_of_slurm_jobs_find_the_culprit_and_a_rerun_submits_nothing(slurm_cluster, tmp_path, capsys):
    repo, state = tmp_path / "repo", tmp_path / "state"
    state.mkdir()
    shas = make_slurm_repo(repo, SPEEDS, pyproject=PYPROJECT)
    report_file = tmp_path / "hunt.json"
    report, err = hunt_two_slots(repo, state, shas, report_file, capsys)
    jobs = probe_jobs_submitted(err)
    assert len(jobs) == report["probes"] > 0
    # Every sample was taken inside a Slurm job, and two ran at once at least once.
    ran_in = [p.read_text() for p in (state / "probes").iterdir()]
    assert len(ran_in) == len(jobs) and set(ran_in) == set(jobs)
    assert "2 running" in err
    assert our_jobs() == []

    code = run_cli(hunt_args(repo, state, shas, "--slots", "2", "--json", str(report_file)))
    err = capsys.readouterr().err
    assert code == 0
    assert probe_jobs_submitted(err) == []
    assert json.loads(report_file.read_text())["probes"] == 0


def test_a_job_scancelled_twice_is_requeued_once_then_skipped_with_the_reason(slurm_cluster, tmp_path):
    repo, state = tmp_path / "repo", tmp_path / "state"
    state.mkdir()
    (state / "hang-budget").write_text("2")     # the first two middle probes hang until scancel
    shas = make_slurm_repo(repo, SPEEDS, pyproject=PYPROJECT)
    report_file = tmp_path / "hunt.json"
    # --no-footprint: commits sharing a tree are empty commits, which the probe's footprint sets
    # aside (they touch nothing it reads); the case pinned here, one skipped tree standing for
    # several candidate commits, exists only where every commit is a candidate
    hunt = subprocess.Popen([sys.executable, "-m", "regressbisect",
                             *hunt_args(repo, state, shas, "--no-footprint", "--json", str(report_file))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cancelled = []
        for _ in range(2):
            hanging = wait_for(lambda: [p for p in state.glob("hanging-*") if p.name[8:] not in cancelled],
                               120, "a hanging probe job")
            job_id = hanging[0].name[len("hanging-"):]
            subprocess.run(["scancel", job_id], check=True)
            cancelled.append(job_id)
        out, err = hunt.communicate(timeout=300)
    finally:
        hunt.kill()
    # commits 1..4 share one tree (the same speed.py), so the skipped candidate is all four: the
    # step 0 -> 5 could be any of 1..5, and no commit is named (exit 9, as git bisect's "could be
    # any of")
    assert hunt.returncode == 9, err[-2000:]
    assert f"job {cancelled[0]} CANCELLED" in err and "submitting it once more" in err
    skips = stored(repo / ".git" / "regressbisect" / "store.sqlite", "skips")
    assert len(skips) == 1
    commit, reason = skips[0]
    assert reason.startswith(f"slurm: job {cancelled[0]} CANCELLED") and f"then job {cancelled[1]} CANCELLED" in reason
    # The re-submitted job was the same candidate's, and that candidate is the one skipped.
    names = {job_name(job_id) for job_id in cancelled}
    assert names == {f"rb-{commit[:10]}"}
    report = json.loads(report_file.read_text())
    assert report["verdict"] == "ambiguous" and report["culprits"] == []
    (step,) = report["ambiguous_steps"]
    possible = {c["commit"]: c["why"] for c in step["possible_commits"]}
    assert set(possible) == set(shas[1:6])
    assert f"job {cancelled[0]} CANCELLED" in str(possible[commit])
    assert our_jobs() == []


def test_ctrl_c_cancels_every_job_and_the_rerun_resumes_from_the_store(slurm_cluster, tmp_path, capsys):
    repo, state = tmp_path / "repo", tmp_path / "state"
    state.mkdir()
    (state / "hang-budget").write_text("2")
    shas = make_slurm_repo(repo, SPEEDS, pyproject=PYPROJECT)
    store = repo / ".git" / "regressbisect" / "store.sqlite"
    hunt = subprocess.Popen([sys.executable, "-m", "regressbisect", *hunt_args(repo, state, shas, "--slots", "2")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: list(state.glob("hanging-*")), 120, "a hanging probe job")
        assert our_jobs(), "the hanging probe's job should be in the queue"
        hunt.send_signal(signal.SIGINT)
        out, err = hunt.communicate(timeout=120)
    finally:
        hunt.kill()
    assert hunt.returncode == 130, err[-2000:]
    assert "cancelled (the hunt was interrupted)" in err
    # At exit every job is cancelled: none pending or running; one may still be COMPLETING while
    # slurmd kills its processes (KillWait), and then leaves the queue.
    assert [job for job in our_jobs() if not job.endswith(("COMPLETING", "CANCELLED"))] == []
    wait_for(lambda: our_jobs() == [], 60, "the cancelled jobs to leave the queue")
    kept = stored(store, "samples")
    assert len(kept) >= 4  # the control arm's samples were returned before the interrupt, and stay

    (state / "hang-budget").unlink()
    report, err = hunt_two_slots(repo, state, shas, tmp_path / "hunt.json", capsys)
    assert report["cached_samples"] == len(kept)       # nothing stored was measured again
    assert len(probe_jobs_submitted(err)) == report["probes"]


def test_nightly_measures_through_slurm_in_a_shared_dir_without_checking_the_submitting_machine(slurm_cluster, tmp_path, capsys):
    repo, state = tmp_path / "repo", tmp_path / "state"
    state.mkdir()
    shared = tmp_path / "shared"                 # the pool on a "shared filesystem" of its own
    make_slurm_repo(repo, [1000.0, 1000.0, 1000.0], pyproject=PYPROJECT + f'shared_dir = "{shared}"\n')
    code = run_cli(["nightly", "-C", str(repo), "--cmd", f"{sys.executable} probe.py",
                    "--env", f"PROBE_STATE={state}", "--instrument", "off", "--executor", "slurm",
                    "--samples", "1", "--max-new", "2", "--no-hunt", "--report-dir", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    assert len(probe_jobs_submitted(err)) == 2
    assert len(list((state / "probes").iterdir())) == 2
    report = json.loads(next((tmp_path / "reports").glob("nightly-*.json")).read_text())
    assert report["machine"]["status"] == "not checked"
    assert our_jobs() == []
    assert [p.name for p in shared.glob("*/worktrees/*")] == ["slot-0"]
    assert not (repo / ".git" / "regressbisect" / "worktrees").exists()
    assert run_cli(["clean", "-C", str(repo)]) == 0
    assert list(shared.glob("*/worktrees/*")) == []
