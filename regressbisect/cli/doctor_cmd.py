"""`regressbisect doctor`: is this machine in its usual shape for measuring? With --cmd: does the
probe measure the candidate's own code (one isolation check, docs/isolation.md)?"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from regressbisect.cli import app
from regressbisect.cli import options as o


@app.command("doctor")
def doctor(
    record: Annotated[bool, typer.Option("--record/--no-record", help="Keep the result in the store's machine history.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    cmd: Annotated[Optional[str], typer.Option("--cmd", help="Instead of the machine check, run this probe once in a worktree of HEAD and show where it imported the project from (exit 7 when not from the worktree).")] = None,
    env: o.Env = None, tokens: o.Tokens = None, timeout: o.Timeout = None,
    store: o.StorePath = None, repo: o.Repo = Path("."),
) -> None:
    """Matmul rate, copy bandwidth, other processes and clocks, against this machine's history.

    With --cmd: run the probe once in a worktree of HEAD and show where it imported the project
    from. Exit codes: 0 fine, 1 slow or busy machine (or a user error), 7 the probe imported the
    project from elsewhere than its worktree.
    """
    if cmd is not None:
        _import_check(repo, cmd, env, tokens, timeout, as_json)
        return
    from regressbisect.config import default_store_path
    from regressbisect.git.history import History
    from regressbisect.machine import doctor as doc
    from regressbisect.probe.runner import environment_fingerprint
    from regressbisect.store import Store

    check = doc.run_check()
    contention = doc.contention_figures()  # the busy-machine guard's figures (docs/contention.md)
    fingerprint, _ = environment_fingerprint()
    path = store or default_store_path(History.open(repo).common_dir)
    history: list = []
    if record or path.exists():  # --no-record only reads: a read-only store will do
        with Store(path, read_only=not record) as s:
            past = s.machine_checks(fingerprint)
            history = past.drop(columns="created_at").to_dict("records") if len(past) else []
            if record:
                s.record_machine_check(fingerprint, doc.check_to_json(check))
    health = doc.assess(check, history)
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
    raise typer.Exit(0 if health.status in (doc.HealthStatus.OK, doc.HealthStatus.NO_HISTORY) else 1)


def _import_check(repo: Path, cmd: str, env: list[str] | None, tokens: int | None,
                  timeout: float | None, as_json: bool) -> None:
    from regressbisect.config import build_config
    from regressbisect.git.history import History
    from regressbisect.probe.import_check import check_imports

    history = History.open(repo)
    flags = {"cmd": cmd, "env": o.parse_env(env), "tokens": tokens, "timeout": timeout}
    config = build_config(history.read_pyproject_table(), flags, source=str(history.root / "pyproject.toml"))
    result = check_imports(history, config)  # IsolationError: one line, exit 7
    outcome = result.outcome
    measured = f"{outcome.sample.tok_s:.6g} tok/s" if outcome.sample else f"skipped: {outcome.skip_reason}"
    if as_json:
        print(json.dumps({"commit": result.commit, "import_roots": list(result.roots),
                          "imported_from": result.imported, "note": result.note,
                          "processes": result.processes, "probe": measured}, indent=2))
        return
    print(f"isolation check at {result.commit[:10]} (HEAD): {result.note}")
    print(f"import roots, first on PYTHONPATH: {', '.join(r if r == '.' else r + '/' for r in result.roots)}")
    width = max((len(m) for m in result.imported), default=0)
    for module, file in result.imported.items():
        print(f"  {module:<{width}}  {file}")
    print(f"probe: {measured}; {result.processes} process(es) imported the project")
