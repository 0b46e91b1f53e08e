"""torch.optim optimizers, with ``step(batch_size=...)`` added (MXNet's ``trainer.step`` contract)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

import torch

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "clip_grad_norm_", "clip_grad_value_"]


def _unhooked_step(cls: type) -> Callable:
    """``cls.step`` without torch's profiling/hook wrapper.

    torch wraps the ``step`` of an Optimizer class in ``profile_hook_step`` (record_function, step
    pre/post hooks) the first time that class is instantiated, and marks the wrapper ``hooked``.
    Our override is itself wrapped, so calling a wrapped parent would run the wrapper twice: the
    hooks would fire twice and the step would cost ~15 us more. The inner function keeps torch's
    own ``no_grad`` decorator (``_use_grad_for_differentiable``)."""
    f = cls.step
    while getattr(f, "hooked", False):
        f = f.__wrapped__
    return f


class _BatchSizeStep:
    _dl_optimizer = ""
    _torch_cls: type = torch.optim.Optimizer

    def step(self, closure=None, batch_size: Optional[float] = None):
        """``step()``: torch's update. ``step(batch_size=B)``: divide gradients by ``B`` first, as
        Gluon's ``trainer.step(B)`` does for a backpropagated sum of per-sample losses."""
        if batch_size is not None:
            if batch_size <= 0:
                raise ValueError(f"batch_size must be positive, got {batch_size}")
            with torch.no_grad():
                for g in self.param_groups:
                    for p in g["params"]:
                        if p.grad is not None:
                            p.grad.div_(batch_size)
        return _unhooked_step(self._torch_cls)(self, closure)


class SGD(_BatchSizeStep, torch.optim.SGD):
    _dl_optimizer = "SGD"
    _torch_cls = torch.optim.SGD


class Adam(_BatchSizeStep, torch.optim.Adam):
    _dl_optimizer = "Adam"
    _torch_cls = torch.optim.Adam


class AdamW(_BatchSizeStep, torch.optim.AdamW):
    _dl_optimizer = "AdamW"
    _torch_cls = torch.optim.AdamW


class RMSprop(_BatchSizeStep, torch.optim.RMSprop):
    _dl_optimizer = "RMSprop"
    _torch_cls = torch.optim.RMSprop


def clip_grad_norm_(params: Iterable[Any], max_norm: float, norm_type: float = 2.0) -> float:
    return float(torch.nn.utils.clip_grad_norm_(list(params), max_norm, norm_type))


def clip_grad_value_(params: Iterable[Any], clip_value: float) -> None:
    torch.nn.utils.clip_grad_value_(list(params), clip_value)
