"""The measured window, announced to regressbisect (its probe contract: docs/design.md).

With `--overlap K` the tool starts several probes at once and names a unix socket in
REGRESSBISECT_WINDOW. A probe sends `open` before its measured steps and waits for `go`: by then
every other probe is stopped, so the window runs alone. Closing the connection (or exiting)
ends the window. Without the variable this does nothing. Standard library only: a probe copies
these lines and needs no package of the tool.
"""
from __future__ import annotations

import contextlib
import os
import socket
from typing import Iterator

WINDOW_ENV = "REGRESSBISECT_WINDOW"   # a copy of the probe contract's (tests/test_contract.py)


@contextlib.contextmanager
def measured_window() -> Iterator[None]:
    path = os.environ.get(WINDOW_ENV)
    if not path:
        yield
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gate:
        gate.connect(path)
        gate.sendall(b"open\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = gate.recv(16)
            if not chunk:
                break   # the gate is gone (the hunt ended): measure as without it
            reply += chunk
        yield
        with contextlib.suppress(OSError):
            gate.sendall(b"close\n")
