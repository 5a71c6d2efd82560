"""`regressbisect run GOOD BAD`: find the commit(s) that made tok/s drop."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o


@app.command("run")
@o.measurement_options
def run(
    good: Annotated[str, typer.Argument(help="A commit known to be fast (e.g. HEAD~20).")],
    bad: Annotated[str, typer.Argument(help="A later commit known to be slow (e.g. HEAD).")],
    cmd: o.Cmd = None, tokens: o.Tokens = None, timeout: o.Timeout = None,
    metric_regex: o.MetricRegex = None, unit: o.Unit = None, env: o.Env = None, min_effect: o.MinEffect = None,
    direction: o.Direction = None, max_samples: o.MaxSamples = None, slots: o.Slots = None,
    slot_devices: o.SlotDevices = None, instrument: o.Instrument = None,
    isolation_check: o.IsolationCheck = None,
    json_out: o.JsonOut = None, store: o.StorePath = None, repo: o.Repo = Path("."),
    quiet: o.Quiet = False, executor: o.Executor = None,
    shared: dict | None = None,
) -> None:
    """Bisect GOOD..BAD (first-parent) on tok/s with repeated, interleaved measurements.

    A commit is named only when its step is at least --min-effect with an interval excluding
    zero; "reproduced" (GOOD vs BAD) is held to the same rule.

    Exit codes: 0 culprits named; 1 user error; 2 not reproduced (GOOD->BAD is not a slowdown of
    --min-effect); 4 every candidate skipped; 5 reproduced, but no single commit explains it (the
    JSON lists the steps ruled out); 6 could not decide within --max-samples; 7 a probe imported the
    project from elsewhere than its worktree; 8 the machine never got quiet within --max-wait;
    130 interrupted (every finished sample is stored: re-run to resume).
    """
    from regressbisect.config import build_config
    from regressbisect.git.history import History
    from regressbisect.hunts.commits import CommitHunt
    from regressbisect.hunts.common import warn_unusable_slots
    from regressbisect.machine.fingerprint import count_gpus
    from regressbisect.render.progress import HuntProgress
    from regressbisect.render.outputs import check_file

    history = History.open(repo)
    flags = {"cmd": cmd, "tokens": tokens, "timeout": timeout, "metric_regex": metric_regex, "unit": unit,
             "env": o.parse_env(env), "min_effect": min_effect, "direction": direction,
             "max_samples": max_samples, "slots": slots, "slot_devices": slot_devices,
             "instrument": instrument,
             "executor": executor,
             "isolation_check": isolation_check}
    flags.update(shared or {})
    config = build_config(history.read_pyproject_table(), flags, source=str(history.root / "pyproject.toml"))
    check_file(json_out, "--json")
    with HuntProgress(quiet=quiet, unit=config.unit) as progress:
        hunt = CommitHunt(history, good, bad, config, store_path=store, progress=progress)
        warn_unusable_slots(config, len(hunt.candidates), count_gpus())
        outcome = hunt.run()
    o.finish(outcome, json_out, history, store)
