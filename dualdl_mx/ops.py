"""dualdl.ops on MXNet: PyTorch's semantics on legacy NDArrays *and* Symbols.

Every function picks ``mx.nd`` or ``mx.sym`` from the argument's type, so a model written with
dualdl layers and ops hybridizes. Shapes are known for NDArrays only; where torch's semantics need
a size (``split`` by size, ``chunk``, ``one_hot(num_classes=-1)``, negative ``permute`` dims) the
Symbol path either uses an MXNet operator that infers it, or raises a ``ValueError`` saying what to
pass instead. Broadcasting ``matmul`` and ``where`` run MXNet's numpy operators (``np.matmul``,
``np.where``) through ``as_np_ndarray()``/``as_nd_ndarray()``: legacy ``dot``/``where`` do not
broadcast.

Differences that remain (legacy NDArrays have no 0-d shape): a full reduction (``sum(x)``,
``max(x)``, ``argmax(x)``, 1-D ``matmul`` 1-D) has shape ``(1,)`` here and ``()`` on torch.
"""
from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
from mxnet import nd

from dualdl.nn.checks import check_not_empty
from dualdl.tensor import resolve_shape

from . import activation as _act
from .fast import compiled, kernels
from .fast.host import host_array
from .ops_base import _F, _axis, _is_nd, _is_tensor, _np

MaxMin = namedtuple("MaxMin", ["values", "indices"])


# ---- activations -----------------------------------------------------------------------------
def relu(x):
    """torch's relu, NaN kept, as MKLDNN's operator (:func:`dualdl_mx.activation.relu`).
    ``Activation(act_type='relu')`` would map NaN to 0, hiding a diverged step from the
    non-finite-loss check (measured, MXNet 1.9.1)."""
    if _is_nd(x):
        check_not_empty("relu", x.shape)
    return _act.relu(_F(x), x)


def sigmoid(x):
    return _F(x).sigmoid(x)


def tanh(x):
    return _F(x).tanh(x)


def gelu(x, approximate: str = "none"):
    """Exact in float64 (MXNet's LeakyReLU operator keeps float32 precision): dualdl_mx.activation."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _act.gelu(_F(x), x, approximate)


def leaky_relu(x, negative_slope: float = 0.01):
    return _act.leaky_relu(_F(x), x, float(negative_slope))


def elu(x, alpha: float = 1.0):
    return _act.elu(_F(x), x, float(alpha))


def silu(x):
    return x * _F(x).sigmoid(x)


def softmax(x, dim: int):
    return _F(x).softmax(x, axis=int(dim))


def _log_softmax_formula(F, x, *, dim: int, kernel: bool = False, leaf: bool = False):
    """``x - max - log(sum(exp(x - max)))`` along ``dim`` (F = nd or sym); also the losses'.
    ``kernel``: the same formula in float64 as one operator each way (dualdl's ``dl_log_softmax``;
    a library operator writes its gradient whatever MXNet asks, so a ``leaf`` x, one with a
    gradient of its own, reaches it through an identity op, whose backward honours add-to)."""
    if kernel:
        return F.dl_log_softmax(F.identity(x) if leaf else x, axis=dim)[0]
    xs = F.broadcast_sub(x, F.max(x, axis=dim, keepdims=True))
    return F.broadcast_sub(xs, F.log(F.sum(F.exp(xs), axis=dim, keepdims=True)))


def log_softmax_kernel(x: nd.NDArray) -> dict:
    """The ``kernel``/``leaf`` settings of :func:`_log_softmax_formula` for NDArray ``x``: dualdl's
    operator for float32/float64 on CPU where its kernels are loaded (a graph cannot know its
    context, so Symbols keep the formula)."""
    use = (x.size > 0 and x.context.device_type == "cpu" and x.dtype in (np.float32, np.float64)
           and kernels.available())                  # an empty x: MXNet reads its 0 as an unknown size
    return {"kernel": use, "leaf": use and x.grad is not None}


def _empty_result(x: nd.NDArray) -> nd.NDArray:
    """A new array of ``x``'s shape, dtype and context with no elements: torch's result of an
    elementwise or along-an-axis op on an empty tensor. MXNet 1.x runs no operator on an empty
    NDArray (its shape inference reads a 0 as an unknown size; dualdl's log-softmax kernel was
    given a size of 2^32 - 1 and left MXNet's allocator failing), so it is made on the host."""
    return host_array(np.empty(x.shape, dtype=x.dtype), x.context)


def log_softmax(x, dim: int):
    """From its formula: MXNet's log_softmax op is off by up to 3.5e-6 (torch 2e-7, and MXNet's
    has a bias of about +1e-6). On NDArrays it runs as one compiled graph, and as dualdl's
    float64 operator on CPU (:func:`log_softmax_kernel`); an empty NDArray gives an empty one of
    its shape, as torch (:func:`_empty_result`)."""
    dim = int(dim)
    if type(x) is nd.NDArray:
        axis = _axis(dim, x.ndim)
        if x.size == 0:
            return _empty_result(x)
        return compiled.run(_log_softmax_formula, {"x": x}, dim=axis, **log_softmax_kernel(x))
    return _log_softmax_formula(_F(x), x, dim=dim)


# ---- linear algebra --------------------------------------------------------------------------
def _nd_matmul(a: nd.NDArray, b: nd.NDArray) -> nd.NDArray:
    """torch.matmul on NDArrays with explicit broadcasting: MXNet 1.9.1's np.matmul gives wrong
    gradients for ``a`` when its batch dims broadcast in a middle axis ((5,1,3,4) @ (2,4,6))."""
    if a.ndim == 1 and b.ndim == 1:
        return nd.dot(a, b)                              # shape (1,): legacy NDArrays have no 0-d
    if a.ndim == 1:
        return _nd_matmul(a.reshape((1, -1)), b).squeeze(axis=-2)
    if b.ndim == 1:
        return _nd_matmul(a, b.reshape((-1, 1))).squeeze(axis=-1)
    if b.ndim == 2:
        return nd.dot(a, b)                              # contracts a's last axis with b's first
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))

    def full(t):
        lead = (1,) * (len(batch) - (t.ndim - 2))
        t = t.reshape(lead + tuple(t.shape)) if lead else t
        if tuple(t.shape[:-2]) != batch:
            t = nd.broadcast_to(t, shape=batch + tuple(t.shape[-2:]))
        return t.reshape((-1,) + tuple(t.shape[-2:]))

    out = nd.batch_dot(full(a), full(b))
    return out.reshape(batch + tuple(out.shape[-2:]))


def matmul(a, b):
    """On Symbols MXNet's np.matmul; its backward is wrong for ``a`` when a's batch dims broadcast
    in a middle axis (measured 9.0 max abs error for (5,1,3,4) @ (2,4,6)): pass such operands
    with equal batch dims (e.g. ``ops.add(a, zeros)``) in hybridized code."""
    if _is_nd(a) and _is_nd(b):
        check_not_empty("matmul", a.shape)
        check_not_empty("matmul", b.shape)
        return _nd_matmul(a, b)
    return _F(a).np.matmul(_np(a), _np(b)).as_nd_ndarray()


def linear(x, weight, bias=None):
    F = _F(x)
    if _is_nd(weight):
        return F.FullyConnected(x, weight, bias, num_hidden=weight.shape[0], no_bias=bias is None,
                                flatten=False)
    y = F.dot(x, weight, transpose_b=True)
    return y if bias is None else F.broadcast_add(y, bias)


# ---- elementwise arithmetic (broadcasting on Symbols too) ------------------------------------
def _binary(a, b, op: str, pyop):
    if _is_tensor(a) and _is_tensor(b):
        return getattr(_F(a), op)(a, b)
    return pyop(a, b)


def add(a, b):
    return _binary(a, b, "broadcast_add", lambda u, v: u + v)


def sub(a, b):
    return _binary(a, b, "broadcast_sub", lambda u, v: u - v)


def mul(a, b):
    return _binary(a, b, "broadcast_mul", lambda u, v: u * v)


def _float(x):
    if _is_nd(x) and np.dtype(x.dtype).kind in "iub":
        return x.astype("float32")
    return x


def div(a, b):
    return _binary(_float(a), _float(b), "broadcast_div", lambda u, v: u / v)


def pow(x, exponent):
    if _is_tensor(x) and _is_tensor(exponent):
        return _F(x).broadcast_power(x, exponent)
    return x ** exponent


def exp(x):
    return _F(x).exp(x)


def log(x):
    return _F(x).log(x)


def sqrt(x):
    return _F(x).sqrt(x)


def abs(x):
    return _F(x).abs(x)


def clamp(x, min: Optional[float] = None, max: Optional[float] = None):
    """``maximum``/``minimum`` with scalars, not ``clip``: clip stores its bounds as float32 (0.3
    clamps a float64 tensor to 0.30000001192...)."""
    F = _F(x)
    y = x if min is None else F.maximum(x, float(min))
    return y if max is None else F.minimum(y, float(max))


def zeros_like(x):
    return _F(x).zeros_like(x)


def ones_like(x):
    return _F(x).ones_like(x)


def _fill(value, like, F):
    """A scalar as a tensor shaped like ``like``: MXNet's np.where with a scalar branch gives
    wrong gradients to the other branch when ``cond`` broadcasts."""
    return F.np.zeros_like(like) + float(value)


def where(cond, a, b):
    ref = cond if _is_tensor(cond) else (a if _is_tensor(a) else b)
    F = _F(ref)
    a_, b_ = _np(a), _np(b)
    if not _is_tensor(a) and not _is_tensor(b):
        base = F.np.zeros_like(_np(cond)).astype("float32")
        a_, b_ = base + float(a), base + float(b)
    elif not _is_tensor(a):
        a_ = _fill(a, b_, F)
    elif not _is_tensor(b):
        b_ = _fill(b, a_, F)
    return F.np.where(_np(cond), a_, b_).as_nd_ndarray()


def masked_fill(x, mask, value: float):
    F = _F(x)
    x_ = _np(x)
    return F.np.where(_np(mask), _fill(value, x_, F), x_).as_nd_ndarray()


def dropout(x, p: float = 0.5, training: bool = True):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, got {p}")
    F = _F(x)
    if not training or p == 0.0:
        return F.identity(x)     # a new node: backward from it works even when x is a leaf
    if p == 1.0:
        return F.zeros_like(x)
    return F.Dropout(x, p=float(p), mode="always")


# ---- shapes ----------------------------------------------------------------------------------
def cat(tensors: Sequence[Any], dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    return _F(tensors[0]).concat(*tensors, dim=int(dim))


concat = cat


def stack(tensors: Sequence[Any], dim: int = 0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    return _F(tensors[0]).stack(*tensors, axis=int(dim))


def _pieces(x, sizes: Sequence[int], dim: int) -> Tuple[Any, ...]:
    F, out, start = _F(x), [], 0
    for s in sizes:
        out.append(F.slice_axis(x, axis=dim, begin=start, end=start + s))
        start += s
    return tuple(out)


def split(x, split_size_or_sections: Union[int, Sequence[int]], dim: int = 0):
    dim = int(dim)
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0:
            raise ValueError(f"split: split_size must be positive, got {size}")
        if not _is_nd(x):
            raise ValueError("split: with a Symbol (hybridized MXNet) the number of pieces is not "
                             "known; pass the list of section sizes instead of one split_size")
        n = x.shape[_axis(dim, x.ndim)]
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        return _pieces(x, sizes, dim)
    sizes = [int(s) for s in split_size_or_sections]
    if _is_nd(x) and builtins.sum(sizes) != x.shape[_axis(dim, x.ndim)]:
        raise ValueError(f"split: sections {sizes} do not sum to the size {x.shape[dim]} of dim {dim} "
                         f"(input shape {tuple(x.shape)})")
    return _pieces(x, sizes, dim)


def chunk(x, chunks: int, dim: int = 0):
    chunks = int(chunks)
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    if _is_nd(x):
        n = x.shape[_axis(int(dim), x.ndim)]
        size = -(-n // chunks) if n else 1
        return split(x, size, dim)
    if chunks == 1:
        return (x,)
    return tuple(_F(x).split(x, num_outputs=chunks, axis=int(dim)))


def transpose(x, dim0: int, dim1: int):
    return _F(x).swapaxes(x, dim1=int(dim0), dim2=int(dim1))


def permute(x, dims: Sequence[int]):
    dims = [int(d) for d in dims]
    if _is_nd(x):
        if len(dims) != x.ndim:
            raise ValueError(f"permute: dims {tuple(dims)} do not match the input's {x.ndim} dimensions "
                             f"(shape {tuple(x.shape)})")
        dims = [_axis(d, x.ndim) for d in dims]
    elif any(d < 0 for d in dims):
        raise ValueError(f"permute: negative dims {tuple(dims)} need the rank, which a Symbol "
                         f"(hybridized MXNet) does not have; write them as non-negative")
    return _F(x).transpose(x, axes=tuple(dims))


def reshape(x, shape: Union[int, Sequence[int]]):
    if _is_nd(x):
        return x.reshape(resolve_shape(shape, int(np.prod(x.shape)), tuple(x.shape)))
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < -1 or s == 0 for s in shape) or shape.count(-1) > 1:
        raise ValueError(f"invalid reshape target {shape}: sizes must be positive or a single -1 "
                         f"(MXNet's special codes 0/-2/-3/-4 are not accepted)")
    return _F(x).reshape(x, shape=shape)


def flatten(x, start_dim: int = 0, end_dim: int = -1):
    start_dim, end_dim = int(start_dim), int(end_dim)
    if _is_nd(x):
        nd_ = builtins.max(x.ndim, 1)
        s, e = _axis(start_dim, nd_, "start_dim"), _axis(end_dim, nd_, "end_dim")
        if s > e:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        shp = tuple(x.shape) or (1,)
        return x.reshape(shp[:s] + (int(np.prod(shp[s:e + 1])),) + shp[e + 1:])
    F = _F(x)
    if start_dim >= 0 and end_dim == -1:
        return F.reshape(x, shape=(0,) * start_dim + (-1,))
    if 0 <= start_dim <= end_dim:
        for _ in range(end_dim - start_dim):
            x = F.reshape(x, shape=(0,) * start_dim + (-3, -2))
        return x
    raise ValueError(f"flatten(start_dim={start_dim}, end_dim={end_dim}) on a Symbol (hybridized "
                     f"MXNet) needs start_dim >= 0 and end_dim == -1 or end_dim >= start_dim")


def squeeze(x, dim: Optional[int] = None):
    if dim is None:
        return _F(x).squeeze(x)
    if _is_nd(x) and x.shape[_axis(int(dim), x.ndim)] != 1:
        return x                                       # torch: squeezing a non-1 dim is a no-op
    return _F(x).squeeze(x, axis=int(dim))


def unsqueeze(x, dim: int):
    return _F(x).expand_dims(x, axis=int(dim))


# ---- reductions ------------------------------------------------------------------------------
def _dims(dim):
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        return tuple(int(d) for d in dim)
    return int(dim)


def sum(x, dim=None, keepdim: bool = False):
    return _F(x).sum(x, axis=_dims(dim), keepdims=bool(keepdim))


def mean(x, dim=None, keepdim: bool = False):
    if _is_nd(x) and np.dtype(x.dtype).kind in "iub":
        raise TypeError(f"mean: expected a floating point tensor, got {np.dtype(x.dtype)} "
                        f"(MXNet would return an integer mean; torch raises)")
    return _F(x).mean(x, axis=_dims(dim), keepdims=bool(keepdim))


def _maxmin(x, dim, keepdim, red: str, arg: str):
    F = _F(x)
    if dim is None:
        return getattr(F, red)(x)
    values = getattr(F, red)(x, axis=int(dim), keepdims=bool(keepdim))
    indices = getattr(F, arg)(x, axis=int(dim), keepdims=bool(keepdim)).astype("int64")
    return MaxMin(values, indices)


def max(x, dim: Optional[int] = None, keepdim: bool = False):
    return _maxmin(x, dim, keepdim, "max", "argmax")


def min(x, dim: Optional[int] = None, keepdim: bool = False):
    return _maxmin(x, dim, keepdim, "min", "argmin")


def _arg(x, dim, keepdim, arg: str):
    F = _F(x)
    if dim is None:
        out = getattr(F, arg)(F.reshape(x, shape=(-1,)), axis=0)
        if keepdim and _is_nd(x):
            out = out.reshape((1,) * builtins.max(x.ndim, 1))
    else:
        out = getattr(F, arg)(x, axis=int(dim), keepdims=bool(keepdim))
    return out.astype("int64")


def argmax(x, dim: Optional[int] = None, keepdim: bool = False):
    return _arg(x, dim, keepdim, "argmax")


def argmin(x, dim: Optional[int] = None, keepdim: bool = False):
    return _arg(x, dim, keepdim, "argmin")


# ---- indices ---------------------------------------------------------------------------------
def embedding(input, weight):
    return _F(weight).take(weight, input, axis=0)


def one_hot(x, num_classes: int = -1):
    if num_classes == -1:
        if not _is_nd(x):
            raise ValueError("one_hot: num_classes=-1 needs the data's maximum, which a Symbol "
                             "(hybridized MXNet) does not have; pass num_classes")
        num_classes = int(x.max().asscalar()) + 1 if x.size else 0
    return _F(x).one_hot(x, depth=int(num_classes), dtype="int64")


# ---- the ops of the other files (one module for backend.module("ops")) -----------------------
from .ops_index import argsort, gather, index_select, sort, take_along_dim, topk  # noqa: E402
from .ops_math import (bmm, baddbmm, cumprod, cumsum, einsum, erf, eye, isfinite, isnan,  # noqa: E402
                       linspace, logsumexp, maximum, minimum, norm, outer, std, var)
from .ops_nn import (avg_pool2d, batch_norm, conv2d, group_norm, interpolate, layer_norm,  # noqa: E402
                     max_pool2d, scaled_dot_product_attention)
from .ops_shape import expand, flip, pad, repeat, roll, tile, tril, triu  # noqa: E402
from .ops_params import add_, grad, model_to_dtype, numel, requires_grad, requires_grad_  # noqa: E402,F401
from .ops_random import (bernoulli, multinomial, normal_, rand, rand_like, randint,  # noqa: E402,F401
                         randint_like, randn, randn_like, uniform_)

clip = clamp
