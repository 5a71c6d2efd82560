"""`regressbisect doctor --cmd`: run the probe once in a pool worktree and say what it imported,
and from where (docs/isolation.md)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from regressbisect.probe.isolation import import_roots, isolation_for_hunt
from regressbisect.probe.runner import probe_spec, run_probe


@dataclass(frozen=True)
class ImportCheck:
    """`doctor --cmd`: what one probe in a worktree of a commit imported, and from where."""

    commit: str
    roots: tuple[str, ...]
    """The worktree's import roots, worktree-relative, in PYTHONPATH order."""
    imported: dict
    """module -> worktree-relative file of every project module the probe imported."""
    note: str
    processes: int
    """Processes of the probe that imported the project (each torchrun rank is one)."""
    outcome: Any
    """The probe's ProbeOutcome (its tok/s, or why it was skipped)."""


def check_imports(history, config, ref: str = "HEAD") -> ImportCheck:
    """Run the probe once in a pool worktree of `ref` with the isolation check on.

    Raises IsolationError (exit code 7) when it imported project code from elsewhere.
    """
    from regressbisect.git.worktrees import WorktreePool

    spec = probe_spec(config)
    isolation = isolation_for_hunt(history, True, spec.env)
    commit = history.resolve(ref)
    with WorktreePool(history, 1) as pool:
        worktree = pool.checkout(0, commit)
        probe = isolation.prepare(worktree)
        outcome = run_probe(spec, worktree, extra_env=probe.env)
        isolation.verify(probe)
        roots = tuple(os.path.relpath(r, worktree) for r in import_roots(worktree))
    report = isolation.report()
    return ImportCheck(commit=commit, roots=roots, imported=report["imported_from"],
                       note=report["note"], processes=report["processes_per_probe"], outcome=outcome)
