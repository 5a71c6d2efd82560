"""Read-only view of the user's repository: refs, first-parent ranges, trees, pyproject.

Nothing here writes to the user's repository. Commits, ranges, trees and blobs are read with
GitPython (`History.repo`: one persistent `git cat-file` per repository instead of a process per
query); discovery and ref resolution stay with `git rev-parse` (it honours GIT_CEILING_DIRECTORIES
and safe.directory, and its errors name what is wrong). Both run git with GIT_OPTIONAL_LOCKS=0 (so
no read refreshes and rewrites the user's index stat cache), hooks and fsmonitor off, and without
inherited GIT_DIR / GIT_INDEX_FILE / GIT_WORK_TREE-style variables (a hook or an IDE that set them
would otherwise point our commands at the user's own index).
"""
from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from regressbisect.errors import UserError, warn
from regressbisect.tomlread import tomllib

if TYPE_CHECKING:  # gitpython is imported lazily: `regressbisect --help` should stay cheap
    import git

# Variables that redirect git away from the repository found by discovery.
_REDIRECTING_GIT_VARS = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX",
)

# Config overrides for every call: no user hooks (a post-checkout hook would run on each
# worktree switch), no fsmonitor daemon for our worktrees, no GPG noise in log output.
_SAFE_CONFIG = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "log.showSignature=false",
    "-c", "advice.detachedHead=false",
)

_UNSHALLOW = "git fetch --unshallow, then run again"
"""The fix for a commit a shallow clone does not hold."""



def git_env() -> dict[str, str]:
    """The environment of every git call we make: no optional locks, no redirection."""
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING_GIT_VARS}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"  # stable, parseable error messages
    return env


def run_git(cwd: Path, *args: str, input: bytes | None = None,
            check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """Run one git command in `cwd` (plain subprocess: a worktree switch must cost few ms)."""
    proc = subprocess.run(["git", *_SAFE_CONFIG, *args], cwd=cwd, input=input,
                          capture_output=True, env=git_env())
    if check and proc.returncode != 0:
        raise GitFailed(args, proc.returncode, proc.stderr.decode(errors="replace"))
    return proc


class GitFailed(RuntimeError):
    """A git command that should not fail did; carries its stderr (an internal error)."""

    def __init__(self, args: tuple[str, ...], returncode: int, stderr: str):
        self.args_ = args
        self.returncode = returncode
        self.stderr = stderr
        first = stderr.strip().splitlines()[0] if stderr.strip() else f"exit {returncode}"
        super().__init__(f"git {' '.join(args[:3])} failed: {first}")


@dataclass(frozen=True)
class Change:
    """One entry a commit changes against the commit before it (`History.changes`)."""

    status: str
    """'A' added, 'D' deleted, 'M' modified, 'T' its type changed (git's letters)."""
    path: str
    """From the top of the work tree, '/'-separated."""
    kind: str
    """'blob' (a file or a symlink), 'tree' (a directory) or 'gitlink' (a submodule)."""


_KINDS = {"040000": "tree", "160000": "gitlink"}


@dataclass(frozen=True)
class CommitInfo:
    """One commit as reports show it."""

    sha: str
    """Full 40-hex commit sha."""
    tree: str
    """Tree sha: identical trees share samples in the store."""
    subject: str
    """First line of the commit message."""
    author: str
    """'Name <email>' of the author."""
    date: str
    """Author date, strict ISO 8601 with offset."""
    parents: tuple[str, ...] = ()
    """Full shas of its parents, the first parent first (two or more: a merge)."""

    @property
    def short(self) -> str:
        return self.sha[:10]


def _commit_info(commit: "git.Commit") -> CommitInfo:
    """A GitPython commit as `git log --format=%H %T %s '%an <%ae>' %aI` shows it."""
    message = commit.message if isinstance(commit.message, str) else commit.message.decode(errors="replace")
    # %s: the first paragraph of the message, its lines joined by spaces
    subject = " ".join(line.strip() for line in message.strip().split("\n\n")[0].splitlines())
    return CommitInfo(sha=commit.hexsha, tree=commit.tree.hexsha, subject=subject,
                      author=f"{commit.author.name} <{commit.author.email}>",
                      date=commit.authored_datetime.isoformat(),
                      parents=tuple(parent.hexsha for parent in commit.parents))


def _without_work_tree(path: Path) -> UserError | None:
    """The error for a repository that has no work tree at `path` (a bare one, or `path` inside
    a .git directory), None when `path` is no repository at all. Hunts need a work tree: its
    pyproject.toml, its uncommitted changes and its checkout are what they read."""
    proc = run_git(path, "rev-parse", "--path-format=absolute", "--is-bare-repository",
                   "--is-inside-git-dir", "--absolute-git-dir", check=False)
    lines = proc.stdout.decode().splitlines()
    if proc.returncode != 0 or len(lines) < 3:
        return None
    bare, inside, git_dir = lines[0] == "true", lines[1] == "true", Path(lines[2])
    if bare:
        return UserError(f"{git_dir} is a bare repository: it has no work tree to hunt in; run in "
                         f"a clone with a work tree (`git clone {git_dir} DIR`) or pass --repo DIR")
    if inside:
        work_tree = f"--repo {git_dir.parent}" if git_dir.name == ".git" else "--repo with its work tree"
        return UserError(f"{path} is inside the git directory {git_dir}: run in the work tree or "
                         f"pass {work_tree}")
    return None


class History:
    """The user's repository, read only. Build with `History.open(path)`."""

    root: Path
    """Top of the user's work tree (of the linked worktree, when opened inside one)."""
    common_dir: Path
    """Absolute git common dir: the main `.git`, also when opened from a linked worktree."""

    def __init__(self, root: Path, common_dir: Path):
        self.root = root
        self.common_dir = common_dir
        self._info_cache: dict[str, CommitInfo] = {}
        # GitPython's object reader is one pipe to `git cat-file`: one reader at a time
        # (slots look up trees from their threads).
        self._repo_lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> "History":
        """Find the repository containing `path` (as git does, honouring GIT_CEILING_DIRECTORIES)."""
        path = Path(path).resolve()
        not_a_repo = UserError(
            f"not a git repository: {path} (run inside a git checkout or pass --repo)")
        if not path.is_dir():
            raise not_a_repo
        proc = run_git(path, "rev-parse", "--path-format=absolute", "--is-bare-repository",
                       "--show-toplevel", "--git-common-dir", check=False)
        if proc.returncode != 0:
            if b"dubious ownership" in proc.stderr:  # git refuses repos owned by someone else
                raise UserError(f"git refuses the repository at {path}: owned by another user "
                                f"(see `git config --global --add safe.directory`)")
            raise _without_work_tree(path) or not_a_repo
        lines = proc.stdout.decode().splitlines()
        if len(lines) < 3 or lines[0] == "true":
            raise _without_work_tree(path) or not_a_repo
        return cls(root=Path(lines[1]), common_dir=Path(lines[2]))

    @cached_property
    def repo(self) -> "git.Repo":
        """A GitPython handle on the same repository (read only), with run_git's safety: no
        optional locks, no hooks or fsmonitor, and redirecting variables pinned to this
        repository (GitPython's commands inherit os.environ and cannot drop a variable; it pins
        GIT_DIR and GIT_COMMON_DIR itself)."""
        import git

        repo = git.Repo(self.root)
        safe = {k: v for k, v in git_env().items() if k in ("GIT_OPTIONAL_LOCKS", "GIT_TERMINAL_PROMPT")}
        inherited = [k for k in _REDIRECTING_GIT_VARS if k in os.environ]
        if inherited:
            git_dir = Path(repo.git_dir)
            pinned = {"GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(self.root),  # (GitPython's own)
                      "GIT_INDEX_FILE": str(git_dir / "index"), "GIT_COMMON_DIR": str(self.common_dir),
                      "GIT_OBJECT_DIRECTORY": str(self.common_dir / "objects"),
                      "GIT_ALTERNATE_OBJECT_DIRECTORIES": "", "GIT_NAMESPACE": "", "GIT_PREFIX": ""}
            safe.update({k: pinned[k] for k in inherited})
        repo.git.update_environment(**safe)
        repo.git.set_persistent_git_options(c=[opt for opt in _SAFE_CONFIG if opt != "-c"])
        return repo

    def _git(self, *args: str, input: bytes | None = None,
             check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return run_git(self.root, *args, input=input, check=check)

    # -- refs -------------------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """Full sha of the commit `ref` names (branch, tag, sha, HEAD~3 ...)."""
        if not ref or ref.startswith("-") or "\n" in ref:
            raise UserError(f"unknown revision {ref!r} (not a commit in {self.root})")
        proc = self._git("rev-parse", "--verify", f"{ref}^{{commit}}", check=False)
        if proc.returncode == 0:
            return proc.stdout.decode().strip()
        stderr = proc.stderr.decode(errors="replace")
        if "ambiguous" in stderr:
            raise UserError(f"ambiguous revision {ref!r}: give more hex digits of the sha")
        kind = self._git("cat-file", "-t", ref, check=False)
        if kind.returncode == 0:
            raise UserError(f"revision {ref!r} names a {kind.stdout.decode().strip()}, "
                            f"not a commit")
        if self._is_shallow():   # the commit may lie beyond the boundary
            raise UserError(f"unknown revision {ref!r}: this clone is shallow (its history stops at "
                            f"its boundary, which may be before {ref!r}): {_UNSHALLOW}")
        raise UserError(f"unknown revision {ref!r} (not a commit in {self.root}; "
                        f"see `git log --oneline`)")

    def head(self) -> str:
        """Full sha of HEAD of the opened work tree."""
        proc = self._git("rev-parse", "--verify", "HEAD^{commit}", check=False)
        if proc.returncode != 0:
            raise UserError(f"repository {self.root} has no commits yet")
        return proc.stdout.decode().strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        """True when `older` is reachable from `newer` (a commit is its own ancestor)."""
        with self._repo_lock:
            return self.repo.is_ancestor(older, newer)

    # -- ranges -----------------------------------------------------------------------------

    def first_parent_range(self, good: str, bad: str) -> list[CommitInfo]:
        """[GOOD, ..., BAD], oldest first, along BAD's first-parent chain.

        The candidates are the commits on BAD's first-parent chain that descend from GOOD
        (`git rev-list --first-parent BAD ^GOOD` intersected with `--ancestry-path`), with GOOD
        put first. When GOOD is on that chain this is exactly the chain between them. When
        GOOD sits on a merged side branch, the oldest candidate is the merge that brought GOOD
        in, tested as one step (a warning says so); mainline commits beside the side branch
        are left out, because they do not contain GOOD and bisection needs every candidate to
        contain GOOD.
        """
        good_sha, bad_sha = self.resolve(good), self.resolve(bad)
        if good_sha == bad_sha:
            raise UserError(f"GOOD and BAD are the same commit ({good_sha[:10]}); "
                            f"pass an older GOOD or a newer BAD")
        if not self.is_ancestor(good_sha, bad_sha):
            if self.is_ancestor(bad_sha, good_sha):
                raise UserError(f"GOOD {good} ({good_sha[:10]}) is not an ancestor of BAD "
                                f"{bad} ({bad_sha[:10]}): the range GOOD..BAD is empty "
                                f"because BAD is the older one; swap them")
            raise UserError(f"GOOD {good} ({good_sha[:10]}) is not an ancestor of BAD {bad} "
                            f"({bad_sha[:10]}); swap them or pick a GOOD on BAD's history "
                            f"(`git merge-base {good} {bad}` is one)")
        chain = self._commits(f"{good_sha}..{bad_sha}", first_parent=True)
        with self._repo_lock:
            descendants = set(self.repo.git.rev_list("--ancestry-path", bad_sha, f"^{good_sha}",
                                                     "--").split())
        newer: list[CommitInfo] = []
        for info in chain:  # newest first; descent from GOOD holds for a prefix of the chain
            if info.sha not in descendants:
                break
            newer.append(info)
        if not newer:
            raise UserError(f"empty range: no commits after GOOD {good_sha[:10]} up to BAD "
                            f"{bad_sha[:10]}")
        newer.reverse()
        if self._first_parent(newer[0].sha) != good_sha:
            warn(f"GOOD {good_sha[:10]} is not on BAD's first-parent chain; the range goes "
                 f"on at merge {newer[0].sha[:10]}, which brought GOOD in, tested as one step")
        return [self.commit_info(good_sha), *newer]

    def touching(self, good: str, bad: str, paths: Sequence[str]) -> set[str]:
        """The shas of GOOD..BAD's first-parent chain whose change touches `paths` (git pathspecs,
        from the top of the work tree): `git log --first-parent --format=%H GOOD..BAD -- PATHS`,
        where a merge touches them when its diff against its first parent does."""
        proc = self._git("log", "--first-parent", "--format=%H", f"{self.resolve(good)}..{self.resolve(bad)}",
                         "--", *paths, check=False)
        if proc.returncode != 0:
            raise UserError(f"git log cannot read the paths {' '.join(paths)}: "
                            f"{proc.stderr.decode(errors='replace').strip()}")
        return set(proc.stdout.decode().split())

    def changes(self, commits: Sequence[CommitInfo]) -> dict[str, tuple[Change, ...]]:
        """What each commit of `commits` after the first changes against the one before it in
        `commits` (a first-parent range, oldest first: a merge against its first parent, the merge
        that brought GOOD in against GOOD), directories and submodules included, renames as a
        deletion and an addition: sha -> its changes (none for a commit that changes nothing).
        One `git diff-tree --stdin` for the whole range."""
        pairs = "".join(f"{new.sha} {old.sha}\n" for old, new in zip(commits, commits[1:]))
        if not pairs:
            return {}
        proc = self._git("diff-tree", "--stdin", "-r", "-t", "--no-renames", "--raw", "-z", "--no-ext-diff",
                         "--ignore-submodules=none", input=pairs.encode())
        found: dict[str, list[Change]] = {}
        current: list[Change] = []
        words = iter(proc.stdout.split(b"\0"))
        for word in words:
            if word.startswith(b":"):   # ':old-mode new-mode old-sha new-sha status', then the path
                old_mode, new_mode, *_, status = word[1:].decode().split()
                path = next(words, b"").decode("utf-8", errors="surrogateescape")
                mode = new_mode if status != "D" else old_mode
                current.append(Change(status[0], path, _KINDS.get(mode, "blob")))
            elif word.strip():
                current = found.setdefault(word.decode().strip(), [])
        return {sha: tuple(changes) for sha, changes in found.items()}

    def lineage(self, tip: str, limit: int) -> list[CommitInfo]:
        """The last `limit` commits of `tip`'s first-parent chain, oldest first (nightly series)."""
        infos = self._commits(self.resolve(tip), first_parent=True, max_count=int(limit))
        return list(reversed(infos))

    def _commits(self, rev: str, **options) -> list[CommitInfo]:
        """Commits of `git rev-list rev` (newest first), cached by sha."""
        with self._repo_lock:
            infos = [_commit_info(c) for c in self.repo.iter_commits(rev, **options)]
        for info in infos:
            self._info_cache.setdefault(info.sha, info)
        return infos

    def _is_shallow(self) -> bool:
        return self._git("rev-parse", "--is-shallow-repository", check=False).stdout.decode().strip() == "true"

    def first_parent(self, sha: str) -> str | None:
        """The first parent of a commit (of a merge: the branch merged into); None for a root.
        UserError when the clone is shallow and the parent lies past its boundary (the commit
        names it, the clone does not hold it)."""
        commit = self.resolve(sha)
        parent = self._first_parent(commit)
        if (parent is not None and self._is_shallow()
                and self._git("cat-file", "-e", f"{parent}^{{commit}}", check=False).returncode != 0):
            raise UserError(f"the parent of commit {commit[:10]} ({parent[:10]}) lies past this shallow "
                            f"clone's boundary: {_UNSHALLOW}")
        return parent

    def _first_parent(self, sha: str) -> str | None:
        with self._repo_lock:
            parents = self.repo.commit(sha).parents
        return parents[0].hexsha if parents else None

    # -- objects ----------------------------------------------------------------------------

    def commit_info(self, sha: str) -> CommitInfo:
        """Sha, tree, subject, author and date of one commit (cached)."""
        if sha not in self._info_cache:
            full = self.resolve(sha)
            with self._repo_lock:
                info = _commit_info(self.repo.commit(full))
            self._info_cache[sha] = self._info_cache[full] = info
        return self._info_cache[sha]

    def tree_of(self, sha: str) -> str:
        """Tree sha of a commit: the part of a candidate's store key that identifies code."""
        return self.commit_info(sha).tree

    def read_pyproject_table(self, sha: str | None = None) -> dict:
        """`[tool.regressbisect]` of pyproject.toml in the work tree (sha None) or a commit.

        Returns {} when there is no pyproject.toml or no such table; a pyproject that is not
        valid TOML is a UserError (the user must fix it, guessing would hide settings).
        """
        if sha is None:
            where = self.root / "pyproject.toml"
            if not where.is_file():
                return {}
            raw = where.read_bytes()
        else:
            where = f"{sha[:10]}:pyproject.toml"
            full = self.resolve(sha)
            with self._repo_lock:
                tree = self.repo.commit(full).tree
                if "pyproject.toml" not in tree or tree["pyproject.toml"].type != "blob":
                    return {}
                raw = tree["pyproject.toml"].data_stream.read()
        try:  # TOML is UTF-8: a replacement character would end up in the probe's command
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"pyproject.toml ({where}) is not UTF-8 (byte {exc.start}: {raw[exc.start:exc.start + 1]!r}); "
                            "TOML must be UTF-8: save it as UTF-8") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"invalid pyproject.toml ({where}): {exc}") from None
        table = data.get("tool", {}).get("regressbisect", {})
        if not isinstance(table, dict):
            raise UserError(f"[tool.regressbisect] in pyproject.toml ({where}) is not a table")
        return table

    def is_dirty(self, untracked: bool = False) -> bool:
        """True when tracked files differ from HEAD (staged or not); `untracked` counts those too.

        Uses `git --no-optional-locks status` so the user's index is never rewritten.
        """
        proc = self._git("--no-optional-locks", "status", "--porcelain",
                         f"--untracked-files={'normal' if untracked else 'no'}",
                         "--ignore-submodules=none")
        return bool(proc.stdout.strip())
