"""Flags shared by the commands that hunt (run, hunks, nightly)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from regressbisect.errors import UserError

Repo = Annotated[Path, typer.Option("--repo", "-C", help="The git repository to hunt in (default: current directory).")]
Cmd = Annotated[Optional[str], typer.Option("--cmd", help="Probe command run in each candidate's worktree; {tokens} is replaced by the budget. Default: cmd in [tool.regressbisect] of pyproject.toml.")]
Tokens = Annotated[Optional[str], typer.Option("--tokens", help="Token budget of one measured run (also REGRESSBISECT_TOKENS), or 'auto'. Default: auto (run picks it from pilot probes of GOOD, starting at 4096; docs/cost.md).")]
NoSharedCaches = Annotated[bool, typer.Option("--no-shared-caches", help="Leave inductor/triton/torch-extensions cache variables alone (default: one cache directory beside the store, shared by all slots).")]
Timeout = Annotated[Optional[float], typer.Option("--timeout", help="Seconds before a probe's process group is killed and the run is skipped. Default 600.")]
MetricRegex = Annotated[Optional[str], typer.Option("--metric-regex", help="Regex whose group 1 is tok/s, for probes that print no '@regressbisect {...}' line.")]
Env = Annotated[Optional[list[str]], typer.Option("--env", help="KEY=VALUE added to the probe's environment (repeatable).")]
MinEffect = Annotated[Optional[float], typer.Option("--min-effect", help="Relative step below which a change is not a culprit (0.02 = 2%). Default 0.02.")]
Direction = Annotated[Optional[str], typer.Option("--direction", help="Culprits of: 'slower' (default), 'faster', or 'both'.")]
MaxSamples = Annotated[Optional[int], typer.Option("--max-samples", help="Cap of samples per candidate; undecided at the cap = UNSURE. Default 96.")]
Slots = Annotated[Optional[int], typer.Option("--slots", help="Candidates measured at once, each in its own worktree and GPUs. Default 1.")]
SlotDevices = Annotated[Optional[list[str]], typer.Option("--slot-devices", help="CUDA_VISIBLE_DEVICES for one slot (repeat once per slot). Default: split visible GPUs evenly.")]
Instrument = Annotated[Optional[str], typer.Option("--instrument", help="'auto' (measure the counters shim's overhead first), 'separate' (counters always in separate runs), 'off'.")]
JsonOut = Annotated[Optional[Path], typer.Option("--json", help="Write the JSON report here.")]
StorePath = Annotated[Optional[Path], typer.Option("--store", help="SQLite store of samples (default: <git dir>/regressbisect/store.sqlite).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output; only the final report.")]


def parse_env(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    env: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair or pair.startswith("="):
            raise UserError(f"--env expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        env[key] = value
    return env


def parse_demo_tokens(value: str | None) -> int | str | None:
    """`demo --tokens`: a number or 'auto' written into the demo's pyproject (None: its default)."""
    if value is None or value.strip().lower() == "auto":
        return None if value is None else "auto"
    try:
        return int(value)
    except ValueError:
        raise UserError(f"--tokens must be a positive integer or 'auto', got {value!r}") from None
