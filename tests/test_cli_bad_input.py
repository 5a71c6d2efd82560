"""Every bad input of docs/design.md ("Bad input") through the real CLI: one line on stderr, its exit code, and the
user's checkout byte-identical afterwards."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import run_cli
from regressbisect.git.history import History
from regressbisect.git.worktrees import WorktreePool
from regressbisect.testing.benchrepo import make_bench_repo
from regressbisect.testing.gitrepo import make_dirty, make_repo, snapshot_checkout

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


def test_a_decimal_comma_in_the_probes_output_is_one_line_not_a_wrong_answer(tmp_path, capsys):
    # A real 15% slow-down printed with decimal commas read as 953 -> 9805 tok/s: "+8.4%, not reproduced".
    path = tmp_path / "comma"
    shas = make_repo(path, [{"rate.txt": "step 9 | 14.095,3 tok/s\n"}, {"rate.txt": "step 9 | 11.980,5 tok/s\n"}])
    code = run_cli(["run", "-C", str(path), "--cmd", "cat rate.txt", "--instrument", "off", "--quiet",
                    shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "'14.095,3' looks like a decimal comma: pass --metric-regex")


def test_a_rate_beyond_any_machine_is_a_skip_with_its_reason_and_no_numpy_warning(repo, capsys):
    path, shas = repo
    code = run_cli(["run", "-C", str(path), "--cmd", "echo '1e253 tok/s'", "--instrument", "off", "--quiet",
                    shas[0], shas[-1]])
    line = _one_line_error(capsys, code, 1, "GOOD", "'1e253' is beyond any machine")
    assert "Warning" not in line and "overflow" not in line


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


def test_a_sample_cap_below_the_naming_floor_is_named_in_a_warning(repo, capsys):
    path, shas = repo
    code = run_cli(["run", "-C", str(path), "--cmd", "exit 3", "--max-samples", "6", shas[0], shas[-1]])
    err = capsys.readouterr().err
    assert code == 1   # the probe fails at GOOD, after the warning
    assert "warning: --max-samples 6 is below the 7 samples" in err and "(use --max-samples 7 or --stall-share 0" in err
    for enough in (["--max-samples", "7"], ["--max-samples", "6", "--stall-share", "0"]):
        run_cli(["run", "-C", str(path), "--cmd", "exit 3", *enough, shas[0], shas[-1]])
        assert "--max-samples" not in capsys.readouterr().err


def test_slots_beyond_the_cores_of_a_machine_without_gpus_are_named_in_a_warning(capsys):
    from regressbisect.config import build_config
    from regressbisect.hunts.common import warn_unusable_slots

    config = build_config({"cmd": "x"}, {"slots": 9})
    warn_unusable_slots(config, candidates=24, gpu_count=0, cores=2)
    err = capsys.readouterr().err
    assert "warning: --slots 9 runs up to 9 CPU probes at once on 2 cores" in err
    assert "never used, and stops the hunt" in err
    # Without the busy check nothing keeps such samples apart: the warning must not say they are
    # unused (every one of them is evidence, measured at a share of a core).
    warn_unusable_slots(build_config({"cmd": "x"}, {"slots": 9, "busy_check": False}), candidates=24,
                        gpu_count=0, cores=2)
    err = capsys.readouterr().err
    assert "--no-busy-check" in err and "every such sample is used" in err and "not used" not in err
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


# -- output paths: checked before the first probe, and a failed write at the end loses nothing --

def _output_cases(tmp_path: Path) -> dict[str, Path]:
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    a_dir = tmp_path / "a-dir"
    a_dir.mkdir()
    return {"a directory": a_dir, "under a file": a_file / "out.json", "a file": a_file}


@pytest.mark.parametrize("command, flag, case", [
    ("run", "--json", "a directory"),
    ("run", "--json", "under a file"),
    ("hunks", "--json", "a directory"),
    ("nightly", "--json", "under a file"),
    ("nightly", "--report-dir", "a file"),
    ("nightly", "--report-dir", "under a file"),
])
def test_an_output_path_that_cannot_be_written_stops_before_the_first_probe(repo, tmp_path, capsys,
                                                                             command, flag, case):
    path, shas = repo
    target = _output_cases(tmp_path)[case]
    marker = tmp_path / "probed"
    argv = [command, "-C", str(path), "--cmd", f"touch {marker}; {sys.executable} bench.py", "--quiet",
            "--env", f"BENCH_STATE={tmp_path / 'state'}", flag, str(target)]
    argv += [shas[0], shas[-1]] if command == "run" else ["--branch", "HEAD"] if command == "nightly" else []
    before = snapshot_checkout(path)
    code = run_cli(argv)
    _one_line_error(capsys, code, 1, flag, str(target))
    assert not marker.exists(), "a probe ran before the output path was checked"
    assert (tmp_path / "a-file").read_text() == "mine\n"
    assert snapshot_checkout(path) == before


@pytest.mark.parametrize("flag", ["--json", "--report-dir"])
def test_an_output_path_in_a_read_only_directory_stops_before_the_first_probe(repo, tmp_path, capsys,
                                                                              read_only, flag):
    path, shas = repo
    read_only.freeze()
    marker = tmp_path / "probed"
    target = read_only.path / ("night.json" if flag == "--json" else "reports")
    code = run_cli(["nightly", "-C", str(path), "--branch", "HEAD", "--quiet", flag, str(target),
                    "--cmd", f"touch {marker}; {sys.executable} bench.py"])
    _one_line_error(capsys, code, 1, flag, str(target))
    assert not marker.exists()


def test_a_json_report_that_cannot_be_written_at_the_end_keeps_the_summary_and_the_verdict(tmp_path, capsys,
                                                                                           fake_probes, monkeypatch):
    # The folder of --json is there when the hunt starts; a probe replaces it with a file (as if it
    # was removed, or its disk filled): the hunt's answer is printed, its exit code kept, and
    # `report --json` writes the stored report afterwards.
    from regressbisect.probe import executors

    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3 + [900.0] * 3)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "hunt.json"

    def sabotaging_probe(*args, **kwargs):   # what `rm -rf out && touch out` in the probe would do
        if out_dir.is_dir():
            out_dir.rmdir()
            out_dir.touch()
        return fake_probes(*args, **kwargs)

    monkeypatch.setattr(executors, "LOCAL_RUNNER", sabotaging_probe)
    code = run_cli(["run", "-C", str(path), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
                    "--env", f"BENCH_STATE={tmp_path / 'state'}", "--quiet", "--instrument", "off",
                    "--json", str(out), shas[0], shas[-1]])
    captured = capsys.readouterr()
    assert out_dir.is_file() and fake_probes.runs > 0
    assert code == 0, captured.err
    assert "1 culprit commit(s) found" in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "--json" in err[0] and str(out) in err[0], err
    assert "regressbisect report" in err[0] and "--json" in err[0]
    again = tmp_path / "again.json"
    assert run_cli(["report", "-C", str(path), "--json", str(again)]) == 0
    report = json.loads(again.read_text())
    assert report["verdict"] == "culprits" and report["culprits"][0]["commit"] == shas[3]


# -- report: where it writes, and a store it may only read --------------------------------------

def _store_with_a_hunt(path: Path) -> Path:
    from regressbisect.store import Store
    from tests.test_render import commits_report

    with Store(path) as store:
        hunt = store.start_hunt(kind="commits", good="a" * 40, bad="b" * 40, config_hash="c",
                                env_fingerprint="e", settings={})
        store.finish_hunt(hunt, commits_report())
    return path


@pytest.mark.parametrize("case", ["a file", "under a file", "read-only"])
def test_report_html_where_it_cannot_be_written_is_one_line(tmp_path, capsys, read_only, case):
    store = _store_with_a_hunt(tmp_path / "store.sqlite")
    cases = _output_cases(tmp_path)
    target = cases[case] if case != "read-only" else read_only.path / "html"
    read_only.freeze()
    code = run_cli(["report", "--store", str(store), "--html", str(target)])
    _one_line_error(capsys, code, 1, "--html", str(target))
    assert (tmp_path / "a-file").read_text() == "mine\n"


def test_report_json_writes_the_stored_report(tmp_path, capsys):
    store = _store_with_a_hunt(tmp_path / "store.sqlite")
    out = tmp_path / "deep" / "hunt.json"
    assert run_cli(["report", "--store", str(store), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["culprits"][0]["subject"] == "build the block mask per layer"



def test_report_reads_a_store_on_a_read_only_file_system(tmp_path, capsys, read_only):
    store = _store_with_a_hunt(read_only.path / "store.sqlite")
    read_only.freeze()
    before = sorted(p.name for p in read_only.path.iterdir())
    for extra in ([], ["--list"], ["--markdown"], ["1"]):
        code = run_cli(["report", "--store", str(store), *extra])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert captured.err == ""
        assert "build the block mask per layer" in captured.out or "culprits" in captured.out
    assert sorted(p.name for p in read_only.path.iterdir()) == before


def test_a_disk_that_fills_during_a_hunt_is_one_line_and_the_same_command_resumes(tmp_path, capsys, fake_probes):
    from tests.diskfs import fill, small_disk
    from regressbisect.store import Store

    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3 + [900.0] * 3)
    with small_disk(tmp_path / "disk", 1024 * 1024) as disk:
        store = disk / "store.sqlite"
        Store(store).close()
        fill(disk, 64 * 1024)
        out = tmp_path / "hunt.json"
        argv = ["run", "-C", str(path), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
                "--env", f"BENCH_STATE={tmp_path / 'state'}", "--quiet", "--instrument", "off",
                "--store", str(store), "--json", str(out), shas[0], shas[-1]]
        code = run_cli(argv)
        _one_line_error(capsys, code, 1, "disk is full", str(store), "run the same command again")
        (disk / "filler").unlink()
        with Store(store) as kept:
            stored = int(kept.hunts()["samples"].sum())
        assert stored > 0
        assert run_cli(argv) == 0, capsys.readouterr().err
        report = json.loads(out.read_text())
        assert report["culprits"][0]["commit"] == shas[3]
        assert report["cached_samples"] >= stored


def test_report_list_shows_local_minutes_and_10_digit_commits(tmp_path, capsys, monkeypatch):
    import datetime
    import time

    store = _store_with_a_hunt(tmp_path / "store.sqlite")
    monkeypatch.setenv("TZ", "IST-5:30")     # a zone away from UTC: local time must show it
    time.tzset()
    try:
        assert run_cli(["report", "--store", str(store), "--list"]) == 0
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert "a" * 10 in row and "a" * 11 not in row
    stamps = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?(?:\.\d+)?(?:[+-]\d\d:\d\d)?", row)
    assert len(stamps) == 1 and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", stamps[0]), row
    shown = datetime.datetime.strptime(stamps[0], "%Y-%m-%d %H:%M")
    utc = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs((shown - utc).total_seconds() - 5.5 * 3600) < 600, (shown, utc)


def test_clean_samples_refuses_a_store_of_a_newer_regressbisect(repo, capsys):
    import sqlite3

    from regressbisect.config import default_store_path
    from regressbisect.store import SCHEMA_VERSION, Store

    path, _ = repo
    store = default_store_path(History.open(path).common_dir)
    Store(store).close()
    with sqlite3.connect(store) as raw:
        raw.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    content = store.read_bytes()
    code = run_cli(["clean", "-C", str(path), "--samples"])
    _one_line_error(capsys, code, 1, "newer regressbisect", str(store))
    assert store.read_bytes() == content
    assert run_cli(["clean", "-C", str(path)]) == 0          # the worktrees alone still go
    assert store.read_bytes() == content


# -- numbers that are no numbers, a repository that cannot be written, a store row that is no sample --

@pytest.mark.parametrize("where, args, words", [
    ("pyproject", "timeout = nan", ["--timeout", "finite", "nan"]),
    ("pyproject", "busy_cpus = inf", ["--busy-cpus", "finite", "inf"]),
    ("pyproject", "busy_gpu = nan", ["busy_gpu in [tool.regressbisect]", "finite"]),
    ("flag", ["--timeout", "nan"], ["--timeout", "finite", "nan"]),
    ("flag", ["--min-effect", "nan"], ["--min-effect", "finite"]),
    ("flag", ["--max-wait", "inf"], ["--max-wait", "finite", "inf"]),
    ("flag", ["--busy-share", "nan"], ["--busy-share", "finite"]),
])
def test_a_number_that_is_nan_or_inf_is_one_line_before_any_worktree(tmp_path, capsys, where, args, words):
    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3)
    if where == "pyproject":  # TOML's nan and inf (JSON has none)
        (path / "pyproject.toml").write_text(f"[tool.regressbisect]\n{args}\n")
        args = []
    code = run_cli(["run", "-C", str(path), "--cmd", "python bench.py", *args, shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, *words)
    assert not (path / ".git" / "regressbisect").exists()


def test_a_read_only_repository_is_named_as_such_and_clean_there_is_one_line(tmp_path, capsys, read_only):
    path = read_only.path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3 + [900.0] * 3)
    read_only.freeze()
    before = snapshot_checkout(path)
    store = tmp_path / "store.sqlite"   # a store that can be written: the repository still cannot
    code = run_cli(["run", "-C", str(path), "--cmd", "python bench.py", "--store", str(store),
                    shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, "worktrees cannot be made in a read-only repository: copy it")
    code = run_cli(["hunks", "-C", str(path), "--cmd", "python bench.py", "--store", str(store)])
    assert code == 1 and len(capsys.readouterr().err.strip().splitlines()) == 1
    code = run_cli(["clean", "-C", str(path)])
    _one_line_error(capsys, code, 1, "read-only repository", "make it writable")
    assert snapshot_checkout(path) == before


@pytest.mark.parametrize("command", [["run", "HEAD~5", "HEAD"], ["hunks", "--commit", "HEAD"], ["nightly"]])
def test_a_hunt_in_a_read_only_repository_says_copy_it_first_not_store(read_only, capsys, command):
    """The default store is in the repository too, but --store elsewhere would not help: every hunt
    takes its lock and makes its worktrees there."""
    path = read_only.path / "repo"
    make_bench_repo(path, [1000.0] * 3 + [900.0] * 3)
    read_only.freeze()
    code = run_cli([command[0], "-C", str(path), "--cmd", "python bench.py", *command[1:]])
    line = _one_line_error(capsys, code, 1, "read-only repository: copy it")
    assert "--store" not in line


@pytest.mark.parametrize("bad", ["'abc'", "-5", "9e999", "NULL"])
def test_a_store_row_that_is_no_sample_makes_the_store_invalid_and_report_shows_the_last_finished_hunt(
        tmp_path, capsys, fake_probes, bad):
    import sqlite3

    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3 + [900.0] * 3)
    store = tmp_path / "store.sqlite"
    argv = ["run", "-C", str(path), "--cmd", f"{sys.executable} bench.py", "--tokens", "1000",
            "--env", f"BENCH_STATE={tmp_path / 'state'}", "--quiet", "--instrument", "off",
            "--store", str(store), shas[0], shas[-1]]
    assert run_cli(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    with sqlite3.connect(store) as raw:
        if bad == "NULL":   # the column is NOT NULL: a foreign row is one without it, wall_seconds
            raw.execute("UPDATE samples SET wall_seconds = 'soon' WHERE id = 3")
        else:
            raw.execute(f"UPDATE samples SET tok_s = {bad} WHERE id = 3")
    raw.close()
    content = store.read_bytes()
    _one_line_error(capsys, run_cli(argv), 1, f"{store} is not a valid regressbisect store", "row 3")
    assert store.read_bytes() == content     # nothing "repaired" away, no hunt registered
    assert run_cli(["report", "--store", str(store)]) == 0, capsys.readouterr().err
    assert "culprit" in capsys.readouterr().out


@pytest.mark.parametrize("committed", [False, True])
def test_a_pyproject_that_is_not_utf8_is_one_line_naming_it(tmp_path, capsys, committed):
    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3)
    # Latin-1, as an editor set to it writes it: "½" and "é" are single bytes that are no UTF-8.
    (path / "pyproject.toml").write_bytes('[tool.regressbisect]\ncmd = "python bench.py ½ é"\n'.encode("latin-1"))
    if committed:   # `nightly` and the candidates read the committed file
        subprocess.run(["git", "-C", str(path), "add", "pyproject.toml"], check=True)
        subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm",
                        "latin-1 pyproject"], check=True)
        from regressbisect.errors import UserError
        with pytest.raises(UserError) as raised:
            History.open(path).read_pyproject_table("HEAD")
        assert "pyproject.toml" in raised.value.message and "not UTF-8" in raised.value.message
        return
    code = run_cli(["run", "-C", str(path), shas[0], shas[-1]])
    _one_line_error(capsys, code, 1, str(path / "pyproject.toml"), "not UTF-8", "TOML must be UTF-8")
    assert not (path / ".git" / "regressbisect").exists()


def test_report_during_a_first_hunt_says_a_hunt_is_running(repo, capsys):
    from regressbisect.config import default_store_path
    from regressbisect.store import Store

    path, shas = repo
    store = default_store_path(History.open(path).common_dir)
    code = run_cli(["report", "-C", str(path)])   # no store yet
    _one_line_error(capsys, code, 1, "no store")
    with Store(store) as s:
        s.start_hunt(kind="commits", good=shas[0], bad=shas[-1], config_hash="c", env_fingerprint="e", settings={})
    with WorktreePool(History.open(path), 1):   # the hunt's lock: it runs
        code = run_cli(["report", "-C", str(path)])
        _one_line_error(capsys, code, 1, "a hunt is running; nothing finished yet")
        code = run_cli(["report", "--store", str(store)])   # from anywhere: the lock is beside the store
        _one_line_error(capsys, code, 1, "a hunt is running; nothing finished yet")
    code = run_cli(["report", "-C", str(path)])     # killed before its end
    _one_line_error(capsys, code, 1, "hunt 1 stopped before its end", "run its command again")
