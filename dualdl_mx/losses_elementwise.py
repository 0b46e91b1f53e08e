"""The elementwise losses on MXNet (MSE, L1, smooth L1, Huber, BCE with logits, KL divergence),
written once for ``F`` = ``mx.nd`` and ``mx.sym`` with PyTorch's formulas and reductions.

On NDArrays the shared checks run first (identical shapes, never a broadcast; weights that
broadcast), then the formula runs as one compiled graph; on Symbols (inside a hybridized block)
the formula alone. MXNet differences hidden here: a 0-d NDArray (which MXNet's operators cannot
compute with) is computed as shape (1,); torch's ``xlogy(t, t)`` of KL divergence (NaN for
``t < 0``, 0 for ``t = 0``) from a safe log; 'batchmean' on Symbols counts the batch in the graph.
"""
from __future__ import annotations

from typing import Any, Optional

import mxnet as mx

from dualdl.losses import _checks as ck

from .losses_symbolic import _as_nd, _reduce, _run, _same_ndim, _symbolic, _vector

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "kl_div"]


def _pair(name: str, input: Any, target: Any, reduction: str, extra: Optional[dict] = None,
          allowed=ck.REDUCTIONS):
    """Checked (input, target) NDArrays of one shape, or the Symbols as they are."""
    ck.check_reduction(name, reduction, allowed)
    if _symbolic(name, dict(input=input, target=target, **(extra or {}))):
        return input, target
    input = _as_nd(name, input)
    target = _as_nd(name, target, input)
    ck.check_same_shape(name, input.shape, target.shape)
    return _vector(input), _vector(target)


def _weighted_reduce(F, el, weight, reduction: str, by_weight: bool):
    """torch 2.13's ``weight=`` of mse/l1 (``by_weight``: 'mean' is sum(w l) / sum(w)) and huber
    ('mean' over the elements)."""
    if weight is None:
        return _reduce(F, el, reduction)
    el = el * weight
    if reduction == "mean" and by_weight:
        return F.sum(el) / F.sum(weight)
    return _reduce(F, el, reduction)


def _elementwise_weight(name: str, input: Any, weight: Any) -> Any:
    if weight is None or isinstance(input, mx.sym.Symbol):
        return weight
    w = _as_nd(name, weight, input)
    ck.check_elementwise_weight(name, w.shape, input.shape)
    return w


def _mse_formula(F, x, t, weight=None, *, reduction: str):
    return _weighted_reduce(F, F.square(x - t), weight, reduction, True)


def _l1_formula(F, x, t, weight=None, *, reduction: str):
    return _weighted_reduce(F, F.abs(x - t), weight, reduction, True)


def _smooth_l1_formula(F, x, t, *, reduction: str, beta: float):
    d = F.abs(x - t)
    el = d if beta == 0 else F.where(d < beta, 0.5 * F.square(d) / beta, d - 0.5 * beta)
    return _reduce(F, el, reduction)


def _huber_formula(F, x, t, weight=None, *, reduction: str, delta: float):
    d = F.abs(x - t)
    el = F.where(d < delta, 0.5 * F.square(d), delta * (d - 0.5 * delta))
    return _weighted_reduce(F, el, weight, reduction, False)


def mse_loss(input, target, reduction="mean", weight=None):
    input, target = _pair("MSELoss", input, target, reduction, dict(weight=weight))
    w = _elementwise_weight("MSELoss", input, weight)
    return _run(_mse_formula, dict(x=input, t=target, weight=w), reduction=reduction)


def l1_loss(input, target, reduction="mean", weight=None):
    input, target = _pair("L1Loss", input, target, reduction, dict(weight=weight))
    w = _elementwise_weight("L1Loss", input, weight)
    return _run(_l1_formula, dict(x=input, t=target, weight=w), reduction=reduction)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    input, target = _pair("SmoothL1Loss", input, target, reduction)
    return _run(_smooth_l1_formula, dict(x=input, t=target), reduction=reduction, beta=float(beta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    input, target = _pair("HuberLoss", input, target, reduction, dict(weight=weight))
    w = _elementwise_weight("HuberLoss", input, weight)
    return _run(_huber_formula, dict(x=input, t=target, weight=w), reduction=reduction, delta=float(delta))


def _bce_logits_formula(F, x, t, weight=None, pos_weight=None, *, reduction: str):
    """aten's ``binary_cross_entropy_with_logits``: ``(1 - t) x + lw (log1p(exp(-|x|)) + max(-x, 0))``
    with ``lw = 1 + (pos_weight - 1) t``."""
    softplus_neg_abs = F.log1p(F.exp(-F.abs(x)))
    if pos_weight is None:
        el = (1 - t) * x + F.relu(-x) + softplus_neg_abs
    else:
        log_weight = F.broadcast_mul(pos_weight - 1, t) + 1
        el = (1 - t) * x + log_weight * (softplus_neg_abs + F.relu(-x))
    if weight is not None:
        el = F.broadcast_mul(el, weight)
    return _reduce(F, el, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction="mean"):
    """``weight`` broadcasts to the input, ``pos_weight`` along the last (class) axis; on Symbols
    both must already have the input's ndim."""
    name = "BCEWithLogitsLoss"
    input, target = _pair(name, input, target, reduction, dict(weight=weight, pos_weight=pos_weight))
    if isinstance(input, mx.nd.NDArray):
        ws = []
        for what, w in (("weight", weight), ("pos_weight", pos_weight)):
            if w is not None:
                w = _vector(_as_nd(name, w, input))
                ck.check_broadcast(name, what, w.shape, input.shape)
                w = _same_ndim(w, input.ndim)
            ws.append(w)
        weight, pos_weight = ws
    return _run(_bce_logits_formula, dict(x=input, t=target, weight=weight, pos_weight=pos_weight),
                reduction=reduction)


def _kl_formula(F, x, t, *, reduction: str, log_target: bool, count: int):
    """``exp(t) (t - x)`` (log_target) or torch's ``xlogy(t, t) - t x``: 0 where ``t = 0``,
    ``t log t`` elsewhere (NaN for ``t < 0``, as torch), the log taken of a safe value so that the
    masked branch passes no NaN gradient."""
    if log_target:
        el = F.exp(t) * (t - x)
    else:
        zero = t == 0
        safe = F.where(zero, F.ones_like(t), t)
        el = F.where(zero, F.zeros_like(t), t * F.log(safe)) - t * x
    if reduction != "batchmean":
        return _reduce(F, el, reduction)
    if count:
        return F.sum(el) / count
    # on Symbols: the batch size (axis 0) counted in the graph
    first = F.slice_axis(F.reshape(x, shape=(0, -1)), axis=1, begin=0, end=1)
    return F.broadcast_div(F.sum(el), F.sum(F.ones_like(first)))


def kl_div(input, target, reduction="mean", log_target=False):
    name = "KLDivLoss"
    zero_d = isinstance(input, mx.nd.NDArray) and input.ndim == 0
    input, target = _pair(name, input, target, reduction, allowed=ck.REDUCTIONS + ("batchmean",))
    count = 0
    if isinstance(input, mx.nd.NDArray):
        count = 1 if zero_d else int(input.shape[0])        # torch: a 0-d input's 'batchmean' is its sum
    return _run(_kl_formula, dict(x=input, t=target), reduction=reduction, log_target=bool(log_target),
                count=count if reduction == "batchmean" else 0)
