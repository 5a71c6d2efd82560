"""Which code wrote a report or a results file: the package version and the commit of the
tool's own source tree, so a result can be traced to the code that made it.

`__version__` is the one definition of the version: pyproject.toml reads it (dynamic version), so
`pip install .` and a built wheel carry the version every report prints. Bump it, with an entry in
CHANGELOG.md, on each user-visible change."""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.2.9"

SOURCE_ROOT = Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=1)
def tool_commit() -> str:
    """`git describe --always --dirty` of the tool's source tree when it is a git checkout
    (an editable install or a clone), else the installed package's metadata version. Computed
    once per process; never raises: "unknown" when neither can be read."""
    if (SOURCE_ROOT / ".git").exists():
        try:
            done = subprocess.run(["git", "-C", str(SOURCE_ROOT), "describe", "--always", "--dirty"],
                                  capture_output=True, text=True, timeout=10)
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("regressbisect")
    except (ImportError, PackageNotFoundError, ValueError):
        return "unknown"


def tool_identity() -> dict[str, str]:
    """The fields that name the code: `tool_version` and `tool_commit`."""
    return {"tool_version": __version__, "tool_commit": tool_commit()}
