"""Where a fresh sample runs: the executor, and for each slot (a lane: slots x overlap) its
environment and a worktree of the hunt's pool holding the candidate.

Without a setup step each slot checks candidates out in a worktree of its own. With one, a
candidate built is kept built in a worktree, taken by one slot at a time (docs/setup.md); the
hunt's rig sized the pool for them (hunts/skeleton.py `Hunt.rig`), once for all its sources.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from regressbisect.git.worktrees import PatchDoesNotApply, SubmoduleUnavailable, WorktreePool
from regressbisect.probe.executors.base import ProbeExecutor
from regressbisect.probe.runner import ProbeSpec, probe_environment
from regressbisect.samples import Candidate, ProbeOutcome, SampleKey

if TYPE_CHECKING:
    from regressbisect.probe.setup_step import SetupStep
    from regressbisect.probe.venvs import SlotVenvs


class Slots:
    """The slots a sample source runs its fresh probes in, and the executor that runs them."""

    def __init__(self, *, pool: WorktreePool, executor: ProbeExecutor, envs: Sequence[Mapping[str, str]],
                 spec: ProbeSpec, key_for: Callable[[Candidate], SampleKey],
                 patch_for: Callable[[Candidate], str | None],
                 setup: "SetupStep | None", venvs: "SlotVenvs | None", build_check: Callable[[Path], None] | None):
        self.pool = pool
        self.executor = executor
        self.envs = list(envs) or [{}]
        """Each slot's environment (its devices)."""
        self._spec = spec
        """The probe's, whose environment the setup step runs in and a venv's PATH extends."""
        self._key_for = key_for
        """A candidate's sample key, which names its build (tree and patch) for the setup step."""
        self._patch_for = patch_for
        self.setup = setup
        """Builds each candidate in its worktree before its probes (docs/setup.md)."""
        self.venvs = venvs
        """A virtualenv per worktree, activated for its setup step and probes (--venv)."""
        self._build_check = build_check
        """Raises when a checked-out candidate declares compiled modules no setup step builds."""

    @property
    def count(self) -> int:
        return len(self.envs)

    @contextlib.contextmanager
    def worktree(self, slot: int, candidate: Candidate) -> Iterator[tuple[Path | ProbeOutcome, dict[str, str]]]:
        """Slot `slot`'s worktree holding `candidate`, checked out and built, and the slot's
        environment there; or the skip outcome of a checkout or setup step that failed. A
        worktree kept built is the slot's until the block ends."""
        if self.setup is None:
            yield self._prepare(slot, slot, False, candidate, None)   # each slot its own worktree
            return
        key = self._key_for(candidate)
        remembered = self.setup.remembered_failure(key, candidate.short)
        if remembered is not None:
            yield _skipped(remembered.reason), {}
            return
        # A worktree per candidate built, taken by one slot at a time (docs/setup.md).
        tree, built = self.setup.trees.take(_build_of(key))
        try:
            yield self._prepare(slot, tree, built, candidate, key)
        finally:
            self.setup.trees.give_back(tree)

    def _prepare(self, slot: int, tree: int, built: bool, candidate: Candidate, key: SampleKey | None
                 ) -> tuple[Path | ProbeOutcome, dict[str, str]]:
        """The slot's environment in worktree `tree`, and the worktree with the candidate checked
        out and the setup step run (a skip outcome if either fails; `key`: the candidate's, with a
        setup step). A worktree that holds the candidate `built` is used as it is (a checkout
        would `git clean` the build away)."""
        env = self._env(slot, tree)
        if built:
            worktree = self.pool.path(tree)
            self.setup.reuse(tree, worktree, candidate.short)
            self.executor.count_build(reused=True)   # in the hunt's cost (hunts/cost.py)
            return worktree, env
        try:
            worktree = self.pool.checkout(tree, candidate.commit, self._patch_for(candidate))
        except PatchDoesNotApply as exc:
            return _skipped(f"patch does not apply: {exc}"), env
        except SubmoduleUnavailable as exc:
            return _skipped(str(exc)), env
        if self._build_check is not None:
            self._build_check(worktree)
        if self.setup is not None:
            result = self.setup.run(key, worktree, probe_environment(self._spec, env), candidate.short)
            self.executor.count_build(reused=False)
            if not result.ok:
                return _skipped(result.reason), env
            self.setup.mark_built(tree, _build_of(key), worktree)   # only once it succeeded
        return worktree, env

    def _env(self, slot: int, tree: int) -> dict[str, str]:
        """The slot's devices, and with --venv the virtualenv of worktree `tree` activated (PATH,
        VIRTUAL_ENV): an install belongs to the worktree's build."""
        env = dict(self.envs[slot])
        if self.venvs is not None:
            from regressbisect.probe.venvs import activation_env

            base_path = env.get("PATH", self._spec.env.get("PATH", os.environ.get("PATH", "")))
            env.update(activation_env(self.venvs.ensure(tree), base_path))
        return env

    def venvs_json(self) -> dict[str, Any] | None:
        """The report's `measurement.venvs`: the base interpreter and the worktrees' venvs."""
        if self.venvs is None:
            return None
        trees = self.setup.trees.used if self.setup is not None else range(self.count)
        return {"base_python": self.venvs.python, "paths": [str(self.venvs.path(t)) for t in trees]}


def _build_of(key: SampleKey) -> tuple[str, str | None]:
    """What a build depends on besides the setup step's command: the candidate's tree and patch."""
    return key.tree, key.patch_hash


def _skipped(reason: str | None) -> ProbeOutcome:
    """A candidate skipped before its probe; wall_seconds 0 keeps setup time out of every tok/s."""
    return ProbeOutcome(sample=None, skip_reason=reason, exit_code=None, wall_seconds=0.0)
