"""Strict JSON for what the tool writes (reports, stored reports, results files): NaN and
infinities become null, so every parser (and SQLite's json_extract) reads it; an interval with
no finite bound is 'unknown', not a number. Below the store and the renderers, which both write it."""
from __future__ import annotations

import json
import math
from typing import Any, Mapping


def strict_json(value: Any) -> Any:
    """`value` with NaN/inf replaced by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def dumps(report: Mapping[str, Any]) -> str:
    return json.dumps(strict_json(report), indent=2, allow_nan=False, default=str) + "\n"
