"""The `regressbisect` command: one module per sub-command, each a thin call into one core function.

Importing this package must stay cheap and never import torch (`regressbisect --help`).
"""
from __future__ import annotations

import signal
import sys

import typer

from regressbisect.errors import ExitCode, UserError, disk_full_message, is_disk_full, print_error
from regressbisect.probe.interrupts import INTERRUPTS

app = typer.Typer(
    name="regressbisect",
    help="Find the commit, or the uncommitted hunk, that made a PyTorch training job slower.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_LINE: list[str] = []
"""The command as the user typed it (`main` sets it): an undecided hunt's report repeats it with a
larger budget and its revisions resolved (hunts/common.py `continue_command`, options.without_revisions)."""

from regressbisect.cli import (clean_cmd, demo_cmd, deps_cmd, doctor_cmd, hunks_cmd,  # noqa: E402,F401
                               nightly_cmd, report_cmd, run_cmd, workload_cmd)  # registers them


def _print_version(asked: bool) -> None:
    if asked:
        from regressbisect.version import __version__, tool_commit

        commit = tool_commit()
        print(f"regressbisect {__version__}" + (f" ({commit})" if commit != __version__ else ""))
        raise typer.Exit()


@app.callback()
def _options(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                          help="Print the version (as reports' tool_version) and exit.")) -> None:
    """Find the commit, or the uncommitted hunk, that made a PyTorch training job slower."""


# Click's base exception, taken from typer's own public BadParameter: typer >= 0.20 vendors click as
# `typer._click` and pip no longer installs the `click` package, older typer uses `click` itself.
USAGE_ERROR = next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException")

INTERRUPTED = ("regressbisect: interrupted; every finished sample is stored: re-run the same "
               "command to resume")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: user errors become one line on stderr and a documented exit code.

    `kill` of any command ends it like Ctrl-C (probe/interrupts.py: probes stopped, Slurm jobs
    cancelled, samples kept); a hunt adds SIGINT for its run, even where it was inherited ignored."""
    COMMAND_LINE[:] = ["regressbisect", *(sys.argv[1:] if argv is None else argv)]
    try:
        with INTERRUPTS.signals((signal.SIGTERM,)):
            # Non-standalone click returns the code of a typer.Exit instead of exiting.
            code = app(args=argv, standalone_mode=False)
    except UserError as exc:
        print_error(exc.message)
        sys.exit(int(exc.exit_code))
    except (KeyboardInterrupt, typer.Abort):
        code = int(ExitCode.INTERRUPTED)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except USAGE_ERROR as exc:  # a bad flag or a missing argument, in non-standalone mode
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "regressbisect"
        print_error(f"{exc.format_message()} (see {command} --help)")
        sys.exit(int(ExitCode.USER_ERROR))
    except Exception as exc:  # a full disk, wherever it is met, is the user's to fix: one line
        if not is_disk_full(exc):
            raise
        print_error(disk_full_message(exc))
        sys.exit(int(ExitCode.USER_ERROR))
    if code == ExitCode.INTERRUPTED:  # typer turns Ctrl-C into Exit(130)
        print(INTERRUPTED, file=sys.stderr)
    sys.exit(code if isinstance(code, int) else 0)
