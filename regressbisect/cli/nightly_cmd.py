"""`regressbisect nightly`: measure the branch tip, detect change points, hunt them."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from regressbisect.cli import app
from regressbisect import config as defaults  # stdlib only: --help stays cheap
from regressbisect.cli import options as o


@app.command("nightly")
@o.hunt_options("nightly")
def nightly(
    paths: Annotated[Optional[list[str]], typer.Argument(
        help="After --: each change point's hunt has only the commits touching these paths as candidates "
             "(git pathspecs, from the repository's top), as `run GOOD BAD -- PATHS`.", metavar="PATHS",
        show_default=False)] = None,
    branch: Annotated[str, typer.Option("--branch", help="Branch whose tip is measured.")] = defaults.NIGHTLY_BRANCH,
    report_dir: Annotated[Path, typer.Option("--report-dir", help="Where the night's HTML, Markdown, PNG and JSON go.")] = Path("reports"),
    samples: Annotated[int, typer.Option("--samples", help="Samples per measured commit.")] = defaults.NIGHTLY_SAMPLES_PER_COMMIT,
    max_new: Annotated[int, typer.Option("--max-new", help="Commits measured per night (tip first, then unseen ones).")] = defaults.NIGHTLY_MAX_NEW,
    lookback: Annotated[int, typer.Option("--lookback", help="First-parent commits that form the series.")] = defaults.NIGHTLY_LOOKBACK,
    min_magnitude: Annotated[float, typer.Option("--min-magnitude", help="Smallest relative step reported as a change point.")] = defaults.CHANGE_MIN_MAGNITUDE,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level of a change point.")] = defaults.CHANGE_ALPHA,
    replay: Annotated[Optional[int], typer.Option("--replay", help="Re-live the last N commits as N nights (one tip each).")] = None,
    no_hunt: Annotated[bool, typer.Option("--no-hunt", help="Report change points without bisecting them.")] = False,
    json_out: o.JsonOut = None, store: o.StorePath = None, repo: o.Repo = Path("."),
    quiet: o.Quiet = False,
    flags: dict | None = None,
) -> None:
    """One night of regression hunting. Exit 3 when a new regression is found (its hunt named a
    culprit, or found an ambiguous step: commits it could be that could not be measured), 7 when a probe
    imported the project from elsewhere than its worktree, 8 when the machine never got quiet
    within --max-wait, 0 otherwise.

    `nightly -- PATHS`: the series is measured as without them; each change point's hunt is
    limited to the commits touching PATHS, and one in whose range none does is not hunted.

    --json writes the last night's report (with --replay: the last replayed night), the same
    document as nightly-<tip>.json in --report-dir.
    """
    from regressbisect.config import build_config
    from regressbisect.errors import ExitCode
    from regressbisect.git.history import History
    from regressbisect.hunts.nightly import NIGHT_KEPT, Nightly, NightlySettings
    from regressbisect.render.progress import HuntProgress
    from regressbisect.render.outputs import check_file, check_folder, write_text, written_after_work
    from regressbisect.jsonio import dumps
    from regressbisect.search.changepoints import ChangePointSettings

    history = History.open(repo)
    config = build_config(history.read_pyproject_table(), flags or {}, source=str(history.root / "pyproject.toml"))
    check_file(json_out, "--json")
    check_folder(report_dir, "--report-dir")
    settings = NightlySettings(branch=branch, samples_per_commit=samples, max_new=max_new, lookback=lookback,
                               changepoints=ChangePointSettings(min_magnitude=min_magnitude, alpha=alpha),
                               hunt=not no_hunt, paths=tuple(paths or ()))
    with HuntProgress(quiet=quiet, unit=config.unit) as progress:
        runner = Nightly(history, config, settings, store_path=store, report_dir=report_dir, progress=progress)
        outcomes = runner.replay(replay) if replay else [runner.run()]
    found = [o_ for o_ in outcomes if o_.exit_code == ExitCode.NIGHTLY_REGRESSION]
    last = outcomes[-1]
    if json_out is not None:
        written_after_work("--json", json_out, lambda: write_text(json_out, dumps(last.report)),
                           kept=NIGHT_KEPT)
    for outcome in found:
        for sha in outcome.report["new_alarms"]:
            print(f"new regression at {sha[:10]} (night of {outcome.report['night']['tip'][:10]})")
    for culprit in (found[-1] if found else last).report.get("culprits", []):
        print(f"culprit {culprit['commit'][:10]} {culprit['step_pct']:+.1f}%  {culprit['subject']}")
    if last.report_files:
        print(f"report: {last.report_files[-1]}")
    raise typer.Exit(int(ExitCode.NIGHTLY_REGRESSION if found else ExitCode.OK))
