"""Input checks whose message is the same on both backends (framework-free)."""
from __future__ import annotations

from typing import Sequence

__all__ = ["empty_batch_error", "check_not_empty"]


def empty_batch_error(who: str, shape: Sequence[int]) -> ValueError:
    """Hides: torch returns empty outputs for an input with no elements (a batch of 0 samples);
    MXNet 1.x's operators raise (its shape inference reads 0 as "unknown"), and a graph through an
    empty batch has no gradient to give. dualdl refuses empty inputs on both, with this message."""
    return ValueError(f"{who}: got an input with no elements (shape {tuple(shape)}, e.g. a batch of 0 "
                      f"samples); MXNet's operators cannot run on it, so dualdl refuses it on both "
                      f"backends: skip empty batches before calling the layer or loss")


def check_not_empty(who: str, shape: Sequence[int]) -> None:
    if 0 in tuple(shape):
        raise empty_batch_error(who, shape)
