"""dualdl.ops on MXNet, math: cumsum, cumprod, norm, var, std, logsumexp, erf, maximum, minimum,
isnan, isfinite, einsum, bmm, baddbmm, outer, eye, linspace.

MXNet differences hidden: no ``cumprod`` (a running product of slices on NDArrays; refused on
Symbols, whose size along ``dim`` is unknown); ``norm`` only for ord 1/2 (other ``p`` written
out); no ``var``/``std`` with a correction (written out, unbiased by default as torch); no
``logsumexp`` (max-shifted formula, ``-inf`` rows give ``-inf`` as torch); ``isnan``/``isfinite``
return bool through MXNet's numpy operators.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np
from mxnet import nd

from .fast.host import host_array
from .ops_base import _F, _is_nd, _np, nonneg_dim, symbol_error


def _axes(dim):
    if dim is None:
        return None
    return tuple(int(d) for d in dim) if isinstance(dim, (list, tuple)) else int(dim)


def cumsum(input, dim: int, *, dtype=None):
    x = input if dtype is None else input.astype(np.dtype(dtype).name)
    d = nonneg_dim("cumsum", x, dim)                       # np.cumsum rejects negative axes
    return _F(x).np.cumsum(_np(x), axis=d).as_nd_ndarray()


def cumprod(input, dim: int, *, dtype=None):
    if not _is_nd(input):
        raise symbol_error("cumprod", "the size along dim is needed (MXNet has no cumprod op)",
                           "compute it before hybridizing or use exp(cumsum(log(x))) for x > 0")
    x = input if dtype is None else input.astype(np.dtype(dtype).name)
    d = nonneg_dim("cumprod", x, dim)
    if x.ndim == 0 or x.shape[d] == 0:
        return x.copy()
    run = nd.slice_axis(x, axis=d, begin=0, end=1)
    out = [run]
    for i in range(1, x.shape[d]):
        run = run * nd.slice_axis(x, axis=d, begin=i, end=i + 1)
        out.append(run)
    return nd.concat(*out, dim=d)


def norm(input, p: Union[str, float] = "fro", dim=None, keepdim: bool = False, dtype=None):
    """``torch.norm`` for vector norms over ``dim`` (all elements if None); 'fro' is the 2-norm."""
    F = _F(input)
    x = input if dtype is None else input.astype(np.dtype(dtype).name)
    ax, kd = _axes(dim), bool(keepdim)
    if p == "fro" or p == 2:
        return F.sqrt(F.sum(x * x, axis=ax, keepdims=kd))
    if p == "nuc" or isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported on MXNet (vector norms and 'fro' only)")
    p = float(p)
    if p == float("inf"):
        return F.max(F.abs(x), axis=ax, keepdims=kd)
    if p == float("-inf"):
        return F.min(F.abs(x), axis=ax, keepdims=kd)
    if p == 0:
        return F.sum(x != 0, axis=ax, keepdims=kd)
    if p == 1:
        return F.sum(F.abs(x), axis=ax, keepdims=kd)
    return F.sum(F.abs(x) ** p, axis=ax, keepdims=kd) ** (1.0 / p)


def var(input, dim=None, *, correction: float = 1, keepdim: bool = False):
    F = _F(input)
    ax = _axes(dim)
    centered = F.broadcast_sub(input, F.mean(input, axis=ax, keepdims=True))
    count = F.sum(F.ones_like(input), axis=ax, keepdims=bool(keepdim))
    total = F.sum(centered * centered, axis=ax, keepdims=bool(keepdim))
    return F.broadcast_div(total, F.relu(count - float(correction)))   # N - c <= 0: inf/nan


def std(input, dim=None, *, correction: float = 1, keepdim: bool = False):
    return _F(input).sqrt(var(input, dim, correction=correction, keepdim=keepdim))


def logsumexp(input, dim, keepdim: bool = False):
    F = _F(input)
    ax = _axes(dim)
    m = F.BlockGrad(F.max(input, axis=ax, keepdims=True))
    m = F.where(F.abs(m) == float("inf"), F.zeros_like(m), m)     # all -inf rows: -inf, not nan
    s = F.log(F.sum(F.exp(F.broadcast_sub(input, m)), axis=ax, keepdims=True))
    out = s + m
    if keepdim:
        return out
    return F.squeeze(out, axis=ax) if ax is not None else F.reshape(out, shape=(-1,))


def erf(input):
    return _F(input).erf(input)


def maximum(input, other):
    return _F(input).broadcast_maximum(input, other)


def minimum(input, other):
    return _F(input).broadcast_minimum(input, other)


def isnan(input):
    return _F(input).np.isnan(_np(input)).as_nd_ndarray()


def isfinite(input):
    return _F(input).np.isfinite(_np(input)).as_nd_ndarray()


def einsum(equation: str, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: expected at least one operand")
    F = _F(operands[0])
    return F.np.einsum(equation, *[_np(o) for o in operands]).as_nd_ndarray()


def bmm(input, mat2):
    for name, t in (("input", input), ("mat2", mat2)):
        if _is_nd(t) and t.ndim != 3:
            raise ValueError(f"bmm: {name} must be a 3-D tensor, got shape {t.shape}")
    return _F(input).batch_dot(input, mat2)


def baddbmm(input, batch1, batch2, *, beta: float = 1, alpha: float = 1):
    F = _F(batch1)
    prod = bmm(batch1, batch2)
    prod = prod if alpha == 1 else prod * float(alpha)
    if beta == 0:
        return prod                                    # torch ignores input (even nan) for beta 0
    return F.broadcast_add(input if beta == 1 else input * float(beta), prod)


def outer(input, vec2):
    F = _F(input)
    return F.broadcast_mul(F.reshape(input, shape=(-1, 1)), F.reshape(vec2, shape=(1, -1)))


def eye(n: int, m: Optional[int], dtype: np.dtype, device):
    return host_array(np.eye(n, m, dtype=dtype), device, dtype)


def linspace(start: float, end: float, steps: int, dtype: np.dtype, device):
    """torch's CPU formula in the output dtype: ``start + i*step`` for the first half,
    ``end - (steps-1-i)*step`` for the rest."""
    dt = np.dtype(dtype)
    i = np.arange(steps).astype(dt)
    lo, hi = dt.type(start), dt.type(end)
    step = (hi - lo) / dt.type(steps - 1) if steps > 1 else dt.type(0)
    vals = np.where(np.arange(steps) < steps // 2, lo + step * i, hi - step * (dt.type(steps - 1) - i))
    return host_array(vals.astype(dt), device, dt)
