"""Test helper: waiting for a process to be gone."""
from __future__ import annotations

import time
from pathlib import Path


def gone(pid: int, wait_s: float = 5.0) -> bool:
    """True once `pid` no longer runs (missing, or a zombie nobody reaped yet)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


DAEMONIZE = '''
import os, time


def daemonize(pid_dir):
    """Leave a daemon behind: fork, setsid, fork again, the middle process exits (the classic
    double fork). The daemon writes an empty file named after its pid into `pid_dir`, then sleeps;
    this returns once that file exists."""
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open(os.path.join(pid_dir, str(os.getpid())), "w").close()
            os.write(ready_w, b"x")
            time.sleep(300)
        os._exit(0)
    os.close(ready_w)
    os.read(ready_r, 1)
    os.wait()
'''
"""Python source defining `daemonize(pid_dir)`, for probes that leave a daemon."""


def daemons(pid_dir: Path) -> list[int]:
    """The pids the daemons of DAEMONIZE wrote into `pid_dir`."""
    return sorted(int(p.name) for p in pid_dir.iterdir())
