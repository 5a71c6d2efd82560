"""`regressbisect deps GOOD_ENV BAD_ENV`: which package of an upgrade, and which release, made tok/s drop."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o

NOT_FOR_DEPS = ("setup", "venv", "drill", "footprint", "slots", "overlap", "slot_devices")
"""run's flags that have no meaning for a deps hunt (one probe at a time, in the project as it is)."""


HELP = """Find which package of an environment upgrade, and which release of it, made --cmd slower.

Your project is measured as it is in its directory; only the environment changes. Each candidate
environment (GOOD_ENV's pins with some of the changes) is a virtualenv of its own, built with uv
and kept until `clean`; your own environment is never touched.

Both ends are measured first (the control arm of `run`); then the changed packages are searched
as `hunks` searches hunks (a combination that does not resolve, install or run is a crash with its
reason), then each culprit package's releases between its two versions are bisected as `run`
bisects commits (a release that does not install is skipped and named). With --package-repo, the
commits between the tags of a culprit's last good and first bad releases are bisected too, each
built from source into the culprit's environment, and the culprit commit's hunks against its
parent are hunted as `run --drill` hunts them.

Every sample is stored as it is taken: the same command re-run after a kill or Ctrl-C goes on
from the stored samples.

Exit codes: 0 culprits named; 1 user error (an environment that does not build, the probe failing
at GOOD or BAD); 2 not reproduced; 4 every candidate skipped; 5 no single package explains it; 6
could not decide within --max-samples; 130 interrupted (every finished sample is stored: re-run to
resume).
"""


@app.command("deps", help=o.reflowed(HELP))
@o.hunt_options("run")
def deps(
    good_env: Annotated[Path, typer.Argument(help="The fast environment: a pinned requirements file (pip freeze) or a uv.lock.")],
    bad_env: Annotated[Path, typer.Argument(help="The slow environment, in either form.")],
    index_url: Annotated[Optional[str], typer.Option("--index-url", help="Package index to install from and list releases of (uv's --index-url; default PyPI).")] = None,
    find_links: Annotated[Optional[list[str]], typer.Option("--find-links", help="A directory (or page) of wheels and sdists, passed to uv; its files are releases too.")] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Only --find-links: no package index (uv's --no-index).")] = False,
    pre: Annotated[bool, typer.Option("--pre", help="Bisect pre-releases and dev releases too (where two dev-release ends are nightlies, their dev releases are bisected without it); ordered by upload time where the index's JSON API gives it.")] = False,
    exclude_newer: Annotated[Optional[str], typer.Option("--exclude-newer", metavar="DATE", help="Build every candidate environment from files uploaded before DATE only (YYYY-MM-DD or an RFC 3339 instant; uv's --exclude-newer), so its resolution is pinned to that day.")] = None,
    yanked: Annotated[bool, typer.Option("--yanked", help="Bisect yanked releases too.")] = False,
    package_repo: Annotated[Optional[list[str]], typer.Option("--package-repo", metavar="NAME=PATH", help="The git repository of changed package NAME (repeatable): the commits between the tags (vX or X) of its last good and first bad releases are bisected too, each built from source with uv, then the culprit commit's hunks.")] = None,
    python: Annotated[Optional[str], typer.Option("--python", help="Interpreter of the candidate environments (default: the one regressbisect runs on).")] = None,
    json_out: o.JsonOut = None, store: o.StorePath = None, repo: o.Repo = Path("."), quiet: o.Quiet = False,
    flags: dict | None = None,
) -> None:
    """`regressbisect deps` (its help: HELP)."""
    from regressbisect.config import build_config
    from regressbisect.deps.builds import IndexOptions
    from regressbisect.deps.envs import normalise, read_environment, unsupported_line
    from regressbisect.deps.releases import ReleaseRule
    from regressbisect.errors import UserError, warn
    from regressbisect.git.history import History
    from regressbisect.hunts.deps import DepsHunt
    from regressbisect.render.outputs import check_file
    from regressbisect.render.progress import HuntProgress

    given = [key for key in NOT_FOR_DEPS if (flags or {}).get(key) not in (None, ())]
    if given:
        raise UserError(f"deps takes no --{given[0].replace('_', '-')}: it measures one candidate environment at "
                        "a time, in the project as it is")
    history = History.open(repo)
    config = build_config(history.read_pyproject_table(), flags or {}, source=str(history.root / "pyproject.toml"))
    check_file(json_out, "--json")
    good, bad = read_environment(good_env), read_environment(bad_env)
    for env in (good, bad):
        line = unsupported_line(env)
        if line is not None:
            warn(line)
    repos = {}
    for pair in package_repo or ():
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--package-repo {pair!r}: give NAME=PATH (a changed package and its git repository)")
        repos[normalise(name)] = Path(path)
    if exclude_newer is not None and not _is_date(exclude_newer):
        raise UserError(f"--exclude-newer {exclude_newer!r}: give a date (2025-01-31) or an RFC 3339 instant "
                        "(2025-01-31T12:00:00Z)")
    index = IndexOptions(index_url=index_url, find_links=tuple(find_links or ()), no_index=no_index,
                         exclude_newer=exclude_newer)
    with HuntProgress(quiet=quiet, unit=config.unit) as progress:
        outcome = DepsHunt(history, config, good, bad, index=index, release_rule=ReleaseRule(pre=pre, yanked=yanked),
                           python=python, progress=progress, store_path=store,
                           package_repos=repos).run()
    finish(outcome, json_out)


def _is_date(text: str) -> bool:
    import datetime

    try:
        datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def finish(outcome, json_out: Path | None) -> None:
    """The summary, the --json report, then the verdict's exit code."""
    from regressbisect.jsonio import dumps
    from regressbisect.render.outputs import write_text, written_after_work
    from regressbisect.render.report_deps import deps_summary

    print(deps_summary(outcome.report))
    if json_out is not None:
        written_after_work("--json", json_out, lambda: write_text(json_out, dumps(outcome.report)),
                           kept="the summary above holds the culprits")
    raise typer.Exit(int(outcome.exit_code))
