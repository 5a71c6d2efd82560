"""The hunted direction: --direction as a sign, and a change measured along it."""
from __future__ import annotations

from regressbisect.config import Direction

__all__ = ["hunted_sign", "toward"]


def hunted_sign(direction: Direction) -> int:
    """-1 for 'slower', +1 for 'faster', 0 for 'both'."""
    return -1 if direction == Direction.SLOWER else 1 if direction == Direction.FASTER else 0


def toward(change: float, sign: int) -> float:
    """A log change measured in the hunted direction `sign` (its size when 0: both); above 0
    exactly when the change is one the hunt looks for."""
    return abs(change) if sign == 0 else change * sign
