"""`regressbisect run GOOD BAD`: find the commit(s) that made tok/s drop."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o


@app.command("run")
def run(
    good: Annotated[str, typer.Argument(help="A commit known to be fast (e.g. HEAD~20).")],
    bad: Annotated[str, typer.Argument(help="A later commit known to be slow (e.g. HEAD).")],
    cmd: o.Cmd = None, tokens: o.Tokens = None, timeout: o.Timeout = None,
    metric_regex: o.MetricRegex = None, env: o.Env = None, min_effect: o.MinEffect = None,
    direction: o.Direction = None, max_samples: o.MaxSamples = None, slots: o.Slots = None,
    slot_devices: o.SlotDevices = None, instrument: o.Instrument = None,
    json_out: o.JsonOut = None, store: o.StorePath = None, repo: o.Repo = Path("."),
    quiet: o.Quiet = False, no_shared_caches: o.NoSharedCaches = False,
) -> None:
    """Bisect GOOD..BAD (first-parent) on tok/s with repeated, interleaved measurements.

    Exit codes: 0 finished (culprits or none), 1 user error, 2 regression not reproduced,
    4 every candidate skipped.
    """
    from regressbisect.config import build_config
    from regressbisect.jsonreport import dumps
    from regressbisect.git.history import History
    from regressbisect.hunt import CommitHunt
    from regressbisect.progress import HuntProgress
    from regressbisect.render import render_summary

    history = History.open(repo)
    flags = {"cmd": cmd, "tokens": tokens, "timeout": timeout, "metric_regex": metric_regex,
             "env": o.parse_env(env), "min_effect": min_effect, "direction": direction,
             "max_samples": max_samples, "slots": slots, "slot_devices": slot_devices,
             "instrument": instrument, "shared_caches": False if no_shared_caches else None}
    config = build_config(history.read_pyproject_table(), flags, source=str(history.root / "pyproject.toml"))
    with HuntProgress(quiet=quiet) as progress:
        hunt = CommitHunt(history, good, bad, config, store_path=store, progress=progress)
        outcome = hunt.run()
    if json_out is not None:
        json_out.write_text(dumps(outcome.report))
    print(render_summary(outcome.report))
    sys.stdout.flush()
    raise typer.Exit(int(outcome.exit_code))
