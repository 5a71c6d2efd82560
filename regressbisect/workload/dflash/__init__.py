"""The reference DFlash-style drafter training workload (docs/workload.md).

Importing this package is cheap (no torch): the CLI only needs `workload_command`.
Run it with `python -m regressbisect.workload.dflash --preset tiny --tokens 4096 [--nproc 2]`.
"""
from .launch import workload_command
from .presets import PRESETS, Preset, get_preset

__all__ = ["workload_command", "Preset", "PRESETS", "get_preset"]
