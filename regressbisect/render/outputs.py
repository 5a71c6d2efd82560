"""Where reports go: the files and folders that --json, --report-dir and --html name.

Each is checked before any work starts (`check_file`, `check_folder`): a path that cannot be
written costs one line then, not a hunt. Written once the work is done (`written_after_work`), a
failure (the disk filled, the folder went away) is one line, and the caller still prints its
answer and exits with its code.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable, TypeVar

from regressbisect.errors import UserError, print_error

T = TypeVar("T")


def check_file(path: Path | None, flag: str) -> None:
    """`flag PATH` names a file that can be written (missing folders above it are created)."""
    if path is None:
        return
    path = Path(path).absolute()
    if path.is_dir():
        raise UserError(f"{flag} {path} is a directory; {flag} takes a file path")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UserError(f"{flag} {path} cannot be written ({_why_not(path)}); pass another path")
        return
    _check_creatable(path.parent, path, flag)


def check_folder(path: Path | None, flag: str) -> None:
    """`flag PATH` names a folder (there or to be made) that files can be written into."""
    if path is None:
        return
    path = Path(path).absolute()
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; {flag} takes a folder")
    _check_creatable(path, path, flag)


def _check_creatable(folder: Path, path: Path, flag: str) -> None:
    """`folder` is, or can be made, a directory this process can write into."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent   # exists() is False under a file too: the walk stops there
    if not existing.is_dir():
        raise UserError(f"{flag} {path}: {existing} is a file, not a folder; pass another path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: cannot write in {existing} ({_why_not(existing)}); "
                        f"pass another path")


def _why_not(path: Path) -> str:
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except OSError:
        pass
    return "permission denied"


def write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` whole or not at all: a full disk leaves no half report behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def written(flag: str, path: Path, write: Callable[[], T]) -> T:
    """`write()`, an OSError of it raised as one line naming the flag and the path."""
    try:
        return write()
    except OSError as error:
        reason = error.strerror or str(error)
        raise UserError(f"could not write {flag} {path} ({reason})") from None


def written_after_work(flag: str, path: Path, write: Callable[[], T], kept: str) -> T | None:
    """`written` at the end of a hunt: a failure is one line saying what is kept (`kept`) and
    returns None, so the caller still prints the answer and exits with the hunt's code."""
    try:
        return written(flag, path, write)
    except UserError as error:
        print_error(f"{error.message}; {kept}")
        return None
