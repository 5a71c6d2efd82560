"""`regressbisect clean`: remove the pooled worktrees (and, on request, the stored samples)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o


@app.command("clean")
def clean(
    repo: o.Repo = Path("."),
    samples: Annotated[bool, typer.Option("--samples", help="Also delete the stored samples of this repo (refused for a store a newer regressbisect wrote).")] = False,
) -> None:
    """Remove regressbisect's worktrees from this repository (never touches your checkout), its
    virtualenvs (the slots' and `deps`' candidate environments), and the preload servers' folders
    of hunts that were killed."""
    from regressbisect.config import default_store_path
    from regressbisect.errors import UserError
    from regressbisect.git.history import History
    from regressbisect.git.worktrees import clean as clean_pool
    from regressbisect.probe.preload import remove_folders_of_ended_hunts
    from regressbisect.store import newer_schema, store_files

    history = History.open(repo)
    store = default_store_path(history.common_dir)
    newer = newer_schema(store) if samples and store.exists() else None
    if newer is not None:  # refused before anything is removed
        raise UserError(f"store {store} was written by a newer regressbisect (schema {newer}): "
                        f"clean --samples leaves it; delete it with that version, or by hand")
    removed = clean_pool(history)
    shared_dir = (history.read_pyproject_table().get("slurm") or {}).get("shared_dir")
    if isinstance(shared_dir, str) and shared_dir:  # the Slurm executor's pool on a shared filesystem
        from regressbisect.probe.executors import shared_work_root
        removed += clean_pool(history, shared_work_root(shared_dir, history))
    print(f"removed {removed} worktree(s)")
    folders = remove_folders_of_ended_hunts()
    if folders:
        print(f"removed {folders} preload folder(s) of hunts that ended without removing them")
    if samples:
        for path in store_files(store):
            path.unlink(missing_ok=True)
        print(f"removed stored samples ({store})")
