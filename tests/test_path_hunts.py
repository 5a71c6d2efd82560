"""`regressbisect run GOOD BAD -- PATHS`: only the commits touching PATHS are candidates (as
`git bisect start BAD GOOD -- PATHS`); the others are reported as not measured, never blamed."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from regressbisect.config import build_config
from regressbisect.git.history import History
from regressbisect.hunts.commits import CommitHunt
from regressbisect.hunts.common import continue_command
from regressbisect.render import render_summary
from regressbisect.testing.benchrepo import BENCH, SpeedProbe
from regressbisect.testing.gitrepo import make_repo
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
