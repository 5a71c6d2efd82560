"""`regressbisect report` while another hunt runs in the same store."""
from __future__ import annotations

from tests.cli import run_cli
from regressbisect.config import default_store_path
from regressbisect.git.history import History
from regressbisect.git.worktrees import WorktreePool
from regressbisect.store import Store
from regressbisect.testing.benchrepo import make_bench_repo


def test_report_during_a_later_hunt_says_it_shows_the_previous_one(tmp_path, capsys, fake_probes):
    path = tmp_path / "repo"
    shas = make_bench_repo(path, [1000.0] * 3 + [900.0] * 3)
    assert run_cli(["run", "-C", str(path), "--cmd", "python bench.py", "--tokens", "1000", "--instrument", "off",
                    "--env", f"BENCH_STATE={tmp_path / 'state'}", "--quiet", shas[0], shas[-1]]) == 0, \
        capsys.readouterr().err
    capsys.readouterr()
    store = default_store_path(History.open(path).common_dir)
    assert run_cli(["report", "-C", str(path)]) == 0
    first = capsys.readouterr()
    assert "culprit" in first.out and "running" not in first.err    # no hunt runs: no note

    with Store(store) as s:     # a second hunt has started and holds the pool's lock: it runs
        later = s.start_hunt(kind="commits", good=shas[1], bad=shas[-1], config_hash="c", env_fingerprint="e",
                             settings={})
    with WorktreePool(History.open(path), 1):
        for argv in (["report", "-C", str(path)], ["report", "--store", str(store)],
                     ["report", "-C", str(path), "--markdown"]):
            assert run_cli(argv) == 0
            out, err = capsys.readouterr()
            lines = err.strip().splitlines()
            assert len(lines) == 1, lines     # one line, on stderr: stdout is the stored report as before
            assert "another hunt is running" in lines[0] and f"hunt {later}" in lines[0]
            assert "this report is of the previous one, hunt 1" in lines[0]
            assert "culprit" in out and "another hunt" not in out
        assert run_cli(["report", "-C", str(path), "1"]) == 0        # asked for by id: the note names it
        assert "this report is of hunt 1" in capsys.readouterr().err
    # the later hunt killed before its end: nothing runs, no note
    assert run_cli(["report", "-C", str(path)]) == 0
    assert "running" not in capsys.readouterr().err
