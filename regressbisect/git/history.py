"""Read-only view of the user's repository: refs, first-parent ranges, trees, pyproject.

Nothing here writes to the user's repository. Every git call goes through `run_git`, which
sets GIT_OPTIONAL_LOCKS=0 (so no read refreshes and rewrites the user's index stat cache) and
drops inherited GIT_DIR / GIT_INDEX_FILE / GIT_WORK_TREE-style variables (a hook or an IDE
that set them would otherwise point our commands at the user's own index).
"""
from __future__ import annotations

import os
import subprocess
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from regressbisect.errors import UserError, warn

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

# Field and record separators for `git log --format` (cannot appear in subjects or names).
_FIELD_SEP = "\x1f"
_FORMAT = _FIELD_SEP.join(["%H", "%T", "%s", "%an <%ae>", "%aI"])


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

    @property
    def short(self) -> str:
        return self.sha[:10]


def _parse_log_record(record: str) -> CommitInfo:
    sha, tree, subject, author, date = record.split(_FIELD_SEP)
    return CommitInfo(sha=sha, tree=tree, subject=subject, author=author, date=date)


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
            raise not_a_repo
        lines = proc.stdout.decode().splitlines()
        if len(lines) < 3 or lines[0] == "true":
            # A bare repository (or running inside .git) has no work tree to read pyproject,
            # dirtiness or hunks from.
            raise not_a_repo
        return cls(root=Path(lines[1]), common_dir=Path(lines[2]))

    @cached_property
    def repo(self) -> "git.Repo":
        """A gitpython handle on the same repository, for callers that want one (read only)."""
        import git

        return git.Repo(self.root)

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
        proc = self._git("merge-base", "--is-ancestor", older, newer, check=False)
        if proc.returncode not in (0, 1):
            raise GitFailed(("merge-base", "--is-ancestor"), proc.returncode,
                            proc.stderr.decode(errors="replace"))
        return proc.returncode == 0

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
        out = self._git("log", "--first-parent", "-z", f"--format={_FORMAT}",
                        bad_sha, f"^{good_sha}", "--").stdout.decode()
        chain = [_parse_log_record(r) for r in out.split("\0") if r.strip("\n")]
        descendants = set(self._git("rev-list", "--ancestry-path", bad_sha, f"^{good_sha}",
                                    "--").stdout.decode().split())
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

    def lineage(self, tip: str, limit: int) -> list[CommitInfo]:
        """The last `limit` commits of `tip`'s first-parent chain, oldest first (nightly series)."""
        out = self._git("log", "--first-parent", "-z", f"--format={_FORMAT}", f"-n{int(limit)}",
                        self.resolve(tip), "--").stdout.decode()
        infos = [_parse_log_record(r) for r in out.split("\0") if r.strip("\n")]
        for info in infos:
            self._info_cache.setdefault(info.sha, info)
        return list(reversed(infos))

    def _first_parent(self, sha: str) -> str | None:
        proc = self._git("rev-parse", "--verify", "--quiet", f"{sha}^1", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    # -- objects ----------------------------------------------------------------------------

    def commit_info(self, sha: str) -> CommitInfo:
        """Sha, tree, subject, author and date of one commit (cached)."""
        if sha not in self._info_cache:
            full = self.resolve(sha)
            out = self._git("log", "-1", "--no-walk", f"--format={_FORMAT}", full,
                            "--").stdout.decode().rstrip("\n")
            info = _parse_log_record(out)
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
            text = where.read_text(encoding="utf-8", errors="replace")
        else:
            where = f"{sha[:10]}:pyproject.toml"
            proc = self._git("cat-file", "blob", f"{self.resolve(sha)}:pyproject.toml",
                             check=False)
            if proc.returncode != 0:
                return {}
            text = proc.stdout.decode("utf-8", errors="replace")
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
