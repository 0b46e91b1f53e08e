"""The helpers every layer check uses (the error of an empty batch, the shape error, int-or-tuple
arguments, "explain on failure"): a module of its own so that the family check modules
(checks.py, conv_checks.py, norm_checks.py) import it without importing each other."""
from __future__ import annotations

import numbers
from typing import Any, Callable, Optional, Sequence, Tuple, Union

__all__ = ["IntOrTuple", "Shape", "explain", "empty_batch_error", "check_not_empty", "shape_error", "to_tuple"]

IntOrTuple = Union[int, Sequence[int]]
Shape = Sequence[int]


def explain(check: Callable[..., None], *args: Any, **kwargs: Any) -> Optional[Exception]:
    """The error ``check(*args, **kwargs)`` raises, or None: for an adapter that checks only after
    the framework's own call failed (``err = explain(...)``; ``raise err from None`` if it is set,
    else re-raise the framework's error)."""
    try:
        check(*args, **kwargs)
    except (ValueError, TypeError, IndexError, NotImplementedError) as e:
        return e
    return None


def empty_batch_error(who: str, shape: Shape) -> ValueError:
    """Hides: torch returns empty outputs for an input with no elements (a batch of 0 samples);
    MXNet 1.x's operators raise (its shape inference reads 0 as "unknown"), and a graph through an
    empty batch has no gradient to give. dualdl refuses empty inputs on both, with this message."""
    return ValueError(f"{who}: got an input with no elements (shape {tuple(shape)}, e.g. a batch of 0 "
                      f"samples); MXNet's operators cannot run on it, so dualdl refuses it on both "
                      f"backends: skip empty batches before calling the layer or loss")


def check_not_empty(who: str, shape: Shape) -> None:
    if 0 in tuple(shape):
        raise empty_batch_error(who, shape)


def shape_error(who: str, expected: str, shape: Shape) -> ValueError:
    """The wrong-rank/wrong-size error of every layer: who, the layout expected, the shape got."""
    return ValueError(f"{who}: expected input of shape {expected}, got {tuple(shape)}")


def to_tuple(v: IntOrTuple, n: int, what: str) -> Tuple[int, ...]:
    """An int or an n-sequence of ints as an n-tuple (torch's ``_pair``/``_single``)."""
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    if isinstance(v, str) or not hasattr(v, "__len__") or len(v) != n \
            or not all(isinstance(i, numbers.Integral) for i in v):
        raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {v!r}")
    return tuple(int(i) for i in v)
