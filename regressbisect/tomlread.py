"""TOML reading on every Python the package supports: the standard library's `tomllib` from 3.11,
the `tomli` backport (a dependency on 3.10 only, the same API) before."""
from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["tomllib"]
