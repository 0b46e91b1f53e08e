"""The margin losses and ``linear_cross_entropy`` on MXNet, with PyTorch's formulas (aten's
Loss.cpp, LossMultiMargin.cpp, LossMultiLabelMargin.cpp) and reductions; Gluon has none of them.

Written once for ``F`` = ``mx.nd`` / ``mx.sym`` (multi-label margin: NDArrays only, its targets
are read on the host). On NDArrays the shared checks (``dualdl.losses._margin_checks``) run
first, then the formula as one compiled graph. MXNet differences hidden here:
- MXNet has no 0-d arrays: a 0-d or unbatched input is computed as a batch of one, and reduced
  losses have shape (1,);
- torch's ``clamp_min(z, 0)`` passes the gradient at ``z = 0`` (``maximum(z, 0.)``, not ``relu``),
  while its multi-class and multi-label margins count a term only where ``z > 0`` (``relu``);
- soft margin is torch's literal ``log1p(exp(-y x))`` (inf, not a stable softplus, where it overflows);
- ``log_sigmoid``'s gradient is torch's kernel's (``1 - z / (1 + z)`` or ``z / (1 + z)``, ``z =
  exp(-|x|)``), carried explicitly: the derivative of the stable formula is 0 at ``x = 0`` on MXNet.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import mxnet as mx
from mxnet import nd

from dualdl.losses import _checks as ck
from dualdl.losses import _margin_checks as mc

from .fast.host import host_array
from .losses_elementwise import _pair
from .losses_symbolic import _vector
from .losses_symbolic import _as_nd, _reduce, _run, _same_ndim, _symbolic

__all__ = ["multi_margin_loss", "multilabel_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "hinge_embedding_loss", "linear_cross_entropy"]


def _host(x: Any) -> np.ndarray:
    if isinstance(x, nd.NDArray):
        return x.asnumpy()
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def _const(a: np.ndarray, like: nd.NDArray) -> nd.NDArray:
    return host_array(np.ascontiguousarray(a, dtype=like.dtype), like.context, like.dtype)


# ---- multi-class margin -------------------------------------------------------------------------
def _multi_margin_formula(F, x, index, weight=None, *, p: int, margin: float, reduction: str):
    """``sum_{j != y} max(0, margin - x[y] + x[j])**p * w[y] / C`` per row of ``x`` (N, C): the
    sum over every j less the j = y term (the same float value, picked), so no class count or
    one-hot is needed on Symbols."""
    xy = F.pick(x, index, axis=1, keepdims=True)
    h = F.relu(F.broadcast_add(margin - xy, x))                  # aten's (margin - x[y]) + x[j]; z > 0 only
    if p == 2:
        h = F.square(h)
    total = F.sum(h, axis=1) - F.pick(h, index, axis=1)
    if weight is not None:
        total = total * F.take(weight, index)
    count = F.sum(F.ones_like(F.slice_axis(x, axis=0, begin=0, end=1)))   # C
    el = F.broadcast_div(total, count)
    return _reduce(F, el, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction="mean"):
    """Input (N, C), (C,) or 0-d with class indices (N,) or (); on Symbols (N, C) only."""
    name = "MultiMarginLoss"
    ck.check_reduction(name, reduction)
    mc.check_p(name, p)
    if not _symbolic(name, dict(input=input, target=target, weight=weight)):
        input = _as_nd(name, input)
        weight = None if weight is None else _as_nd(name, weight, input)
        C = mc.multi_margin_shapes(name, input.shape, tuple(getattr(target, "shape", np.shape(target))),
                                   None if weight is None else weight.shape)
        t = ck.check_class_indices(name, _host(target), C)
        input = input.reshape((-1, C))
        target = _const(t.reshape(-1), input)
    return _run(_multi_margin_formula, dict(x=input, index=target, weight=weight), p=int(p), margin=float(margin),
                reduction=reduction)


# ---- multi-label margin (NDArrays) ----------------------------------------------------------------
def _multilabel_margin_formula(F, x, counts, *, reduction: str, C: int):
    """``sum_j counts[j] sum_{i not listed} max(0, 1 - x[j] + x[i]) / C`` per row (N, C): the
    (N, C, C) pairs, weighted by how often j is listed and whether i is not."""
    z = F.broadcast_add(F.expand_dims(1 - x, 2), F.expand_dims(x, 1))          # [n, j, i] = 1 - x_j + x_i
    pairs = F.broadcast_mul(F.expand_dims(counts, 2), F.expand_dims(counts == 0, 1))
    el = F.sum(F.relu(z) * pairs, axis=(1, 2)) / C                                # torch counts z > 0 only
    return _reduce(F, el, reduction)


def multilabel_margin_loss(input, target, reduction="mean"):
    name = "MultiLabelMarginLoss"
    ck.check_reduction(name, reduction)
    if isinstance(input, mx.sym.Symbol) or isinstance(target, mx.sym.Symbol):
        raise TypeError(f"{name}: on MXNet it needs NDArrays (each row's targets are read on the host); "
                        f"got a Symbol: compute the loss outside the hybridized block")
    input = _as_nd(name, input)
    C = mc.multilabel_margin_shapes(name, input.shape, tuple(getattr(target, "shape", np.shape(target))))
    counts = mc.multilabel_counts(name, _host(target), C)
    input = input.reshape((-1, C))
    return _run(_multilabel_margin_formula, dict(x=input, counts=_const(counts, input)), reduction=reduction, C=C)


# ---- soft margin, hinge embedding -----------------------------------------------------------------
def _soft_margin_formula(F, x, t, *, reduction: str):
    return _reduce(F, F.log1p(F.exp(-x * t)), reduction)


def soft_margin_loss(input, target, reduction="mean"):
    input, target = _pair("SoftMarginLoss", input, target, reduction)
    if isinstance(input, nd.NDArray):
        ck.check_not_empty("SoftMarginLoss", input.shape)
    return _run(_soft_margin_formula, dict(x=input, t=target), reduction=reduction)


def _hinge_formula(F, x, t, *, margin: float, reduction: str):
    """aten's ``hinge_embedding_loss``: ``where(t != 1, clamp_min(margin - x, 0), 0) + where(t != -1, x, 0)``."""
    zeros = F.zeros_like(x)
    el = F.where(t != 1, F.maximum(margin - x, 0.0), zeros) + F.where(t != -1, x, zeros)
    return _reduce(F, el, reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    input, target = _pair("HingeEmbeddingLoss", input, target, reduction)
    if isinstance(input, nd.NDArray):
        ck.check_not_empty("HingeEmbeddingLoss", input.shape)
    return _run(_hinge_formula, dict(x=input, t=target), margin=float(margin), reduction=reduction)


# ---- multi-label soft margin ----------------------------------------------------------------------
def _log_sigmoid(F, x):
    """torch's ``log_sigmoid``: value ``min(x, 0) - log1p(exp(-|x|))``, gradient its kernel's."""
    z = F.exp(-F.abs(x))
    value = F.minimum(x, 0.0) - F.log1p(z)
    grad = F.where(x < 0, 1 - z / (1 + z), z / (1 + z))
    bg = F.BlockGrad
    return bg(value) + (x - bg(x)) * bg(grad)


def _multilabel_soft_margin_formula(F, x, t, weight=None, *, reduction: str):
    el = -(t * _log_sigmoid(F, x) + (1 - t) * _log_sigmoid(F, -x))
    if weight is not None:
        el = F.broadcast_mul(el, weight)
    count = F.sum(F.ones_like(x), axis=-1)                       # C, in every position
    return _reduce(F, F.sum(el, axis=-1) / count, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):
    """Class axis last; ``weight`` broadcasts to the input (on Symbols: with the input's ndim)."""
    name = "MultiLabelSoftMarginLoss"
    ck.check_reduction(name, reduction)
    if not _symbolic(name, dict(input=input, target=target, weight=weight)):
        input = _as_nd(name, input)
        target = _as_nd(name, target, input)
        mc.multilabel_soft_margin_shape(name, input.shape, target.shape)
        if weight is not None:
            weight = _vector(_as_nd(name, weight, input))
            ck.check_broadcast(name, "weight", weight.shape, input.shape)
            weight = _same_ndim(weight, input.ndim)
    return _run(_multilabel_soft_margin_formula, dict(x=input, t=target, weight=weight), reduction=reduction)


# ---- linear cross-entropy -------------------------------------------------------------------------
def linear_cross_entropy(input, linear_weight, target, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None, weight_shape=None):
    """``cross_entropy(input @ W.T + b)`` with torch's shapes: ``linear_weight`` (C, *out_features,
    in_features), logits (N, C, *out_features) or (C,). ``options`` (torch's chunking strategy) is
    ignored: MXNet computes the logits whole (torch's reference path; same numbers within rounding).
    On Symbols: a batched input with class-index targets (``ignore_index`` None means -100), and
    ``weight_shape`` (C, *out_features, in_features) for the ``linear_weight`` Symbol (of any shape
    with those elements: the module passes its Linear's (C * prod(out_features), in_features))."""
    from .losses import cross_entropy
    name = "LinearCrossEntropyLoss"
    ck.check_reduction(name, reduction)
    shape = tuple(int(d) for d in (linear_weight.shape if weight_shape is None else weight_shape))
    C, out, fin = shape[0], shape[1:-1], shape[-1]
    ii = -100 if ignore_index is None else int(ignore_index)
    n = int(np.prod(out, dtype=np.int64)) * C
    symbolic = _symbolic(name, dict(input=input, target=target, linear_bias=linear_bias, weight=weight))
    F = mx.sym if symbolic else nd
    if not symbolic:
        input = _as_nd(name, input)
        mc.linear_ce_shapes(name, input.shape, fin, C, out, tuple(getattr(target, "shape", np.shape(target))),
                            ignore_index)
        linear_weight = _as_nd(name, linear_weight, input)
        linear_bias = None if linear_bias is None else _as_nd(name, linear_bias, input)
    w2 = F.reshape(linear_weight, shape=(n, fin))
    b = None if linear_bias is None else F.reshape(linear_bias, shape=(n,))
    logits = F.FullyConnected(input, w2, b, num_hidden=n, no_bias=b is None, flatten=False)
    if symbolic or input.ndim == 2:                      # (N, C, *out_features); unbatched: (C,)
        logits = F.reshape(logits, shape=(0, C) + out)
    return cross_entropy(logits, target, weight, ii, reduction, float(label_smoothing))
