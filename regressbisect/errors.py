"""User-facing failures and warnings.

Every failure a user can cause ends as one line on stderr and a documented exit code
(README, "Exit codes"); nothing else of ours is printed as a traceback.
"""
from __future__ import annotations

import enum
import sys


class ExitCode(enum.IntEnum):
    """The process exit codes; README "Exit codes" and docs/report-schema.md list the same."""

    OK = 0                  # hunt finished with an answer: culprits found
    USER_ERROR = 1          # bad ref, bad flag, not a repo, another hunt running ...
    NOT_REPRODUCED = 2      # endpoints do not differ by at least --min-effect: nothing to hunt
    NIGHTLY_REGRESSION = 3  # nightly found (and hunted) a new slowdown
    ALL_SKIPPED = 4         # every candidate in the range was skipped
    NOT_LOCALISED = 5       # the slowdown reproduced, but no single commit/hunk step explains it
    UNDECIDED = 6           # the budget (--max-samples) ran out before the answer was sure
    ISOLATION = 7           # a probe imported the project from somewhere else than its worktree
    MACHINE_BUSY = 8        # the machine never got quiet enough to measure within --max-wait
    INTERRUPTED = 130       # Ctrl-C / SIGINT / SIGTERM: every finished sample is stored


class UserError(Exception):
    """A failure caused by input: printed as one line, exits with `exit_code`."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.USER_ERROR):
        if "\n" in message:
            raise ValueError("UserError messages are one line")
        super().__init__(message)
        self.message = message
        self.exit_code = ExitCode(exit_code)


def print_error(message: str) -> None:
    """The one line of a failure on stderr: a UserError, or a file the finished work could not
    be written to (that one keeps the work's exit code)."""
    print(f"regressbisect: error: {message}", file=sys.stderr)


def warn(message: str, flag: str | None = None) -> None:
    """Print a warning; `flag` names the option that makes it go away (hyperfine style)."""
    hint = f" (use {flag} to change this)" if flag else ""
    print(f"warning: {message}{hint}", file=sys.stderr)
