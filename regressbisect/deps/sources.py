"""A culprit package's own repository (`deps --package-repo NAME=PATH`): the commits between the
tags of its last good and first bad releases, and each commit's source, to be installed into the
culprit's environment in place of the release (deps/builds.py); for the drill into a culprit
commit, its parent's source with a subset of the commit's hunks applied (`PatchedSource`).

A release X is tagged `vX` or `X`; a tag that is not there is one line in the report, never a guess.
"""
from __future__ import annotations

import hashlib
import io
import subprocess
import tarfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from regressbisect.git.history import CommitInfo, History, git_env, run_git
from regressbisect.git.hunks import APPLY_ARGS, Hunk, build_patch, encode_patch


class SourceUnavailable(Exception):
    """The commits between two releases cannot be listed, or a source cannot be made: why, in one line."""


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


@dataclass(frozen=True)
class PatchedSource:
    """A commit's parent with a subset of that commit's hunks applied (git/hunks.py), as a
    directory to install from: one candidate of the drill into a culprit commit."""

    parent: CommitSource
    hunks: tuple[Hunk, ...]

    @cached_property
    def patch(self) -> str:
        return build_patch(self.hunks)

    @property
    def key(self) -> str:
        """The parent's tree and the subset's patch: what the files are made of."""
        return f"{self.parent.key}+{hashlib.sha1(encode_patch(self.patch)).hexdigest()}"

    def export(self, where: Path) -> Path:
        """The parent's files with the patch applied; SourceUnavailable when it does not apply."""
        files = self.parent.export(where)
        # git apply outside any repository (the export may lie inside one, e.g. under .git):
        # the ceiling stops git looking above the export, so paths are relative to it
        proc = subprocess.run(["git", "apply", *APPLY_ARGS, "-"], cwd=files, input=encode_patch(self.patch),
                              capture_output=True, env={**git_env(), "GIT_CEILING_DIRECTORIES": str(files.parent)})
        if proc.returncode != 0:
            lines = proc.stderr.decode(errors="replace").strip().splitlines() or ["git apply failed"]
            raise SourceUnavailable(f"the hunks do not apply to {self.parent.commit.sha[:10]}: {lines[0]}")
        return files
