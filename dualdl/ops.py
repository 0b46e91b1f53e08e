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

Dispatch costs one dict lookup per call (the adapter module is cached per tensor type).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

from .backend import backend_for

__all__ = [
    "relu", "sigmoid", "tanh", "gelu", "leaky_relu", "elu", "silu", "softmax", "log_softmax",
    "matmul", "linear", "add", "sub", "mul", "div", "pow", "exp", "log", "sqrt", "abs", "clamp",
    "zeros_like", "ones_like", "where", "masked_fill", "dropout",
    "cat", "concat", "stack", "split", "chunk", "transpose", "permute", "reshape", "flatten",
    "squeeze", "unsqueeze", "sum", "mean", "max", "min", "argmax", "argmin",
    "embedding", "one_hot",
]

Tensor = Any            # a native tensor: torch.Tensor, mx.nd.NDArray or mx.sym.Symbol
Number = Union[int, float]

_IMPL: Dict[type, Any] = {}


def _ops(x: Any):
    """The adapter ops module for ``x``'s type (cached; this is on every forward pass)."""
    try:
        return _IMPL[type(x)]
    except KeyError:
        mod = backend_for(x).module("ops")
        _IMPL[type(x)] = mod
        return mod


def _ops2(*xs: Any):
    """The ops module of the first argument that is a tensor (others may be Python numbers)."""
    for x in xs:
        mod = _IMPL.get(type(x))
        if mod is not None:
            return mod
    for x in xs:
        if not isinstance(x, (int, float, bool)):
            return _ops(x)
    raise TypeError(f"expected at least one native tensor, got {', '.join(type(x).__name__ for x in xs)}")


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
    MXNet: ``LeakyReLU(act_type="gelu")`` for the erf form, the tanh form written out."""
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


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Inverted dropout when ``training`` (scale 1/(1-p) on both). Unlike Gluon, the argument
    decides, not ``autograd.record()``. Masks come from each framework's RNG: they differ."""
    return _ops(x).dropout(x, p, training)


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
