"""`regressbisect report [HUNT]`: render a stored hunt (table, Markdown, HTML + PNG)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o


@app.command("report")
def report(
    hunt: Annotated[Optional[int], typer.Argument(help="Hunt id (default: the latest finished); `--list` shows them.")] = None,
    list_hunts: Annotated[bool, typer.Option("--list", help="List stored hunts.")] = False,
    html: Annotated[Optional[Path], typer.Option("--html", help="Write a self-contained HTML page (with PNG plots) into this folder.")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print Markdown (for a CI comment) instead of the table.")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="Write the hunt's JSON report here (the document `run --json` writes).")] = None,
    store: o.StorePath = None, repo: o.Repo = Path("."),
) -> None:
    """Render any stored hunt the same way a hunt does."""
    from tabulate import tabulate

    from regressbisect.config import default_store_path
    from regressbisect.errors import UserError
    from regressbisect.git.history import History
    from regressbisect.render import facts, render_html, render_markdown, render_summary
    from regressbisect.render.outputs import check_file, check_folder, write_text, written
    from regressbisect.render.report_load import load_report
    from regressbisect.jsonio import dumps
    from regressbisect.store import Store

    check_folder(html, "--html")
    check_file(json_out, "--json")
    path = store or default_store_path(History.open(repo).common_dir)
    with Store(path, read_only=True) as s:
        if list_hunts:
            rows = [(h.id, h.kind, facts.short(h.good), facts.short(h.bad), facts.local_time(h.started_at),
                     h.verdict if isinstance(h.verdict, str) else "unfinished")
                    for h in s.hunts().itertuples()]
            print(tabulate(rows, headers=["id", "kind", "good", "bad", "started", "verdict"]))
            return
        hunt_id = hunt if hunt is not None else s.last_hunt_id(finished=True)
        data = s.hunt_report(hunt_id) if hunt_id is not None else None
        newest = s.last_hunt_id()
        unfinished = newest if hunt_id is None else None
        later = None    # a hunt newer than this report's with no report yet: it may be running now
        if newest is not None and hunt_id is not None and newest > hunt_id and s.hunt_report(newest) is None:
            later = newest
    if data is None and hunt_id is None:
        if unfinished is None:
            raise UserError(f"no hunt in {path} yet: run one first")
        if _hunt_running(path, repo):
            raise UserError(f"a hunt is running; nothing finished yet (hunt {unfinished}: `regressbisect report "
                            f"--list` shows it)")
        raise UserError(f"no hunt in {path} has finished: hunt {unfinished} stopped before its end; run its "
                        f"command again to resume it")
    if data is None:
        raise UserError(f"no finished hunt {hunt_id} in {path} (see `regressbisect report --list`)")
    if later is not None and _hunt_running(path, repo):
        # one line on stderr: the report itself (stdout, --json, --html) stays the stored one
        shown = f"the previous one, hunt {hunt_id}" if hunt is None else f"hunt {hunt_id}"
        print(f"note: another hunt is running in this store (hunt {later}, not finished); this report is of {shown}",
              file=sys.stderr)
    typed = load_report(data)     # its schema migrated once, here; --json writes the stored document as it is
    print(render_markdown(typed) if markdown else render_summary(typed))
    if html is not None:
        print(f"wrote {written('--html', html, lambda: render_html(typed, html))}")
    if json_out is not None:
        print(f"wrote {written('--json', json_out, lambda: write_text(json_out, dumps(data)))}")


def _hunt_running(store: Path, repo: Path) -> bool:
    """Whether a hunt holds the pool lock beside the store (the default store's folder) or in the
    repository (a --store elsewhere)."""
    from regressbisect.errors import UserError
    from regressbisect.git.history import History
    from regressbisect.git.worktrees import hunt_running, pool_root

    if hunt_running(store.parent):
        return True
    try:
        return hunt_running(pool_root(History.open(repo)))
    except UserError:   # --store given outside any repository
        return False
