"""A culprit package's own repository (`deps --package-repo NAME=PATH`): the commits between the
tags of its last good and first bad releases, and each commit's source, to be installed into the
culprit's environment in place of the release (deps/builds.py `Source`).

A release X is tagged `vX` or `X`; a tag that is not there is one line in the report, never a guess.
"""
from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path

from regressbisect.git.history import CommitInfo, History, run_git


class SourceUnavailable(Exception):
    """The commits between two releases cannot be listed: why, in one line."""


def release_tag(history: History, version: str) -> str | None:
    """The commit the tag of release `version` names (`vX`, else `X`), or None."""
    for tag in (f"v{version}", version):
        found = run_git(history.root, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}", check=False)
        if found.returncode == 0:
            return found.stdout.decode().strip()
    return None


def commits_between(history: History, good: str, bad: str) -> list[CommitInfo]:
    """The first-parent commits from release `good`'s tag to release `bad`'s, both included."""
    ends = []
    for version in (good, bad):
        sha = release_tag(history, version)
        if sha is None:
            raise SourceUnavailable(f"no tag v{version} or {version} in {history.root}")
        ends.append(sha)
    if not history.is_ancestor(ends[0], ends[1]):
        raise SourceUnavailable(f"the tag of {good} is not an ancestor of the tag of {bad} in {history.root}")
    return history.first_parent_range(ends[0], ends[1])


@dataclass(frozen=True)
class CommitSource:
    """One commit of a package's repository, as a directory to install from."""

    history: History
    commit: CommitInfo

    @property
    def key(self) -> str:
        """What the build depends on: the commit's tree (a reword builds the same)."""
        return self.commit.tree

    def export(self, where: Path) -> Path:
        """The commit's files under `where` (git archive: no worktree, nothing of the user's touched)."""
        archive = run_git(self.history.root, "archive", "--format=tar", self.commit.sha).stdout
        where.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(where, filter="data")
        return where
