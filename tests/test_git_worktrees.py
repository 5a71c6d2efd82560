"""git/worktrees.py against real repositories: exact switches, reuse, patches, lock, repair."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode
from regressbisect.git.history import History
from regressbisect.git.worktrees import PatchDoesNotApply, PoolLocked, WorktreePool, clean
from tests.gitrepo import git, make_dirty, make_repo, snapshot_checkout

ROOT = Path(__file__).resolve().parents[1]

SPECS = [
    {"model.py": "def step():\n    return 1\n", "data/a.txt": "a0\n", ".gitignore": "*.log\n"},
    {"model.py": "def step():\n    return 2\n", "data/b.txt": "b1\n"},
    {"model.py": "def step():\n    return 3\n", "data/a.txt": None},
]


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    path = tmp_path / "repo"
    return path, make_repo(path, SPECS)


def tree_files(path: Path) -> dict[str, bytes]:
    """Every file under `path` except the worktree's `.git` gitfile."""
    return {p.relative_to(path).as_posix(): p.read_bytes()
            for p in sorted(path.rglob("*")) if p.is_file() and p.name != ".git"}


def committed_files(repo: Path, sha: str) -> dict[str, bytes]:
    names = git(repo, "ls-tree", "-r", "--name-only", sha).splitlines()
    return {n: subprocess.run(["git", "cat-file", "blob", f"{sha}:{n}"], cwd=repo,
                              capture_output=True, check=True).stdout for n in names}


def assert_exactly(slot: Path, repo: Path, sha: str) -> None:
    assert tree_files(slot) == committed_files(repo, sha)
    assert git(slot, "rev-parse", "HEAD") == sha
    assert git(slot, "status", "--porcelain", "--ignored") == ""


def admin_dir(slot: Path) -> Path:
    return Path((slot / ".git").read_text().split("gitdir: ", 1)[1].strip())


def pool_worktrees(repo: Path) -> list[str]:
    listing = git(repo, "worktree", "list", "--porcelain").splitlines()
    return [ln.split(" ", 1)[1] for ln in listing
            if ln.startswith("worktree ") and "/regressbisect/worktrees/" in ln]


def test_checkout_is_exact_and_lives_in_the_common_dir(repo):
    path, shas = repo
    history = History.open(path)
    with WorktreePool(history) as pool:
        slot = pool.checkout(0, shas[0])
        assert slot == pool.path(0)
        assert slot.is_relative_to(history.common_dir / "regressbisect" / "worktrees")
        assert_exactly(slot, path, shas[0])
        # Leftovers of a probe: edits, untracked and ignored files, a nested directory.
        (slot / "model.py").write_text("garbage\n")
        (slot / "run.log").write_text("ignored output\n")
        (slot / "build" / "x").mkdir(parents=True)
        (slot / "build" / "x" / "out.bin").write_bytes(b"\x00")
        for sha in (shas[2], shas[1], shas[1]):
            assert pool.checkout(0, sha) == slot
            assert_exactly(slot, path, sha)


def test_second_checkout_reuses_the_worktree(repo):
    path, shas = repo
    with WorktreePool(History.open(path)) as pool:
        slot = pool.checkout(0, shas[0])
        admin = admin_dir(slot)
        identity = ((slot / ".git").stat().st_ino, admin.stat().st_ino,
                    (admin / "commondir").stat().st_ino)
        pool.checkout(0, shas[2])
    with WorktreePool(History.open(path)) as pool:  # a later hunt reuses it too
        slot2 = pool.checkout(0, shas[1])
    assert slot2 == slot and admin_dir(slot2) == admin
    assert ((slot / ".git").stat().st_ino, admin.stat().st_ino,
            (admin / "commondir").stat().st_ino) == identity
    assert pool_worktrees(path) == [str(slot)]


def test_slots_are_independent(repo):
    path, shas = repo
    with WorktreePool(History.open(path), slots=2) as pool:
        a, b = pool.checkout(0, shas[0]), pool.checkout(1, shas[2])
        assert a != b
        assert_exactly(a, path, shas[0])
        assert_exactly(b, path, shas[2])
        with pytest.raises(IndexError):
            pool.path(2)


def test_slots_switch_concurrently_from_threads(repo):
    from concurrent.futures import ThreadPoolExecutor
    path, shas = repo
    with WorktreePool(History.open(path), slots=3) as pool:
        def walk(slot: int) -> Path:
            for sha in shas[slot:] + shas[:slot]:
                where = pool.checkout(slot, sha)
            return where
        with ThreadPoolExecutor(max_workers=3) as ex:
            slots = list(ex.map(walk, range(3)))
        for k, where in enumerate(slots):
            assert_exactly(where, path, (shas[k:] + shas[:k])[-1])
    assert len(pool_worktrees(path)) == 3


def test_patch_applies_and_is_undone_by_the_next_switch(repo):
    path, shas = repo
    patch = git(path, "diff", "--binary", shas[0], shas[1]) + "\n"
    with WorktreePool(History.open(path)) as pool:
        slot = pool.checkout(0, shas[0], patch=patch)
        assert tree_files(slot) == committed_files(path, shas[1])
        assert git(slot, "rev-parse", "HEAD") == shas[0]
        slot = pool.checkout(0, shas[0])
        assert_exactly(slot, path, shas[0])  # data/b.txt, created by the patch, is gone


def test_patch_that_does_not_apply_leaves_the_slot_clean(repo):
    path, shas = repo
    patch = git(path, "diff", shas[0], shas[1]) + "\n"  # expects `return 1`
    with WorktreePool(History.open(path)) as pool:
        with pytest.raises(PatchDoesNotApply) as exc:
            pool.checkout(0, shas[2], patch=patch)
        assert exc.value.line.startswith("error:")
        assert "\n" not in exc.value.line
        assert_exactly(pool.path(0), path, shas[2])


def test_second_pool_on_the_same_repo_is_refused(repo, tmp_path):
    path, shas = repo
    history = History.open(path)
    with WorktreePool(history):
        with pytest.raises(PoolLocked) as exc:
            with WorktreePool(History.open(path / "data")):
                pass
        assert exc.value.exit_code == ExitCode.USER_ERROR
        assert f"pid {os.getpid()}" in exc.value.message
        assert "another regressbisect hunt is running" in exc.value.message
        with pytest.raises(PoolLocked):
            clean(history)
    with WorktreePool(history) as pool:  # released on exit
        pool.checkout(0, shas[0])


def test_checkout_needs_the_lock(repo):
    path, shas = repo
    with pytest.raises(RuntimeError, match="pool lock"):
        WorktreePool(History.open(path)).checkout(0, shas[0])


def test_lock_is_released_when_the_holder_is_killed(repo):
    path, shas = repo
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from regressbisect.git.history import History
            from regressbisect.git.worktrees import WorktreePool
            pool = WorktreePool(History.open(Path({str(path)!r}))).__enter__()
            print("locked", flush=True)
            time.sleep(60)
        """)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(PoolLocked) as exc:
            WorktreePool(History.open(path)).__enter__()
        assert f"pid {holder.pid}" in exc.value.message
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        with WorktreePool(History.open(path)) as pool:
            assert_exactly(pool.checkout(0, shas[1]), path, shas[1])
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.stdout.close()


def test_clean_removes_everything(repo):
    path, shas = repo
    history = History.open(path)
    before = sorted(p.name for p in (history.common_dir / "worktrees").glob("*")) \
        if (history.common_dir / "worktrees").exists() else []
    with WorktreePool(history, slots=2) as pool:
        pool.checkout(0, shas[0])
        pool.checkout(1, shas[1])
    assert len(pool_worktrees(path)) == 2
    assert clean(history) == 2
    assert pool_worktrees(path) == []
    assert not (history.common_dir / "regressbisect" / "worktrees").exists()
    after = sorted(p.name for p in (history.common_dir / "worktrees").glob("*"))
    assert after == before
    assert clean(history) == 0


def test_users_dirty_checkout_is_byte_identical(repo):
    path, shas = repo
    (path / "notes.log").write_text("ignored by .gitignore\n")
    make_dirty(path, tracked="model.py", staged="data/b.txt")
    # Stale stat info: any index refresh of ours would rewrite the user's index.
    stamp = os.stat(path / ".gitignore").st_mtime + 50
    os.utime(path / ".gitignore", (stamp, stamp))
    before = snapshot_checkout(path)
    assert before["stash"] and before["diff_cached"] and b"untracked_notes" in before["status"]
    history = History.open(path)
    good_patch = git(path, "diff", shas[0], shas[1]) + "\n"
    with WorktreePool(history, slots=2) as pool:
        for sha in shas + shas[::-1]:
            pool.checkout(0, sha)
        pool.checkout(1, shas[0], patch=good_patch)
        with pytest.raises(PatchDoesNotApply):
            pool.checkout(1, shas[2], patch=good_patch)
    clean(history)
    assert snapshot_checkout(path) == before


def test_works_from_inside_a_users_linked_worktree(repo, tmp_path):
    path, shas = repo
    linked = tmp_path / "linked"
    git(path, "worktree", "add", "-q", "-b", "feature", str(linked), shas[1])
    make_dirty(linked, tracked="model.py", staged="data/b.txt", stash=False)
    main_before, linked_before = snapshot_checkout(path), snapshot_checkout(linked)
    history = History.open(linked)
    with WorktreePool(history) as pool:
        slot = pool.checkout(0, shas[2])
        assert slot.is_relative_to((path / ".git").resolve())
        assert_exactly(slot, path, shas[2])
    with pytest.raises(PoolLocked):  # one lock per repository, whichever worktree opens it
        with WorktreePool(History.open(path)):
            with WorktreePool(history):
                pass
    assert clean(history) == 1
    assert snapshot_checkout(path) == main_before
    assert snapshot_checkout(linked) == linked_before
    assert git(path, "worktree", "list", "--porcelain").count("worktree ") == 2


# -- repair after a killed hunt -------------------------------------------------------------

def _break_metadata(slot: Path) -> None:
    import shutil
    shutil.rmtree(admin_dir(slot))          # git's side of the worktree vanished


def _break_directory(slot: Path) -> None:
    import shutil
    shutil.rmtree(slot)                     # our side vanished, git's metadata is stale


def _break_gitfile(slot: Path) -> None:
    (slot / ".git").write_text("garbage")   # killed while writing


def _leave_index_lock(slot: Path) -> None:
    (admin_dir(slot) / "index.lock").write_text("")  # killed inside `git checkout`


def _corrupt_index(slot: Path) -> None:
    (admin_dir(slot) / "index").write_bytes(b"DIRC-not-really")


@pytest.mark.parametrize("damage", [_break_metadata, _break_directory, _break_gitfile,
                                    _leave_index_lock, _corrupt_index])
def test_damaged_slot_is_repaired(repo, damage):
    path, shas = repo
    history = History.open(path)
    with WorktreePool(history) as pool:
        slot = pool.checkout(0, shas[0])
        (slot / "leftover.txt").write_text("x")
        damage(slot)
        assert pool.checkout(0, shas[1]) == slot
        assert_exactly(slot, path, shas[1])
    assert pool_worktrees(path) == [str(slot)]
    git(path, "worktree", "prune")
    assert pool_worktrees(path) == [str(slot)]  # the repaired metadata is not stale


def test_checkout_accepts_a_name_but_never_an_option(repo):
    path, shas = repo
    from regressbisect.errors import UserError
    with WorktreePool(History.open(path)) as pool:
        assert_exactly(pool.checkout(0, "main~1"), path, shas[1])
        with pytest.raises(UserError, match="unknown revision"):
            pool.checkout(0, "--orphan=x")
