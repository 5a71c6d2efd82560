"""git/worktrees.py against real repositories: exact switches, reuse, patches, lock, repair."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from regressbisect.errors import ExitCode, UserError
from regressbisect.git.history import History
from regressbisect.git.hunks import build_patch, collect_hunks
from regressbisect.git.worktrees import (PatchDoesNotApply, PoolLocked, SubmoduleUnavailable, WorktreePool,
                                        clean)
from regressbisect.testing.gitrepo import commit, git, make_dirty, make_repo, snapshot_checkout

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


def _repo_with_submodule(tmp_path: Path, url: str | None = None) -> tuple[Path, Path, list[str], list[str]]:
    """A library repo `lib` (two commits: VALUE = 1, VALUE = 2) and a project `repo` that has it
    as submodule `vendor/lib`: commit 0 adds it at VALUE = 1, commit 1 moves it to VALUE = 2,
    commit 2 removes it. The project's checkout is left at commit 1 with the submodule initialised."""
    lib = tmp_path / "lib"
    lib_shas = make_repo(lib, [{"libmod.py": "VALUE = 1\n"}, {"libmod.py": "VALUE = 2\n"}])
    path = tmp_path / "repo"
    make_repo(path, [{"bench.py": "import libmod\n"}])
    git(path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", url or str(lib), "vendor/lib")
    git(path / "vendor" / "lib", "checkout", "-q", lib_shas[0])
    shas = [commit(path, {}, "add the submodule at VALUE = 1")]
    git(path / "vendor" / "lib", "checkout", "-q", lib_shas[1])
    shas.append(commit(path, {}, "move the submodule to VALUE = 2"))
    git(path, "rm", "-q", "vendor/lib")
    shas.append(commit(path, {}, "remove the submodule"))
    git(path, "checkout", "-q", shas[1])
    git(path, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    return path, lib, shas, lib_shas


def _user_state(path: Path) -> dict:
    """What of the user's repository a checkout of a slot must not change: config, the submodule's
    clone (its HEAD, refs, config) and checkout."""
    modules = path / ".git" / "modules"
    return {"config": (path / ".git" / "config").read_bytes(),
            "modules": {p.relative_to(modules).as_posix(): p.read_bytes() for p in sorted(modules.rglob("*"))
                        if p.is_file() and "objects" not in p.parts and p.name != "index"}
            if modules.exists() else None,
            "checkout": snapshot_checkout(path)}


def test_submodules_are_checked_out_at_each_candidates_commit(tmp_path):
    path, _, shas, _ = _repo_with_submodule(tmp_path)
    before = _user_state(path)
    with WorktreePool(History.open(path)) as pool:
        slot = pool.checkout(0, shas[0])
        assert (slot / "vendor" / "lib" / "libmod.py").read_text() == "VALUE = 1\n"
        (slot / "vendor" / "lib" / "libmod.py").write_text("garbage\n")   # a probe's leftovers
        (slot / "vendor" / "lib" / "built.so").write_bytes(b"\x00")
        assert pool.checkout(0, shas[1]) == slot
        assert (slot / "vendor" / "lib" / "libmod.py").read_text() == "VALUE = 2\n"
        assert not (slot / "vendor" / "lib" / "built.so").exists()
        pool.checkout(0, shas[0])
        assert (slot / "vendor" / "lib" / "libmod.py").read_text() == "VALUE = 1\n"
        assert git(slot / "vendor" / "lib", "status", "--porcelain", "--ignored") == ""
        pool.checkout(0, shas[2])
        assert not (slot / "vendor").exists()
        pool.checkout(0, shas[1])
    assert _user_state(path) == before
    assert clean(History.open(path)) == 1 and pool_worktrees(path) == []   # a slot with a submodule too
    assert _user_state(path) == before


def test_submodules_the_user_never_initialised_come_from_their_url(tmp_path):
    path, _, shas, _ = _repo_with_submodule(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-recurse-submodules", str(path), str(clone))
    before = _user_state(clone)
    with WorktreePool(History.open(clone)) as pool:
        slot = pool.checkout(0, shas[0])
        assert (slot / "vendor" / "lib" / "libmod.py").read_text() == "VALUE = 1\n"
    assert _user_state(clone) == before   # no submodule.* entry written into the user's config
    assert "[submodule" not in (clone / ".git" / "config").read_text()


def test_a_submodule_that_cannot_be_checked_out_is_named_with_the_fix(tmp_path):
    path, lib, shas, _ = _repo_with_submodule(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-recurse-submodules", str(path), str(clone))
    lib.rename(tmp_path / "lib-moved")   # its URL leads nowhere now, and the user has no clone of it
    with WorktreePool(History.open(clone)) as pool:
        with pytest.raises(SubmoduleUnavailable) as raised:
            pool.checkout(0, shas[0])
    message = str(raised.value)
    assert "vendor/lib" in message and "git submodule update --init --recursive" in message
    assert "\n" not in message


def test_a_patch_that_moves_a_submodule_checks_it_out_at_the_new_commit(tmp_path):
    path, _, shas, lib_shas = _repo_with_submodule(tmp_path)
    (move,) = collect_hunks(path, shas[0], target=shas[1])     # commit 1 moves the submodule, nothing else
    assert (move.kind, move.file) == ("submodule", "vendor/lib")
    assert move.excerpt == f"the submodule vendor/lib moved {lib_shas[0][:10]}..{lib_shas[1][:10]}"
    before = _user_state(path)
    with WorktreePool(History.open(path)) as pool:
        slot = pool.checkout(0, shas[0], build_patch([move]))
        assert (slot / "vendor" / "lib" / "libmod.py").read_text() == "VALUE = 2\n"
        assert git(slot / "vendor" / "lib", "rev-parse", "HEAD") == lib_shas[1]
        assert pool.checkout(0, shas[0]) == slot      # without the move: where commit 0 has it
        assert (slot / "vendor" / "lib" / "libmod.py").read_text() == "VALUE = 1\n"
        assert git(slot, "status", "--porcelain") == ""
    assert _user_state(path) == before
    # one that is added or removed is no hunk: a commit's diff holding one gives no hunk verdict
    with pytest.raises(UserError, match="removes the submodule vendor/lib, which no hunk can hold"):
        collect_hunks(path, shas[1], target=shas[2])


def test_the_work_trees_submodule_at_another_commit_is_a_hunk(tmp_path):
    path, _, shas, lib_shas = _repo_with_submodule(tmp_path)
    git(path / "vendor" / "lib", "checkout", "-q", lib_shas[0])    # HEAD records lib_shas[1]
    (move,) = collect_hunks(path)
    assert move.excerpt == f"the submodule vendor/lib moved {lib_shas[1][:10]}..{lib_shas[0][:10]}"
    with WorktreePool(History.open(path)) as pool:
        slot = pool.checkout(0, shas[1], build_patch([move]))
        assert (slot / "vendor" / "lib" / "libmod.py").read_text() == "VALUE = 1\n"


def test_nested_submodules_with_relative_urls_are_checked_out(tmp_path):
    make_repo(tmp_path / "inner", [{"inner.py": "I = 1\n"}])
    make_repo(tmp_path / "mid", [{"mid.py": "M = 1\n"}])
    git(tmp_path / "mid", "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../inner", "deep")
    commit(tmp_path / "mid", {}, "nest inner")
    top = tmp_path / "top"
    make_repo(top, [{"top.py": "T = 1\n"}])
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../mid", "mid")
    sha = commit(top, {}, "add mid")
    # the user's clone, submodules never initialised: ../mid is relative to its origin, ../inner to mid's
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(top), str(clone))
    before = _user_state(clone)
    with WorktreePool(History.open(clone)) as pool:
        slot = pool.checkout(0, sha)
        assert sorted(p.relative_to(slot).as_posix() for p in slot.rglob("*.py")) == [
            "mid/deep/inner.py", "mid/mid.py", "top.py"]
    assert _user_state(clone) == before
