"""Static worst-case cost estimate of a checked CEL expression (placeholder)."""

from __future__ import annotations

__all__ = ["estimate_cost"]


def estimate_cost(serialized: bytes) -> int:
    """Estimate the worst-case evaluation cost of a serialized checked expression."""
    return 0
