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
