"""Run the real CLI in-process and return its exit code (what a shell would see)."""
from __future__ import annotations

from regressbisect.cli import main


def run_cli(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
