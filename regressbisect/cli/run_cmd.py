"""`regressbisect run GOOD BAD`: find the commit(s) that made tok/s drop."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from regressbisect.cli import COMMAND_LINE, app
from regressbisect.cli import options as o


@app.command("run")
@o.hunt_options("run")
def run(
    good: Annotated[str, typer.Argument(help="A commit known to be fast (e.g. HEAD~20).")],
    bad: Annotated[str, typer.Argument(help="A later commit known to be slow (e.g. HEAD).")],
    paths: Annotated[Optional[list[str]], typer.Argument(
        help="After --: only commits touching these paths (git pathspecs, from the repository's top) "
             "are candidates, as in `git bisect start BAD GOOD -- PATHS`.", metavar="PATHS",
        show_default=False)] = None,
    json_out: o.JsonOut = None, store: o.StorePath = None, repo: o.Repo = Path("."),
    quiet: o.Quiet = False,
    flags: dict | None = None,
) -> None:
    """Bisect GOOD..BAD (first-parent) on tok/s with repeated, interleaved measurements.

    A commit is named only when its step is at least --min-effect with an interval excluding
    zero; "reproduced" (GOOD vs BAD) is held to the same rule. `run GOOD BAD -- PATHS`: only the
    commits touching PATHS are measured, the others are reported as not measured.

    Exit codes: 0 culprits named; 1 user error; 2 not reproduced (GOOD->BAD is not a slowdown of
    --min-effect); 4 every candidate skipped; 5 reproduced, but no single commit explains it (the
    JSON lists the steps ruled out); 6 could not decide within --max-samples; 7 a probe imported the
    project from elsewhere than its worktree; 8 the machine never got quiet within --max-wait;
    9 ambiguous: the only steps found have unmeasurable commits inside, so no single commit is
    named (the report lists the commits each could be, with their skip reasons); 130 interrupted (every finished sample is stored: re-run to resume).
    """
    from regressbisect.config import build_config
    from regressbisect.git.history import History
    from regressbisect.hunts.commits import CommitHunt
    from regressbisect.hunts.common import warn_short_cap, warn_unusable_slots
    from regressbisect.search.bisect import SearchSettings
    from regressbisect.machine.fingerprint import count_gpus
    from regressbisect.render.progress import HuntProgress
    from regressbisect.render.outputs import check_file

    history = History.open(repo)
    config = build_config(history.read_pyproject_table(), flags or {}, source=str(history.root / "pyproject.toml"))
    check_file(json_out, "--json")
    with HuntProgress(quiet=quiet, unit=config.unit) as progress:
        hunt = CommitHunt(history, good, bad, config, store_path=store, progress=progress,
                          command_line=o.without_revisions(COMMAND_LINE), paths=paths or ())
        warn_unusable_slots(config, len(hunt.candidates), count_gpus())
        warn_short_cap(SearchSettings.of(config, "run"))
        outcome = hunt.run()
    o.finish(outcome, json_out, history, store)
