"""torch.optim optimizers, with ``step(batch_size=...)`` added (MXNet's ``trainer.step`` contract)."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable, List, Optional, Tuple

import torch

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "clip_grad_norm_", "clip_grad_value_", "grad_maxima",
           "grads_finite", "step_if_finite"]


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


@torch.no_grad()
def grad_maxima(params: Iterable[Any]) -> List[float]:
    """The largest ``|g|`` of the gradients of each (dtype, device): NaN if any element is NaN,
    inf if any is infinite (``max`` propagates NaN; no sum, so finite gradients never overflow).
    One ``_foreach_norm`` (ord inf) and one host read per (dtype, device): one for a usual model."""
    by_kind: dict = {}
    for p in params:
        g = p.grad
        if g is not None:
            by_kind.setdefault((g.dtype, g.device, g.is_sparse), []).append(g)
    maxima = []
    for (_, _, sparse), gs in by_kind.items():
        if sparse:
            maxima += [float(g.coalesce().values().abs().amax()) if g._nnz() else 0.0 for g in gs]
        else:
            maxima.append(float(torch.stack(torch._foreach_norm(gs, float("inf"))).amax()))
    return maxima


_UNSCALE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def step_if_finite(optimizer: Any, params: Iterable[Any], cache: Optional[dict] = None,
                   losses: Optional[float] = None) -> bool:
    """``optimizer.step()`` after :func:`grads_finite` says every gradient is finite, and the
    step's loss (``losses``: what ``Replicas.run(read=False)`` returned, a float on torch) is
    finite too (a torch step on CPU is synchronous: nothing to queue before the check's read)."""
    if losses is not None and not math.isfinite(losses):
        return False
    if not grads_finite(params, cache):
        return False
    optimizer.step()
    return True


def grads_finite(params: Iterable[Any], cache: Optional[dict] = None) -> bool:
    """Whether every gradient element is finite: torch's own multi-tensor check (the one
    ``GradScaler`` runs, with an unscale factor of exactly 1, which leaves every value as it is),
    one kernel and one host read for the usual model (all gradients dense, of one device and
    dtype); by (dtype, device) groups otherwise. Measured on CPU: 7 us for the benchmark MLP's 6
    gradients, where ``_foreach_norm(ord=inf)`` took 84 us. ``cache`` (the Trainer's) keeps the
    kernel's found-flag and factor tensors between calls (a flag is zeroed again only after it
    was raised): 1-2 us a step less than a new flag each time."""
    gs = [g for p in params if (g := p.grad) is not None]
    if not gs:
        return True
    flags = cache.get("flags") if cache is not None else None
    if flags is None:
        flags = _flags(gs[0].device)
        if cache is not None:
            cache["flags"] = flags
    found, one = flags
    try:
        torch._amp_foreach_non_finite_check_and_unscale_(gs, found, one)
    except (RuntimeError, TypeError):       # several devices or dtypes, sparse, integer
        if cache is not None:
            cache.pop("flags", None)        # (the flags may be on another device than the gradients)
        return _grouped_finite(gs)
    if found.item():
        found.zero_()
        return False
    return True


def _grouped_finite(gs: List[torch.Tensor]) -> bool:
    """The check without kept flags: fresh ones on the gradients' device, else by (dtype, device)."""
    try:
        return _all_finite(gs, gs[0].device)
    except (RuntimeError, TypeError):
        pass
    by_kind: dict = {}
    for g in gs:
        by_kind.setdefault((g.dtype, g.device, g.is_sparse or g.dtype not in _UNSCALE_DTYPES), []).append(g)
    return all(_group_finite(group, dev, other) for (_, dev, other), group in by_kind.items())


def _group_finite(gs: List[torch.Tensor], device: torch.device, other: bool) -> bool:
    """One (dtype, device) group: the multi-tensor check, else (sparse, or a dtype the kernel
    of this device does not take) one ``isfinite`` per tensor."""
    if not other:
        try:
            return _all_finite(gs, device)
        except (RuntimeError, TypeError):
            pass
    return all(bool(torch.isfinite(g.coalesce().values() if g.is_sparse else g).all()) for g in gs)


def _flags(device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """The multi-tensor check's found-flag (0) and unscale factor (exactly 1) on ``device``."""
    return (torch.zeros(1, dtype=torch.float32, device=device),
            torch.ones((), dtype=torch.float32, device=device))


def _all_finite(gs: List[torch.Tensor], device: torch.device) -> bool:
    found, one = _flags(device)
    torch._amp_foreach_non_finite_check_and_unscale_(gs, found, one)
    return not found.item()
