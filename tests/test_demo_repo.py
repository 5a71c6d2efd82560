"""The demo repository: scripted history, standalone trainer, counters of a culprit, dirty tree."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import regressbisect
from regressbisect.workload.demo import DemoRepo, add_multirank_branch, build_demo_repo
from regressbisect.errors import UserError

SHIM_DIR = Path(regressbisect.__file__).parent / "probe" / "shim"
TOKENS = 96  # two tiny steps: the tests check structure and counters, not speed


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRepo:
    return build_demo_repo(tmp_path_factory.mktemp("demo") / "repo", tokens=TOKENS)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_history_is_scripted_and_deterministic(demo: DemoRepo, tmp_path: Path) -> None:
    shas = _git(demo.path, "rev-list", "--first-parent", "HEAD").split()
    assert len(shas) >= 22 and shas[::-1] == [sha for sha, _ in demo.commits]
    last_20 = set(shas[:20])
    assert len(demo.culprits) >= 2 and all(c.sha in last_20 for c in demo.culprits)
    assert demo.more_lm_head_not_slower in last_20
    again = build_demo_repo(tmp_path / "again", tokens=TOKENS)
    assert again.commits == demo.commits  # fixed dates and identities: same shas


def test_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "occupied").mkdir()
    (tmp_path / "occupied" / "file.txt").write_text("mine")
    with pytest.raises(UserError):
        build_demo_repo(tmp_path / "occupied")
    assert (tmp_path / "occupied" / "file.txt").read_text() == "mine"


def test_trainer_is_standalone_and_configured(demo: DemoRepo) -> None:
    config = tomllib.loads((demo.path / "pyproject.toml").read_text())["tool"]["regressbisect"]
    assert "{tokens}" in config["cmd"] and config["tokens"] == TOKENS and config["timeout"] > 0
    for source in (demo.path / "trainer").glob("*.py"):
        text = source.read_text()
        assert "import regressbisect" not in text and "from regressbisect" not in text, source


def test_the_h200_demo_overlaps_three_probes_and_the_cpu_demo_none(demo: DemoRepo, tmp_path: Path) -> None:
    """Three h200 probes fit on one H200 (docs/cost.md); on a CPU machine overlap saves nothing."""
    h200 = build_demo_repo(tmp_path / "h200", preset="h200", tokens=TOKENS)
    table = tomllib.loads((h200.path / "pyproject.toml").read_text())["tool"]["regressbisect"]
    assert table["overlap"] == 3 and "--preset h200" in table["cmd"]
    tiny = tomllib.loads((demo.path / "pyproject.toml").read_text())["tool"]["regressbisect"]
    assert "overlap" not in tiny


def test_working_tree_is_dirty_over_three_files(demo: DemoRepo) -> None:
    changed = [line[3:] for line in _git(demo.path, "status", "--porcelain").splitlines()]
    assert len(changed) >= 3 and set(changed) == set(demo.uncommitted.files)
    assert demo.uncommitted.added >= 200 and demo.uncommitted.regressing_hunks


def _export(demo: DemoRepo, sha: str, into: Path) -> Path:
    into.mkdir()
    archive = subprocess.run(["git", "archive", sha], cwd=demo.path, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def _probe_all(demo: DemoRepo, checkouts: list[Path]) -> list[tuple[dict, list[dict]]]:
    """Run the [tool.regressbisect] command in each checkout, two at a time, with the shim."""
    config = tomllib.loads((demo.path / "pyproject.toml").read_text())["tool"]["regressbisect"]
    argv = shlex.split(config["cmd"].format(tokens=config["tokens"]))
    argv = [sys.executable if a == "python" else a for a in argv] + ["--warmup", "1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGRESSBISECT_")}
    env.update(PYTHONPATH=str(SHIM_DIR), REGRESSBISECT_INSTRUMENT="1")
    results = []
    for batch in (checkouts[i:i + 2] for i in range(0, len(checkouts), 2)):
        procs = [subprocess.Popen(argv, cwd=c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for c in batch]
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-2000:]
            protocol = [json.loads(l.split(" ", 1)[1]) for l in out.splitlines()
                        if l.startswith("@regressbisect ")]
            counters = [json.loads(l.split(" ", 1)[1]) for l in out.splitlines()
                        if l.startswith("@regressbisect-counters ")]
            assert len(protocol) == 1 and len(counters) == 1
            results.append((protocol[0], counters[0]["iters"]))
    return results


def _per_iter(rows: list[dict], key: str) -> set:
    return {row[key] for row in rows}


@pytest.mark.slow
def test_endpoints_run_and_culprit_counters_change(demo: DemoRepo, tmp_path: Path) -> None:
    shas = [sha for sha, _ in demo.commits]
    culprit = demo.sha_of("Build the attention mask in the drafter layer loop")
    parent = shas[shas.index(culprit) - 1]
    checkouts = [_export(demo, sha, tmp_path / name) for name, sha in
                 (("head_20", shas[-21]), ("head", shas[-1]), ("parent", parent), ("culprit", culprit))]
    (old, old_rows), (new, new_rows), (before, before_rows), (after, after_rows) = _probe_all(demo, checkouts)
    for record in (old, new, before, after):
        assert record["tok_s"] > 0 and record["tokens"] == TOKENS and len(record["iters"]) == 2
    # The scripted culprit: one create_block_mask per step becomes one per drafter layer (2).
    assert _per_iter(before_rows, "create_block_mask_calls") == {1}
    assert _per_iter(after_rows, "create_block_mask_calls") == {2}
    assert _per_iter(after["iters"], "create_block_mask_calls") == {2}
    # Between the endpoints: metrics every step, lm_head chunk 8 -> 1: 4 (6) -> 48 calls per step.
    assert _per_iter(old_rows, "lm_head_calls") <= {4, 6}
    assert _per_iter(new_rows, "lm_head_calls") == {48}   # 16 chunks * 2 + 16 metric calls


@pytest.mark.slow   # a torchrun launcher and two training ranks
def test_multirank_branch_adds_a_receiver_sync_that_runs_under_torchrun(tmp_path: Path) -> None:
    demo = build_demo_repo(tmp_path / "demo", preset="tiny")
    culprit = add_multirank_branch(demo)
    root = demo.path
    assert _git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == "multirank"
    assert _git(root, "rev-parse", "HEAD~4") == _git(root, "rev-parse", f"{demo.culprits[0].sha}~1")
    assert _git(root, "rev-parse", "HEAD~2").strip() == culprit
    assert _git(root, "diff", "--name-only", f"{culprit}~1", culprit).split() == ["trainer/transport.py"]
    assert ".item()" in _git(root, "show", culprit)
    assert _git(root, "status", "--porcelain").strip() == ""          # the demo's diff is not carried over
    # the check runs in Receiver, i.e. only with separate target and drafter ranks: run them
    done = subprocess.run([sys.executable, "-m", "trainer", "--preset", "tiny", "--nproc", "2", "--tokens", "96"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.split("@regressbisect ", 1)[1].splitlines()[0])["tokens"] == 96


def test_the_demo_command_builds_and_lists_the_history(tmp_path):
    """`regressbisect demo DIR --build-only --history`: the one command line of the demo builds
    the repository and lists each commit with its scripted role and the diff's size."""
    from typer.testing import CliRunner

    from regressbisect.cli import app
    from regressbisect.workload.demo import history_lines

    result = CliRunner().invoke(app, ["demo", str(tmp_path / "cli"), "--build-only", "--history"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"built {tmp_path / 'cli'}")
    demo = build_demo_repo(tmp_path / "direct")  # the same script gives the same shas
    assert lines[1:] == history_lines(demo)
    assert sum("<- culprit:" in line for line in lines) == len(demo.culprits) >= 1
    assert lines[-1].startswith(f"uncommitted: {len(demo.uncommitted.files)} files")
