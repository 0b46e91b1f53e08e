"""More activations (issue 34) on MXNet, which has no block (and mostly no operator) for them:
GLU, Hardtanh, Hardshrink, Softshrink, Tanhshrink, Threshold, Softmin, Softsign, LogSigmoid, CELU,
SELU, Softmax2d, each composed from exact elementwise operators with torch's formula, branch
conditions and gradients (float64 exact, eager and hybridized); 0-d inputs as every activation
(:class:`~dualdl_mx.activation._Pointwise`). ``inplace`` is kept as an attribute: MXNet returns a
new array with the same values."""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
from mxnet import nd

from dualdl.nn.registry import defined_in
from .activation import _Pointwise, _SoftmaxBase

# torch's SELU constants (torch.nn.functional.selu: elu with this alpha and scale)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _full_like(F, x, value: float):
    """``value`` in ``x``'s shape and dtype (rounded to it, as torch casts its scalars)."""
    return F.zeros_like(x) + value


class GLU(_Pointwise):
    """``torch.nn.GLU(dim=-1)``: ``a * sigmoid(b)`` of the two halves of ``dim`` (MXNet's split);
    an odd size is refused with torch's message."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def _dl_check(self, x: nd.NDArray) -> None:
        if x.ndim == 0:
            raise ValueError("GLU: glu does not support scalars because halving size must be even")
        if not -x.ndim <= self.dim < x.ndim:
            raise ValueError(f"GLU(dim={self.dim}): dim out of range for input of shape {tuple(x.shape)}")
        if x.shape[self.dim] % 2:
            raise ValueError(f"GLU: Halving dimension must be even, but dimension {self.dim % x.ndim} is size "
                             f"{x.shape[self.dim]}")

    def hybrid_forward(self, F, x):
        a, b = F.split(x, num_outputs=2, axis=self.dim)
        return a * F.sigmoid(b)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def hardtanh_formula(F, x, min_val: float, max_val: float):
    """torch's hardtanh: clipped, NaN kept, the gradient only strictly inside ``(min_val, max_val)``
    (also ReLU6 and Hardsigmoid's, whose bounds MXNet's clip would pass a gradient at)."""
    lo, hi = float(min_val), float(max_val)
    if np.float32(lo) == lo and np.float32(hi) == hi:      # clip keeps its bounds as float32: exact here
        outside = F.clip(x, lo, hi)                         # (NaN kept), 2x fewer ops than the general form
    else:
        outside = F.where(x <= lo, _full_like(F, x, lo), F.where(x >= hi, _full_like(F, x, hi), x))
    return F.where((x > lo) * (x < hi), x, F.BlockGrad(outside))


class Hardtanh(_Pointwise):
    """``torch.nn.Hardtanh``: ``min_val`` where ``x <= min_val``, ``max_val`` where ``x >= max_val``,
    else x (NaN kept), the gradient passed only where ``min_val < x < max_val`` (0 at the bounds and
    at NaN, as torch's vectorized loop). MXNet's clip stores its bounds as float32 and passes the
    gradient at them."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: Optional[float] = None, max_value: Optional[float] = None) -> None:
        super().__init__()
        if min_value is not None:                       # torch's deprecation, word for word
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`",
                          FutureWarning, stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`",
                          FutureWarning, stacklevel=2)
            max_val = max_value
        self.min_val, self.max_val, self.inplace = min_val, max_val, bool(inplace)

    def hybrid_forward(self, F, x):
        return hardtanh_formula(F, x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class Hardshrink(_Pointwise):
    """``torch.nn.Hardshrink(lambd=0.5)``: x where ``x < -lambd`` or ``x > lambd``, else 0; NaN
    kept with gradient 0 (torch's)."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def hybrid_forward(self, F, x):
        lambd = float(self.lambd)
        shrunk = F.where(x == x, F.zeros_like(x), F.BlockGrad(x))          # 0; NaN kept, no gradient
        return F.where((x < -lambd) + (x > lambd), x, shrunk)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(_Pointwise):
    """``torch.nn.Softshrink(lambd=0.5)``: torch's ``x > l ? x - l : (x < -l ? x + l : x * 0)``,
    with its gradient (0 for ``-l <= x <= l`` and at NaN)."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()                  # lambd >= 0: checked by dualdl.nn.arguments
        self.lambd = lambd

    def hybrid_forward(self, F, x):
        lambd = float(self.lambd)
        return F.where(x > lambd, x - lambd, F.where(x < -lambd, x + lambd, F.BlockGrad(x) * 0.0))

    def extra_repr(self) -> str:
        return str(self.lambd)


class Tanhshrink(_Pointwise):
    """``torch.nn.Tanhshrink``: ``x - tanh(x)``."""

    def hybrid_forward(self, F, x):
        return x - F.tanh(x)


class Threshold(_Pointwise):
    """``torch.nn.Threshold(threshold, value)``: ``value`` where ``x <= threshold``, else x (NaN
    kept; gradient 0 where replaced)."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, bool(inplace)

    def hybrid_forward(self, F, x):
        return F.where(x <= float(self.threshold), _full_like(F, x, float(self.value)), x)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class Softmin(_SoftmaxBase):
    """``torch.nn.Softmin(dim)``: MXNet's softmax of ``-x`` (torch's ``softmin``)."""

    def _apply(self, F, x, dim: int):
        return F.softmax(-x, axis=dim)


class Softsign(_Pointwise):
    """``torch.nn.Softsign``: ``x / (1 + |x|)`` (MXNet's ``Activation('softsign')`` is the same
    formula without torch's gradient order)."""

    def hybrid_forward(self, F, x):
        return x / (F.abs(x) + 1.0)


class LogSigmoid(_Pointwise):
    """``torch.nn.LogSigmoid``: torch's stable ``min(x, 0) - log1p(exp(-|x|))``, written per
    branch, ``x - log1p(exp(x))`` for x < 0 and ``-log1p(exp(-x))`` otherwise, so that each branch's
    own gradient is torch's ``sigmoid(-x)`` (0.5 at 0; the exps of the unused branch are clamped)."""

    def hybrid_forward(self, F, x):
        negative = x - F.log1p(F.exp(F.minimum(x, 1.0)))
        positive = -F.log1p(F.exp(-F.maximum(x, -1.0)))
        return F.where(x < 0, negative, positive)


class CELU(_Pointwise):
    """``torch.nn.CELU(alpha=1.0)``: torch's kernel, ``x > 0 ? x : alpha * expm1(x * (1 / alpha))``
    (the exp taken of ``min(x, 0)``: no inf in the unused branch), with the exact gradient: torch's
    float64 backward takes ``1 / alpha`` of alpha rounded to float32 (up to 6e-8 relative off for
    an alpha that is no float32, e.g. 0.7; exact for 0.5, 2.0, 2.5)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()                  # alpha != 0: checked by dualdl.nn.arguments
        self.alpha, self.inplace = alpha, bool(inplace)

    def hybrid_forward(self, F, x):
        alpha = float(self.alpha)
        return F.where(x > 0, x, F.expm1(F.minimum(x, 0.0) * (1.0 / alpha)) * alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(_Pointwise):
    """``torch.nn.SELU``: torch's kernel, ``x > 0 ? scale * x : expm1(x) * (alpha * scale)`` with
    its constants (Gluon's SELU runs MXNet's LeakyReLU operator, float32 precision in float64)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def hybrid_forward(self, F, x):
        return F.where(x > 0, x * SELU_SCALE, F.expm1(F.minimum(x, 0.0)) * (SELU_ALPHA * SELU_SCALE))

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softmax2d(_Pointwise):
    """``torch.nn.Softmax2d``: MXNet's softmax over the channel axis -3 of (C, H, W) or (N, C, H, W);
    other ranks refused with torch's ValueError (its message)."""

    def _dl_check(self, x: nd.NDArray) -> None:
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {x.ndim}D instead")

    def hybrid_forward(self, F, x):
        return F.softmax(x, axis=-3)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
for _name in __all__:       # MXNet's operators cannot run on an empty batch: refused, as on torch
    globals()[_name]._dl_refuses_empty = True
