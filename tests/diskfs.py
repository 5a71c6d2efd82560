"""Test helper: a real small filesystem (full disk) and a real read-only directory.

`small_disk(path, size)` mounts a tmpfs of `size` bytes on `path` (root only; the test is skipped
where mount is not allowed); `fill(path, leave)` fills it up to `leave` free bytes. `ReadOnly`
gives a directory to fill, then `freeze()` makes it unwritable to this process: a tmpfs remounted
read-only as root (root ignores permission bits), chmod a-w otherwise.
"""
from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@contextlib.contextmanager
def small_disk(path: Path, size: int) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    proc = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path, leave: int) -> None:
    """Write a filler file into `path`'s filesystem until `leave` bytes (about) are free."""
    free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
    with open(path / "filler", "ab") as out:
        with contextlib.suppress(OSError):
            out.write(b"\0" * max(0, free - leave))


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


class ReadOnly:
    def __init__(self, path: Path):
        self.path = path
        self.mounted = os.geteuid() == 0
        path.mkdir(parents=True, exist_ok=True)
        if self.mounted:
            proc = _mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(path))
            if proc.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")

    def freeze(self) -> None:
        if self.mounted:
            proc = _mount("-o", "remount,ro", str(self.path))
            assert proc.returncode == 0, proc.stderr
            return
        for root, _, files in os.walk(self.path):
            for name in files:
                os.chmod(Path(root) / name, stat.S_IRUSR | stat.S_IRGRP)
            os.chmod(root, stat.S_IRUSR | stat.S_IXUSR)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            return
        for root, _, _ in os.walk(self.path):
            os.chmod(root, stat.S_IRWXU)


@pytest.fixture
def read_only(tmp_path) -> Iterator[ReadOnly]:
    """A directory `tmp_path/ro` to fill; `read_only.freeze()` makes it unwritable."""
    directory = ReadOnly(tmp_path / "ro")
    try:
        yield directory
    finally:
        directory.close()
