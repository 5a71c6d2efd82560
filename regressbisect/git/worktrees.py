"""A pool of detached git worktrees, reused across probes and hunts, locked against a second hunt.

Layout, all inside the user's git common dir (never in their work tree):

    <common_dir>/regressbisect/lock                     flock'ed by the running hunt (pid, time)
    <common_dir>/regressbisect/worktrees/slot-<k>/      detached worktree k

A hunt with a setup step widens the pool beyond its slots (`widen`: worktrees kept built per
candidate, docs/setup.md); the worktrees beyond the slots are removed when the pool is closed.

A slot is created once (`git worktree add --detach`, through GitPython's `repo.git`) and then
switched in place (`git checkout --detach --force` + `git clean -ffdx`), which costs tens of
milliseconds instead of the hundreds a fresh worktree costs; the switch and `git apply` run
through `run_git`, a bare subprocess, since they are on every probe's path and need the
worktree's own directory and bytes on stdin. The switch is exact: every untracked and ignored file
(build outputs, `__pycache__`) is removed too, so a probe never sees files of another candidate.
The only writes to the user's repository are the worktree metadata git keeps under
`<common_dir>/worktrees/` and our own directory.

Submodules are checked out in every slot at the commits the candidate records (`git submodule
update --init --force` per submodule, recursively, then `git clean` inside each). For a linked
worktree git keeps a submodule's repository under the worktree's own admin directory
(`<common_dir>/worktrees/slot-<k>/modules/<name>`), not in the shared `<common_dir>/modules`, so
each slot clones it once and later switches only check out. The clone is taken from the user's
own clone of that submodule (`<common_dir>/modules/<name>`, a local clone: hard links, no
network) where there is one, else from its URL (the user's `submodule.<name>.url`, else
`.gitmodules`, relative URLs resolved as git does). The URL and the "active" flag go on the
command line (`-c`), so that `submodule init` finds them set and writes nothing into the
user's config (which linked worktrees share). A patch that moves a submodule (a hunk of kind
'submodule', git/hunks.py) has it checked out at its new commit after the patch is applied: the
slot's index records that commit (`git update-index`), as a commit that moved it would, and the
same `submodule update` checks it out; the next switch resets the index.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Mapping, Optional

from regressbisect.errors import UserError, warn
from regressbisect.git.hunks import APPLY_ARGS, encode_patch, submodule_moves
from regressbisect.git.history import GitFailed, History, run_git

_OUR_DIR = "regressbisect"
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class PoolLocked(UserError):
    """Another regressbisect process holds this repository's pool lock."""

    def __init__(self, pid: int | None, since: str | None):
        who = f"pid {pid}" if pid is not None else "pid unknown"
        when = f", since {since}" if since else ""
        super().__init__(f"another regressbisect hunt is running on this repo ({who}{when}); "
                         f"wait for it or stop it")
        self.pid = pid
        self.since = since


class RepositoryNotWritable(UserError):
    """The git dir cannot be written (a read-only file system or someone else's clone): the pool's
    lock and worktrees live there."""

    def __init__(self, where: Path, error: OSError):
        super().__init__(f"worktrees cannot be made in a read-only repository: copy it (git clone) and "
                         f"hunt in the copy ({where}: {error.strerror})")
        self.where = where
        self.reason = error.strerror


class PatchDoesNotApply(Exception):
    """`git apply` refused the patch; the slot was reset to the plain commit."""

    def __init__(self, line: str, stderr: str = ""):
        super().__init__(line)
        self.line = line
        """The first `error:` line of git apply (e.g. 'error: patch failed: model.py:12')."""
        self.stderr = stderr
        """Everything git apply printed on stderr."""


class SubmoduleUnavailable(Exception):
    """A submodule of the candidate could not be checked out in its slot (one line: which, why, the fix)."""

    def __init__(self, line: str):
        super().__init__(line)
        self.line = line


def pool_root(history: History) -> Path:
    """`<common_dir>/regressbisect`: everything of ours inside the user's repository."""
    return history.common_dir / _OUR_DIR


def _read_lock_holder(fd: int) -> tuple[int | None, str | None]:
    try:
        raw = os.pread(fd, 4096, 0).decode(errors="replace")
        holder = json.loads(raw)
        return int(holder["pid"]), str(holder["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, None  # holder is between truncate and write, or the file is foreign


def hunt_running(lock_dir: Path) -> bool:
    """Whether a hunt holds the pool lock in `lock_dir` (a repository's `pool_root`), seen without
    taking it (a hunt starting at that moment must not find it held): the kernel's table of
    flocks, /proc/locks; where there is none, whether the pid the lock file names runs."""
    path = lock_dir / "lock"
    try:
        inode = path.stat().st_ino
    except OSError:
        return False
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        try:
            with open(path, "rb") as f:
                pid, _ = _read_lock_holder(f.fileno())
            if pid is None:
                return False
            os.kill(pid, 0)
            return True
        except (OSError, ValueError):
            return False
    return any(fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(inode)
               for fields in (line.split() for line in table.splitlines()) if len(fields) > 5)


def _open_lock_file(path: Path) -> int:
    """The lock file opened for writing (made, with its directory, when missing);
    RepositoryNotWritable where the repository cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise RepositoryNotWritable(path.parent, error) from None
        raise


def check_writable(history: History) -> None:
    """RepositoryNotWritable (copy it) where the pool's lock cannot be made: a hunt checks it before
    anything else, since the default store lives there too and its own error could only advise
    --store, which does not help (the lock and the worktrees stay in the repository)."""
    os.close(_open_lock_file(pool_root(history) / "lock"))


class _PoolLock:
    """An exclusive `flock` on `<common_dir>/regressbisect/lock`.

    flock, not a pid file: the kernel releases it when the holder dies, even by SIGKILL, so a
    killed hunt never leaves the repository locked. The fd is not inherited by probes
    (Python opens non-inheritable fds), so a leftover probe cannot keep the lock either.
    """

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            raise RuntimeError("pool lock already held by this pool")
        fd = _open_lock_file(self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, since = _read_lock_holder(fd)
            os.close(fd)
            raise PoolLocked(pid, since) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": since}).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class WorktreePool:
    """`slots` detached worktrees of one repository; use as a context manager (it holds the lock).

    Slots may be switched from different threads at once (each worktree has its own index);
    one slot must not be used by two threads at once.
    """

    def __init__(self, history: History, slots: int = 1, *, root: Path | None = None):
        if slots < 1:
            raise ValueError("a pool needs at least one slot")
        self.history = history
        self.slots = slots
        self.trees = slots
        """Worktrees slot-0..slot-<trees-1>: the slots, then those `widen` added."""
        # `root`: somewhere else than the git dir, e.g. a filesystem Slurm nodes share. The lock
        # stays in the git dir: it guards the repository, wherever its slots live.
        self.root = (root or pool_root(history)) / "worktrees"
        self._lock = _PoolLock(pool_root(history) / "lock")
        self._admin_lock = threading.Lock()  # `git worktree add/prune` edit shared metadata
        self._base_url: str | None = None

    # -- lock -------------------------------------------------------------------------------

    def __enter__(self) -> "WorktreePool":
        self._lock.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self._remove_spares()
        finally:
            self._lock.release()

    def _remove_spares(self) -> None:
        """The worktrees beyond the slots (`widen`) go with the hunt; one that cannot be removed
        stays for `regressbisect clean`, which a warning names: the hunt's result is not lost."""
        from git import GitCommandError

        for spare in range(self.slots, self.trees):
            where = self.path(spare)
            if not (where.exists() or where.is_symlink()):
                continue
            try:
                self._remove(where)
            except (OSError, GitCommandError) as exc:
                warn(f"cannot remove the worktree {where} ({exc}); `regressbisect clean` removes it")

    # -- slots ------------------------------------------------------------------------------

    def widen(self, trees: int) -> None:
        """Allow `trees` worktrees (more than the slots); those beyond the slots go at `__exit__`."""
        self.trees = max(self.trees, trees)

    def path(self, slot: int) -> Path:
        """Where worktree `slot` lives (it may not exist before its first checkout)."""
        if not 0 <= slot < self.trees:
            raise IndexError(f"slot {slot} out of range 0..{self.trees - 1}")
        return self.root / f"slot-{slot}"

    def checkout(self, slot: int, commit: str, patch: str | None = None) -> Path:
        """Make slot `slot` exactly `commit` (plus `patch`, if given) and return its path.

        The patch is applied with plain `git apply` (working tree only), so the slot's index
        stays at `commit` and the next switch removes files the patch created. On
        PatchDoesNotApply the slot is left clean at `commit`. A submodule the patch moves
        (git/hunks.py, kind 'submodule') is checked out at its new commit afterwards.
        """
        if not self._lock.held:
            raise RuntimeError("WorktreePool.checkout needs the pool lock: use `with pool:`")
        where = self.path(slot)
        if not _FULL_SHA.fullmatch(commit):
            commit = self.history.resolve(commit)  # never hand git a name starting with '-'
        if not self._is_healthy(where):
            self._recreate(where, commit)
        else:
            try:
                self._switch(where, commit)
            except GitFailed:
                # A half-finished checkout of a killed hunt, a corrupt index ...: start afresh.
                self._recreate(where, commit)
        _check_out_submodules(where, self.history.common_dir, self._superproject_url())
        moves, patch = submodule_moves(patch) if patch else ({}, patch)
        if patch:
            self._apply(where, commit, patch)
        if moves:
            _move_submodules(where, moves, self.history.common_dir, self._superproject_url())
        return where

    def _superproject_url(self) -> str:
        """What a relative submodule URL is relative to: the default remote's URL, else the
        user's work tree (git's rule)."""
        if self._base_url is None:
            proc = run_git(self.history.root, "config", "--get", "remote.origin.url", check=False)
            self._base_url = proc.stdout.decode().strip() or str(self.history.root)
        return self._base_url

    def _switch(self, where: Path, commit: str) -> None:
        run_git(where, "checkout", "--quiet", "--detach", "--force", commit)
        # -ff: also nested repositories; -d: directories; -x: ignored files (exact, see module doc)
        run_git(where, "clean", "-ffdxq")

    def _apply(self, where: Path, commit: str, patch: str) -> None:
        data = patch if patch.endswith("\n") else patch + "\n"
        # The flags hunks.py builds its patches for (zero-context hunks apply in any subset);
        # encode_patch keeps the original bytes of files that are not valid UTF-8.
        proc = run_git(where, "apply", *APPLY_ARGS, "-", input=encode_patch(data), check=False)
        if proc.returncode == 0:
            return
        stderr = proc.stderr.decode(errors="replace")
        # git apply is atomic, but reset anyway: the slot must be exactly `commit` after this.
        self._switch(where, commit)
        errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
        line = errors[0] if errors else (stderr.strip().splitlines() or ["git apply failed"])[0]
        raise PatchDoesNotApply(line, stderr)

    # -- creation and repair ----------------------------------------------------------------

    def _is_healthy(self, where: Path) -> bool:
        """True when `where` is a registered worktree whose metadata points back at it.

        Reads three small files instead of spawning git (this runs before every switch).
        Stale `index.lock`/`HEAD.lock` files of a killed hunt are removed: we hold the pool
        lock, so no other git process of ours can be working in this slot.
        """
        try:
            gitfile = (where / ".git").read_text().strip()
            if not gitfile.startswith("gitdir: "):
                return False
            admin = Path(gitfile[len("gitdir: "):])
            if not admin.is_absolute():
                admin = (where / admin).resolve()
            backlink = Path((admin / "gitdir").read_text().strip())
            if not backlink.is_absolute():
                backlink = (admin / backlink).resolve()
            if backlink.resolve() != (where / ".git").resolve():
                return False
            if not (admin / "HEAD").is_file() or not (admin / "commondir").is_file():
                return False
        except OSError:
            return False
        for stale in ("index.lock", "HEAD.lock"):
            (admin / stale).unlink(missing_ok=True)
        return True

    def _recreate(self, where: Path, commit: str) -> None:
        """Remove whatever is at `where`, prune its stale metadata, and add a fresh worktree."""
        with self._admin_lock:
            self._remove_locked(where)
            where.parent.mkdir(parents=True, exist_ok=True)
            worktree = self.history.repo.git.worktree
            # --force: the path may still be registered by metadata that prune kept (locked).
            worktree("add", "--quiet", "--detach", "--force", str(where), commit)

    def _remove(self, where: Path) -> None:
        with self._admin_lock:
            self._remove_locked(where)

    def _remove_locked(self, where: Path) -> None:
        """Remove whatever is at `where` and prune the worktree metadata git no longer needs."""
        if where.exists() or where.is_symlink():
            shutil.rmtree(where, ignore_errors=True)
            if where.exists():
                where.unlink()
        self.history.repo.git.worktree("prune")


TrackedState = Mapping[str, Optional[bytes]]
"""The tracked files of a worktree that differ from its commit (a hunk patch, a setup step's
edits), each with its content; None: deleted."""


def tracked_state(where: Path) -> dict[str, bytes | None]:
    """What `where`'s tracked files hold beyond its commit (`git diff HEAD`, submodules left
    out); untracked and ignored files (build outputs) are not part of it."""
    proc = run_git(where, "diff", "--name-only", "-z", "--no-renames", "--ignore-submodules=all", "HEAD")
    paths = [p for p in proc.stdout.decode(errors="surrogateescape").split("\0") if p]
    return {path: _content(where / path) for path in paths}


def restore_tracked(where: Path, state: TrackedState) -> list[str]:
    """Make `where`'s tracked files hold `state` again (what `tracked_state` read right after
    the setup step ran), leaving untracked and ignored files (the build's outputs) alone: a file
    `state` does not name goes back to the commit (`git checkout HEAD --`), one it names gets its
    content back. Returns the paths that differed, sorted; [] (one `git diff`) when none did."""
    now = tracked_state(where)
    as_commit = object()
    differ = sorted(p for p in set(now) | set(state) if now.get(p, as_commit) != state.get(p, as_commit))
    to_commit = [p for p in differ if p not in state]
    if to_commit:
        run_git(where, "--literal-pathspecs", "checkout", "--quiet", "HEAD", "--pathspec-from-file=-",
                "--pathspec-file-nul", input="\0".join(to_commit).encode(errors="surrogateescape"))
    for path in differ:
        if path not in state:
            continue
        target, content = where / path, state[path]
        if content is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    return differ


def _content(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _check_out_submodules(work: Path, user_git_dir: Path, base_url: str) -> None:
    """Check out the submodules of the commit checked out in `work` (a slot, or a submodule of
    one) at the commits it records, recursively, each clean. `user_git_dir`: the user's git dir
    of the same repository (where their clones of its submodules are, `modules/<name>`, and
    their config); `base_url`: the URL relative submodule URLs are relative to."""
    if not (work / ".gitmodules").is_file():
        return
    listing = run_git(work, "ls-files", "--stage", "-z").stdout.decode(errors="surrogateescape")
    gitlinks = [entry.split("\t", 1)[1] for entry in listing.split("\0") if entry.startswith("160000 ")]
    if not gitlinks:
        return
    declared = _gitmodules(work)
    for path in gitlinks:
        _check_out_submodule(work, path, declared, user_git_dir, base_url)


def _move_submodules(work: Path, moves: Mapping[str, str], user_git_dir: Path, base_url: str) -> None:
    """Check out each submodule `moves` names (path -> commit) at that commit, recursively: the
    slot's index records it there, as a commit that moved it would, and the next switch resets it."""
    declared = _gitmodules(work)
    for path, commit in moves.items():
        run_git(work, "update-index", "--cacheinfo", f"160000,{commit},{path}")
        _check_out_submodule(work, path, declared, user_git_dir, base_url)


def _check_out_submodule(work: Path, path: str, declared: Mapping[str, Mapping[str, str]], user_git_dir: Path,
                         base_url: str) -> None:
    """Check out the submodule at `path` of `work` at the commit `work`'s index records, clean, and
    its own submodules (`_check_out_submodules`)."""
    name = next((n for n, entry in declared.items() if entry.get("path") == path), None)
    if name is None:
        raise SubmoduleUnavailable(f"submodule {path} has no entry in .gitmodules at this commit, so git "
                                   f"cannot check it out; add one (`git submodule add`)")
    url = _user_url(user_git_dir / "config", name) or _resolve_url(declared[name].get("url", ""), base_url)
    user_clone = user_git_dir / "modules" / name
    source = str(user_clone) if (user_clone / "HEAD").is_file() else url
    proc = run_git(work, "-c", "protocol.file.allow=always", "-c", f"submodule.{name}.url={source}",
                   "-c", f"submodule.{name}.active=true",
                   "submodule", "update", "--quiet", "--init", "--force", "--checkout", "--", path,
                   check=False)
    if proc.returncode != 0:
        errors = [ln for ln in proc.stderr.decode(errors="replace").splitlines()
                  if ln.startswith(("fatal:", "error:"))] or ["git submodule update failed"]
        raise SubmoduleUnavailable(
            f"submodule {path} cannot be checked out from {source} ({errors[0]}); initialise it in "
            f"your checkout, the hunt clones it from there: `git submodule update --init --recursive` "
            f"(first `git config submodule.{name}.url <where it is now>` if it moved)")
    run_git(work / path, "clean", "-ffdxq")
    _check_out_submodules(work / path, user_clone, url)


def _gitmodules(work: Path) -> dict[str, dict[str, str]]:
    """{name: {"path": ..., "url": ...}} of `work`'s .gitmodules."""
    proc = run_git(work, "config", "-f", ".gitmodules", "-z", "--get-regexp", r"^submodule\..*\.(path|url)$",
                   check=False)
    out: dict[str, dict[str, str]] = {}
    for entry in proc.stdout.decode(errors="surrogateescape").split("\0"):
        key, _, value = entry.partition("\n")
        if key.startswith("submodule.") and key.count(".") >= 2:
            name, _, field = key[len("submodule."):].rpartition(".")
            out.setdefault(name, {})[field] = value
    return out


def _user_url(config: Path, name: str) -> str | None:
    """The user's own `submodule.<name>.url` (set by their `git submodule init`), if any."""
    if not config.is_file():
        return None
    proc = run_git(config.parent, "config", "-f", str(config), "--get", f"submodule.{name}.url", check=False)
    return proc.stdout.decode().strip() or None


def _resolve_url(url: str, base: str) -> str:
    """A .gitmodules URL as git resolves it: `./x` and `../x` relative to `base` (the
    superproject's URL, taken as a directory)."""
    if not url.startswith(("./", "../")):
        return url
    base = base.rstrip("/")
    while url.startswith(("./", "../")):
        if url.startswith("../"):
            cut = max(base.rfind("/"), base.rfind(":"))
            base = base[:cut] if cut > 0 else base
            url = url[3:]
        else:
            url = url[2:]
    return f"{base}/{url}"


def checked_out(worktree: Path) -> str | None:
    """The commit a worktree of the pool holds (its detached HEAD), read from its files without
    a git process; None where it is not such a worktree or HEAD names a branch."""
    try:
        dotgit = (Path(worktree) / ".git").read_text(encoding="utf-8").strip()
        if not dotgit.startswith("gitdir:"):
            return None
        admin = Path(worktree) / dotgit[len("gitdir:"):].strip()
        head = (admin / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return head if _FULL_SHA.fullmatch(head) else None


def _registered_worktrees(history: History) -> list[Path]:
    out = history.repo.git.worktree("list", "--porcelain", "-z")
    return [Path(field[len("worktree "):]) for field in out.split("\0")
            if field.startswith("worktree ")]


def clean(history: History, root: Path | None = None) -> int:
    """`regressbisect clean`: remove every pool worktree and the pool directory.

    Returns how many worktrees were removed (registered ones and orphan slot directories).
    Raises PoolLocked while a hunt holds the lock. The slots' virtualenvs (`venvs/`, rebuilt in
    a moment when needed) go too; the lock file, the sample store and the setup logs are kept.
    `root`: a pool kept elsewhere (a Slurm shared_dir).
    """
    from git import GitCommandError

    pool = WorktreePool(history, root=root)
    removed = 0
    ours = pool_root(history)
    if not os.access(ours if ours.exists() else ours.parent, os.W_OK):  # the lock cannot be taken
        raise UserError(f"nothing can be removed from a read-only repository ({ours}): make it "
                        f"writable first")
    with pool:
        pool_dir = pool.root.resolve()
        for wt in _registered_worktrees(history):
            if not wt.resolve().is_relative_to(pool_dir):
                continue  # one of the user's own worktrees
            try:
                history.repo.git.worktree("remove", "--force", "--force", str(wt))
            except GitCommandError:
                shutil.rmtree(wt, ignore_errors=True)  # prune below drops its metadata
            removed += 1
        if pool.root.exists():
            removed += sum(1 for child in pool.root.iterdir() if child.is_dir())
            shutil.rmtree(pool.root, ignore_errors=True)
        history.repo.git.worktree("prune")
        shutil.rmtree((root or pool_root(history)) / "venvs", ignore_errors=True)
    return removed
