"""git/history.py against real repositories: refs, ranges, bad input, read-only reads."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode, UserError
from regressbisect.git.history import CommitInfo, History
from regressbisect.testing.gitrepo import commit, git, make_repo, merge, snapshot_checkout


@pytest.fixture
def linear(tmp_path: Path) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"a.py": f"x = {i}\n", "pkg/b.py": "y = 0\n"} for i in range(5)],
                     messages=[f"step {i}" for i in range(5)])
    git(repo, "tag", "v0", shas[0])
    return repo, shas


def assert_user_error(exc: pytest.ExceptionInfo[UserError], *fragments: str) -> None:
    err = exc.value
    assert err.exit_code == ExitCode.USER_ERROR == 1
    assert "\n" not in err.message
    for fragment in fragments:
        assert fragment in err.message, err.message


# -- open -----------------------------------------------------------------------------------

def test_open_from_subdirectory_finds_top_and_common_dir(linear):
    repo, _ = linear
    history = History.open(repo / "pkg")
    assert history.root == repo.resolve()
    assert history.common_dir == (repo / ".git").resolve()
    assert Path(history.repo.working_tree_dir) == repo.resolve()  # gitpython handle


def test_not_a_git_repository(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    # Keep discovery from walking above tmp_path into whatever contains it.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(UserError) as exc:
        History.open(plain)
    assert_user_error(exc, "not a git repository", str(plain), "--repo")
    with pytest.raises(UserError) as exc:
        History.open(tmp_path / "missing")
    assert_user_error(exc, "not a git repository")


def test_a_bare_repository_is_named_bare_with_the_fix(linear, tmp_path):
    repo, _ = linear
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    for where in (bare, bare / "refs"):
        with pytest.raises(UserError) as exc:
            History.open(where)
        assert_user_error(exc, "bare repository", str(bare), "git clone", "--repo")
        assert "not a git repository" not in exc.value.message


def test_inside_the_git_directory_points_at_the_work_tree(linear):
    repo, _ = linear
    with pytest.raises(UserError) as exc:
        History.open(repo / ".git" / "refs")
    assert_user_error(exc, "inside the git directory", str((repo / ".git").resolve()),
                      f"--repo {repo.resolve()}")


def test_open_inside_linked_worktree(linear, tmp_path):
    repo, shas = linear
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked), shas[2])
    history = History.open(linked)
    assert history.root == linked.resolve()
    assert history.common_dir == (repo / ".git").resolve()
    assert history.head() == shas[2]


# -- refs -----------------------------------------------------------------------------------

def test_resolve_names(linear):
    repo, shas = linear
    history = History.open(repo)
    assert history.resolve("main") == shas[-1]
    assert history.resolve("HEAD~1") == shas[-2]
    assert history.resolve(shas[1][:8]) == shas[1]
    assert history.resolve("v0") == shas[0]
    git(repo, "tag", "-a", "-m", "annotated", "v1", shas[1])
    assert history.resolve("v1") == shas[1]  # annotated tags peel to their commit


@pytest.mark.parametrize("ref", ["nope", "HEAD~99", "--all", "", "deadbeef" * 5])
def test_unknown_revision(linear, ref):
    repo, _ = linear
    with pytest.raises(UserError) as exc:
        History.open(repo).resolve(ref)
    assert_user_error(exc, "unknown revision", repr(ref))



def test_unknown_revision_in_a_shallow_clone_names_the_boundary_and_the_fix(linear, tmp_path):
    repo, shas = linear
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    with pytest.raises(UserError) as exc:
        History.open(clone).resolve(shas[0])          # a commit beyond the clone's boundary
    assert_user_error(exc, "unknown revision", "this clone is shallow", "git fetch --unshallow")
    with pytest.raises(UserError) as exc:
        History.open(repo).resolve("nope")            # a full clone: no word of it
    assert "shallow" not in exc.value.message

def test_revision_that_is_not_a_commit(linear):
    repo, shas = linear
    tree = git(repo, "rev-parse", f"{shas[0]}^{{tree}}")
    with pytest.raises(UserError) as exc:
        History.open(repo).resolve(tree)
    assert_user_error(exc, "tree", "not a commit")


# -- ranges ---------------------------------------------------------------------------------

def test_linear_range_is_inclusive_oldest_first(linear):
    repo, shas = linear
    infos = History.open(repo).first_parent_range("v0", "main")
    assert [c.sha for c in infos] == shas
    assert [c.subject for c in infos] == [f"step {i}" for i in range(5)]
    sub = History.open(repo).first_parent_range(shas[1], shas[3])
    assert [c.sha for c in sub] == shas[1:4]


def test_good_equals_bad(linear):
    repo, shas = linear
    with pytest.raises(UserError) as exc:
        History.open(repo).first_parent_range("main", shas[-1])  # two names, one commit
    assert_user_error(exc, "same commit", shas[-1][:10])


def test_good_newer_than_bad_is_an_empty_range(linear):
    repo, shas = linear
    with pytest.raises(UserError) as exc:
        History.open(repo).first_parent_range(shas[3], shas[1])
    assert_user_error(exc, "not an ancestor", "empty", "swap")


def test_good_on_unrelated_branch(linear):
    repo, shas = linear
    git(repo, "checkout", "-q", "-b", "side", shas[1])
    side = commit(repo, {"side.py": "z = 1\n"})
    git(repo, "checkout", "-q", "main")
    with pytest.raises(UserError) as exc:
        History.open(repo).first_parent_range(side, "main")
    assert_user_error(exc, "not an ancestor", "swap them or pick", "merge-base")


@pytest.fixture
def merged(tmp_path: Path) -> dict[str, str]:
    """main: A - B - M - C, where M merges feature F1 - F2 branched off A."""
    repo = tmp_path / "merged"
    a, b = make_repo(repo, [{"a.py": "1\n"}, {"a.py": "2\n"}])
    git(repo, "checkout", "-q", "-b", "feature", a)
    f1 = commit(repo, {"f.py": "1\n"})
    f2 = commit(repo, {"f.py": "2\n"})
    git(repo, "checkout", "-q", "main")
    m = merge(repo, "feature")
    c = commit(repo, {"a.py": "3\n"})
    return {"repo": str(repo), "A": a, "B": b, "F1": f1, "F2": f2, "M": m, "C": c}


def test_first_parent_range_skips_merged_side_branch(merged):
    history = History.open(Path(merged["repo"]))
    shas = [c.sha for c in history.first_parent_range(merged["A"], merged["C"])]
    assert shas == [merged["A"], merged["B"], merged["M"], merged["C"]]


def test_good_on_merged_side_branch_starts_at_the_merge(merged, capsys):
    history = History.open(Path(merged["repo"]))
    shas = [c.sha for c in history.first_parent_range(merged["F1"], merged["C"])]
    assert shas == [merged["F1"], merged["M"], merged["C"]]
    assert "not on BAD's first-parent chain" in capsys.readouterr().err


def test_commit_info_lists_every_parent_first_parent_first(merged):
    history = History.open(Path(merged["repo"]))
    assert history.commit_info(merged["M"]).parents == (merged["B"], merged["F2"])
    assert history.commit_info(merged["C"]).parents == (merged["M"],)
    assert history.first_parent_range(merged["A"], merged["C"])[2].parents == (merged["B"], merged["F2"])


def test_no_warning_when_good_on_first_parent_chain(merged, capsys):
    History.open(Path(merged["repo"])).first_parent_range(merged["B"], merged["C"])
    assert capsys.readouterr().err == ""


# -- objects --------------------------------------------------------------------------------

def test_commit_info_and_tree(linear):
    repo, shas = linear
    history = History.open(repo)
    info = history.commit_info(shas[2][:7])
    assert isinstance(info, CommitInfo)
    assert info.sha == shas[2]
    assert info.tree == git(repo, "rev-parse", f"{shas[2]}^{{tree}}")
    assert history.tree_of(shas[2]) == info.tree
    assert info.subject == "step 2"
    assert info.author == "Test Author <author@example.com>"
    assert info.date == git(repo, "log", "-1", "--format=%aI", shas[2])
    assert info.date.startswith("2023-11-14T22:")  # fixed dates of tests/gitrepo.py


def test_reworded_commit_shares_the_tree(linear):
    repo, shas = linear
    git(repo, "commit", "-q", "--amend", "-m", "reworded")
    history = History.open(repo)
    assert history.head() != shas[-1]
    assert history.tree_of("HEAD") == history.tree_of(shas[-1])


def test_read_pyproject_table(tmp_path):
    repo = tmp_path / "r"
    shas = make_repo(repo, [
        {"a.py": "1\n"},
        {"pyproject.toml": "[tool.regressbisect]\ncmd = 'python a.py'\nruns = 3\n"},
        {"pyproject.toml": "[tool.other]\nx = 1\n"},
    ])
    history = History.open(repo)
    assert history.read_pyproject_table(shas[0]) == {}
    assert history.read_pyproject_table(shas[1]) == {"cmd": "python a.py", "runs": 3}
    assert history.read_pyproject_table(shas[2]) == {}
    (repo / "pyproject.toml").write_text("[tool.regressbisect]\nruns = 7\n")  # uncommitted
    assert history.read_pyproject_table() == {"runs": 7}
    (repo / "pyproject.toml").write_text("[tool.regressbisect\n")
    with pytest.raises(UserError) as exc:
        history.read_pyproject_table()
    assert_user_error(exc, "invalid pyproject.toml")


def test_is_dirty_kinds(linear):
    repo, _ = linear
    history = History.open(repo)
    assert not history.is_dirty()
    (repo / "new.txt").write_text("untracked\n")
    assert not history.is_dirty()
    assert history.is_dirty(untracked=True)
    (repo / "pkg" / "b.py").write_text("y = 1\n")
    assert history.is_dirty()
    git(repo, "add", "pkg/b.py")
    (repo / "pkg" / "b.py").write_text("y = 0\n")  # staged change, work tree back to HEAD
    assert history.is_dirty()


def test_reads_never_rewrite_the_users_index(linear):
    repo, shas = linear
    history = History.open(repo)
    # Make the index stat cache stale: a plain `git status` would refresh and rewrite it.
    stamp = os.stat(repo / "a.py").st_mtime + 100
    os.utime(repo / "a.py", (stamp, stamp))
    before = snapshot_checkout(repo)
    history.is_dirty()
    history.is_dirty(untracked=True)
    history.first_parent_range(shas[0], shas[-1])
    history.read_pyproject_table()
    history.head()
    assert snapshot_checkout(repo) == before
    # The check above can fail: a refreshing status does rewrite the index bytes.
    git(repo, "status", "--porcelain")
    assert snapshot_checkout(repo)["index_bytes"] != before["index_bytes"]


def test_make_repo_helper_supports_callables_and_deletions(tmp_path):
    def rename(path: Path) -> str:
        (path / "a.py").rename(path / "b.py")
        return "rename a to b"

    repo = tmp_path / "helper"
    shas = make_repo(repo, [{"a.py": "1\n", "c.py": "c\n"}, rename, {"c.py": None}])
    assert git(repo, "ls-tree", "--name-only", shas[1]).splitlines() == ["b.py", "c.py"]
    assert git(repo, "ls-tree", "--name-only", shas[2]).splitlines() == ["b.py"]
    assert History.open(repo).commit_info(shas[1]).subject == "rename a to b"
    # Same inputs, same shas: dates depend only on the repository's own history.
    assert make_repo(tmp_path / "again", [{"a.py": "1\n", "c.py": "c\n"}]) == shas[:1]
