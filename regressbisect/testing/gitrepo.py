"""Test helper: real git repositories with scripted histories, dirty checkouts and snapshots.

    shas = make_repo(tmp_path / "repo", [{"a.py": "x = 1\n"}, {"a.py": "x = 2\n"}])

Each commit is either a dict {path: content} (files written on top of the previous tree;
content None deletes the file) or a callable `step(repo_path) -> str | None` that edits the
work tree any way it likes and may return the commit subject. Dates are fixed and increasing,
so shas are reproducible for the same inputs.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable, Mapping, Sequence, Union

CommitSpec = Union[Mapping[str, Union[str, bytes, None]], Callable[[Path], Union[str, None]]]

_BASE_DATE = 1_700_000_000  # fixed epoch seconds: reproducible shas


def git_env(date: int | None = None) -> dict[str, str]:
    """An environment for test git commands: fixed identity, no user/system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="Test Author", GIT_AUTHOR_EMAIL="author@example.com",
               GIT_COMMITTER_NAME="Test Committer", GIT_COMMITTER_EMAIL="c@example.com",
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C")
    if date is not None:
        stamp = f"@{date} +0000"
        env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
    return env


def git(path: Path, *args: str, input: bytes | None = None, date: int | None = None) -> str:
    """Run git in `path`; return stripped stdout; raise with stderr on failure."""
    proc = subprocess.run(["git", *args], cwd=path, input=input, capture_output=True,
                          env=git_env(date))
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode().strip()


def write_files(path: Path, files: Mapping[str, str | bytes | None]) -> None:
    """Write (or, for None, delete) files relative to `path`, creating directories."""
    for rel, content in files.items():
        target = path / rel
        if content is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def _next_date(path: Path) -> int:
    """A date one minute after the previous commit of this repository: shas depend only on
    the repository's own history, not on what other tests did before."""
    proc = subprocess.run(["git", "rev-list", "--count", "--all"], cwd=path,
                          capture_output=True, env=git_env())
    count = int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0
    return _BASE_DATE + 60 * (count + 1)


def commit(path: Path, spec: CommitSpec, message: str | None = None) -> str:
    """Apply one commit spec in the repo at `path`, commit everything, return the new sha."""
    subject = None
    if callable(spec):
        subject = spec(path)
    else:
        write_files(path, spec)
    date = _next_date(path)
    git(path, "add", "-A")
    msg = message or subject or f"commit {(date - _BASE_DATE) // 60}"
    git(path, "commit", "-q", "--allow-empty", "-m", msg, date=date)
    return git(path, "rev-parse", "HEAD")


def make_repo(path: Path, commits: Sequence[CommitSpec], messages: Sequence[str] | None = None,
              branch: str = "main") -> list[str]:
    """Create a repository at `path` with one commit per spec; return the shas, oldest first."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    # Local config so later plain `git` calls in the repo (by the code under test) work too.
    git(path, "config", "user.name", "Test Author")
    git(path, "config", "user.email", "author@example.com")
    git(path, "config", "commit.gpgsign", "false")
    shas = []
    for i, spec in enumerate(commits):
        shas.append(commit(path, spec, messages[i] if messages else None))
    return shas


def merge(path: Path, other: str, message: str = "merge") -> str:
    """Create a merge commit of `other` into the current branch (--no-ff); return its sha."""
    git(path, "merge", "-q", "--no-ff", "-m", message, other, date=_next_date(path))
    return git(path, "rev-parse", "HEAD")


def make_dirty(path: Path, tracked: str, staged: str, stash: bool = True) -> None:
    """Make the checkout at `path` dirty in every way a user's can be.

    `tracked` and `staged` are existing tracked files: one gets an unstaged edit, the other a
    staged one. Adds an untracked file, an ignored-looking file, and (first, so it stays
    on the stash) a stash entry.
    """
    if stash:
        write_files(path, {tracked: (path / tracked).read_text() + "# stashed edit\n"})
        git(path, "stash", "push", "-q", "-m", "user stash")
    write_files(path, {tracked: (path / tracked).read_text() + "# unstaged edit\n"})
    write_files(path, {staged: (path / staged).read_text() + "# staged edit\n"})
    git(path, "add", staged)
    write_files(path, {"untracked_notes.txt": "mine, not committed\n",
                       "scratch/deep/file.bin": b"\x00\x01binary"})


def snapshot_checkout(path: Path) -> dict:
    """Everything of a checkout a tool must leave alone, for byte-identity assertions.

    Files of the work tree (bytes; `.git` excluded), `git status --porcelain`, the index
    (raw bytes, `ls-files -s`, `diff --cached`), stash list, HEAD, branch and all refs.
    Read with --no-optional-locks so taking the snapshot does not itself rewrite the index.
    """
    def g(*args: str) -> bytes:
        proc = subprocess.run(["git", "--no-optional-locks", *args], cwd=path,
                              capture_output=True, env=git_env())
        return proc.stdout

    files: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(path).as_posix()
            if rel == ".git":  # a linked worktree's gitfile
                continue
            files[rel] = full.read_bytes() if not full.is_symlink() else os.readlink(full).encode()
    index_path = Path(g("rev-parse", "--path-format=absolute", "--git-path", "index")
                      .decode().strip())
    return {
        "files": files,
        "status": g("status", "--porcelain", "--untracked-files=all"),
        "index_bytes": index_path.read_bytes() if index_path.exists() else None,
        "ls_files": g("ls-files", "-s"),
        "diff_cached": g("diff", "--cached", "--binary"),
        "stash": g("stash", "list", "--format=%H %gs"),
        "head": g("rev-parse", "HEAD"),
        "branch": g("symbolic-ref", "-q", "HEAD"),
        "refs": g("for-each-ref", "--format=%(refname) %(objectname)"),
    }
