"""Every bad input of docs/design.md ("Bad input") through the real CLI: one line on stderr, its exit code, and the
user's checkout byte-identical afterwards."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import run_cli
from regressbisect.git.history import History
from regressbisect.git.worktrees import WorktreePool
from tests.benchrepo import make_bench_repo
from tests.gitrepo import make_dirty, snapshot_checkout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3 + [900.0] * 3)
    make_dirty(path, tracked="bench.py", staged="README.md")
    return path, shas


def _one_line_error(capsys, code: int, expected_code: int, *words: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == expected_code, err
    assert len(err) == 1, err
    for word in words:
        assert word in err[0], err[0]
    return err[0]


@pytest.mark.parametrize("good, bad, words", [
    ("no-such-ref", "HEAD", ["unknown revision", "no-such-ref"]),
    ("HEAD", "HEAD~3", ["not an ancestor", "swap"]),
    ("HEAD", "HEAD", ["same commit"]),
])
def test_bad_refs(repo, capsys, good, bad, words):
    path, _ = repo
    before = snapshot_checkout(path)
    code = run_cli(["run", "-C", str(path), "--cmd", "python bench.py", good, bad])
    _one_line_error(capsys, code, 1, *words)
    assert snapshot_checkout(path) == before


def test_not_a_git_repository(tmp_path, capsys):
    code = run_cli(["run", "-C", str(tmp_path), "--cmd", "x", "HEAD~1", "HEAD"])
    _one_line_error(capsys, code, 1, "not a git repository")


def test_no_command_anywhere(repo, capsys):
    path, shas = repo
    code = run_cli(["run", "-C", str(path), shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "--cmd")


def test_a_hunt_already_running_on_this_repo(repo, capsys):
    path, shas = repo
    with WorktreePool(History.open(path), 1):
        code = run_cli(["run", "-C", str(path), "--cmd", "python bench.py", shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "another regressbisect hunt is running")


def test_probe_printing_no_metric_at_an_endpoint(repo, capsys):
    path, shas = repo
    code = run_cli(["run", "-C", str(path), "--cmd", "echo hello", "--instrument", "off", "--quiet",
                    shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "GOOD", "no metric")


def test_probe_timing_out_at_an_endpoint(repo, capsys):
    path, shas = repo
    code = run_cli(["run", "-C", str(path), "--cmd", "sleep 30", "--timeout", "0.5", "--instrument", "off",
                    "--quiet", shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "timeout")


def test_hunks_without_uncommitted_changes(tmp_path, capsys):
    path = tmp_path / "clean"
    make_bench_repo(path, [1000.0] * 2)
    code = run_cli(["hunks", "-C", str(path), "--cmd", "python bench.py"])
    _one_line_error(capsys, code, 1, "no uncommitted changes")


def test_corrupt_store(repo, capsys, tmp_path):
    path, shas = repo
    store = tmp_path / "store.sqlite"
    store.write_bytes(b"this is not sqlite at all" * 100)
    code = run_cli(["run", "-C", str(path), "--cmd", "python bench.py", "--store", str(store),
                    shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "not a valid regressbisect store")
    assert store.read_bytes() == b"this is not sqlite at all" * 100   # never "repaired" away


def test_bad_flag_value(repo, capsys):
    path, shas = repo
    code = run_cli(["run", "-C", str(path), "--cmd", "x", "--direction", "up", shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "--direction")


@pytest.mark.parametrize("command", ["run", "hunks", "nightly"])
@pytest.mark.parametrize("regex, words", [
    ("([0-9", "not a valid regex"),
    ("[0-9.]+ tok/s", "exactly one group"),
    ("([0-9.]+) (tok)/s", "exactly one group"),
])
def test_invalid_metric_regex_is_one_line_before_any_worktree(repo, capsys, command, regex, words):
    path, shas = repo
    before = snapshot_checkout(path)
    ends = [shas[0], shas[-1]] if command == "run" else []
    code = run_cli([command, "-C", str(path), "--cmd", "python bench.py", "--metric-regex", regex, *ends])
    _one_line_error(capsys, code, 1, "--metric-regex", words)
    assert not (path / ".git" / "regressbisect").exists()   # no store, no worktree pool
    assert snapshot_checkout(path) == before


def test_invalid_metric_regex_in_pyproject_is_one_line(tmp_path, capsys):
    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3, pyproject={"metric_regex": "(tok/s"})
    code = run_cli(["run", "-C", str(path), "--cmd", "python bench.py", shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "metric_regex", "pyproject.toml", "not a valid regex")
    assert not (path / ".git" / "regressbisect").exists()


def test_slots_beyond_the_candidates_are_named_in_a_warning(repo, capsys):
    path, shas = repo
    code = run_cli(["run", "-C", str(path), "--cmd", "exit 3", "--slots", "50", shas[0], shas[-1]])
    err = capsys.readouterr().err
    assert code == 1   # the probe fails at GOOD, after the warning
    assert "warning: --slots 50 exceeds the 6 candidates of the range" in err and "(use --slots" in err


def test_slots_beyond_the_cores_of_a_machine_without_gpus_are_named_in_a_warning(capsys):
    from regressbisect.config import build_config
    from regressbisect.hunts.common import warn_unusable_slots

    config = build_config({"cmd": "x"}, {"slots": 9})
    warn_unusable_slots(config, candidates=24, gpu_count=0, cores=2)
    assert "warning: --slots 9 runs up to 9 CPU probes at once on 2 cores" in capsys.readouterr().err
    for quiet in (dict(gpu_count=8, cores=2), dict(gpu_count=0, cores=16)):   # GPU slots; enough cores
        warn_unusable_slots(config, candidates=24, **quiet)
        assert capsys.readouterr().err == ""


def test_help_does_not_import_torch():
    code = ("import sys; from regressbisect.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "assert 'pandas' not in sys.modules, 'pandas imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "run" in proc.stdout and "hunks" in proc.stdout
