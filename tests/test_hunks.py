"""git/hunks.py on real repositories: collection, stable ids, any-subset patches, functions."""
from __future__ import annotations

import os
import random
import stat
import subprocess
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode, UserError
from regressbisect.git.hunks import (APPLY_ARGS, Hunk, build_patch, collect_hunks,
                                     encode_patch, group_hunks)
from regressbisect.testing.gitrepo import git, git_env, make_repo, snapshot_checkout, write_files

SAMPLE_PY = '''import os

CONST = 1


class Trainer:
    """A trainer."""

    lr = 0.1

    def step(self, batch):
        x = batch
        y = x + 1
        return y

    @staticmethod
    def helper():
        def inner():
            return 1
        return inner()


def train(n):
    total = 0
    for i in range(n):
        total += i
        total -= 0
    return total


async def fetch():
    return 2
'''


def _numbered(prefix: str, n: int) -> str:
    return "".join(f"{prefix} line {i}\n" for i in range(n))


BASE_FILES: dict[str, str | bytes] = {
    "model.py": SAMPLE_PY,
    "big.txt": _numbered("big", 60),
    "staged.txt": _numbered("staged", 10),
    "gone.txt": _numbered("gone", 5),
    "tool.sh": "#!/bin/sh\necho hi\n",
    "weights.bin": bytes(range(256)) * 4,
    "nonl.txt": "first\nlast without newline",
    "crlf.txt": "one\r\ntwo\r\nthree\r\nfour\r\n",
    "sub dir/spaced name.txt": _numbered("spaced", 6),
    'caf\u00e9 "q".txt': _numbered("quoted", 4),
    "becomes_link.txt": "a file, then a symlink\n",
}


def _edit_lines(path: Path, edits: dict[int, str | None], inserts: dict[int, list[str]]) -> None:
    """Replace (str) or delete (None) 0-based lines, insert lists before 0-based positions."""
    old = path.read_text().split("\n")
    out: list[str] = []
    for i, line in enumerate(old):
        out.extend(inserts.get(i, []))
        new = edits.get(i, line)
        if new is not None:
            out.append(new)
    out.extend(inserts.get(len(old), []))
    path.write_text("\n".join(out))


def _dirty(repo: Path) -> None:
    """Every kind of uncommitted change a user can have."""
    _edit_lines(repo / "model.py",
                edits={2: "CONST = 2", 8: "    lr = 0.2", 11: "        x = batch * 2",
                       15: "    @classmethod", 18: "            return 10",
                       25: "        total += 2 * i", 26: None},
                inserts={31: ["    await_me = 3"]})
    _edit_lines(repo / "big.txt",
                edits={0: "BIG first changed", 10: None, 11: None, 20: "big twenty changed",
                       40: "big forty changed", 59: "big last changed"},
                inserts={5: ["inserted A1", "inserted A2"], 30: ["inserted B"],
                         45: ["inserted C"], 60: ["appended at end"]})
    write_files(repo, {"nonl.txt": "first changed\nlast without newline",
                       "crlf.txt": "one\r\nTWO\r\nthree\r\nfour\r\nfive\r\n",
                       "sub dir/spaced name.txt": _numbered("spaced", 6).replace("line 3", "L3"),
                       "weights.bin": bytes(range(255, -1, -1)) * 4})
    _edit_lines(repo / 'caf\u00e9 "q".txt', edits={1: "quoted one changed"}, inserts={})
    (repo / "gone.txt").unlink()
    os.chmod(repo / "tool.sh", 0o755)
    (repo / "becomes_link.txt").unlink()
    (repo / "becomes_link.txt").symlink_to("big.txt")
    # Staged changes: an edit and a new file, both only in the index + work tree.
    _edit_lines(repo / "staged.txt", edits={3: "staged three changed"}, inserts={})
    write_files(repo, {"added_staged.py": "def added():\n    return 1\n"})
    git(repo, "add", "staged.txt", "added_staged.py")
    # Untracked files: only with include_untracked.
    write_files(repo, {"notes/untracked.txt": "not tracked\nat all\n",
                       "untracked.bin": b"\x00\xff\x00binary", "run me.sh": "#!/bin/sh\n"})
    os.chmod(repo / "run me.sh", 0o755)


@pytest.fixture()
def dirty_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    make_repo(repo, [BASE_FILES])
    _dirty(repo)
    return repo


def _worktree_state(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file (bytes, executable bit) of a work tree, .git excluded."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = Path(dirpath) / name
            if full.is_symlink():
                state[full.relative_to(root).as_posix()] = (os.readlink(full).encode(), False)
                continue
            state[full.relative_to(root).as_posix()] = (
                full.read_bytes(), bool(full.stat().st_mode & stat.S_IXUSR))
    return state


def _apply(where: Path, patch: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "apply", *APPLY_ARGS, "-"], cwd=where,
                          input=encode_patch(patch), capture_output=True, env=git_env())


def _reset(where: Path) -> None:
    git(where, "reset", "-q", "--hard")
    git(where, "clean", "-fdxq")


def test_collects_modified_staged_deleted_added_binary_and_mode(dirty_repo: Path) -> None:
    hunks = collect_hunks(dirty_repo)
    files = {h.file for h in hunks}
    assert files == {"model.py", "big.txt", "nonl.txt", "crlf.txt", "sub dir/spaced name.txt",
                     "weights.bin", "gone.txt", "tool.sh", "staged.txt", "added_staged.py",
                     'caf\u00e9 "q".txt', "becomes_link.txt"}
    kinds = {h.file: h.kind for h in hunks if h.kind != "modify"}
    assert kinds == {"weights.bin": "binary", "gone.txt": "delete-file", "tool.sh": "mode",
                     "added_staged.py": "add-file", "becomes_link.txt": "type-change"}
    # -U0: one hunk per run of changed lines (big.txt: 10 edits; the two deleted lines are one
    # run, and the last line's change + the appended line are another).
    assert sum(h.file == "big.txt" for h in hunks) == 8
    assert len({h.id for h in hunks}) == len(hunks)


def test_untracked_only_on_request(dirty_repo: Path) -> None:
    without = {h.file for h in collect_hunks(dirty_repo)}
    with_untracked = collect_hunks(dirty_repo, include_untracked=True)
    added = {h.file: h.kind for h in with_untracked}
    assert "notes/untracked.txt" not in without and "untracked.bin" not in without
    assert added["notes/untracked.txt"] == "add-file"
    assert added["untracked.bin"] == "binary"
    assert added["run me.sh"] == "add-file"


def test_ids_are_stable_across_collections_and_line_shifts(dirty_repo: Path) -> None:
    first = collect_hunks(dirty_repo, include_untracked=True)
    second = collect_hunks(dirty_repo, include_untracked=True)
    assert [h.id for h in first] == [h.id for h in second]
    # An unrelated new edit at the top of big.txt shifts the line numbers of all later hunks
    # of that file but must not change their ids.
    text = (dirty_repo / "big.txt").read_text()
    (dirty_repo / "big.txt").write_text("a brand new first line\n" + text)
    third = collect_hunks(dirty_repo, include_untracked=True)
    assert {h.id for h in first} - {h.id for h in third} == {
        h.id for h in first if h.file == "big.txt" and h.old_start == 1}


def test_user_repository_is_left_untouched(dirty_repo: Path) -> None:
    before = snapshot_checkout(dirty_repo)
    collect_hunks(dirty_repo, include_untracked=True)
    collect_hunks(dirty_repo)
    assert snapshot_checkout(dirty_repo) == before


def test_any_subset_applies_and_all_reproduce_the_work_tree(dirty_repo: Path,
                                                            tmp_path: Path) -> None:
    hunks = collect_hunks(dirty_repo, include_untracked=True)
    scratch = tmp_path / "scratch"
    git(tmp_path, "clone", "-q", str(dirty_repo), str(scratch))

    # Everything together: byte-identical work tree, executable bits included.
    result = _apply(scratch, build_patch(hunks))
    assert result.returncode == 0, result.stderr.decode()
    assert _worktree_state(scratch) == _worktree_state(dirty_repo)
    _reset(scratch)

    rng = random.Random(7)
    by_id = {h.id: h for h in hunks}
    for trial in range(60):
        size = rng.randint(1, len(hunks) - 1)
        subset = rng.sample(hunks, size)
        result = _apply(scratch, build_patch(subset))
        assert result.returncode == 0, (trial, result.stderr.decode())
        # Diffing the scratch tree gives back exactly the subset's hunks (same ids).
        again = collect_hunks(scratch, include_untracked=True)
        assert {h.id for h in again} == {h.id for h in subset}, trial
        for h in again:  # and each hunk's own lines, not its neighbours'
            assert h.body == by_id[h.id].body
        _reset(scratch)


def test_single_hunks_each_apply(dirty_repo: Path, tmp_path: Path) -> None:
    hunks = collect_hunks(dirty_repo, include_untracked=True)
    scratch = tmp_path / "scratch"
    git(tmp_path, "clone", "-q", str(dirty_repo), str(scratch))
    for hunk in hunks:
        result = _apply(scratch, build_patch([hunk]))
        assert result.returncode == 0, (hunk.file, hunk.text, result.stderr.decode())
        _reset(scratch)


def test_enclosing_functions_of_python_hunks(dirty_repo: Path) -> None:
    hunks = [h for h in collect_hunks(dirty_repo) if h.file == "model.py"]
    by_first_line = {h.excerpt.splitlines()[0]: h.function for h in hunks}
    assert by_first_line == {
        "-CONST = 1": None,
        "-    lr = 0.1": "Trainer",
        "-        x = batch": "Trainer.step",
        "-    @staticmethod": "Trainer.helper",
        "-            return 1": "Trainer.helper.inner",
        "-        total += i": "train",   # replaced line and the deleted one after it: one hunk
        "+    await_me = 3": "fetch",
    }
    groups = group_hunks(collect_hunks(dirty_repo))
    ids = {h.id for h in collect_hunks(dirty_repo)}
    for level in groups:  # every level is a partition of all ids
        flat = [i for group in level for i in group]
        assert sorted(flat) == sorted(ids)
    assert len(groups[0]) < len(groups[1]) < len(groups[2]) == len(ids)
    model_ids = {h.id for h in hunks}
    assert [set(g) for g in groups[0] if set(g) & model_ids] == [model_ids]


def test_pure_deletion_uses_the_old_file_for_its_function(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, [{"m.py": "x = 1\n\n\ndef f():\n    a = 1\n    b = 2\n    return a\n"}])
    write_files(repo, {"m.py": "x = 1\n\n\ndef f():\n    a = 1\n    return a\n"})
    (hunk,) = collect_hunks(repo)
    assert (hunk.old_len, hunk.new_len, hunk.function) == (1, 0, "f")
    assert hunk.lines == (6, 6)


def test_new_and_deleted_files_are_one_hunk_each(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, [{"old.py": _numbered("old", 20)}])
    (repo / "old.py").unlink()
    write_files(repo, {"new.py": _numbered("new", 30)})
    git(repo, "add", "-A")
    hunks = collect_hunks(repo)
    assert [(h.file, h.kind, h.lines) for h in hunks] == [
        ("new.py", "add-file", (1, 30)), ("old.py", "delete-file", (1, 20))]


def test_no_changes_is_a_user_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, [{"a.txt": "a\n"}])
    with pytest.raises(UserError) as err:
        collect_hunks(repo)
    assert err.value.exit_code == ExitCode.USER_ERROR
    assert err.value.message.startswith("no uncommitted changes against HEAD (nothing to bisect")
    write_files(repo, {"b.txt": "untracked\n"})
    with pytest.raises(UserError, match="1 untracked file"):
        collect_hunks(repo)
    assert [h.file for h in collect_hunks(repo, include_untracked=True)] == ["b.txt"]


def test_not_a_repo_and_unknown_base_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a git repository"):
        collect_hunks(tmp_path)
    repo = tmp_path / "repo"
    make_repo(repo, [{"a.txt": "a\n"}])
    with pytest.raises(UserError, match="unknown revision"):
        collect_hunks(repo, "no-such-ref")


def test_identical_hunks_in_one_file_get_distinct_stable_ids(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo, [{"a.txt": "x\n1\n2\nx\n3\n"}])
    write_files(repo, {"a.txt": "y\n1\n2\ny\n3\n"})
    first = collect_hunks(repo)
    assert len(first) == 2 and first[0].id != first[1].id
    assert [h.id for h in collect_hunks(repo)] == [h.id for h in first]
    assert isinstance(first[0], Hunk)
