"""`regressbisect hunks`: which uncommitted hunks made tok/s drop."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from regressbisect.cli import COMMAND_LINE, app
from regressbisect.cli import options as o


@app.command("hunks")
@o.hunt_options("hunks")
def hunks(
    paths: Annotated[Optional[list[str]], typer.Argument(
        help="After --: only the hunks in files under these paths (git pathspecs, from the repository's "
             "top) are searched; the others stay applied in every candidate, as in `git bisect ... -- PATHS`.",
        metavar="PATHS", show_default=False)] = None,
    base: Annotated[str, typer.Option("--base", help="Commit the work tree's changes are compared against.")] = "HEAD",
    commit: Annotated[str | None, typer.Option("--commit", help="Hunt the hunks of this commit's diff against its first parent (a merge: the branch it was merged into) instead of the work tree's; your checkout is not read.")] = None,
    tracked_only: Annotated[bool, typer.Option("--tracked-only", help="Leave untracked files out (by default they are bisected as whole-file hunks: the change is what is on disk).")] = False,
    include_untracked: Annotated[bool, typer.Option("--include-untracked", hidden=True, help="Accepted for old scripts: untracked files are included by default now.")] = False,
    json_out: o.JsonOut = None, store: o.StorePath = None,
    repo: o.Repo = Path("."), quiet: o.Quiet = False,
    flags: dict | None = None,
) -> None:
    """Find the uncommitted hunks (staged + unstaged) that make tok/s worse: BASE + the hunks in
    file order, bisected like commits; delta debugging only where hunks interact.

    With --commit REV the hunks are REV's diff against its first parent, which is BASE, and BASE +
    every hunk is REV itself (`run --drill` does this for every culprit it names).

    `hunks -- PATHS`: only the hunks in files under PATHS are searched; the others are not measured,
    applied in every candidate (BASE's side included), so BASE + every hunk stays your tree.

    Untracked files are included (--tracked-only leaves them out). Your work tree, index and
    untracked files are only read; candidates are built in pooled worktrees. A hunk (with the
    hunks it needs) is named only when BASE + it alone is slower than BASE by at least
    --min-effect at an anytime-valid e-value of 200:1, on fresh runs measured beside BASE.

    Exit codes: 0 culprit hunks named; 1 user error; 2 not reproduced (BASE + changes is not
    slower by --min-effect); 4 every run skipped; 5 reproduced, but no hunk explains it on its
    own; 6 could not decide within --max-samples; 7 a probe imported the project from elsewhere than
    its worktree; 8 the machine never got quiet within --max-wait; 130 interrupted (re-run to
    resume). Exit 9 (ambiguous) is the commit hunt's: a hunk hunt has no unmeasurable commits.
    """
    from regressbisect.config import build_config
    from regressbisect.errors import UserError
    from regressbisect.git.history import History
    from regressbisect.hunts.hunks import HunkHunt
    from regressbisect.render.progress import HuntProgress
    from regressbisect.render.outputs import check_file

    if commit is not None and base != "HEAD":
        raise UserError("--commit and --base exclude each other: --commit's BASE is the commit's first parent "
                        "(drop --base)")
    history = History.open(repo)
    config = build_config(history.read_pyproject_table(), flags or {}, source=str(history.root / "pyproject.toml"))
    check_file(json_out, "--json")
    with HuntProgress(quiet=quiet, unit=config.unit) as progress:
        hunt = HunkHunt(history, config, base=base, commit=commit, include_untracked=not tracked_only,
                        store_path=store, progress=progress, command_line=o.without_revisions(COMMAND_LINE),
                        paths=paths or ())
        outcome = hunt.run()
    o.finish(outcome, json_out, history, store)
