"""`regressbisect workload`: run the built-in DFlash-style training step directly."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Annotated, Optional

import typer

from regressbisect.cli import app


@app.command("workload")
def workload(
    preset: Annotated[str, typer.Option("--preset", help="'tiny' (CPU, seconds) or 'h200' (one H200 per drafter rank).")] = "tiny",
    nproc: Annotated[int, typer.Option("--nproc", help="Processes (torchrun ranks); 1 runs target and drafter in one process.")] = 1,
    tokens: Annotated[Optional[int], typer.Option("--tokens", help="Measured token budget (default: the preset's).")] = None,
) -> None:
    """Run the reference workload once and print its metrics line (in a child process)."""
    from regressbisect.workload.dflash.launch import workload_command

    argv = workload_command(preset, nproc, tokens)
    raise typer.Exit(subprocess.call(argv, env=os.environ.copy(), stdout=sys.stdout, stderr=sys.stderr))
