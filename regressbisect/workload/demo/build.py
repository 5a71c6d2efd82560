"""Build the demo git repository from its script (script.py): a standalone copy of the reference
DFlash trainer with the scripted history (harmless commits and real regressions) and an
uncommitted diff. `regressbisect demo` is its command line.

Every edit is a string replacement asserted to match exactly, applied to the trainer sources as
they are in this package, so a change to the workload that breaks the script fails loudly here.
Commit dates and identities are fixed, so the same sources give the same shas.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from regressbisect.errors import UserError
from regressbisect.workload.demo.script import (DEFAULT_TOKENS, DEFAULT_TOKENS_BY_PRESET, FIRST_DATE, HOURS,
                                                INITIAL_EDITS, MULTIRANK_HISTORY, PACKAGE,
                                                REGRESSING_UNCOMMITTED, UNCOMMITTED, UNCOMMITTED_MORE, Edit,
                                                pyproject_toml, scripted_history)

_WORKLOAD_DIR = Path(__file__).parent.parent / "dflash"


# ---------------------------------------------------------------------------------------------
# Value types


class DemoCulprit(NamedTuple):
    """A commit of the history that makes the job slower; unpacks as (sha, effect)."""

    sha: str
    """Full sha of the culprit."""
    effect: str
    """Expected effect: tok/s change measured side by side, counters before -> after."""


@dataclass(frozen=True)
class DiffSummary:
    """The uncommitted changes left in the demo working tree."""

    files: tuple[str, ...]
    """Changed tracked files."""
    added: int
    """Lines added (git diff --numstat)."""
    removed: int
    """Lines removed."""
    regressing_hunks: tuple[str, ...]
    """Description of the hunks that slow the job; every other hunk is harmless."""


@dataclass(frozen=True)
class DemoRepo:
    """What build_demo_repo made."""

    path: Path
    """Root of the new repository."""
    commits: tuple[tuple[str, str], ...]
    """(sha, subject) of every commit, oldest first; the last one is HEAD."""
    culprits: tuple[DemoCulprit, ...]
    """The scripted slowdowns (sha, expected effect), oldest first."""
    more_lm_head_not_slower: str
    """Sha of the commit doing more lm_head work that is not slower (it removes other work)."""
    counters_only: tuple[str, ...]
    """Shas whose counters change (host syncs) without a CPU slowdown."""
    uncommitted: DiffSummary
    """The working-tree diff."""
    tokens: int
    """Token budget written to [tool.regressbisect]."""

    def sha_of(self, subject_prefix: str) -> str:
        """Sha of the one commit whose subject starts with `subject_prefix`."""
        found = [sha for sha, subject in self.commits if subject.startswith(subject_prefix)]
        if len(found) != 1:
            raise KeyError(subject_prefix)
        return found[0]


# ---------------------------------------------------------------------------------------------
# Building


def _git(repo: Path, *args: str, date: int | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_AUTHOR_NAME": "Dana Drafter", "GIT_AUTHOR_EMAIL": "dana@example.com",
                "GIT_COMMITTER_NAME": "Dana Drafter", "GIT_COMMITTER_EMAIL": "dana@example.com",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    if date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{date} +0000"
    proc = subprocess.run(["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", *args],
                          cwd=repo, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _apply(root: Path, edit: Edit) -> None:
    target = root / edit.path
    if edit.create:
        if target.exists():
            raise AssertionError(f"demo edit would overwrite {edit.path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(edit.new)
        return
    text = target.read_text()
    found = text.count(edit.old)
    if found != edit.count:
        raise AssertionError(f"demo edit of {edit.path}: expected {edit.count} match(es) of "
                             f"{edit.old[:60]!r}, found {found}")
    target.write_text(text.replace(edit.old, edit.new))


def _copy_trainer(root: Path) -> None:
    """The workload sources, unchanged, as a standalone package (stdlib + torch only)."""
    package = root / PACKAGE
    package.mkdir()
    for source in sorted(_WORKLOAD_DIR.glob("*.py")):
        text = source.read_text().replace("regressbisect.workload.dflash", PACKAGE)
        (package / source.name).write_text(text)


def _commit(root: Path, subject: str, index: int) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", subject, date=FIRST_DATE + index * HOURS)
    return _git(root, "rev-parse", "HEAD")


def build_demo_repo(path: Path, preset: str = "tiny", tokens: int | str | None = None) -> DemoRepo:
    """Create a new git repository at `path` with the scripted history and uncommitted diff.

    Raises UserError when `path` exists and is not an empty directory.
    """
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UserError(f"demo path {path} exists and is not empty; choose a new directory")
    auto_tokens = tokens == "auto"  # pyproject says tokens = "auto": the hunt picks the budget
    tokens = (DEFAULT_TOKENS_BY_PRESET.get(preset, DEFAULT_TOKENS) if tokens is None or auto_tokens
              else int(tokens))
    if tokens < 1:
        raise UserError("--tokens must be >= 1")
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "--template=", "-b", "main")

    _copy_trainer(path)
    for edit in INITIAL_EDITS:
        _apply(path, edit)
    pyproject = pyproject_toml(preset, tokens)
    if auto_tokens:
        pyproject = pyproject.replace(f"\ntokens = {tokens}\n", '\ntokens = "auto"\n')
    (path / "pyproject.toml").write_text(pyproject)
    commits = [(_commit(path, "Import the DFlash drafter trainer", 0), "Import the DFlash drafter trainer")]
    culprits: list[DemoCulprit] = []
    more_work = ""
    counters_only: list[str] = []
    for index, scripted in enumerate(scripted_history(preset, tokens), start=1):
        for edit in scripted.edits:
            _apply(path, edit)
        sha = _commit(path, scripted.subject, index)
        commits.append((sha, scripted.subject))
        if scripted.kind == "culprit":
            culprits.append(DemoCulprit(sha=sha, effect=scripted.effect))
        elif scripted.kind == "more-lm-head-not-slower":
            more_work = sha
        elif scripted.kind == "counters-only":
            counters_only.append(sha)

    for edit in (*UNCOMMITTED, *UNCOMMITTED_MORE):
        _apply(path, edit)
    return DemoRepo(path=path, commits=tuple(commits), culprits=tuple(culprits),
                    more_lm_head_not_slower=more_work, counters_only=tuple(counters_only),
                    uncommitted=_diff_summary(path), tokens=tokens)


def add_multirank_branch(demo: DemoRepo) -> str:
    """Branch 'multirank' in a built demo repository, from the parent of its first culprit, with
    four scripted commits of which one slows only multi-rank runs; returns that commit's sha.

    The demo's uncommitted diff is discarded (the branch is committed work only).
    """
    root = demo.path
    _git(root, "reset", "-q", "--hard")
    _git(root, "checkout", "-q", "-B", "multirank", f"{demo.culprits[0].sha}~1")
    culprit = ""
    for offset, scripted in enumerate(MULTIRANK_HISTORY):
        for edit in scripted.edits:
            _apply(root, edit)
        # dates after the main history's, so the same sources give the same shas
        sha = _commit(root, scripted.subject, len(demo.commits) + offset)
        if scripted.kind == "culprit":
            culprit = sha
    return culprit


def _diff_summary(root: Path) -> DiffSummary:
    files: list[str] = []
    added = removed = 0
    for line in _git(root, "diff", "--numstat", "HEAD").splitlines():
        plus, minus, name = line.split("\t")
        files.append(name)
        added += int(plus)
        removed += int(minus)
    return DiffSummary(files=tuple(files), added=added, removed=removed,
                       regressing_hunks=REGRESSING_UNCOMMITTED)


def history_table(preset: str = "tiny", tokens: int = DEFAULT_TOKENS) -> list[tuple[int, str, str, str]]:
    """(index, subject, kind, expected effect) of the scripted history, index 0 = first commit."""
    rows = [(0, "Import the DFlash drafter trainer", "harmless", "none")]
    for index, scripted in enumerate(scripted_history(preset, tokens), start=1):
        rows.append((index, scripted.subject, scripted.kind, scripted.effect))
    return rows


def history_lines(demo: DemoRepo) -> list[str]:
    """The built history, oldest first, one line a commit with its role, and the diff's size
    (`regressbisect demo --history`)."""
    n = len(demo.commits)
    lines = []
    for i, (sha, subject) in enumerate(demo.commits):
        mark = next((" <- culprit: " + c.effect for c in demo.culprits if c.sha == sha), "")
        if sha == demo.more_lm_head_not_slower:
            mark = " <- more lm_head work, not slower"
        lines.append(f"HEAD~{n - 1 - i:<3d} {sha[:10]} {subject}{mark}")
    u = demo.uncommitted
    lines.append(f"uncommitted: {len(u.files)} files, +{u.added} -{u.removed}")
    return lines
