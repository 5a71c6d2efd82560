"""`regressbisect demo [DIR]`: build the demo repository and hunt its regressions."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o


@app.command("demo")
def demo(
    directory: Annotated[Path, typer.Argument(help="Where to build the demo repository (must not exist or be empty).")] = Path("regressbisect-demo"),
    preset: Annotated[str, typer.Option("--preset", help="Workload preset: 'tiny' (CPU) or 'h200' (GPU).")] = "tiny",
    tokens: o.Tokens = None,
    hunks: Annotated[bool, typer.Option("--hunks/--no-hunks", help="Also bisect the demo's uncommitted diff (regressbisect hunks).")] = False,
    build_only: Annotated[bool, typer.Option("--build-only", help="Only build the repository.")] = False,
    show_history: Annotated[bool, typer.Option("--history", help="List the built history: each commit, the scripted culprits and the uncommitted diff's size.")] = False,
    slots: o.Slots = None,
    instrument: o.Instrument = None,
    json_out: o.JsonOut = None,
    quiet: o.Quiet = False,
) -> None:
    """The README's main job: a scripted history of the DFlash-style trainer, hunted end to end.

    Runs `regressbisect run HEAD~20 HEAD` in DIR (the command comes from DIR's pyproject), then
    `regressbisect hunks` on its uncommitted diff, and prints both reports.
    """
    from regressbisect.config import build_config
    from regressbisect.git.history import History
    from regressbisect.hunts.commits import CommitHunt
    from regressbisect.hunts.hunks import HunkHunt
    from regressbisect.render import render_summary
    from regressbisect.render.progress import HuntProgress
    from regressbisect.jsonio import dumps
    from regressbisect.workload.demo import build_demo_repo, history_lines

    info = build_demo_repo(directory, preset=preset, tokens=o.parse_demo_tokens(tokens))
    print(f"built {info.path} ({len(info.commits)} commits, uncommitted diff in the work tree)")
    if show_history:
        print("\n".join(history_lines(info)))
    if build_only:
        return
    history = History.open(info.path)
    config = build_config(history.read_pyproject_table(), {"slots": slots, "instrument": instrument},
                          source=str(history.root / "pyproject.toml"))
    reports = {}
    with HuntProgress(quiet=quiet) as progress:
        outcome = CommitHunt(history, "HEAD~20", "HEAD", config, progress=progress).run()
    reports["commits"] = outcome.report
    print(render_summary(outcome.report))
    if hunks:
        with HuntProgress(quiet=quiet) as progress:
            hunk_outcome = HunkHunt(history, config, progress=progress).run()
        reports["hunks"] = hunk_outcome.report
        print(render_summary(hunk_outcome.report))
    expected = {sha for sha, _ in info.culprits}
    found = {c["commit"] for c in outcome.report["culprits"]}
    print(f"scripted culprits found: {len(expected & found)}/{len(expected)}")
    if json_out is not None:
        json_out.write_text(dumps(reports))
    raise typer.Exit(int(outcome.exit_code))
