"""Tensor functions for forward passes, written once: PyTorch's names, arguments and semantics
(``dim=``, ``keepdim=``), dispatched on the tensor's type to ``dualdl_torch.ops`` or
``dualdl_mx.ops``.

On MXNet every function accepts NDArrays *and* Symbols, so a model written only with dualdl layers
and these ops can be ``hybridize()``-d. Differences that remain on MXNet are listed per function;
the general ones:

- **0-d results**: legacy NDArrays have no shape ``()``; a full reduction (``sum(x)``, ``max(x)``,
  ``argmax(x)``, ``matmul`` of two vectors) has shape ``(1,)`` on MXNet and ``()`` on torch.
  ``dualdl.item()`` reads either.
- **dtype promotion**: MXNet does not promote (float32 with float64 raises); torch does.
- **Symbols have no shape**: a few arguments that need a size (``split`` by size,
  ``one_hot(num_classes=-1)``, negative ``permute`` dims, some ``flatten`` ranges) raise a
  ``ValueError`` on Symbols saying what to pass instead.

The ops by family (PyTorch's names, signatures and defaults, torch 2.13):

- activations: relu, sigmoid, tanh, gelu, leaky_relu, elu, silu, softmax, log_softmax;
- arithmetic and math: add, sub, mul, div, pow, exp, log, sqrt, abs, erf, clamp/clip, maximum,
  minimum, isnan, isfinite, matmul, linear, bmm, baddbmm, outer, einsum;
- shapes: cat/concat, stack, split, chunk, transpose, permute, reshape, flatten, squeeze,
  unsqueeze, expand, repeat, tile, flip, roll, pad, tril, triu;
- reductions and scans: sum, mean, max, min, argmax, argmin, norm, var, std, logsumexp, cumsum,
  cumprod;
- indexing and sorting: gather, index_select, take_along_dim, topk, sort, argsort, embedding,
  one_hot, where, masked_fill;
- creation: zeros_like, ones_like, eye, linspace;
- functional layers (``torch.nn.functional``): dropout, interpolate, conv2d, max_pool2d,
  avg_pool2d, batch_norm, layer_norm, group_norm, scaled_dot_product_attention; all of
  ``torch.nn.functional`` under its own signatures (adaptive pools, pad, one_hot, embedding, the
  losses, ...) is :mod:`dualdl.nn.functional` (``from dualdl.nn import functional as F``);
- random tensors (``dl.randn``, ``dl.randn_like``, ``dl.multinomial``, ...): :mod:`dualdl.random`.

The measured MXNet differences behind them are listed in docs/differences.md.

Dispatch costs one dict lookup per call (the adapter module is cached per tensor type;
``dualdl.ops_dispatch``). The functional layers are written in ``dualdl.ops_nn``; import
every op from here.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from .ops_dispatch import Number, Tensor, _ops, _ops2
from .ops_nn import (avg_pool2d, batch_norm, conv2d, dropout, group_norm, interpolate, layer_norm,
                     max_pool2d, scaled_dot_product_attention)

__all__ = [
    "relu", "sigmoid", "tanh", "gelu", "leaky_relu", "elu", "silu", "softmax", "log_softmax",
    "matmul", "linear", "add", "sub", "mul", "div", "pow", "exp", "log", "sqrt", "abs", "clamp",
    "zeros_like", "ones_like", "where", "masked_fill", "dropout",
    "cat", "concat", "stack", "split", "chunk", "transpose", "permute", "reshape", "flatten",
    "squeeze", "unsqueeze", "sum", "mean", "max", "min", "argmax", "argmin",
    "embedding", "one_hot",
]


# ---- activations -----------------------------------------------------------------------------
def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``."""
    return _ops(x).relu(x)


def sigmoid(x: Tensor) -> Tensor:
    return _ops(x).sigmoid(x)


def tanh(x: Tensor) -> Tensor:
    return _ops(x).tanh(x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU; ``approximate="none"`` (erf, torch's default) or ``"tanh"``.
    MXNet: ``LeakyReLU(act_type="gelu")`` for the erf form (float32 precision in float64, so float64
    NDArrays get the formula; also for ``leaky_relu``/``elu``), the tanh form written out."""
    return _ops(x).gelu(x, approximate)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """Torch's default slope 0.01 (Gluon's ``LeakyReLU`` block has no default)."""
    return _ops(x).leaky_relu(x, negative_slope)


def elu(x: Tensor, alpha: float = 1.0) -> Tensor:
    return _ops(x).elu(x, alpha)


def silu(x: Tensor) -> Tensor:
    """``x * sigmoid(x)`` (Swish with beta 1)."""
    return _ops(x).silu(x)


def softmax(x: Tensor, dim: int) -> Tensor:
    """Softmax along ``dim`` (required: torch's implicit-dim form is deprecated)."""
    return _ops(x).softmax(x, dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    return _ops(x).log_softmax(x, dim)


# ---- linear algebra --------------------------------------------------------------------------
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``torch.matmul``: batched, broadcasting batch dims, 1-D operands promoted as in numpy.
    MXNet: ``dot``/``batch_dot`` for 2-D/3-D NDArrays, MXNet's ``np.matmul`` otherwise (legacy
    ``dot`` contracts N-D tensors differently and does not broadcast). Vector @ vector has shape
    ``(1,)`` on MXNet NDArrays (``()`` on torch) and is not supported on Symbols.
    MXNet 1.9.1 bug avoided for NDArrays (explicit broadcast + ``batch_dot``) but not on Symbols:
    ``np.matmul``'s gradient for ``a`` is wrong when a's batch dims broadcast in a middle axis
    (e.g. (5,1,3,4) @ (2,4,6)); in hybridized code give such operands equal batch dims."""
    return _ops2(a, b).matmul(a, b)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``x @ weight.T + bias`` on the last axis, weight (out, in). MXNet: ``FullyConnected``
    with ``flatten=False`` (never flattens non-batch axes as Gluon's Dense does)."""
    return _ops(x).linear(x, weight, bias)


# ---- elementwise -----------------------------------------------------------------------------
def add(a: Union[Tensor, Number], b: Union[Tensor, Number]) -> Tensor:
    """``a + b`` with broadcasting. MXNet: ``broadcast_add`` (``+`` on Symbols does not
    broadcast); no dtype promotion."""
    return _ops2(a, b).add(a, b)


def sub(a: Union[Tensor, Number], b: Union[Tensor, Number]) -> Tensor:
    """``a - b`` with broadcasting (MXNet: ``broadcast_sub``)."""
    return _ops2(a, b).sub(a, b)


def mul(a: Union[Tensor, Number], b: Union[Tensor, Number]) -> Tensor:
    """``a * b`` with broadcasting (MXNet: ``broadcast_mul``)."""
    return _ops2(a, b).mul(a, b)


def div(a: Union[Tensor, Number], b: Union[Tensor, Number]) -> Tensor:
    """True division with broadcasting. MXNet divides integer NDArrays as integers (7/2 = 3);
    here integer NDArrays are cast to float32 first, as torch does. On Symbols the dtype is
    unknown: divide floats."""
    return _ops2(a, b).div(a, b)


def pow(x: Union[Tensor, Number], exponent: Union[Tensor, Number]) -> Tensor:
    """``x ** exponent``, either may be a tensor (MXNet: ``broadcast_power`` for two tensors)."""
    return _ops2(x, exponent).pow(x, exponent)


def exp(x: Tensor) -> Tensor:
    return _ops(x).exp(x)


def log(x: Tensor) -> Tensor:
    return _ops(x).log(x)


def sqrt(x: Tensor) -> Tensor:
    return _ops(x).sqrt(x)


def abs(x: Tensor) -> Tensor:
    return _ops(x).abs(x)


def clamp(x: Tensor, min: Optional[float] = None, max: Optional[float] = None) -> Tensor:
    """Clip to ``[min, max]``; either bound may be None (MXNet's ``clip`` needs both: +-inf)."""
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    return _ops(x).clamp(x, min, max)


# one implementation with dualdl.zeros_like / ones_like (dtype=, device=; Symbols; 0-size NDArrays)
from .tensor import ones_like, zeros_like  # noqa: E402


def where(cond: Tensor, a: Union[Tensor, Number], b: Union[Tensor, Number]) -> Tensor:
    """``a`` where ``cond`` else ``b``, all three broadcast. A non-bool ``cond`` counts non-zero as
    true on both backends. MXNet: its ``np.where`` (legacy ``where`` does not broadcast)."""
    return _ops2(cond, a, b).where(cond, a, b)


def masked_fill(x: Tensor, mask: Tensor, value: float) -> Tensor:
    """``x`` with ``value`` where ``mask`` (broadcast to ``x``) is true/non-zero; the gradient
    flows to ``x`` elsewhere. ``value`` may be ``-inf`` (attention masks)."""
    return _ops(x).masked_fill(x, mask, value)


# ---- shapes ----------------------------------------------------------------------------------
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate along an existing ``dim`` (MXNet: ``concat(*xs, dim=)``)."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    return _ops(tensors[0]).cat(tensors, dim)


concat = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join along a new ``dim``."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    return _ops(tensors[0]).stack(tensors, dim)


def split(x: Tensor, split_size_or_sections: Union[int, Sequence[int]], dim: int = 0) -> Tuple[Tensor, ...]:
    """Torch's ``split``: an int is the size of each piece (the last may be smaller), a list gives
    every piece's size (must sum to the dim's size). MXNet's ``split`` means *number* of pieces;
    on Symbols pass the list of sizes (the dim's size is unknown there)."""
    return _ops(x).split(x, split_size_or_sections, dim)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> Tuple[Tensor, ...]:
    """Torch's ``chunk``: pieces of ``ceil(n / chunks)`` (possibly fewer pieces). On Symbols the
    dim's size must be divisible by ``chunks`` (MXNet ``split(num_outputs=)``)."""
    return _ops(x).chunk(x, chunks, dim)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims (MXNet: ``swapaxes``; MXNet's ``transpose`` is torch's ``permute``)."""
    return _ops(x).transpose(x, dim0, dim1)


def permute(x: Tensor, dims: Sequence[int]) -> Tensor:
    """Reorder all dims. MXNet's ``transpose`` rejects negative axes: they are resolved for
    NDArrays; on Symbols write them non-negative."""
    return _ops(x).permute(x, dims)


# one implementation with dualdl.reshape (positive sizes and one -1; Symbols; 0-size NDArrays)
from .tensor import reshape  # noqa: E402


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` (torch's default start_dim is 0; Gluon's ``Flatten``
    keeps the first axis: use ``flatten(x, 1)``). On Symbols ``start_dim >= 0`` and
    ``end_dim == -1`` or ``>= start_dim`` (done with reshape codes)."""
    return _ops(x).flatten(x, start_dim, end_dim)


def squeeze(x: Tensor, dim: Optional[int] = None) -> Tensor:
    """Drop size-1 dims (only ``dim`` if given; a no-op when that dim is not 1, as torch; MXNet
    raises, and on Symbols it still does). Squeezing all of a (1,) NDArray gives (1,) on MXNet."""
    return _ops(x).squeeze(x, dim)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim (MXNet: ``expand_dims``; negative dims count as in torch)."""
    return _ops(x).unsqueeze(x, dim)


# ---- reductions ------------------------------------------------------------------------------
def sum(x: Tensor, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> Tensor:
    """Sum over ``dim`` (an int, a tuple, or None for all). Full reduction: shape ``()`` on torch,
    ``(1,)`` on MXNet."""
    return _ops(x).sum(x, dim, keepdim)


def mean(x: Tensor, dim: Union[None, int, Sequence[int]] = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim``. Integer input raises ``TypeError`` on torch and on MXNet NDArrays
    (MXNet alone would return a truncated integer mean)."""
    return _ops(x).mean(x, dim, keepdim)


def max(x: Tensor, dim: Optional[int] = None, keepdim: bool = False):
    """Torch-like: without ``dim`` the maximum value; with ``dim`` a named tuple
    ``(values, indices)`` (indices int64 on both; MXNet's argmax alone returns float32)."""
    return _ops(x).max(x, dim, keepdim)


def min(x: Tensor, dim: Optional[int] = None, keepdim: bool = False):
    """As :func:`max`, for the minimum."""
    return _ops(x).min(x, dim, keepdim)


def argmax(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """Indices of maxima as **int64** on both (MXNet returns float32); ``dim=None`` indexes the
    flattened tensor (shape ``(1,)`` on MXNet)."""
    return _ops(x).argmax(x, dim, keepdim)


def argmin(x: Tensor, dim: Optional[int] = None, keepdim: bool = False) -> Tensor:
    """As :func:`argmax`, for minima."""
    return _ops(x).argmin(x, dim, keepdim)


# ---- indices ---------------------------------------------------------------------------------
def embedding(input: Tensor, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (V, D) at integer ``input``. torch needs integer indices and raises on
    out-of-range ones; MXNet (``take``) also takes float indices and clips out-of-range ones."""
    return _ops(weight).embedding(input, weight)


def one_hot(x: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding with a new last dim; ``num_classes=-1`` uses ``max(x) + 1``
    (NDArrays only on MXNet: a Symbol's maximum is unknown)."""
    return _ops(x).one_hot(x, num_classes)


def clip(x: Tensor, min: Optional[float] = None, max: Optional[float] = None) -> Tensor:
    """Alias of :func:`clamp` (as ``torch.clip``)."""
    return clamp(x, min, max)


# ---- indexing and sorting --------------------------------------------------------------------
def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """``out[i][j][k] = input[i][index[i][j][k]][k]`` for ``dim=1``; ``index`` has input's rank and
    may be smaller in the other dims. MXNet: ``index_array`` + ``gather_nd`` (no gather op);
    ``sparse_grad=True`` refused; on Symbols ``dim >= 0``."""
    return _ops(input).gather(input, dim, index, sparse_grad=sparse_grad)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """Entries of ``input`` at the 1-D integer ``index`` along ``dim`` (MXNet: ``take``; out-of-range
    indices raise on NDArrays as on torch, wrap on Symbols)."""
    return _ops(input).index_select(input, dim, index)


def take_along_dim(input: Tensor, indices: Tensor, dim: Optional[int] = None) -> Tensor:
    """``numpy.take_along_axis``; ``dim=None`` indexes the flattened input. Broadcasting of the other
    dims works on NDArrays; on Symbols the shapes must match as for :func:`gather`."""
    return _ops(input).take_along_dim(input, indices, dim)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """Named tuple ``(values, indices)`` (indices int64). MXNet always returns them sorted; the order
    of equal values may differ."""
    return _ops(input).topk(input, k, dim, largest, sorted)


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """Named tuple ``(values, indices)``. ``stable=True`` keeps equal elements in input order (as
    torch documents); MXNet's argsort is not stable, so there numpy's stable sort is used on
    NDArrays and Symbols refuse ``stable=True``."""
    return _ops(input).sort(input, dim, descending, stable)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """int64 indices that sort ``input`` along ``dim`` (``stable`` as in :func:`sort`)."""
    return _ops(input).argsort(input, dim, descending, stable)


# ---- shape and layout ------------------------------------------------------------------------
def expand(input: Tensor, *sizes: Union[int, Sequence[int]]) -> Tensor:
    """``Tensor.expand``: broadcast to ``sizes`` (-1 keeps a dim; new dims lead). On Symbols -1 is
    MXNet's 0 and no new dims can be added (the rank is unknown)."""
    return _ops(input).expand(input, *sizes)


def repeat(input: Tensor, *repeats: Union[int, Sequence[int]]) -> Tensor:
    """``Tensor.repeat``: tile ``input`` (numpy's ``tile``, not ``repeat_interleave``)."""
    return _ops(input).repeat(input, *repeats)


def tile(input: Tensor, dims: Sequence[int]) -> Tensor:
    """``torch.tile`` (fewer ``dims`` than the rank are prepended with 1s)."""
    return _ops(input).tile(input, dims)


def flip(input: Tensor, dims: Union[int, Sequence[int]]) -> Tensor:
    """Reverse the order along ``dims`` (MXNet rejects negative axes: resolved on NDArrays, on
    Symbols write them non-negative)."""
    return _ops(input).flip(input, dims)


def roll(input: Tensor, shifts: Union[int, Sequence[int]],
         dims: Union[None, int, Sequence[int]] = None) -> Tensor:
    """Shift elements circularly; ``dims=None`` rolls the flattened tensor (MXNet: ``np.roll``)."""
    return _ops(input).roll(input, shifts, dims)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: Optional[float] = None) -> Tensor:
    """``torch.nn.functional.pad``: ``(left, right)`` pairs from the last dim backwards, modes
    'constant' (``value``, default 0), 'reflect', 'replicate', 'circular'. MXNet's ``pad`` takes
    4-D/5-D only and has no circular mode: built from slices and concat (any rank, Symbols too).
    Negative (cropping) pads are refused on MXNet."""
    return _ops(input).pad(input, pad, mode, value)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """Lower triangle of the last two dims (batched), above ``diagonal`` zeroed."""
    return _ops(input).tril(input, diagonal)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """Upper triangle of the last two dims (MXNet: ``x - tril(x, diagonal - 1)``)."""
    return _ops(input).triu(input, diagonal)


# ---- math ------------------------------------------------------------------------------------
def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative sum along ``dim`` (MXNet: ``np.cumsum``)."""
    return _ops(input).cumsum(input, dim, dtype=dtype)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    """Cumulative product along ``dim``. MXNet has no cumprod: NDArrays only (a running product
    of slices, exact with zeros and negatives); Symbols raise."""
    return _ops(input).cumprod(input, dim, dtype=dtype)


def norm(input: Tensor, p: Union[str, float] = "fro", dim: Union[None, int, Sequence[int]] = None,
         keepdim: bool = False, dtype: Any = None) -> Tensor:
    """``torch.norm`` for vector norms: ``p`` = 'fro'/2, 1, inf, -inf, 0 or any float, over ``dim``
    (all elements if None). MXNet's ``norm`` has ord 1/2 only: the others are written out; 'nuc'
    is refused."""
    return _ops(input).norm(input, p, dim, keepdim, dtype)


def var(input: Tensor, dim: Union[None, int, Sequence[int]] = None, *, correction: float = 1,
        keepdim: bool = False) -> Tensor:
    """Variance with ``correction`` (1: unbiased, torch's default; 0: biased). MXNet has no
    unbiased variance: written out as ``sum((x - mean)^2) / (N - correction)``."""
    return _ops(input).var(input, dim, correction=correction, keepdim=keepdim)


def std(input: Tensor, dim: Union[None, int, Sequence[int]] = None, *, correction: float = 1,
        keepdim: bool = False) -> Tensor:
    """``sqrt(var(...))`` with the same ``correction``."""
    return _ops(input).std(input, dim, correction=correction, keepdim=keepdim)


def logsumexp(input: Tensor, dim: Union[int, Sequence[int]], keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` over ``dim``, max-shifted (stable); rows of -inf give -inf as torch."""
    return _ops(input).logsumexp(input, dim, keepdim)


def erf(input: Tensor) -> Tensor:
    return _ops(input).erf(input)


def maximum(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise maximum, broadcasting (MXNet: ``broadcast_maximum``)."""
    return _ops2(input, other).maximum(input, other)


def minimum(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise minimum, broadcasting (MXNet: ``broadcast_minimum``)."""
    return _ops2(input, other).minimum(input, other)


def isnan(input: Tensor) -> Tensor:
    """Bool tensor, true at NaN (MXNet: ``np.isnan``)."""
    return _ops(input).isnan(input)


def isfinite(input: Tensor) -> Tensor:
    """Bool tensor, true where neither NaN nor +-inf."""
    return _ops(input).isfinite(input)


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """Einstein summation (operands as arguments or one list). MXNet: ``np.einsum``."""
    if not operands:
        raise ValueError("einsum: expected at least one operand")
    first = operands[0][0] if isinstance(operands[0], (list, tuple)) else operands[0]
    return _ops(first).einsum(equation, *operands)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """Batched (B, n, m) @ (B, m, p), no broadcasting (MXNet: ``batch_dot``)."""
    return _ops(input).bmm(input, mat2)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``; ``input`` broadcasts; with ``beta=0``
    ``input`` is ignored (NaN in it does not propagate), as torch."""
    return _ops(batch1).baddbmm(input, batch1, batch2, beta=beta, alpha=alpha)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two 1-D tensors."""
    return _ops(input).outer(input, vec2)


def eye(n: int, m: Optional[int] = None, *, dtype: Any = None, device: Any = None,
        backend: Optional[str] = None) -> Tensor:
    """(n, m) identity on the active backend (or ``backend``); default dtype float32. A creation
    op: not available inside a hybridized forward (no Symbol to create it from)."""
    be, dt, dev = _creation(dtype, device, backend)
    return be.module("ops").eye(int(n), None if m is None else int(m), dt, dev)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: Any = None,
             backend: Optional[str] = None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (default float32). MXNet:
    torch's formula in the output dtype (measured: within 1 ulp of torch, 6e-8 in float32 and
    2.2e-16 in float64 for ``linspace(-3.5, 2.25, 11)``: torch's SIMD kernel picks its formula per
    vector chunk)."""
    if int(steps) < 0:
        raise ValueError(f"linspace: number of steps must be non-negative, got {steps}")
    be, dt, dev = _creation(dtype, device, backend)
    return be.module("ops").linspace(float(start), float(end), int(steps), dt, dev)


def _creation(dtype: Any, device: Any, backend: Optional[str]):
    """The backend, numpy dtype and native device of a creation op (as ``dualdl.zeros``)."""
    import numpy as np

    from .backend import get_backend
    from .tensor import _check_device, _dtype, _parse_device
    be = get_backend(backend)
    d = _parse_device(device)
    _check_device(be, d)
    return be, _dtype(dtype, np.dtype("float32")), be.native_device(d)


__all__ += [
    "clip", "gather", "index_select", "take_along_dim", "topk", "sort", "argsort",
    "expand", "repeat", "tile", "flip", "roll", "pad", "tril", "triu",
    "cumsum", "cumprod", "norm", "var", "std", "logsumexp", "erf", "maximum", "minimum",
    "isnan", "isfinite", "einsum", "bmm", "baddbmm", "outer", "eye", "linspace",
    "interpolate", "conv2d", "max_pool2d", "avg_pool2d", "batch_norm", "layer_norm", "group_norm",
    "scaled_dot_product_attention",
]
