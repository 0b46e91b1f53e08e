"""Optimizers with torch.optim's signatures and torch's update formulas on both backends.

``dl.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)`` returns a
``torch.optim.SGD`` (subclass) for a torch model and a dualdl optimizer over Gluon Parameters for
an MXNet model; both apply the same update to the same gradients. See ``docs/training.md``.

What this hides (measured in shared/reference/mxnet-vs-torch.md §3):
- MXNet SGD keeps ``lr`` inside the momentum buffer (``mom = mu*mom - lr*g``), torch outside
  (``buf = mu*buf + g; w -= lr*buf``): they diverge (0.69 measured) after an lr change mid-run.
  dualdl uses torch's formula on both.
- MXNet Adam folds bias correction into the lr, which moves epsilon (``eps/sqrt(1-b2^t)``);
  dualdl uses torch's placement: ``w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)``.
- ``step(batch_size=B)`` divides the gradients by ``B`` first: MXNet's ``trainer.step(batch_size)``
  for code that backpropagates a sum of per-sample losses; ``step()`` uses them as they are.
- Param groups by name pattern replace MXNet's ``lr_mult``/``wd_mult`` (see :func:`param_groups`).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, List

from ..backend import backend_of
from .groups import BIASES_AND_NORMS, param_groups
from . import lr_scheduler

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "LAMB",
           "param_groups", "BIASES_AND_NORMS", "clip_grad_norm_", "clip_grad_value_",
           "grad_max_abs", "grads_finite", "lr_scheduler", "backend_of_params"]


def _first_param(params: List[Any]):
    for p in params:
        if isinstance(p, dict):
            ps = list(p.get("params", []))
            if ps:
                return ps[0]
        else:
            return p
    raise ValueError("optimizer got an empty parameter list")


def backend_of_params(params: Iterable[Any]):
    """The backend owning these parameters (torch tensors or Gluon Parameters)."""
    first = _first_param(list(params))
    be = backend_of(first, default=None)
    if be is None:
        raise TypeError(f"expected torch Parameters or Gluon Parameters, got {type(first).__name__}")
    return be


class _Factory:
    """Declared here, built by the backend that owns the parameters (from its ``_module``)."""
    _module = "optim"

    def __new__(cls, params, *args, **kwargs):
        params = list(params)
        be = backend_of_params(params)
        return getattr(be.module(cls._module), cls.__name__)(params, *args, **kwargs)


class SGD(_Factory):
    """SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False): torch's formula."""


class Adam(_Factory):
    """Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0): torch's epsilon placement;
    weight_decay is L2 added to the gradient (as both frameworks do)."""


class AdamW(_Factory):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2): decoupled decay
    ``w *= 1 - lr*wd`` before the Adam update (MXNet 1.9 has no AdamW in core)."""


class RMSprop(_Factory):
    """RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False):
    torch's formula (eps outside the square root; MXNet's RMSProp puts it inside)."""


class Adagrad(_Factory):
    """Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10):
    torch's formula (MXNet's AdaGrad puts eps inside the root and has no lr_decay)."""
    _module = "optim_adaptive"


class Adadelta(_Factory):
    """Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0): torch's formula (MXNet's has no lr)."""
    _module = "optim_adaptive"


class Adamax(_Factory):
    """Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0): torch's formula
    (eps inside the infinity-norm max)."""
    _module = "optim_adaptive"


class NAdam(_Factory):
    """NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
    decoupled_weight_decay=False): torch's momentum schedule (MXNet's Nadam differs)."""
    _module = "optim_adaptive"


class LAMB(_Factory):
    """LAMB(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, bias_correction=True,
    lower_bound=None, upper_bound=None, *, maximize=False): MXNet 1.9.1's ``mx.optimizer.LAMB``
    formula (gluonnlp's BERT recipe) on both backends; torch has no LAMB (formula in
    ``dualdl/optim/lamb.py``)."""
    _module = "optim_lamb"


def clip_grad_norm_(parameters: Iterable[Any], max_norm: float, norm_type: float = 2.0) -> float:
    """Scale gradients so their global norm is at most ``max_norm``; returns the norm before
    clipping (``torch.nn.utils.clip_grad_norm_`` / ``gluon.utils.clip_global_norm``)."""
    params = list(parameters)
    return backend_of_params(params).module("optim").clip_grad_norm_(params, max_norm, norm_type)


def clip_grad_value_(parameters: Iterable[Any], clip_value: float) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]``, before weight decay
    (as torch; MXNet's ``clip_gradient`` clips after weight decay for Adam)."""
    params = list(parameters)
    backend_of_params(params).module("optim").clip_grad_value_(params, clip_value)


def grad_max_abs(parameters: Iterable[Any]) -> float:
    """The largest ``|g|`` over all gradients (0.0 if none): ``nan`` if any gradient element is
    NaN, ``inf`` if any is infinite, so ``math.isfinite(grad_max_abs(ps))`` says whether a step
    is safe. Exact (a max, never a sum that could overflow), computed with one fused reduction
    and one host read per device (``torch._foreach_norm`` / one compiled MXNet graph); slower
    than :func:`grads_finite`, so the Trainer only uses it to report a failed check."""
    params = list(parameters)
    if not params:
        return 0.0
    maxima = backend_of_params(params).module("optim").grad_maxima(params)
    return max(maxima, key=lambda v: (math.isnan(v), v)) if maxima else 0.0


def grads_finite(parameters: Iterable[Any]) -> bool:
    """Whether every gradient element is finite (no NaN, no inf); exact, one fused check and one
    host read per device (torch: the multi-tensor check of ``GradScaler``; MXNet: ``multi_sum_sq``,
    confirmed by an exact max-|g| graph when a sum is not finite). ``dl.Trainer`` runs it (the
    adapter's, with a cached plan) before every optimizer step."""
    params = list(parameters)
    return not params or backend_of_params(params).module("optim").grads_finite(params)
