"""dualdl losses on MXNet written once for ``F`` = ``mx.nd`` and ``mx.sym``: BCE, margin ranking,
cosine embedding, triplet margin, Poisson and Gaussian NLL, with PyTorch's formulas.

On NDArrays the argument checks of ``dualdl.losses._checks`` run first (shapes, target and value
ranges: the errors torch users expect, never an MXNetError), then the formula runs as one compiled
graph. On Symbols (inside a hybridized block) shapes and values are unknown, so only the
formula runs. MXNet differences hidden here:
- torch's BCE gradient ``(x - t) / max(x (1 - x), 1e-12)`` is not the derivative of its clamped
  logs (which is NaN at 0 and 1): the formula carries torch's gradient explicitly;
- ``clamp_min(z, 0)`` passes the gradient at ``z = 0`` (``maximum(z, 0.)`` does, ``relu`` not);
- ``torch.minimum`` splits the gradient of a tie in half (MXNet's gives it all to the first);
- torch clamps GaussianNLL's var under ``no_grad``: the clamp's gradient is the identity;
- MXNet has no 0-d arrays: reduced losses and unbatched inputs give shape (1,).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import numpy as np
import mxnet as mx
from mxnet import autograd, nd

from dualdl.losses import _checks as ck

from .fast import compiled
from .fast.host import host_array

__all__ = ["binary_cross_entropy", "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "poisson_nll_loss", "gaussian_nll_loss"]


# aten's ``constexpr float EPSILON = 1e-12`` (BCE's gradient floor, cosine_embedding_loss): the
# float32 value, promoted (in float64 the difference from 1e-12 is 4e-9 relative)
_ATEN_EPS = float(np.float32(1e-12))


# ---- dispatch: checked + compiled on NDArrays, the bare formula on Symbols ----------------------
def _symbolic(name: str, inputs: Dict[str, Any]) -> bool:
    """True when the inputs are Symbols (all of them), False for NDArrays; else a TypeError."""
    present = [v for v in inputs.values() if v is not None]
    if all(isinstance(v, mx.sym.Symbol) for v in present):
        return True
    if any(isinstance(v, mx.sym.Symbol) for v in present):
        raise TypeError(f"{name}: inside a hybridized block every tensor argument must be a Symbol; "
                        f"got a mix of Symbols and {', '.join(sorted({type(v).__name__ for v in present}))}")
    return False


def _run(formula, inputs: Dict[str, Any], **static: Any):
    if any(isinstance(v, mx.sym.Symbol) for v in inputs.values()):
        return formula(mx.sym, **inputs, **static)
    return compiled.run(formula, inputs, static_alloc=True, **static)


def _as_nd(name: str, x: Any, like: Optional[nd.NDArray] = None) -> nd.NDArray:
    """An NDArray in ``like``'s context and dtype (numbers, numpy arrays, torch tensors converted)."""
    if like is None:
        if not isinstance(x, nd.NDArray):
            raise TypeError(f"{name}: expected an mxnet NDArray (or Symbol) input, got {type(x).__name__}")
        return x
    if isinstance(x, nd.NDArray):
        if x.context != like.context:
            x = x.as_in_context(like.context)
        return x if x.dtype == like.dtype else x.astype(like.dtype)
    host = x.detach().cpu().numpy() if hasattr(x, "detach") else x
    return host_array(np.array(host, dtype=like.dtype, ndmin=1), like.context, like.dtype)


def _vector(x: Any) -> Any:
    """A 0-d NDArray as shape (1,) (MXNet's operators read () as an unknown shape)."""
    return x.reshape((1,)) if isinstance(x, nd.NDArray) and x.ndim == 0 else x


def _min_max(x: nd.NDArray):
    with autograd.pause():
        x = x.reshape((1,)) if x.ndim == 0 else x      # MXNet 1.x's reductions refuse a 0-d array
        lo, hi = nd.concat(nd.min(x), nd.max(x), dim=0).asnumpy().tolist()
    return lo, hi


def _reduce(F, el, reduction: str):
    if reduction == "mean":
        return F.mean(el)
    return F.sum(el) if reduction == "sum" else el


def _clamp_min0(F, z):
    """torch's ``clamp_min(z, 0)``: the gradient passes where ``z >= 0`` (``relu``'s stops at 0)."""
    return F.maximum(z, 0.0)


def _same_ndim(w, ndim: int):
    """Right-align ``w``'s axes with an ndim-D array (MXNet's broadcast ops want equal ndim)."""
    return w.reshape((1,) * (ndim - w.ndim) + w.shape) if w.ndim < ndim else w


# ---- BCE on probabilities -------------------------------------------------------------------------
def _bce_formula(F, x, t, weight=None, *, reduction: str):
    """torch's ``binary_cross_entropy`` (aten Loss.cpp): value with logs clamped at -100, and
    torch's gradients ``(x - t) / max(x (1 - x), 1e-12)`` (input), ``log(1-x) - log(x)`` (target)."""
    logx = F.maximum(F.log(x), -100.0)
    log1mx = F.maximum(F.log1p(-x), -100.0)
    value = (t - 1) * log1mx - t * logx
    gx = (x - t) / F.maximum(x * (1 - x), _ATEN_EPS)
    bg = F.BlockGrad
    el = bg(value) + (x - bg(x)) * bg(gx) + (t - bg(t)) * bg(log1mx - logx)
    if weight is not None:
        el = F.broadcast_mul(el, weight)
    return _reduce(F, el, reduction)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    name = "BCELoss"
    ck.check_reduction(name, reduction)
    if not _symbolic(name, dict(input=input, target=target, weight=weight)):
        input = _as_nd(name, input)
        target = _as_nd(name, target, input)
        ck.check_same_shape(name, input.shape, target.shape)
        ck.check_not_empty(name, input.shape)
        input, target = _vector(input), _vector(target)
        ck.check_probabilities(name, *_min_max(input))
        if weight is not None:
            weight = _vector(_as_nd(name, weight, input))
            ck.check_broadcast(name, "weight", weight.shape, input.shape)
            weight = _same_ndim(weight, input.ndim)
    return _run(_bce_formula, dict(x=input, t=target, weight=weight), reduction=reduction)


# ---- pairs and triplets ---------------------------------------------------------------------------
def _margin_ranking_formula(F, x1, x2, t, *, margin: float, reduction: str):
    return _reduce(F, _clamp_min0(F, -t * (x1 - x2) + margin), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    name = "MarginRankingLoss"
    ck.check_reduction(name, reduction)
    if not _symbolic(name, dict(input1=input1, input2=input2, target=target)):
        input1 = _as_nd(name, input1)
        input2, target = _as_nd(name, input2, input1), _as_nd(name, target, input1)
        ck.check_same_shapes(name, ("input1", "input2", "target"), (input1.shape, input2.shape, target.shape))
    return _run(_margin_ranking_formula, dict(x1=input1, x2=input2, t=target), margin=float(margin),
                reduction=reduction)


def _cosine_formula(F, x1, x2, t, *, margin: float, reduction: str, axis: int):
    """aten's ``cosine_embedding_loss``: ``x.y / sqrt((|x|^2 + 1e-12)(|y|^2 + 1e-12))``."""
    eps = _ATEN_EPS
    prod = F.sum(x1 * x2, axis=axis)
    denom = F.sqrt((F.sum(x1 * x1, axis=axis) + eps) * (F.sum(x2 * x2, axis=axis) + eps))
    cos = prod / denom
    zeros = F.zeros_like(cos)
    t = F.reshape(t, shape=(-1,))
    el = F.where(t == 1, 1 - cos, zeros) + F.where(t == -1, _clamp_min0(F, cos - margin), zeros)
    return _reduce(F, el, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """Inputs (N, D) and target (N,), or (D,) and target () / (1,). On Symbols the inputs must be 2-D."""
    name = "CosineEmbeddingLoss"
    ck.check_reduction(name, reduction)
    axis = 1
    if not _symbolic(name, dict(input1=input1, input2=input2, target=target)):
        input1 = _as_nd(name, input1)
        input2, target = _as_nd(name, input2, input1), _as_nd(name, target, input1)
        ck.check_cosine_shapes(name, input1.shape, input2.shape, target.shape)
        axis = 1 if input1.ndim == 2 else 0
    return _run(_cosine_formula, dict(x1=input1, x2=input2, t=target), margin=float(margin),
                reduction=reduction, axis=axis)


def _pnorm(F, d, p: float):
    """``torch.norm(d, p, dim=-1)``."""
    if p == 2:
        return F.sqrt(F.sum(F.square(d), axis=-1))
    if p == 1:
        return F.sum(F.abs(d), axis=-1)
    return F.power(F.sum(F.power(F.abs(d), p), axis=-1), 1.0 / p)


def _tie_minimum(F, a, b):
    """``torch.minimum``: equal entries share the gradient half and half (MXNet's give it to ``a``)."""
    return F.where(a == b, 0.5 * (a + b), F.minimum(a, b))


def _triplet_formula(F, a, pos, neg, *, margin: float, p: float, eps: float, swap: bool, reduction: str):
    """aten's ``triplet_margin_loss`` with ``pairwise_distance(x, y) = ||x - y + eps||_p``."""
    d_pos = _pnorm(F, a - pos + eps, p)
    d_neg = _pnorm(F, a - neg + eps, p)
    if swap:
        d_neg = _tie_minimum(F, d_neg, _pnorm(F, pos - neg + eps, p))
    return _reduce(F, _clamp_min0(F, margin + d_pos - d_neg), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
    name = "TripletMarginLoss"
    ck.check_reduction(name, reduction)
    if not _symbolic(name, dict(anchor=anchor, positive=positive, negative=negative)):
        anchor = _as_nd(name, anchor)
        positive, negative = _as_nd(name, positive, anchor), _as_nd(name, negative, anchor)
        ck.check_same_shapes(name, ("anchor", "positive", "negative"),
                             (anchor.shape, positive.shape, negative.shape), min_ndim=1)
    return _run(_triplet_formula, dict(a=anchor, pos=positive, neg=negative), margin=float(margin),
                p=float(p), eps=float(eps), swap=bool(swap), reduction=reduction)


# ---- Poisson and Gaussian NLL ---------------------------------------------------------------------
def _poisson_formula(F, x, t, *, log_input: bool, full: bool, eps: float, reduction: str):
    el = F.exp(x) - t * x if log_input else x - t * F.log(x + eps)
    if full:                               # Stirling's term where t > 1, computed at t everywhere as torch
        # does (masked after): the target's gradient is then NaN where t <= 0 (0 * log'(0)), as torch's
        stirling = t * F.log(t) - t + 0.5 * F.log(2 * math.pi * t)
        el = el + F.where(t > 1, stirling, F.zeros_like(t))
    return _reduce(F, el, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    name = "PoissonNLLLoss"
    ck.check_reduction(name, reduction)
    if not _symbolic(name, dict(input=input, target=target)):
        input = _as_nd(name, input)
        target = _as_nd(name, target, input)
        ck.check_same_shape(name, input.shape, target.shape)
        ck.check_not_empty(name, input.shape)
    return _run(_poisson_formula, dict(x=input, t=target), log_input=bool(log_input), full=bool(full),
                eps=float(eps), reduction=reduction)


def _gaussian_formula(F, x, t, var=None, *, var_value: float, full: bool, eps: float, reduction: str):
    """torch's ``gaussian_nll_loss``; var clamped at eps with an identity gradient (torch clamps
    under ``no_grad``): ``BlockGrad(max(var, eps)) + var - BlockGrad(var)``."""
    if var is None:
        v = F.ones_like(x) * max(var_value, eps)
    else:
        v = F.BlockGrad(F.maximum(var, eps)) + (var - F.BlockGrad(var))
    el = 0.5 * F.broadcast_add(F.log(v), F.broadcast_div(F.square(x - t), v))
    if full:
        el = el + 0.5 * math.log(2 * math.pi)
    return _reduce(F, el, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``var``: a number, or an array of one of torch's shapes (on Symbols: of the input's ndim)."""
    name = "GaussianNLLLoss"
    ck.check_reduction(name, reduction)
    number = isinstance(var, (int, float))
    if number:
        ck.check_var_nonnegative(name, float(var))
    if not _symbolic(name, dict(input=input, target=target, var=None if number else var)):
        input = _as_nd(name, input)
        target = _as_nd(name, target, input)
        ck.check_same_shape(name, input.shape, target.shape)
        ck.check_not_empty(name, input.shape)
        if not number:
            var = _as_nd(name, var, input)
            var = var.reshape(ck.gaussian_var_shape(name, input.shape, var.shape))
            ck.check_var_nonnegative(name, _min_max(var)[0])
    return _run(_gaussian_formula, dict(x=input, t=target, var=None if number else var),
                var_value=float(var) if number else 0.0, full=bool(full), eps=float(eps), reduction=reduction)
