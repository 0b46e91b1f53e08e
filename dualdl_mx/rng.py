"""Random-number state on MXNet/Gluon."""
from __future__ import annotations

from typing import Any, Dict

__all__ = ["rng_state", "set_rng_state"]


def rng_state() -> Dict[str, Any]:
    """MXNet 1.x cannot read its RNG state (only ``mx.random.seed``): nothing to save."""
    return {}


def set_rng_state(state: Dict[str, Any]) -> None:
    return None
