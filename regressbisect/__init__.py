"""regressbisect: find the commit or hunk that made a PyTorch training job slower.

User scripts may call :func:`report` to print the metrics line a probe is read by; importing
this package is cheap (no torch, no git).
"""
from __future__ import annotations

from regressbisect.probe.protocol import report
from regressbisect.version import __version__

__all__ = ["report", "__version__"]
