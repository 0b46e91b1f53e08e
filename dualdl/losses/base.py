"""The base of dualdl's losses (configuration + ``__call__``) and PyTorch's ``reduce``, shared by
every loss module of the package."""
from __future__ import annotations

from typing import Any

from ..backend import backend_for
from . import _checks as _ck

__all__ = ["Loss", "reduce"]


def _impl(x: Any):
    return backend_for(x).module("losses")


def reduce(loss: Any, reduction: str = "mean") -> Any:
    """Reduce an unreduced (``reduction='none'``) loss the way PyTorch does: 'mean' over every
    element, 'sum', or 'none'. The step contract: backpropagate a 'mean' loss for PyTorch-style
    optimizer steps (MXNet's ``backward()`` on an (N,) loss sums it; ``Trainer.step(N)`` divides)."""
    return _impl(loss).reduce(loss, reduction)


class Loss:
    """Base of dualdl's losses: a configuration plus ``__call__`` (alias ``forward``)."""

    _name = "Loss"
    _reductions = _ck.REDUCTIONS

    def __init__(self, reduction: str = "mean", size_average: Any = None, reduce: Any = None) -> None:
        if size_average is not None or reduce is not None:
            raise ValueError(f"{type(self).__name__}: size_average and reduce are deprecated in PyTorch "
                             f"and not supported; use reduction='mean'|'sum'|'none'")
        self.reduction = _ck.check_reduction(type(self).__name__, reduction, self._reductions)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self(*args, **kwargs)

    def _config(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        cfg = ", ".join(f"{k}={v!r}" for k, v in self._config().items() if not _is_tensor_like(v))
        return f"{type(self).__name__}({cfg})"


def _is_tensor_like(v: Any) -> bool:
    return hasattr(v, "shape") and not isinstance(v, (int, float))
