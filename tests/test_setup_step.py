"""The per-candidate setup step and per-slot virtualenvs (docs/setup.md).

Fast tests drive SampleSource with a real worktree pool, real setup commands and a fake probe
executor. The slow ones are Must-show (c): a C extension whose C source holds the slowdown,
built per candidate by `--setup`, against the same hunt without it.
"""
from __future__ import annotations

import contextlib
import json
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
from regressbisect.git.worktrees import WorktreePool, pool_root
from regressbisect.samples import Candidate, ProbeOutcome, Sample, SampleKey
from regressbisect.hunts.sampling import MeasurementParts, Request, SampleSource
from regressbisect.probe.runner import ProbeSpec, timeout_reason
from regressbisect.probe.setup_step import SPARE_TREES, BuiltTrees, SetupStep
from regressbisect.probe.venvs import SlotVenvs
from regressbisect.store import Store
from tests.ci import missing
from tests.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
from regressbisect.testing.benchrepo import SpeedProbe, make_bench_repo
from regressbisect.testing.cextrepo import make_cext_repo
from regressbisect.testing.gitrepo import make_repo


class BuiltProbe:
    """Fake executor: a sample only when the setup's output is in the worktree."""

    def __init__(self):
        self.envs: list[dict] = []

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        self.envs.append(dict(extra_env or {}))
        if not (worktree / "built.txt").exists():
            return ProbeOutcome(sample=None, skip_reason="exit 1: ImportError: not built", exit_code=1,
                                wall_seconds=0.01)
        return ProbeOutcome(sample=Sample(tok_s=100.0), skip_reason=None, exit_code=0, wall_seconds=0.01)


def _source(repo: Path, store: Store, pool: WorktreePool, setup_cmd: str, hunt_id: int | None,
            probe=None, venvs=None, patch_for=lambda c: None, config: str = "c", timeout_s: float = 30,
            setup_timeout_s: float = 60) -> tuple[SampleSource, SetupStep]:
    history = pool.history
    setup = SetupStep(command=setup_cmd, store=store, hunt_id=hunt_id, timeout_s=setup_timeout_s,
                      log_dir=pool_root(history) / "setup-logs")
    pool.widen(setup.trees.fit(1))     # as the hunt's rig sizes it, for one lane
    source = SampleSource(
        store=store, pool=pool, spec=ProbeSpec(command="true", tokens=10, timeout_s=timeout_s),
        env_fingerprint="fp", hunt_id=hunt_id,
        key_for=lambda c: SampleKey(tree=history.tree_of(c.commit), patch_hash=c.patch_hash, config_hash=config,
                                    env_fingerprint="fp"),
        patch_for=patch_for, probe_runner=probe or BuiltProbe(),
        parts=MeasurementParts(setup=setup, venvs=venvs))
    return source, setup


def _hunt(store: Store) -> int:
    return store.start_hunt(kind="commits", good="a", bad="b", config_hash="c", env_fingerprint="fp",
                            settings={})


@pytest.fixture
def repo(tmp_path):
    shas = make_repo(tmp_path / "repo", [{"a.py": "x = 1\n", ".gitignore": "built.txt\n"},
                                         {"a.py": "x = 2\n"}, {"a.py": "x = 3\n"}])
    return tmp_path / "repo", shas


class OwnBuildProbe:
    """Fake executor: tok/s = 100 + X from the build output `built.txt` (a copy of `a.py`,
    `x = X`, made by the setup step), so a sample shows whose build it ran on."""

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        if not (worktree / "built.txt").exists():
            return ProbeOutcome(sample=None, skip_reason="exit 1: ImportError: not built", exit_code=1,
                                wall_seconds=0.01)
        x = int((worktree / "built.txt").read_text().split("=")[1])
        return ProbeOutcome(sample=Sample(tok_s=100.0 + x), skip_reason=None, exit_code=0, wall_seconds=0.01)


def _builds(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_each_candidate_is_built_once_while_good_and_bad_alternate_in_one_slot(repo, tmp_path):
    path, shas = repo
    log = tmp_path / "builds.log"   # outside the repository: one line per setup run
    history = History.open(path)
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        source, setup = _source(path, store, pool, f"git rev-parse HEAD >> {log}; cp a.py built.txt",
                                _hunt(store), probe=OwnBuildProbe())
        order = [0, 2] * 4 + [1, 0, 2, 1, 1]
        draws = [source.draw_many([Request(Candidate(shas[i]))])[0] for i in order]
        spares = [pool.path(t) for t in range(1, setup.trees.count)]
    # Every sample ran on its own candidate's build (x = i + 1 at commit i) ...
    assert [d.value for d in draws] == [101.0 + i for i in order]
    # ... and each candidate was built once: GOOD and BAD alternating kept their worktrees.
    assert sorted(_builds(log)) == sorted(shas[i] for i in set(order))
    report = setup.to_json()
    assert report["runs"] == 3 and report["failures"] == 0
    assert sum(c["reuses"] for c in report["per_candidate"].values()) == len(order) - 3
    assert source.probe_seconds == pytest.approx(0.01 * len(order))  # setup time is not probe time
    # The worktrees kept beside the slot's own are removed when the pool is closed.
    assert spares and not any(p.exists() for p in spares) and pool.path(0).exists()


def test_built_worktrees_are_bounded_and_the_least_recently_used_one_is_given_to_a_new_build():
    trees = BuiltTrees()
    assert trees.fit(1) == 1 + SPARE_TREES == 8

    def probe(build):   # a probe of one lane: take, build if needed, give back
        tree, built = trees.take(build)
        if not built:
            trees.mark_built(tree, build, {})
        trees.give_back(tree)
        return tree, built

    first = {b: probe(b)[0] for b in range(8)}
    assert sorted(first.values()) == list(range(8))       # one worktree each, none evicted yet
    assert probe(0) == (first[0], True)                    # 0 is now the most recently used
    assert probe(8) == (first[1], False)                   # 1 was the least recently used
    assert probe(1) == (first[2], False) and probe(0) == (first[0], True)
    # Two lanes probing one build at once: the second cannot share the first's worktree.
    held, built = trees.take(0)
    other, other_built = trees.take(0)
    assert (held, built) == (first[0], True) and other != held and not other_built


def test_a_candidate_with_an_edited_tree_is_built_apart_from_its_commit(repo, tmp_path):
    path, shas = repo
    log = tmp_path / "builds.log"
    history = History.open(path)
    edit = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 9\n"
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        source, setup = _source(path, store, pool, f"git rev-parse HEAD >> {log}; cp a.py built.txt",
                                _hunt(store), probe=OwnBuildProbe(),
                                patch_for=lambda c: edit if c.patch else None)
        order = [Candidate(shas[0]), Candidate(shas[0], ("h1",))] * 3
        draws = [source.draw_many([Request(c)])[0] for c in order]
    assert [d.value for d in draws] == [101.0, 109.0] * 3
    assert _builds(log) == [shas[0], shas[0]]   # the commit, and the commit with the edit


class EditingProbe:
    """Fake executor: notes the tracked files it finds (a.py, b.py), then edits a.py, deletes b.py
    and adds a line to .gitignore, as a probe that rewrites its own config would."""

    def __init__(self):
        self.seen: list[tuple[str, str | None]] = []

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        b = worktree / "b.py"
        self.seen.append(((worktree / "a.py").read_text(), b.read_text() if b.exists() else None))
        with open(worktree / "a.py", "a") as f:
            f.write("# edited by the probe\n")
        b.unlink(missing_ok=True)
        with open(worktree / ".gitignore", "a") as f:
            f.write("*.probe\n")
        return ProbeOutcome(sample=Sample(tok_s=100.0), skip_reason=None, exit_code=0, wall_seconds=0.01)


def test_a_probe_finds_the_tracked_files_as_the_patch_and_the_setup_left_them_at_every_probe(tmp_path):
    path = tmp_path / "repo"
    shas = make_repo(path, [{"a.py": "x = 1\n", "b.py": "y = 1\n", ".gitignore": "built.txt\n"}])
    history = History.open(path)
    edit = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 9\n"
    probe = EditingProbe()
    # The setup writes an untracked output and edits a tracked file (a version file a build stamps):
    # both are the build, kept; what the probe changed is not.
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        source, setup = _source(path, store, pool, "cp a.py built.txt; echo '# stamped' >> a.py",
                                _hunt(store), probe=probe, patch_for=lambda c: edit if c.patch else None)
        order = [Candidate(shas[0]), Candidate(shas[0], ("h1",))] * 3
        for candidate in order:
            source.draw_many([Request(candidate)])
        worktrees = [pool.path(t) for t in range(2)]
        assert all((w / "built.txt").exists() for w in worktrees)   # the build outputs stayed
    assert probe.seen == [("x = 1\n# stamped\n", "y = 1\n"), ("x = 9\n# stamped\n", "y = 1\n")] * 3
    assert setup.runs == 2
    assert setup.to_json()["tracked_files_restored"] == {"probes": 4, "files": [".gitignore", "a.py", "b.py"]}


def test_a_new_setup_step_or_an_edited_setup_command_builds_again(repo, tmp_path):
    path, shas = repo
    log = tmp_path / "builds.log"
    history = History.open(path)
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        hunt = _hunt(store)
        first, _ = _source(path, store, pool, f"echo one >> {log}; cp a.py built.txt", hunt, probe=OwnBuildProbe())
        first.draw_many([Request(Candidate(shas[0]))])
        # The same hunt resumed by a new process (after kill -9 too): it cannot know what was
        # done in the worktrees since, so it builds again before the first probe.
        resumed, _ = _source(path, store, pool, f"echo one >> {log}; cp a.py built.txt", hunt,
                             probe=OwnBuildProbe())
        stored, fresh = [resumed.draw_many([Request(Candidate(shas[0]))])[0] for _ in range(2)]
        assert stored.cached and _builds(log) == ["one", "one"]
        # An edited setup command (a new config hash, so no stored sample) builds again too.
        edited, _ = _source(path, store, pool, f"echo two >> {log}; cp a.py built.txt", hunt,
                            probe=OwnBuildProbe(), config="c2")
        (draw,) = edited.draw_many([Request(Candidate(shas[0]))])
    assert _builds(log) == ["one", "one", "two"] and draw.value == fresh.value == 101.0


def test_a_failed_setup_is_not_taken_for_a_built_tree(repo, tmp_path):
    path, shas = repo
    log = tmp_path / "builds.log"
    failed_once = tmp_path / "failed-once"
    history = History.open(path)
    # Leaves its output in the tree, then fails the first time: a half-built tree.
    command = (f"echo run >> {log}; cp a.py built.txt; "
               f"if [ ! -e {failed_once} ]; then touch {failed_once}; exit 1; fi")
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        source, setup = _source(path, store, pool, command, None, probe=OwnBuildProbe())  # no hunt: retried
        draws = [source.draw_many([Request(Candidate(shas[0]))])[0] for _ in range(3)]
    assert draws[0].sample is None and draws[0].skip_reason.startswith("setup failed: exit 1")
    assert [d.value for d in draws[1:]] == [101.0, 101.0]
    assert _builds(log) == ["run", "run"]   # built again after the failure, then reused
    assert setup.to_json()["per_candidate"][shas[0][:10]] == {
        "runs": 1, "failures": 1, "reuses": 1, "remembered": 0, "seconds": pytest.approx(setup.seconds, abs=0.01)}


class BuiltSpeedProbe(SpeedProbe):
    """SpeedProbe of a bench repo whose speed is only known once the setup built it (speed.py
    copied to built_speed.py); also the worktree of each probe."""

    def __init__(self):
        super().__init__(noise=0.01)
        self.worktrees: set[Path] = set()

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        built = worktree / "built_speed.py"
        if not built.exists() or built.read_text() != (worktree / "speed.py").read_text():
            return ProbeOutcome(sample=None, skip_reason="exit 1: not built", exit_code=1, wall_seconds=0.01)
        self.worktrees.add(worktree)
        return super().__call__(spec, worktree, extra_env)


def test_a_hunt_builds_each_candidate_it_probes_once_and_counts_builds_in_its_cost(tmp_path):
    repo = tmp_path / "repo"
    make_bench_repo(repo, [1000.0] * 3 + [900.0] * 3)
    log = tmp_path / "builds.log"
    config = build_config({}, {"cmd": "fake", "tokens": 1000, "instrument": "off", "busy_check": False,
                               "setup": f"git rev-parse HEAD >> {log}; cp speed.py built_speed.py"})
    probe = BuiltSpeedProbe()
    report = CommitHunt(History.open(repo), "HEAD~5", "HEAD", config, store_path=tmp_path / "store.sqlite",
                        probe_runner=probe).run().report
    assert report["verdict"] == "culprits"
    probed = set(probe.count)
    assert sorted(_builds(log)) == sorted(probed)   # one build per candidate probed
    assert report["measurement"]["setup"]["runs"] == len(probed) < probe.runs
    cost = report["cost"]
    assert cost["builds"] == len(probed) and cost["build_reuses"] == probe.runs - len(probed)
    assert f"{len(probed)} builds" in render_summary(report)
    assert len(probe.worktrees) > 1   # GOOD and BAD each kept their own built worktree
    assert not any(w.exists() for w in probe.worktrees if w.name != "slot-0")   # removed at the end


@pytest.mark.slow
def test_a_hunt_killed_during_a_setup_builds_that_candidate_again_when_resumed(tmp_path):
    repo = tmp_path / "repo"
    make_bench_repo(repo, [1000.0] * 3 + [900.0] * 3)
    log, building = tmp_path / "builds.log", tmp_path / "building"
    # The third build is killed half-way (kill -9 of the hunt while it runs); the probe refuses a
    # tree without the build's last output.
    setup = (f"git rev-parse HEAD >> {log}; cp speed.py half_built.py; "
             f"if [ $(wc -l < {log}) -eq 3 ]; then echo $$ > {building}; sleep 60; fi; cp speed.py built_speed.py")
    args = [sys.executable, "-m", "regressbisect", "run", "-C", str(repo), "--cmd",
            f"test -e built_speed.py && {sys.executable} bench.py", "--tokens", "1000", "--instrument", "off",
            "--env", f"BENCH_STATE={tmp_path / 'state'}", "--quiet", "--no-busy-check", "--setup", setup,
            "--store", str(tmp_path / "store.sqlite"), "--json", str(tmp_path / "hunt.json"), "HEAD~5", "HEAD"]
    hunt = subprocess.Popen(args, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if building.exists() and building.read_text().strip():
                break
            assert hunt.poll() is None, "the hunt ended before its third build"
            time.sleep(0.1)
        hunt.kill()
        hunt.wait(timeout=30)
    finally:
        if hunt.poll() is None:
            hunt.kill()
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(building.read_text().strip()), signal.SIGKILL)
    half_built = _builds(log)[2]
    assert subprocess.run(args, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True).returncode == 0
    report = json.loads((tmp_path / "hunt.json").read_text())
    assert report["verdict"] == "culprits"
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM skips").fetchone() == (0,)   # no probe on a half build
    builds = _builds(log)
    assert builds.count(half_built) == 2   # killed, then built again: never taken for a build
    assert report["cost"]["builds"] == len(builds) - 3   # the resumed process built what it probed anew
    pool = repo / ".git" / "regressbisect" / "worktrees"
    assert sorted(p.name for p in pool.iterdir()) == ["slot-0"]   # the killed hunt's spares too


def test_failed_setup_skips_with_its_reason_and_a_resumed_hunt_does_not_rerun_it(repo, tmp_path):
    path, shas = repo
    log = tmp_path / "setup.log"
    history = History.open(path)
    command = f"echo run >> {log}; echo compiling; echo 'error: boom.c:3: bad' >&2; exit 3"
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        hunt = _hunt(store)
        source, _ = _source(path, store, pool, command, hunt)
        (draw,) = source.draw_many([Request(Candidate(shas[1]))])
        assert draw.sample is None
        assert draw.skip_reason.startswith("setup failed: exit 3: error: boom.c:3: bad (log: ")
        log_file = Path(draw.skip_reason.split("(log: ")[1].rstrip(")"))
        assert log_file.is_relative_to(path / ".git" / "regressbisect")
        assert "compiling" in log_file.read_text()
        # A resumed hunt (same hunt id, new process state) reuses the stored failure ...
        resumed, setup = _source(path, store, pool, command, hunt)
        (again,) = resumed.draw_many([Request(Candidate(shas[1]), namespace="other")])
        assert again.skip_reason == draw.skip_reason
        assert log.read_text().count("run") == 1
        # ... a new hunt retries (the user may have fixed the build meanwhile).
        fresh, _ = _source(path, store, pool, command, _hunt_new(store))
        fresh.draw_many([Request(Candidate(shas[1]))])
        assert log.read_text().count("run") == 2
        rows = store.setups(SampleKey(history.tree_of(shas[1]), None, "c", "fp"), setup.hash)
    assert [r["ok"] for r in rows] == [False, False]
    assert "error: boom.c:3: bad" in rows[0]["output_tail"]


class NeedsTime:
    """Fake executor: a run that needs `seconds`, stopped at the spec's timeout below that."""

    def __init__(self, seconds: float):
        self.seconds, self.runs = seconds, 0

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        self.runs += 1
        if spec.timeout_s < self.seconds:
            return ProbeOutcome(sample=None, skip_reason=timeout_reason(spec.timeout_s), exit_code=None,
                                wall_seconds=spec.timeout_s)
        return ProbeOutcome(sample=Sample(tok_s=100.0), skip_reason=None, exit_code=0, wall_seconds=self.seconds)


def test_a_resumed_hunt_given_a_longer_timeout_runs_a_timed_out_candidate_again(repo, tmp_path):
    path, shas = repo
    history = History.open(path)
    probe = NeedsTime(45)
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        hunt = _hunt(store)
        source, _ = _source(path, store, pool, "true", hunt, probe=probe, timeout_s=30)
        (draw,) = source.draw_many([Request(Candidate(shas[1]))])
        assert draw.skip_reason == "timeout after 30s" and probe.runs == 1
        # resumed under the same limit: the stored timeout stands (no probe)
        same, _ = _source(path, store, pool, "true", hunt, probe=probe, timeout_s=30)
        assert same.draw_many([Request(Candidate(shas[1]), namespace="b")])[0].skip_reason == "timeout after 30s"
        assert probe.runs == 1
        # resumed with --timeout 60: it runs again, and measures
        longer, _ = _source(path, store, pool, "true", hunt, probe=probe, timeout_s=60)
        assert longer.draw_many([Request(Candidate(shas[1]), namespace="c")])[0].value == 100.0
        assert probe.runs == 2


def test_a_resumed_hunt_given_a_longer_setup_timeout_builds_again(repo, tmp_path):
    path, shas = repo
    history = History.open(path)
    log = tmp_path / "setup.log"
    command = f"echo run >> {log}; sleep 1; echo x = 1 > built.txt"
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        hunt = _hunt(store)
        source, _ = _source(path, store, pool, command, hunt, setup_timeout_s=0.2)
        (draw,) = source.draw_many([Request(Candidate(shas[1]))])
        assert draw.skip_reason.startswith("setup failed: timeout after 0.2s")
        same, _ = _source(path, store, pool, command, hunt, setup_timeout_s=0.2)
        assert same.draw_many([Request(Candidate(shas[1]), namespace="b")])[0].value is None
        assert log.read_text().count("run") == 1
        longer, _ = _source(path, store, pool, command, hunt, setup_timeout_s=30)
        assert longer.draw_many([Request(Candidate(shas[1]), namespace="c")])[0].value == 100.0
        assert log.read_text().count("run") == 2


def test_a_stored_setup_failure_is_reused_even_where_the_tree_has_older_samples(repo, tmp_path):
    path, shas = repo
    log = tmp_path / "setup.log"
    history = History.open(path)
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        key = SampleKey(history.tree_of(shas[1]), None, "c", "fp")
        # A sample of this tree from an earlier hunt (its build worked then).
        store.add_outcome(key, Candidate(shas[1]), ProbeOutcome(Sample(tok_s=90.0), None, 0, 0.1), hunt_id=None)
        source, setup = _source(path, store, pool, f"echo run >> {log}; exit 1", _hunt(store))
        draws = [source.draw_many([Request(Candidate(shas[1]))])[0] for _ in range(3)]
    assert [d.value for d in draws] == [90.0, None, None]
    assert draws[1].skip_reason == draws[2].skip_reason
    assert log.read_text().count("run") == 1 and setup.remembered_failures == 1


def _hunt_new(store: Store) -> int:
    return store.start_hunt(kind="commits", good="a", bad="b2", config_hash="c", env_fingerprint="fp",
                            settings={})


def test_setup_and_probe_run_in_the_slot_venv(repo, tmp_path):
    path, shas = repo
    history = History.open(path)
    probe = BuiltProbe()
    venvs = SlotVenvs(tmp_path / "venvs")
    with Store(tmp_path / "s.sqlite") as store, WorktreePool(history, 1) as pool:
        source, _ = _source(path, store, pool,
                            'echo "$VIRTUAL_ENV|$(command -v python)|$(command -v pip)|$REGRESSBISECT_TOKENS" > built.txt',
                            _hunt(store), probe=probe, venvs=venvs)
        source.draw_many([Request(Candidate(shas[0]))])
        seen = (pool.path(0) / "built.txt").read_text().strip().split("|")
    venv = venvs.path(0)
    assert seen == [str(venv), str(venv / "bin" / "python"), str(venv / "bin" / "pip"), "10"]
    assert probe.envs[0]["VIRTUAL_ENV"] == str(venv)
    assert probe.envs[0]["PATH"].split(os.pathsep)[0] == str(venv / "bin")


def test_config_takes_setup_and_venv_from_pyproject_and_hashes_them_only_when_set():
    plain = build_config({"cmd": "python bench.py"}, {})
    built = build_config({"cmd": "python bench.py", "setup": "make", "venv": True}, {})
    assert built.probe.setup == "make" and built.probe.venv
    assert plain.probe.config_hash() != built.probe.config_hash()
    # Only a set setup step or venv enters the hash: an empty setup is no setup.
    assert plain.probe.config_hash() == build_config({"cmd": "python bench.py", "setup": " "}, {}).probe.config_hash()
    assert build_config({"cmd": "x"}, {"setup": "make"}).probe.setup == "make"


@pytest.mark.slow
def test_an_install_into_slot_0s_venv_is_seen_nowhere_else(tmp_path):
    package = tmp_path / "leakcheck"
    package.mkdir()
    (package / "leakcheck_mod.py").write_text("WHERE = 'slot 0'\n")
    (package / "setup.py").write_text("from setuptools import setup\n"
                                      "setup(name='leakcheck', version='1', py_modules=['leakcheck_mod'])\n")
    venvs = SlotVenvs(tmp_path / "venvs")
    slot0, slot1 = venvs.ensure(0), venvs.ensure(1)
    subprocess.run([str(slot0 / "bin" / "pip"), "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", str(package)], check=True, capture_output=True)
    probe_cmd = "import leakcheck_mod; print(leakcheck_mod.WHERE)"
    ok = subprocess.run([str(slot0 / "bin" / "python"), "-c", probe_cmd], capture_output=True, text=True)
    assert ok.stdout.strip() == "slot 0"
    for python in (slot1 / "bin" / "python", Path(sys.executable)):
        other = subprocess.run([str(python), "-c", probe_cmd], capture_output=True, text=True)
        assert other.returncode != 0 and "ModuleNotFoundError" in other.stderr, python
    # The user's packages stay visible inside the slot (here: typer from the test environment).
    assert subprocess.run([str(slot1 / "bin" / "python"), "-c", "import typer"]).returncode == 0


# -- Must-show (c): a C extension ------------------------------------------------------------

SPEEDS = [1000.0] * 4 + [700.0] * 3   # the C source changes at index 4


@pytest.fixture
def cext(tmp_path):
    """The C-extension repo, and a user environment with the BAD build installed (pip install .
    of HEAD, non-editable): what a user who installed their project has."""
    repo = tmp_path / "repo"
    shas = make_cext_repo(repo, SPEEDS)
    userenv = tmp_path / "userenv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(userenv)],
                   check=True)
    (userenv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
     / "_base.pth").write_text("\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    subprocess.run([str(userenv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--no-index", str(repo)], check=True, capture_output=True)
    before = _snapshot(repo)
    yield repo, shas, userenv
    assert _snapshot(repo) == before  # the user's checkout is only read


def _snapshot(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(repo).parts}


def _cext_args(repo: Path, shas, userenv: Path, tmp_path: Path, name: str, *extra: str) -> list[str]:
    path = f"{userenv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return ["run", "-C", str(repo), "--cmd", "python bench.py", "--tokens", "1000",
            "--env", f"BENCH_STATE={tmp_path / ('state-' + name)}", "--env", f"PATH={path}",
            "--instrument", "off", "--quiet", "--store", str(tmp_path / f"{name}.sqlite"),
            "--json", str(tmp_path / f"{name}.json"), *extra, shas[0], shas[-1]]


@pytest.mark.slow
def test_c_extension_before_and_after_the_setup_step(cext, tmp_path):
    repo, shas, userenv = cext
    # Before: no setup step (and the build check off). Every worktree holds only sources, so
    # `import fastmod` finds the installed BAD build: all candidates measure the same code and
    # the hunt cannot answer.
    code = run_cli(_cext_args(repo, shas, userenv, tmp_path, "before", "--no-build-check"))
    assert code != 0
    if (tmp_path / "before.json").exists():
        assert json.loads((tmp_path / "before.json").read_text())["culprits"] == []
    # After: each candidate is compiled in its worktree before it is measured.
    code = run_cli(_cext_args(repo, shas, userenv, tmp_path, "after",
                              "--setup", "python setup.py build_ext --inplace"))
    assert code == 0
    report = json.loads((tmp_path / "after.json").read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[4]]
    setup = report["measurement"]["setup"]
    assert setup["command"] == "python setup.py build_ext --inplace"
    assert setup["runs"] >= 2 and setup["failures"] == 0 and setup["seconds"] > 0
    with sqlite3.connect(tmp_path / "after.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*), SUM(ok) FROM setups").fetchone() == (setup["runs"],) * 2


@pytest.mark.slow
def test_c_extension_installed_per_candidate_into_slot_venvs(cext, tmp_path):
    repo, shas, userenv = cext
    code = run_cli(_cext_args(repo, shas, userenv, tmp_path, "venv", "--venv", "--setup",
                              "pip install -q --force-reinstall --no-deps --no-build-isolation --no-index ."))
    assert code == 0
    report = json.loads((tmp_path / "venv.json").read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[4]]
    venv_paths = report["measurement"]["venvs"]["paths"]
    assert venv_paths[0].startswith(str(repo / ".git" / "regressbisect" / "venvs"))
    # The user's environment still has its own (BAD) build, untouched by the candidates' installs.
    speed = subprocess.run([str(userenv / "bin" / "python"), "-c", "import fastmod; print(fastmod.speed())"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert speed.stdout.strip() == "700.0"


@pytest.mark.parametrize("with_uv", [True, False])
def test_slot_venv_sees_the_users_packages_with_uv_and_with_plain_venv(tmp_path, monkeypatch, with_uv):
    import shutil

    from regressbisect.probe import venvs as venvs_module

    real_which = shutil.which
    if not with_uv:
        monkeypatch.setattr(venvs_module.shutil, "which", lambda name: None if name == "uv" else real_which(name))
    elif real_which("uv") is None:
        missing("uv is not on PATH (pip install uv)")
    venv = SlotVenvs(tmp_path / "venvs").ensure(0)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys, typer; print(sys.prefix)"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(venv)
    assert subprocess.run([str(venv / "bin" / "pip"), "--version"], capture_output=True).returncode == 0


def test_a_c_extension_without_a_setup_step_stops_before_the_first_probe_naming_the_fix(tmp_path, capsys):
    repo = tmp_path / "repo"
    shas = make_cext_repo(repo, [1000.0, 1000.0, 700.0])
    args = ["run", "-C", str(repo), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000", "--quiet",
            "--env", f"BENCH_STATE={tmp_path / 'state'}", "--instrument", "off",
            "--store", str(tmp_path / "store.sqlite"), shas[0], shas[-1]]
    assert run_cli(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "setup.py (ext_modules=)" in err[0] and '--setup "python setup.py build_ext --inplace"' in err[0]
    assert "--no-build-check" in err[0]
    with sqlite3.connect(tmp_path / "store.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM skips").fetchone()[0] == 0   # no probe ran
    # measured anyway: the probe runs (and fails at GOOD: nothing built `fastmod` there)
    assert run_cli([*args, "--no-build-check"]) == 1
    err = capsys.readouterr().err
    assert "fastmod" in err and "--no-build-check" not in err


@pytest.mark.parametrize("files, where", [
    ({"setup.py": "from setuptools import setup\nsetup(name='x', ext_modules=mods)\n"}, "setup.py (ext_modules=)"),
    ({"setup.py": "from Cython.Build import cythonize\nsetup(ext_modules = cythonize('a.pyx'))\n"},
     "setup.py (ext_modules=)"),
    ({"pyproject.toml": "[build-system]\nrequires = ['scikit-build-core']\n"
                        "build-backend = 'scikit_build_core.build'\n"},
     "pyproject.toml (build-backend 'scikit_build_core.build')"),
    ({"pyproject.toml": "[build-system]\nrequires = ['meson-python']\nbuild-backend = 'mesonpy'\n"},
     "pyproject.toml (build-backend 'mesonpy')"),
    ({"pyproject.toml": "[build-system]\nrequires = ['maturin>=1,<2']\nbuild-backend = 'maturin'\n"},
     "pyproject.toml (build-backend 'maturin')"),
    ({"pyproject.toml": "[build-system]\nrequires = ['setuptools', 'setuptools_rust>=1.5']\n"
                        "build-backend = 'setuptools.build_meta'\n"},
     "pyproject.toml (build requires 'setuptools-rust')"),
    ({"pyproject.toml": "[build-system]\nrequires = ['setuptools>=74']\n"
                        "[tool.setuptools]\next-modules = [{name = 'a', sources = ['a.c']}]\n"},
     "pyproject.toml ([tool.setuptools] ext-modules)"),
    ({"setup.cfg": "[options]\nsetup_requires =\n    Cython>=3\n"}, "setup.cfg (setup_requires 'cython')"),
])
def test_declared_extensions_are_found_in_each_kind_of_build_file(tmp_path, files, where):
    from regressbisect.probe.extensions import declared_extensions

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert declared_extensions(tmp_path).where == where


def test_a_pure_python_project_declares_no_extensions(tmp_path):
    from regressbisect.probe.extensions import declared_extensions

    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='x', py_modules=['x'])\n")
    (tmp_path / "pyproject.toml").write_text("[build-system]\nrequires = ['hatchling']\n"
                                             "build-backend = 'hatchling.build'\n")
    assert declared_extensions(tmp_path) is None
    assert declared_extensions(tmp_path / "missing") is None


SELF_EDITING_BENCH = '''\
import json, os, random
FACTOR = @FACTOR@
value = 1000.0 / FACTOR * random.gauss(1.0, 0.01)
tokens = int(os.environ["REGRESSBISECT_TOKENS"])
print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": tokens / value, "tok_s": value}))
# Then it rewrites a tracked file of its worktree (as a job rewriting its config, or a cache file).
source = open(__file__).read()
open(__file__, "w").write(source.replace("FACTOR = " + "1.25", "FACTOR = " + "1.0"))
'''


def _self_editing_repo(path: Path) -> list[str]:
    """9 commits; bench.py is 20% slower (FACTOR = 1.25) from commit 5 on, and every probe of it
    resets FACTOR to 1.0 in its worktree after measuring."""
    commits = [{"bench.py": SELF_EDITING_BENCH.replace("@FACTOR@", "1.0"), ".gitignore": "built.txt\n"}]
    for i in range(1, 9):
        commits.append({"bench.py": SELF_EDITING_BENCH.replace("@FACTOR@", "1.25")} if i == 5
                       else {f"notes/n{i}.txt": f"{i}\n"})
    return make_repo(path, commits)


@pytest.mark.parametrize("extra", [[], ["--slots", "2"], ["--overlap", "2"], ["--venv"]],
                         ids=["one-slot", "two-slots", "overlap", "venv"])
def test_a_probe_that_edits_a_tracked_file_finds_it_restored_before_its_next_probe(tmp_path, capsys, extra):
    repo = tmp_path / "repo"
    shas = _self_editing_repo(repo)
    code = run_cli(["run", "-C", str(repo), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
                    "--instrument", "off", "--no-busy-check", "--setup", "git rev-parse HEAD > built.txt",
                    "--store", str(tmp_path / "store.sqlite"), "--json", str(tmp_path / "hunt.json"),
                    *extra, "HEAD~8", "HEAD"])
    out, err = capsys.readouterr()
    report = json.loads((tmp_path / "hunt.json").read_text())
    assert (code, report["verdict"]) == (0, "culprits"), out
    assert [c["commit"] for c in report["culprits"]] == [shas[5]]
    assert report["cost"]["build_reuses"] > 0   # the edited worktrees were reused, restored
    said = [line for line in err.splitlines() if "modified tracked files in its worktree" in line]
    assert len(said) == 1 and "(bench.py)" in said[0] and "restored before every probe" in said[0]
    assert report["measurement"]["setup"]["tracked_files_restored"]["files"] == ["bench.py"]


BUILT_SPEED_BENCH = '''\
import json, os, random
value = float(open("built_speed.txt").read()) * random.gauss(1.0, 0.01)
tokens = int(os.environ["REGRESSBISECT_TOKENS"])
print("@regressbisect " + json.dumps({"tokens": tokens, "seconds": tokens / value, "tok_s": value}))
'''


def test_a_setup_script_outside_the_repository_edited_between_runs_is_measured_again(tmp_path, capsys):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"bench.py": BUILT_SPEED_BENCH, ".gitignore": "built_speed.txt\n"}]
                     + [{f"notes/n{i}.txt": f"{i}\n"} for i in range(1, 9)])
    build = tmp_path / "build.sh"   # the build script, kept outside the repository

    def slow_from(commit: str) -> None:
        build.write_text(f"if git merge-base --is-ancestor {commit} HEAD; then echo 800; else echo 1000; fi"
                         f" > built_speed.txt\n")

    def hunt(name: str) -> tuple[int, dict, list[str]]:
        code = run_cli(["run", "-C", str(repo), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
                        "--instrument", "off", "--no-busy-check", "--quiet", "--setup", f"sh {build}",
                        "--store", str(tmp_path / "store.sqlite"), "--json", str(tmp_path / f"{name}.json"),
                        "HEAD~8", "HEAD"])
        return code, json.loads((tmp_path / f"{name}.json").read_text()), capsys.readouterr().out.splitlines()

    slow_from(shas[5])
    code, first, out = hunt("first")
    assert (code, [c["commit"] for c in first["culprits"]]) == ((0, [shas[5]]))
    assert not first.get("from_store_only") and not out[0].startswith("every sample from the store")
    slow_from(shas[3])   # the build script changed: every build, so every sample, is another
    code, second, out = hunt("second")
    assert second["probes"] > 0 and second["measurement"]["setup"]["runs"] > 0
    assert (code, [c["commit"] for c in second["culprits"]]) == (0, [shas[3]])
    # The same again: answered from the store, and its first line says so.
    code, third, out = hunt("third")
    assert (code, [c["commit"] for c in third["culprits"]]) == (0, [shas[3]])
    assert third["probes"] == 0 and third["from_store_only"] is True
    assert out[0] == (f"every sample from the store ({third['cached_samples']}): nothing was run; "
                      f"--store NEW_FILE to measure again")
