"""`regressbisect doctor`: is this machine in its usual shape for measuring?"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o


@app.command("doctor")
def doctor(
    record: Annotated[bool, typer.Option("--record/--no-record", help="Keep the result in the store's machine history.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    store: o.StorePath = None, repo: o.Repo = Path("."),
) -> None:
    """Matmul rate, copy bandwidth, other processes and clocks, against this machine's history."""
    from regressbisect import doctor as doc
    from regressbisect.config import default_store_path
    from regressbisect.git.history import History
    from regressbisect.probe.runner import environment_fingerprint
    from regressbisect.store import Store

    check = doc.run_check()
    contention = doc.contention_figures()  # the busy-machine guard's figures (docs/contention.md)
    fingerprint, _ = environment_fingerprint()
    path = store or default_store_path(History.open(repo).common_dir)
    with Store(path) as s:
        past = s.machine_checks(fingerprint)
        history = past.drop(columns="created_at").to_dict("records") if len(past) else []
        health = doc.assess(check, history)
        if record:
            s.record_machine_check(fingerprint, doc.check_to_json(check))
    if as_json:
        print(json.dumps({"check": doc.check_to_json(check), "status": health.status,
                          "reasons": list(health.reasons), "contention": contention}, indent=2))
    else:
        print(f"{check.device}: matmul {check.matmul_tflops:.2f} TFLOP/s, copy {check.copy_gbps:.1f} GB/s, "
              f"{check.other_processes} other process(es)")
        print(f"other load: {contention['text']}")
        print(f"status: {health.status}")
        for reason in health.reasons:
            print(f"  {reason}")
    raise typer.Exit(0 if health.status in ("ok", "no-history") else 1)
