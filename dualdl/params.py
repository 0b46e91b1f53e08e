"""Parameters and models written once: what torch code does with methods that Gluon's classes lack.

- ``dl.to_dtype(model, "float64")``: torch's ``model.double()`` / ``model.to(torch.float64)``,
  Gluon's ``model.cast("float64")`` (parameters and buffers, in place; returns the model).
- ``dl.numel(p)``, ``dl.dim(p)``, ``dl.requires_grad(p)``, ``dl.requires_grad_(p, False)``: torch's
  ``p.numel()``, ``p.dim()``, ``p.requires_grad``, ``p.requires_grad_()``; a Gluon ``Parameter`` has
  none of them (``grad_req='null'`` is its "no gradient").
- ``dl.grad(p)``: torch's ``p.grad``; Gluon's is one array per context (summed here).
- ``dl.add_(p, other, alpha=-lr)``: torch's manual update ``p.data.add_(p.grad, alpha=-lr)``
  (pytorch/examples word_language_model), outside autograd on both; on Gluon every context's copy.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from .backend import backend_of

__all__ = ["to_dtype", "numel", "dim", "requires_grad", "requires_grad_", "grad", "add_"]


def _impl(obj: Any):
    return backend_of(obj).module("ops")


def to_dtype(model: Any, dtype: Any) -> Any:
    """Cast every floating parameter and buffer of ``model`` to ``dtype`` ("float64", a numpy or torch
    dtype), in place; returns the model (torch: ``model.to(dtype)``; MXNet: ``model.cast``)."""
    from .tensor import _dtype
    return _impl(model).model_to_dtype(model, _dtype(dtype))


def numel(p: Any) -> int:
    """Number of elements of a parameter or tensor (``p.numel()``)."""
    return _impl(p).numel(p)


def dim(p: Any) -> int:
    """Number of dimensions of a parameter or tensor (``p.dim()``)."""
    return len(tuple(p.shape))


def requires_grad(p: Any) -> bool:
    """Whether ``p`` takes a gradient (``p.requires_grad``; Gluon: ``grad_req != 'null'``)."""
    return _impl(p).requires_grad(p)


def requires_grad_(p: Any, requires_grad: bool = True) -> Any:
    """Freeze (False) or unfreeze a parameter, in place (``p.requires_grad_()``; Gluon: ``grad_req``)."""
    return _impl(p).requires_grad_(p, requires_grad)


def grad(p: Any) -> Optional[Any]:
    """The gradient of ``p`` after backward (``p.grad``; Gluon: the sum over its contexts), or None."""
    return _impl(p).grad(p)


def add_(p: Any, other: Any, *, alpha: float = 1.0) -> Any:
    """``p += alpha * other`` in place, outside autograd (``p.data.add_(other, alpha=alpha)``): the
    manual SGD step ``dl.add_(p, dl.grad(p), alpha=-lr)``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise ValueError(f"add_: alpha must be a finite number, got {alpha!r}")
    return _impl(p).add_(p, other, float(alpha))
