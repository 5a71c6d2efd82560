"""End to end: real git repos and the real CLI. Tests of verdicts, reports and exit codes answer
the bench script in-process (`fake_probes`: regressbisect/testing/benchrepo.py BenchProbe, checked
here against the script itself); tests of what needs processes (daemons, signals, the shim) run
real probes.

The bench script's tok/s follows `speed.py` at each commit, times seeded lognormal noise
(regressbisect/testing/benchrepo.py), so these tests are deterministic.
"""
from __future__ import annotations

import json
import shlex
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from regressbisect.config import build_config
from regressbisect.git.history import History
from regressbisect.hunts.commits import CommitHunt
from regressbisect.render import render_summary
from regressbisect.search.bisect import CommitSearch
from tests.cli import run_cli
from regressbisect.probe.isolation import isolation_for_hunt
from regressbisect.probe.runner import ProbeSpec, run_probe
from regressbisect.testing.benchrepo import BenchProbe, SpeedProbe, make_bench_repo
from regressbisect.testing.gitrepo import commit, git, make_dirty, make_repo, merge, snapshot_checkout
from regressbisect.testing.procs import daemons, gone

pytestmark = pytest.mark.slow


QUIET = ("--env", "BENCH_NOISE=0.005")
"""For real-probe tests whose subject is not the statistics: half the probes of the default 2% noise."""


def hunt_args(repo: Path, state: Path, *extra: str) -> list[str]:
    return ["run", "-C", str(repo), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
            "--env", f"BENCH_STATE={state}", "--quiet", *extra]


@pytest.mark.parametrize("env, timeout_s", [
    ({}, 60.0),
    ({"BENCH_NOISE": "0.1", "BENCH_SEED": "3"}, 60.0),
    ({"BENCH_FAIL_AT": "900.0", "BENCH_FAIL_CODE": "3"}, 60.0),
    ({"BENCH_FAIL_AT": "900.0"}, 60.0),
    ({"BENCH_HANG_AT": "900.0"}, 0.5),
    ({"broken": "1"}, 60.0),
], ids=["measured", "noise-seed", "exit-3", "exit-1", "hang", "broken-environment"])
def test_bench_probe_answers_as_the_bench_script_does(tmp_path, env, timeout_s):
    """The in-process fake of the end-to-end tests against bench.py in a process: the same
    sample sequence, the same skips and reasons, the same import record."""
    make_bench_repo(tmp_path / "repo", [900.0])
    worktree = tmp_path / "repo"
    isolation = isolation_for_hunt(History.open(worktree), True, {})
    outcomes = {}
    for how, runner in (("process", run_probe), ("in-process", BenchProbe())):
        state = tmp_path / how
        state.mkdir()
        if env.get("broken"):
            (state / "broken-environment").touch()
        spec = ProbeSpec(command=f"{sys.executable} bench.py", tokens=1000, timeout_s=timeout_s,
                         env={**env, "BENCH_STATE": str(state)})
        runs = []
        for _ in range(3):
            imports = isolation.prepare(worktree)
            outcome = runner(spec, worktree, imports.env)
            runs.append((outcome.sample, outcome.skip_reason, outcome.exit_code if outcome.skip_reason is None
                         or env.get("BENCH_HANG_AT") is None else "killed", isolation.verify(imports)))
        outcomes[how] = runs
    assert outcomes["in-process"] == outcomes["process"]
    values = {sample.tok_s for sample, *_ in outcomes["process"] if sample is not None}
    assert len(values) == (0 if set(env) - {"BENCH_NOISE", "BENCH_SEED"} else 3)   # a sequence, not one value


def test_the_clis_hunt_answers_every_probe_with_the_fake(tmp_path, fake_probes):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 3 + [900.0] * 3)
    out = tmp_path / "hunt.json"
    assert run_cli(hunt_args(tmp_path / "repo", tmp_path / "state", "--instrument", "off",
                             "--json", str(out), shas[0], shas[-1])) == 0
    report = json.loads(out.read_text())
    assert fake_probes.runs == report["probes"] > 0 and fake_probes.processes == 0
    assert report["isolation"]["imported_from"] == {"__main__": "bench.py", "speed": "speed.py"}


def test_finds_a_5pct_step_at_2pct_noise_in_24_commits(tmp_path, capsys, fake_probes):
    speeds = [1000.0] * 13 + [950.0] * 11          # culprit: index 13
    shas = make_bench_repo(tmp_path / "repo", speeds)
    out = tmp_path / "hunt.json"
    code = run_cli(hunt_args(tmp_path / "repo", tmp_path / "state", "--instrument", "off",
                             "--json", str(out), shas[0], shas[-1]))
    assert code == 0
    report = json.loads(out.read_text())
    assert report["verdict"] == "culprits"
    assert [c["commit"] for c in report["culprits"]] == [shas[13]]
    culprit = report["culprits"][0]
    assert culprit["parent"] == shas[12]
    assert -8.0 < culprit["step_pct"] < -2.0
    assert culprit["ci95_pct"][0] <= culprit["step_pct"] <= culprit["ci95_pct"][1]
    assert culprit["share_of_gap"] > 0.7
    assert report["endpoints"]["good"]["median_tok_s"] > report["endpoints"]["bad"]["median_tok_s"]
    # bounded cost: far fewer runs than measuring every commit 5 times
    assert report["probes"] < 5 * len(speeds)
    printed = capsys.readouterr().out
    assert shas[13][:10] in printed


def test_two_culprits_are_both_found_with_their_shares(tmp_path, fake_probes):
    speeds = [1000.0] * 5 + [920.0] * 6 + [828.0] * 5     # -8% at index 5, -10% at index 11
    shas = make_bench_repo(tmp_path / "repo", speeds)
    out = tmp_path / "hunt.json"
    code = run_cli(hunt_args(tmp_path / "repo", tmp_path / "state", "--instrument", "off",
                             "--env", "BENCH_NOISE=0.01", "--json", str(out), shas[0], shas[-1]))
    assert code == 0
    report = json.loads(out.read_text())
    culprits = sorted(report["culprits"], key=lambda c: c["index"])
    assert [c["commit"] for c in culprits] == [shas[5], shas[11]]
    shares = [c["share_of_gap"] for c in culprits]
    assert 0.3 < shares[0] < 0.6 and 0.4 < shares[1] < 0.7
    assert abs(report["unexplained_share"]) < 0.2


def test_four_slots_repeat_the_ends_of_a_side_check_and_keep_every_sample(tmp_path, monkeypatch):
    # once the culprit is confirmed, its sides are checked with all 4 slots: the same end runs in
    # two slots of one round (two worktrees at one commit), and both samples are stored and count
    batches: list[list[int]] = []
    next_batch = CommitSearch.next_batch

    def recording(self, slots=1):
        batch = next_batch(self, slots)
        batches.append([m.index for m in batch])
        return batch

    monkeypatch.setattr(CommitSearch, "next_batch", recording)
    speeds = [1000.0] * 11 + [900.0] * 5
    shas = make_bench_repo(tmp_path / "repo", speeds)
    probe = SpeedProbe(noise=0.05)
    config = build_config({}, {"cmd": "fake", "tokens": 1000, "instrument": "off", "slots": 4})
    report = CommitHunt(History.open(tmp_path / "repo"), shas[0], shas[-1], config,
                        store_path=tmp_path / "store.sqlite", probe_runner=probe).run().report
    assert [c["commit"] for c in report["culprits"]] == [shas[11]]
    assert any(len(set(b)) < len(b) for b in batches)
    with sqlite3.connect(tmp_path / "store.sqlite", timeout=5) as con:
        stored = con.execute("select count(*) from samples where tok_s is not null").fetchone()[0]
    assert stored == report["probes"] == probe.runs == sum(len(b) for b in batches)
    assert sum(c["n"] for c in report["candidates"]) == stored


def test_a_merge_culprit_is_said_to_be_one_with_the_hunt_of_its_branch(tmp_path, monkeypatch):
    # main: c0 - c1 - c2 - M - c3; M merges feature f1 - f2 (branched off c1), f2 is the slowdown
    repo = tmp_path / "repo"
    c0, c1 = make_bench_repo(repo, [1000.0, 1000.0])
    git(repo, "checkout", "-q", "-b", "feature", c1)
    commit(repo, {"notes/f1.txt": "f1\n"}, "feature: harmless")
    f2 = commit(repo, {"speed.py": "SPEED = 900.0\n"}, "feature: the slowdown")
    git(repo, "checkout", "-q", "main")
    commit(repo, {"notes/c2.txt": "c2\n"}, "main: harmless")
    m = merge(repo, "feature", "Merge feat")
    c3 = commit(repo, {"notes/c3.txt": "c3\n"}, "main: harmless too")
    config = build_config({}, {"cmd": "fake --x 'a b'", "tokens": 1000, "instrument": "off",
                               "env": {"OMP_NUM_THREADS": "1"}, "min_effect": 0.05, "busy_check": False})
    report = CommitHunt(History.open(repo), c0, c3, config, store_path=tmp_path / "store.sqlite",
                        probe_runner=SpeedProbe(noise=0.01)).run().report
    (culprit,) = report["culprits"]
    assert culprit["commit"] == m
    merge_base = git(repo, "merge-base", f"{m}^1", f"{m}^2")
    assert merge_base == c1
    assert culprit["merge"]["parents"] == [culprit["parent"], f2]
    (command,) = culprit["merge"]["follow_up"]
    assert command.startswith("regressbisect run --cmd ") and command.endswith(
        f" $(git merge-base {culprit['parent']} {f2}) {f2}")
    text = render_summary(report)
    assert "is a merge" in text and command in text
    # the follow-up, given to the CLI, hunts that range with this hunt's settings, --cmd included
    words = shlex.split(command.replace(f"$(git merge-base {culprit['parent']} {f2})", merge_base))
    taken = {}

    def capture(hunt):
        taken.update(config=hunt.config, good=hunt.commits[0].sha, bad=hunt.commits[-1].sha)
        raise SystemExit(0)

    monkeypatch.setattr(CommitHunt, "run", capture)
    assert run_cli([words[1], "-C", str(repo), *words[2:]]) == 0
    assert taken == {"config": config, "good": merge_base, "bad": f2}
    monkeypatch.undo()
    # the follow-up, run as given, names the branch's commit
    follow_up = CommitHunt(History.open(repo), merge_base, f2, config, store_path=tmp_path / "store.sqlite",
                           probe_runner=SpeedProbe(noise=0.01)).run().report
    assert [c["commit"] for c in follow_up["culprits"]] == [f2]
    assert follow_up["culprits"][0]["merge"] is None


def test_a_a_range_is_not_reproduced_exit_2(tmp_path, capsys, fake_probes):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 12)
    out = tmp_path / "hunt.json"
    code = run_cli(hunt_args(tmp_path / "repo", tmp_path / "state", "--instrument", "off",
                             "--json", str(out), shas[0], shas[-1]))
    assert code == 2
    report = json.loads(out.read_text())
    assert report["verdict"] == "not-reproduced"
    assert report["culprits"] == []
    for side in ("good", "bad"):
        ep = report["endpoints"][side]
        assert ep["n"] >= 3 and ep["ci95"][0] <= ep["median_tok_s"] <= ep["ci95"][1]
    printed = capsys.readouterr().out
    assert "no regression reproduced" in printed.lower()


def test_rerun_measures_nothing_already_stored(tmp_path, fake_probes):
    speeds = [1000.0] * 6 + [900.0] * 6
    shas = make_bench_repo(tmp_path / "repo", speeds)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    args = hunt_args(tmp_path / "repo", tmp_path / "state", "--instrument", "off")
    assert run_cli([*args, "--json", str(first), shas[0], shas[-1]]) == 0
    assert run_cli([*args, "--json", str(second), shas[0], shas[-1]]) == 0
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert a["probes"] > 0 and a["cached_samples"] == 0
    assert b["probes"] == 0 and b["cached_samples"] == a["probes"]
    assert [c["commit"] for c in a["culprits"]] == [c["commit"] for c in b["culprits"]] == [shas[6]]
    assert any(c["cached"] > 0 for c in b["candidates"])



def test_a_resumed_hunt_counts_each_stored_sample_it_reuses_once(tmp_path, fake_probes):
    """The budget's pilots, the overhead arm and the search all read GOOD's stored samples (each
    namespace walks them from the first): a sample served to several is still one sample reused."""
    import sqlite3

    from regressbisect.config import default_store_path
    from regressbisect.git.history import History

    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 6 + [900.0] * 6)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    args = [a for a in hunt_args(tmp_path / "repo", tmp_path / "state") if a not in ("--tokens", "1000")]
    assert run_cli([*args, "--json", str(first), shas[0], shas[-1]]) == 0       # budget chosen: pilots
    assert run_cli([*args, "--json", str(second), shas[0], shas[-1]]) == 0
    store = default_store_path(History.open(tmp_path / "repo").common_dir)
    with sqlite3.connect(store) as raw:
        rows = raw.execute("SELECT count(*) FROM samples").fetchone()[0]
    raw.close()
    b = json.loads(second.read_text())
    assert b["probes"] == 0 and b["cached_samples"] <= rows, (b["cached_samples"], rows)


TWO_METRICS_BENCH = """\
import math, os, random
from pathlib import Path
from speed import SPEED
counter = Path(os.environ["NOISE_STATE"]) / "runs"      # the k-th run draws from seed k: reproducible
k = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(k + 1))
rng = random.Random(k)
print(f"{1000.0 * math.exp(rng.gauss(0.0, 0.01)):.1f} items/s")   # the same at every commit
print(f"{SPEED * math.exp(rng.gauss(0.0, 0.01)):.1f} tok/s")
"""


def test_a_changed_metric_regex_measures_again_instead_of_reusing_the_old_values(tmp_path):
    # a probe printing two metrics, read once with the default regex (tok/s, which drops 20%) and
    # once with a regex for items/s (flat): the second hunt must read items/s, not reuse tok/s
    speeds = [1000.0] * 4 + [800.0] * 4
    shas = make_repo(tmp_path / "repo", [{"bench.py": TWO_METRICS_BENCH, "speed.py": f"SPEED = {speeds[0]}\n"}]
                     + [{"speed.py": f"SPEED = {v}\n", f"notes/n{i}.txt": f"{i}\n"} for i, v in enumerate(speeds[1:])])
    first, second = tmp_path / "tok.json", tmp_path / "items.json"
    (tmp_path / "noise").mkdir()
    args = ["run", "-C", str(tmp_path / "repo"), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
            "--instrument", "off", "--quiet", "--env", f"NOISE_STATE={tmp_path / 'noise'}"]
    assert run_cli([*args, "--json", str(first), shas[0], shas[-1]]) == 0
    code = run_cli([*args, "--metric-regex", r"([0-9.]+) items/s", "--json", str(second), shas[0], shas[-1]])
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert [c["commit"] for c in a["culprits"]] == [shas[4]]
    assert b["probes"] > 0 and b["cached_samples"] == 0
    assert code == 2 and b["verdict"] == "not-reproduced" and b["unit"] == "items/s"
    assert int((tmp_path / "noise" / "runs").read_text()) >= a["probes"] + b["probes"]   # every run drew from it
    for side in ("good", "bad"):
        assert 950 < b["endpoints"][side]["median_tok_s"] < 1050


def test_a_one_slot_hunt_reuses_no_sample_taken_beside_other_slots(tmp_path, fake_probes):
    speeds = [1000.0] * 3 + [900.0] * 3
    shas = make_bench_repo(tmp_path / "repo", speeds)
    crowded, alone, again = tmp_path / "slots3.json", tmp_path / "slots1.json", tmp_path / "again.json"
    args = hunt_args(tmp_path / "repo", tmp_path / "state", "--instrument", "off")
    assert run_cli([*args, "--slots", "3", "--json", str(crowded), shas[0], shas[-1]]) == 0
    assert run_cli([*args, "--slots", "1", "--json", str(alone), shas[0], shas[-1]]) == 0
    assert run_cli([*args, "--slots", "1", "--json", str(again), shas[0], shas[-1]]) == 0
    a, b, c = (json.loads(p.read_text()) for p in (crowded, alone, again))
    assert a["probes"] > 0 and b["probes"] > 0 and b["cached_samples"] == 0
    assert c["probes"] == 0 and c["cached_samples"] == b["probes"]   # the same concurrency is reused


def test_a_probe_without_torch_gets_no_overhead_arm_and_no_counters_runs(tmp_path):
    """The bench script imports no torch: its one shimmed probe counts nothing, so the hunt runs
    no overhead pairs and no counters runs (they would measure nothing) and says why. The
    overhead arm itself is tested with a fake executor that counts (tests/test_cost.py)."""
    speeds = [1000.0] * 5 + [900.0] * 5
    shas = make_bench_repo(tmp_path / "repo", speeds)
    out = tmp_path / "hunt.json"
    code = run_cli(hunt_args(tmp_path / "repo", tmp_path / "state", *QUIET, "--json", str(out),
                             "--instrument", "auto", shas[0], shas[-1]))
    assert code == 0
    report = json.loads(out.read_text())
    assert report["culprits"][0]["commit"] == shas[5]
    assert report["instrumentation_overhead_pct"] is None
    assert "counted nothing" in report["instrumentation"]["note"]
    assert report["instrumentation"]["overhead_pairs"] == 1
    assert report["probes"] == sum(c["n"] for c in report["candidates"]) + 1  # + the shimmed one
    assert report["cost"]["probe_wall_s"] > 0 and report["cost"]["gpu_s"] >= 0
    # the preload server's learning probe saw no torch import: no torch settings in the summary
    text = render_summary(report)
    assert "TORCHINDUCTOR" not in text and "torch.compile" not in text


@pytest.mark.parametrize("preload", ["off", "json"])
def test_a_hunt_whose_probe_leaves_a_daemon_leaves_no_process(tmp_path, capsys, preload):
    # every probe double-forks a daemon that sleeps (fresh probes, or forked from a preload server)
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 2 + [900.0] * 2)
    pid_dir = tmp_path / "daemons"
    pid_dir.mkdir()
    out = tmp_path / "hunt.json"
    code = run_cli(hunt_args(tmp_path / "repo", tmp_path / "state", *QUIET, "--instrument", "off", "--preload", preload,
                             "--env", f"BENCH_DAEMONS={pid_dir}", "--json", str(out), shas[0], shas[-1]))
    report = json.loads(out.read_text())
    assert code == 0 and [c["commit"] for c in report["culprits"]] == [shas[2]]
    left = daemons(pid_dir)
    assert len(left) == report["probes"]
    assert [pid for pid in left if not gone(pid, wait_s=1.0)] == []
    leftovers = report["measurement"]["leftovers"]
    assert leftovers["probes"] == leftovers["killed"] == report["probes"]
    assert int(leftovers["first"][0].split()[0]) in left
    warnings = [line for line in capsys.readouterr().err.splitlines() if "left 1 process" in line]
    assert len(warnings) == 1 and "killed" in warnings[0]


def test_probe_failing_at_an_endpoint_is_one_line_exit_1(tmp_path, capsys):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 3 + [900.0] * 3)
    code = run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", "no-such-command-xyz", "--quiet",
                    "--instrument", "off", shas[0], shas[-1]])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GOOD" in err[0] and "command not found" in err[0]


def test_a_new_hunt_retries_what_failed_in_an_earlier_one(tmp_path, capsys, fake_probes):
    shas = make_bench_repo(tmp_path / "repo", [1000.0] * 4 + [900.0] * 4)
    state = tmp_path / "state"
    state.mkdir()
    (state / "broken-environment").write_text("")
    args = hunt_args(tmp_path / "repo", state, "--instrument", "off", shas[0], shas[-1])
    assert run_cli(args) == 1
    assert "environment is broken" in capsys.readouterr().err
    (state / "broken-environment").unlink()   # the user fixes the environment
    assert run_cli(args) == 0


@pytest.mark.parametrize("failure", [("BENCH_FAIL_CODE=3", "exit 3"), ("BENCH_HANG_AT=333.0", "timeout after")])
def test_a_slow_commit_that_crashes_or_hangs_is_an_ambiguous_step_not_its_neutral_child(
        tmp_path, capsys, failure, fake_probes):
    speeds = [1000.0] * 6 + [333.0] + [900.0] * 6   # commit 6 is the slow one, and cannot be measured
    shas = make_bench_repo(tmp_path / "repo", speeds)
    out = tmp_path / "hunt.json"
    fault, why = failure
    flags = (["--env", "BENCH_FAIL_AT=333.0", "--env", fault] if fault.startswith("BENCH_FAIL")
             else ["--env", fault, "--timeout", "4"])
    code = run_cli(hunt_args(tmp_path / "repo", tmp_path / "state", "--instrument", "off", *flags,
                             "--json", str(out), shas[0], shas[-1]))
    report = json.loads(out.read_text())
    assert code == 9 and report["verdict"] == "ambiguous" and report["exit_code"] == 9
    assert report["culprits"] == []                  # the neutral commit 7 is never named
    (step,) = report["ambiguous_steps"]
    assert (step["last_good"], step["first_bad"]) == (shas[5], shas[7])
    possible = {p["commit"]: p["why"] for p in step["possible_commits"]}
    assert set(possible) == {shas[6], shas[7]}
    assert why in possible[shas[6]] and possible[shas[6]].startswith("skipped")
    text = capsys.readouterr().out
    assert "culprit 1:" not in text and "(culprit)" not in text
    assert "ambiguous step 1:" in text and why in text


# -- the user's checkout is never touched: after a hunt, SIGINT, and SIGKILL + resume ---------

def _count_samples(common_dir: Path) -> int:
    db = common_dir / "regressbisect" / "store.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return con.execute("select count(*) from samples").fetchone()[0]
    except sqlite3.Error:
        return 0


def _start_hunt(repo: Path, state: Path, shas: list[str], json_out: Path,
                ignore_sigint: bool = False) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    # A hunt in its own process: tests/conftest.py cannot turn contention verdicts off there,
    # and other jobs on a shared test machine would make it wait (docs/contention.md).
    args = hunt_args(repo, state, *QUIET, "--instrument", "off", "--env", "BENCH_SLEEP=0.15",
                     "--no-busy-check", "--json", str(json_out), shas[0], shas[-1])

    def inherit_ignored_sigint():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen([sys.executable, "-c", "from regressbisect.cli import main; main()", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=inherit_ignored_sigint if ignore_sigint else None)


def _wait_for_samples(repo: Path, proc: subprocess.Popen, at_least: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = _count_samples(repo / ".git")
        if n >= at_least:
            return n
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("hunt stored too few samples in time")


@pytest.fixture
def dirty_repo(tmp_path):
    speeds = [1000.0] * 9 + [920.0] * 9
    repo = tmp_path / "repo"
    shas = make_bench_repo(repo, speeds)
    make_dirty(repo, tracked="bench.py", staged="README.md")
    return repo, shas


def test_dirty_checkout_is_byte_identical_after_a_hunt(dirty_repo, tmp_path, fake_probes):
    repo, shas = dirty_repo
    before = snapshot_checkout(repo)
    assert run_cli(hunt_args(repo, tmp_path / "state", "--instrument", "off", shas[0], shas[-1])) == 0
    assert snapshot_checkout(repo) == before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_sigint_mid_hunt_leaves_checkout_identical_and_exits_130(dirty_repo, tmp_path, signum):
    # the hunt starts with SIGINT ignored, as under `bash -c 'regressbisect run ... &'` (a
    # background job of a non-interactive shell): its own handler must still stop it
    repo, shas = dirty_repo
    before = snapshot_checkout(repo)
    proc = _start_hunt(repo, tmp_path / "state", shas, tmp_path / "h.json", ignore_sigint=True)
    _wait_for_samples(repo, proc, 4)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"resume" in err
    assert snapshot_checkout(repo) == before


@pytest.mark.parametrize("concurrency", [["--slots", "2"], ["--overlap", "2", "--env", "BENCH_GATED=1"]],
                         ids=["slots", "overlap"])
def test_sigterm_stores_no_killed_probe_and_starts_none(tmp_path, concurrency):
    """The probes a stop kills are the stop's doing: none is stored as a failure of its
    candidate (a resumed hunt would reuse that skip), and none is started again (the window
    gate re-runs a probe that failed beside others: that must not delay the stop)."""
    repo = tmp_path / "repo"
    shas = make_bench_repo(repo, [1000.0] * 6 + [900.0] * 6)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    state = tmp_path / "state"
    args = hunt_args(repo, state, "--instrument", "off", "--env", "BENCH_SLEEP=2",
                     "--no-busy-check", *concurrency, shas[0], shas[-1])
    proc = subprocess.Popen([sys.executable, "-c", "from regressbisect.cli import main; main()", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_samples(repo, proc, 2)
    # the stop comes while a round's probes run: they have started (bench.py's marker, written
    # first) beyond those stored, and each has about 2 s to go
    deadline = time.monotonic() + 60
    while len(list(state.glob("n-*"))) <= _count_samples(repo / ".git"):
        assert time.monotonic() < deadline and proc.poll() is None, "no probe was running to be stopped"
        time.sleep(0.02)
    signalled = time.time()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    with sqlite3.connect(repo / ".git" / "regressbisect" / "store.sqlite") as db:
        skips = db.execute("SELECT commit_sha, reason FROM skips").fetchall()
        spans = db.execute("SELECT started_at - ?, wall_seconds FROM samples", (signalled,)).fetchall()
    assert skips == []
    # bench.py never fails: a probe that started and was not stored is one the stop killed
    assert len(list(state.glob("n-*"))) > len(spans), "no probe was running at the stop"
    # A probe that ended before the stop keeps its sample (stored as the round unwinds, so it may
    # come after the stop: not evidence of a probe left running); none ran past the stop, so none
    # started after it either. Seconds from the stop to each stored probe's start, and its length:
    assert all(start + wall < 0 for start, wall in spans), f"a probe running at the stop was stored: {spans}"


def test_sigkill_mid_hunt_then_resume_reuses_every_stored_sample(dirty_repo, tmp_path):
    repo, shas = dirty_repo
    before = snapshot_checkout(repo)
    proc = _start_hunt(repo, tmp_path / "state", shas, tmp_path / "h.json")
    _wait_for_samples(repo, proc, 6)
    proc.kill()
    proc.wait(timeout=30)
    stored = _count_samples(repo / ".git")
    assert snapshot_checkout(repo) == before
    # the probe that was running when we killed the hunt may still be finishing: give it a moment
    resumed = _start_hunt(repo, tmp_path / "state", shas, tmp_path / "resumed.json")
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    report = json.loads((tmp_path / "resumed.json").read_text())
    assert report["cached_samples"] >= stored
    assert [c["commit"] for c in report["culprits"]] == [shas[9]]
    assert snapshot_checkout(repo) == before
