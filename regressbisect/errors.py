"""User-facing failures and warnings.

Every failure a user can cause ends as one line on stderr and a documented exit code
(README, "Exit codes"); nothing else of ours is printed as a traceback.
"""
from __future__ import annotations

import enum
import errno
import os
import sqlite3
import sys
from pathlib import Path


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
    AMBIGUOUS = 9           # the only step found has unmeasurable commits inside: no single commit named
    INTERRUPTED = 130       # Ctrl-C / SIGINT / SIGTERM: every finished sample is stored


class UserError(Exception):
    """A failure caused by input: printed as one line, exits with `exit_code`."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.USER_ERROR):
        if "\n" in message:
            raise ValueError("UserError messages are one line")
        super().__init__(message)
        self.message = message
        self.exit_code = ExitCode(exit_code)


class DiskFull(Exception):
    """The disk filled (or a quota ran out) while writing `where`. Not a UserError: a hunt that
    stops on it stays unfinished, so the same command resumes it once there is space; the CLI
    prints `DISK_FULL` as its one line."""

    def __init__(self, where: Path | str):
        super().__init__(f"no space left writing {where}")
        self.where = str(where)


DISK_FULL = ("the disk is full ({where}): every sample finished before is stored and the store "
             "is intact; free some space and run the same command again to resume")

_NEARLY_FULL_BYTES = 1 << 20
"""Free space under which an I/O error of SQLite's is read as the disk being full: SQLite reports
a -shm file it cannot grow as SQLITE_IOERR_SHMSIZE, not SQLITE_FULL."""
_SQLITE_FULL, _SQLITE_IOERR = 13, 10


def is_disk_full(error: BaseException, path: Path | None = None) -> bool:
    """`error` is a full disk or quota: ENOSPC/EDQUOT, SQLite's SQLITE_FULL, a command's "No space
    left on device", or SQLite's I/O error on `path` (a store) whose file system is (nearly) full."""
    if isinstance(error, DiskFull):
        return True
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        if code == _SQLITE_FULL or "disk is full" in str(error):
            return True
        if path is not None and code is not None and code & 0xFF == _SQLITE_IOERR:
            return free_bytes(Path(path).parent) < _NEARLY_FULL_BYTES
        return False
    return "No space left on device" in str(error)   # a git or other command's stderr


def disk_full_message(error: BaseException) -> str:
    """The one line for an `is_disk_full` error that stopped a command."""
    where = (error.where if isinstance(error, DiskFull) else getattr(error, "filename", None)
             or (str(error).strip().splitlines() or ["writing"])[0])
    return DISK_FULL.format(where=where)


def free_bytes(folder: Path) -> int:
    """Bytes this process may still write on `folder`'s file system (a large number if unknown)."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 1 << 62
    return stats.f_bavail * stats.f_frsize


def print_error(message: str) -> None:
    """The one line of a failure on stderr: a UserError, or a file the finished work could not
    be written to (that one keeps the work's exit code)."""
    print(f"regressbisect: error: {message}", file=sys.stderr)


def warn(message: str, flag: str | None = None) -> None:
    """Print a warning; `flag` names the option that makes it go away (hyperfine style)."""
    hint = f" (use {flag} to change this)" if flag else ""
    print(f"warning: {message}{hint}", file=sys.stderr)
