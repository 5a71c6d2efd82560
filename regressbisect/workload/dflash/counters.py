"""Optional read of the regressbisect counters shim, when a probe loaded it.

Nothing is imported: the shim registers `regressbisect.probe.instrument` in sys.modules itself,
so this trainer stays standalone (the demo repository copies it without regressbisect).
"""
from __future__ import annotations

import sys

# A copy of the probe contract's COUNTER_NAMES (tests/test_contract.py)
COUNTER_KEYS = ("lm_head_calls", "create_block_mask_calls", "create_block_mask_ms", "host_syncs")


def snapshot() -> dict[str, float] | None:
    """Cumulative counters of this process, or None when the shim is not active."""
    instrument = sys.modules.get("regressbisect.probe.instrument")
    if instrument is None or not instrument.active():
        return None
    return dict(instrument.snapshot())


def delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float]:
    """Counters spent between two snapshots ({} without the shim)."""
    if before is None or after is None:
        return {}
    out: dict[str, float] = {}
    for key in COUNTER_KEYS:
        value = after.get(key, 0) - before.get(key, 0)
        out[key] = round(value, 3) if isinstance(value, float) else value
    return out
