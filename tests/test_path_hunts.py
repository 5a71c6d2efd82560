"""`regressbisect run GOOD BAD -- PATHS`: only the commits touching PATHS are candidates (as
`git bisect start BAD GOOD -- PATHS`); the others are reported as not measured, never blamed.
`hunks -- PATHS` searches only the hunks under PATHS (the others in every candidate), and
`nightly -- PATHS` hands PATHS to each change point's hunt."""
from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

from regressbisect.config import build_config
from regressbisect.errors import ExitCode
from regressbisect.git.history import History
from regressbisect.hunts.commits import CommitHunt
from regressbisect.hunts.common import continue_command
from regressbisect.hunts.hunks import HunkHunt
from regressbisect.render import render_summary
from regressbisect.samples import Candidate, ProbeOutcome, Sample
from regressbisect.testing.benchrepo import BENCH, SpeedProbe
from regressbisect.testing.gitrepo import make_repo, snapshot_checkout, write_files
from regressbisect.testing.nightly import FakeMachine, nightly_for
from tests.cli import run_cli

pytestmark = pytest.mark.slow

NOT_MEASURED_REASON = "not measured: touches none of PATHS"


def _history(path: Path) -> tuple[list[str], set[int]]:
    """12 commits; 2, 5, 7 and 10 touch pkg/, and 7 (with speed.py) is the slow step."""
    specs: list[dict] = [{"bench.py": BENCH, "speed.py": "SPEED = 1000.0\n", "README.md": "r\n",
                          "pkg/__init__.py": ""}]
    touching = {2, 5, 7, 10}
    for i in range(1, 12):
        if i in touching:
            files = {f"pkg/m{i}.py": f"X = {i}\n"}
            if i == 7:
                files["speed.py"] = "SPEED = 900.0\n"
        else:
            files = {f"docs/d{i}.md": f"docs {i}\n"} if i % 2 else {f"notes/n{i}.txt": f"note {i}\n"}
        specs.append(files)
    return make_repo(path, specs, [f"commit {i}" for i in range(12)]), touching


def test_a_path_limited_hunt_measures_only_the_commits_touching_paths(tmp_path, capsys, fake_probes):
    shas, touching = _history(tmp_path / "repo")
    out = tmp_path / "hunt.json"
    code = run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", f"{sys.executable} bench.py",
                    "--tokens", "1000", "--env", f"BENCH_STATE={tmp_path / 'state'}", "--quiet",
                    "--instrument", "off", "--json", str(out), shas[0], shas[-1], "--", "pkg"])
    assert code == 0
    report = json.loads(out.read_text())
    assert [c["commit"] for c in report["culprits"]] == [shas[7]]
    assert report["paths"] == ["pkg"] and report["range_length"] == 12
    measured = {shas[0], shas[-1]} | {shas[i] for i in touching}
    assert {c["commit"] for c in report["candidates"]} <= measured
    assert all(c["commit"] in measured for c in report["candidates"] if c["n"] > 0)
    skipped = [shas[i] for i in range(1, 11) if i not in touching]
    assert [c["commit"] for c in report["not_measured"]] == skipped
    assert {c["reason"] for c in report["not_measured"]} == {NOT_MEASURED_REASON}
    before = {c["commit"]: c for c in report["not_measured"]}[shas[6]]   # between GOOD's level and the culprit
    assert before["same_as"] == shas[5] and before["verdict"] != "bad"
    printed = capsys.readouterr().out
    assert "6 commits not measured: they touch none of PATHS (pkg)" in printed


def test_a_docs_only_commit_is_never_measured(tmp_path):
    shas = make_repo(tmp_path / "repo", [
        {"speed.py": "SPEED = 1000.0\n", "pkg/core.py": "A = 1\n"},
        {"docs/guide.md": "how to\n"},
        {"pkg/core.py": "A = 2\n", "speed.py": "SPEED = 900.0\n"},
        {"docs/guide.md": "how to, again\n"},
        {"pkg/core.py": "A = 3\n"},
    ])
    probe = SpeedProbe(noise=0.01)
    config = build_config({}, {"cmd": "python bench.py", "tokens": 1000, "instrument": "off"})
    hunt = CommitHunt(History.open(tmp_path / "repo"), shas[0], shas[-1], config, paths=["pkg"],
                      store_path=tmp_path / "store.sqlite", probe_runner=probe)
    assert [c.sha for c in hunt.commits] == [shas[0], shas[2], shas[4]]
    report = hunt.run().report
    assert probe.count.get(shas[1], 0) == probe.count.get(shas[3], 0) == 0
    assert probe.count[shas[2]] > 0
    assert [c["commit"] for c in report["culprits"]] == [shas[2]]
    assert [(c["commit"], c["reason"]) for c in report["not_measured"]] == [
        (shas[1], NOT_MEASURED_REASON), (shas[3], NOT_MEASURED_REASON)]
    assert "2 commits not measured: they touch none of PATHS (pkg)" in render_summary(report)


def test_paths_no_commit_touches_are_one_line_and_exit_1(tmp_path, capsys, fake_probes):
    shas, _ = _history(tmp_path / "repo")
    code = run_cli(["run", "-C", str(tmp_path / "repo"), "--cmd", f"{sys.executable} bench.py",
                    "--env", f"BENCH_STATE={tmp_path / 'state'}", "--quiet", shas[0], shas[-1],
                    "--", "nowhere", "src/missing.py"])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert "no commit between GOOD and BAD touches PATHS (nowhere src/missing.py)" in err
    assert len(err.splitlines()) == 1
    assert fake_probes.runs == 0


def test_the_continue_command_keeps_the_paths():
    line = continue_command(["regressbisect", "run", "--max-samples", "40"], 40, ["a" * 40, "b" * 40],
                            paths=["pkg", "src/x.py"])
    assert line.endswith(f"--max-samples 80 {'a' * 40} {'b' * 40} -- pkg src/x.py")


# -- hunks -- PATHS ----------------------------------------------------------------------------


class _TreeProbe:
    """tok/s from the candidate worktree's speed.py (no process), and what each probe saw of
    docs/guide.md: whether the hunk outside PATHS was in its candidate."""

    def __init__(self):
        self.docs: list[str] = []
        self.speeds: list[float] = []

    def __call__(self, spec, worktree: Path, extra_env=None) -> ProbeOutcome:
        speed = float((worktree / "speed.py").read_text().split("=")[1])
        self.docs.append((worktree / "docs" / "guide.md").read_text())
        self.speeds.append(speed)
        value = speed * math.exp(random.Random(f"{speed}-{len(self.speeds)}").gauss(0.0, 0.01))
        return ProbeOutcome(sample=Sample(tok_s=value, tokens=1000, seconds=1000 / value),
                            skip_reason=None, exit_code=0, wall_seconds=0.01)


def _dirty_repo(path: Path) -> None:
    """BASE: speed.py, pkg/core.py, docs/guide.md; the work tree slows speed.py down by 10%,
    changes pkg/core.py harmlessly and edits docs/guide.md (the docs-only hunk)."""
    make_repo(path, [{"speed.py": "SPEED = 1000.0\n", "pkg/core.py": "A = 1\n", "docs/guide.md": "how to\n"}])
    write_files(path, {"speed.py": "SPEED = 900.0\n", "pkg/core.py": "A = 2\n", "docs/guide.md": "how to, again\n"})


def test_a_hunk_hunt_limited_to_paths_names_the_slow_hunk_and_never_measures_the_docs_hunk(tmp_path):
    _dirty_repo(tmp_path / "repo")
    before = snapshot_checkout(tmp_path / "repo")
    probe = _TreeProbe()
    config = build_config({}, {"cmd": "python bench.py", "tokens": 1000, "instrument": "off"})
    hunt = HunkHunt(History.open(tmp_path / "repo"), config, paths=["pkg", "speed.py"],
                    store_path=tmp_path / "store.sqlite", probe_runner=probe)
    assert sorted(h.file for h in hunt.hunks) == ["pkg/core.py", "speed.py"]
    report = hunt.run().report
    # the docs hunk is in every candidate, BASE's side included: never searched, never left out
    assert probe.docs and set(probe.docs) == {"how to, again\n"}
    assert 1000.0 in probe.speeds and 900.0 in probe.speeds
    assert [[h["file"] for h in c["hunks"]] for c in report["culprits"]] == [["speed.py"]]
    assert report["paths"] == ["pkg", "speed.py"] and report["hunk_count"] == 2
    assert [(h["file"], h["reason"]) for h in report["not_measured"]] == [("docs/guide.md", NOT_MEASURED_REASON)]
    assert "docs/guide.md" not in report["files"]
    assert ("1 hunk not measured (in every candidate): it touches none of PATHS (pkg speed.py): docs/guide.md"
            in render_summary(report))
    assert snapshot_checkout(tmp_path / "repo") == before


def test_no_hunk_touching_paths_is_one_line_and_exit_1(tmp_path, capsys, fake_probes):
    _dirty_repo(tmp_path / "repo")
    code = run_cli(["hunks", "-C", str(tmp_path / "repo"), "--cmd", f"{sys.executable} bench.py", "--quiet",
                    "--", "src", "nowhere.py"])
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert "no uncommitted hunk touches PATHS (src nowhere.py)" in err
    assert len(err.splitlines()) == 1
    assert fake_probes.runs == 0


def test_an_undecided_hunk_hunts_continue_command_keeps_the_paths(tmp_path):
    _dirty_repo(tmp_path / "repo")
    config = build_config({}, {"cmd": "python bench.py", "tokens": 1000, "instrument": "off", "max_samples": 4})
    hunt = HunkHunt(History.open(tmp_path / "repo"), config, paths=["speed.py"], store_path=tmp_path / "s.sqlite",
                    probe_runner=_TreeProbe(), command_line=["regressbisect", "hunks", "--max-samples", "4"])
    assert hunt.continue_line() == f"regressbisect hunks --max-samples 8 --base {hunt.base} -- speed.py"


# -- nightly -- PATHS ----------------------------------------------------------------------------


def test_a_nightly_limited_to_paths_hunts_only_the_commits_touching_them(tmp_path):
    """22 commits; 11 touches pkg/ and slows speed.py down by 10%, the others touch docs/ or
    pkg/ harmlessly. A night on each commit but 10 and 11: the change point lies between 9 and 12,
    whose hunt measures 11 and not 10 (docs only)."""
    specs: list[dict] = [{"speed.py": "SPEED = 1000.0\n", "pkg/__init__.py": ""}]
    for i in range(1, 22):
        if i == 11:
            specs.append({"pkg/m11.py": "X = 11\n", "speed.py": "SPEED = 900.0\n"})
        else:
            specs.append({f"pkg/m{i}.py": f"X = {i}\n"} if i % 4 == 0 else {f"docs/d{i}.md": f"docs {i}\n"})
    shas = make_repo(tmp_path / "repo", specs, [f"commit {i}" for i in range(22)])
    nightly = nightly_for(tmp_path / "repo", FakeMachine(seed=2), tmp_path, reports=False, paths=("pkg",))
    outcomes = [nightly.run(shas[i]) for i in range(22) if i not in (10, 11)]
    hunted = [h for o in outcomes for h in o.report["hunts"] if h["first_reported"]]
    assert hunted, [o.report["change_points"] for o in outcomes]
    first = hunted[0]
    assert (first["good"], first["bad"]) == (shas[9], shas[12])
    assert [c["commit"] for c in first["not_measured"]] == [shas[10]]
    # the hunt measured 11, which then joins the series: its point moves to 9..11, hunted again
    for hunt in hunted:
        assert hunt["paths"] == ["pkg"]
        assert [c["commit"] for c in hunt["culprits"]] == [shas[11]]
        assert shas[10] not in {c["commit"] for c in hunt["candidates"]}
        assert [c["reason"] for c in hunt["not_measured"]] == [NOT_MEASURED_REASON]
    assert outcomes[-1].report["settings"]["paths"] == ["pkg"]
    assert any(o.exit_code == ExitCode.NIGHTLY_REGRESSION for o in outcomes)


def test_a_commits_hunks_under_paths_keep_the_commit_as_base_plus_every_hunk(tmp_path):
    shas = make_repo(tmp_path / "repo", [
        {"speed.py": "SPEED = 1000.0\n", "pkg/core.py": "A = 1\n", "docs/guide.md": "how to\n"},
        {"speed.py": "SPEED = 900.0\n", "pkg/core.py": "A = 2\n", "docs/guide.md": "how to, again\n"},
    ])
    config = build_config({}, {"cmd": "python bench.py", "tokens": 1000, "instrument": "off"})
    hunt = HunkHunt(History.open(tmp_path / "repo"), config, commit=shas[1], paths=["pkg/core.py", "speed.py"],
                    store_path=tmp_path / "store.sqlite", probe_runner=_TreeProbe())
    docs = [h.id for h in hunt.not_measured]
    assert [h.file for h in hunt.not_measured] == ["docs/guide.md"]
    assert hunt.candidate(hunt.by_id) == Candidate(shas[1])          # the commit itself, its samples shared
    assert hunt.candidate(()) == Candidate(shas[0], tuple(docs))     # BASE + the hunk outside PATHS
