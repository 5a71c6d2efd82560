"""What the scripts share: the repository on sys.path (once, here), the one envelope of every
results file, and table printing. Scripts import regressbisect and this module, never tests/
(tests/test_layering.py checks it); see scripts/README.md."""
from __future__ import annotations

import json
import math
import platform
import shlex
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from regressbisect.hunts.common import without_option  # noqa: E402
from regressbisect.jsonio import dumps  # noqa: E402
from regressbisect.version import tool_identity  # noqa: E402

RESULTS_SCHEMA = 1
"""1: the envelope (tool, tool_version, tool_commit, date, machine, command) around `results`."""


def results_envelope(results: Mapping[str, Any], argv: Sequence[str] | None = None) -> dict[str, Any]:
    """`results` with what traces it: the code (version and commit), when, where and the command."""
    argv = sys.argv if argv is None else argv
    return {"tool": "regressbisect", "results_schema": RESULTS_SCHEMA, **tool_identity(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": {"host": platform.node(), "platform": platform.platform(),
                        "python": platform.python_version()},
            "command": shlex.join(["python", *argv]),
            "results": dict(results)}


def read_results(path: Path) -> dict[str, Any]:
    """The `results` of a results file; a file written before the envelope is its own results."""
    data = json.loads(path.read_text())
    return data["results"] if isinstance(data, dict) and "results_schema" in data else data


def provenance_line(argv: Sequence[str] | None = None) -> str:
    """One line for a markdown results file: the code, the date, the machine and the command."""
    env = results_envelope({}, argv)
    return (f"regressbisect {env['tool_version']} at {env['tool_commit']}, {env['date']}, {env['machine']['host']} "
            f"({env['machine']['platform']}, Python {env['machine']['python']}); `{env['command']}`")


def write_results(path: Path, results: Mapping[str, Any], argv: Sequence[str] | None = None) -> Path:
    """Write one results file (strict JSON, in the envelope) and say where it went."""
    path.write_text(dumps(results_envelope(results, argv)))
    print(f"wrote {path}")
    return path


def paired_change(log_ratios: Sequence[float], digits: int = 1) -> str:
    """'+x% (se y%)' of paired log ratios (arm / reference, one per round: pairs cancel drift the
    rounds share); '-' with fewer than two."""
    if len(log_ratios) < 2:
        return "-"
    se = statistics.stdev(log_ratios) / math.sqrt(len(log_ratios))
    return f"{math.expm1(statistics.mean(log_ratios)):+.{digits}%} ({se:.{digits}%})"


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A GitHub-markdown table on stdout: the form docs/results/*.md keep."""
    print("| " + " | ".join(str(h) for h in headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


def run_arms(script: str, arms: Sequence[str], argv: Sequence[str]) -> list[dict[str, Any]]:
    """Each arm NAME[@PATH] (default: now, this checkout) runs `script --worker` with the command
    line `argv` less its --arm options, in an interpreter with PATH first on PYTHONPATH (a copy of
    the tool: `git worktree add --detach PATH <rev>`); the JSON rows it prints, each with its
    'arm'. A worker must not import this module, which puts this checkout first on sys.path."""
    rows: list[dict[str, Any]] = []
    for arm in arms or ["now"]:
        name, _, path = arm.partition("@")
        pythonpath = os.pathsep.join(p for p in (path or str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
        out = subprocess.run([sys.executable, script, "--worker", *_without_arms(argv)], check=True,
                             capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=pythonpath)).stdout
        rows += [{"arm": name, **row} for row in json.loads(out)]
    return rows


def _without_arms(argv: Sequence[str]) -> list[str]:
    """The command line without its --arm options (a worker runs one arm)."""
    return without_option(argv, "--arm")
