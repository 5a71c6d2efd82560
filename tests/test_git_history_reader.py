"""History reads commits, ranges, trees and blobs through GitPython: the same answers as git's
command line, from threads at once, and never redirected by GIT_DIR-style variables."""
from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from regressbisect.git.history import History
from regressbisect.testing.gitrepo import git, make_repo, snapshot_checkout


def _git_log(repo: Path, rev: str) -> list[tuple[str, str, str, str, str]]:
    out = subprocess.run(["git", "-C", str(repo), "log", "--first-parent", "-z",
                          "--format=%H%x1f%T%x1f%s%x1f%an <%ae>%x1f%aI", rev, "--"],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(record.split("\x1f")) for record in out.split("\0") if record.strip("\n")]


def test_commits_match_git_log_including_multi_line_subjects(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"a.py": f"x = {i}\n"} for i in range(4)],
                     messages=["one", "a subject\nwrapped on two lines\n\nbody", "three", "four"])
    history = History.open(repo)
    got = [(c.sha, c.tree, c.subject, c.author, c.date) for c in history.first_parent_range(shas[0], shas[-1])]
    assert got == list(reversed(_git_log(repo, shas[-1])))
    assert [c.sha for c in history.lineage(shas[-1], 2)] == shas[-2:]


def test_trees_from_many_threads_at_once(tmp_path):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"a.py": f"x = {i}\n"} for i in range(12)])
    expected = [git(repo, "rev-parse", f"{sha}^{{tree}}").strip() for sha in shas]
    history = History.open(repo)
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(history.tree_of, shas * 4)) == expected * 4


def test_redirecting_variables_do_not_move_reads_or_touch_the_users_index(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    other = tmp_path / "other"
    shas = make_repo(mine, [{"a.py": f"x = {i}\n", "pyproject.toml": f"[tool.regressbisect]\ntokens = {i + 1}\n"}
                            for i in range(3)])
    make_repo(other, [{"b.py": "y = 1\n"}])
    before = snapshot_checkout(mine)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(other / ".git" / "objects"))
    history = History.open(mine)
    assert [c.sha for c in history.first_parent_range(shas[0], shas[-1])] == shas
    assert history.read_pyproject_table(shas[1]) == {"tokens": 2}
    assert history.is_ancestor(shas[0], shas[-1]) and not history.is_ancestor(shas[-1], shas[0])
    for name in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(name)
    assert snapshot_checkout(mine) == before
