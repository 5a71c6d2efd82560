"""What a deps hunt's samples are stored under, so that a killed or interrupted hunt re-run with
the same arguments reuses them (store.py: every sample is committed the moment it exists).

A deps candidate is the project as it is (HEAD, plus whatever its work tree changes) run in one
candidate environment. Its store key is that of a commit hunt's candidate with a patch: the tree
of HEAD, and a "patch" of two ids, the environment's hash (deps/builds.py `EnvBuilder.key`: its
resolved pins, the interpreter and the index) and the hash of the work tree's changes against
HEAD (none when it is clean). The probe config's hash and the machine's fingerprint complete
it, as for every hunt: another --cmd, token budget or metric takes new samples.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from regressbisect.git.history import History, git_env
from regressbisect.samples import Candidate, SampleKey

ENV_ID = "env:"
WORK_ID = "work:"


@dataclass(frozen=True)
class ProjectState:
    """The project a deps hunt measures: HEAD, its tree, and its work tree's changes."""

    commit: str
    tree: str
    work: str | None
    """Hash of the work tree's content where it differs from HEAD's tree (None: clean)."""

    @classmethod
    def of(cls, history: History) -> "ProjectState":
        commit = history.head()
        tree = history.tree_of(commit)
        work = work_tree_hash(history)
        return cls(commit, tree, work if work != tree else None)

    def candidate(self, env_key: str) -> Candidate:
        """The project in the environment of hash `env_key`."""
        ids = (ENV_ID + env_key,) + ((WORK_ID + self.work,) if self.work else ())
        return Candidate(self.commit, ids)

    def key(self, env_key: str, *, config_hash: str, env_fingerprint: str) -> SampleKey:
        return SampleKey(tree=self.tree, patch_hash=self.candidate(env_key).patch_hash,
                         config_hash=config_hash, env_fingerprint=env_fingerprint)


def work_tree_hash(history: History) -> str:
    """The tree git would commit of the work tree as it is, untracked files included and ignored
    ones left out, written through a copy of the index (the user's index is never touched)."""
    git_dir = Path(subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=history.root,
                                  capture_output=True, text=True, check=True, env=git_env()).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="regressbisect-index-") as scratch:
        index = Path(scratch) / "index"
        if (git_dir / "index").is_file():   # its stat cache spares hashing the unchanged files again
            shutil.copyfile(git_dir / "index", index)
        env = {**git_env(), "GIT_INDEX_FILE": str(index)}
        for args in (["add", "--all", "--", "."], ["write-tree"]):
            out = subprocess.run(["git", *args], cwd=history.root, capture_output=True, text=True, env=env)
            if out.returncode != 0:   # unknown: no stored sample may stand for it
                return "unknown-" + uuid.uuid4().hex
    return out.stdout.strip()
