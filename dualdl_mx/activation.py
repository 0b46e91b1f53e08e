"""Activations on MXNet with PyTorch's names and defaults: ReLU ... LogSoftmax, PReLU, ReLU6,
Hardswish, Hardsigmoid, Softplus, Mish. Every one runs a 0-d input (:class:`_Pointwise`)."""
from __future__ import annotations

import math
from typing import Any, Optional

import mxnet as mx
import numpy as np
from mxnet import nd

from dualdl import config
from dualdl.nn.resample_checks import check_prelu_input
from dualdl.nn.registry import defined_in
from . import fast
from .fast import compiled, relu as fast_relu
from .base import Layer, _positional, is_ndarray


class _Pointwise(Layer):
    """Base of the MXNet activations. Hides: MXNet 1.x has no 0-d arrays (its operators read the
    shape () as unknown and raise), where torch runs an activation on a 0-d tensor. A 0-d NDArray
    is run as shape (1,) and the output reshaped to () (``NDArray.reshape``, which MXNet does on
    such an array, keeps the autograd graph), eager and hybridized (the cached graph sees (1,))."""

    def _dl_check(self, x: nd.NDArray) -> None:
        """Checks of an NDArray input in its own shape, before a 0-d one is run as (1,)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = _positional(self, args, kwargs)
        x = args[0] if args else None
        if isinstance(x, nd.NDArray):
            self._dl_check(x)
            if x.ndim == 0:
                return Layer.__call__(self, x.reshape((1,)), *args[1:]).reshape(())
        return Layer.__call__(self, *args)


# ---- GELU, LeakyReLU, ELU: MXNet's LeakyReLU operator is fast but keeps float32 precision --------
def _exact_formula(x, float64: Optional[bool] = None) -> bool:
    """True for float64 NDArrays, and for a Symbol where ``float64`` says the graph is float64 (a
    Symbol has no dtype: the layers pass theirs, :class:`_Float64Formula`; without it a graph runs
    the operator). MXNet's ``LeakyReLU`` operator (act_type gelu/leaky/elu) keeps float32 precision
    in float64 (slope as a float32, erf in float32: up to 5.8e-7 off torch); its exact formulas
    cost 2.5-15x the operator in float32, which keeps it."""
    return x.dtype == np.float64 if is_ndarray(x) else bool(float64)


def _formula(F, formula, x, **static: Any):
    """``formula(F, x, **static)``: one cached graph call on an NDArray, inline in a graph."""
    if is_ndarray(x):
        return compiled.run(formula, {"x": x}, **static)
    return formula(F, x, **static)


def _gelu_erf(F, x):
    """``0.5 x (1 + erf(x / sqrt 2))``. MXNet's erf backward has float32 precision in float64, so
    erf's derivative ``2/sqrt(pi) exp(-u^2)`` is put in by hand (``u - BlockGrad(u)`` is 0 but carries
    the gradient; u clipped to +-10, where the derivative is below 1e-43, so the gradient at +-inf
    is 1 and 0, where torch's is NaN)."""
    u = x * math.sqrt(0.5)                        # M_SQRT1_2, as torch
    uc = F.clip(u, -10.0, 10.0)
    d_erf = F.BlockGrad(F.exp(-uc * uc) * (2.0 / math.sqrt(math.pi)))
    erf = F.BlockGrad(F.erf(u)) + (uc - F.BlockGrad(uc)) * d_erf
    return 0.5 * x * (1.0 + erf)


def _leaky_relu_formula(F, x, *, slope: float):
    """torch's ``x > 0 ? x : slope x``: the same values (signed zeros included) and gradients (slope
    at 0 and for NaN, 1 at +inf)."""
    return F.where(x > 0, x, x * slope)


def _elu_formula(F, x, *, alpha: float):
    """torch's ``x > 0 ? x : alpha expm1(x)``; the exp is taken of ``min(x, 0)``, so the unused
    branch has no inf (nor a NaN gradient) for large x."""
    return F.where(x > 0, x, alpha * F.expm1(F.minimum(x, 0.0)))


def relu(F, x):
    """torch's relu: MXNet's ``relu`` op, which keeps NaN as torch does (``Activation(relu)`` and
    ``LeakyReLU(leaky, slope=0)``, MKLDNN's, map NaN to 0). Its gradient at NaN is NaN (torch's:
    1). On float32 feature maps the fast form (:func:`dualdl_mx.fast.relu.relu`) runs instead:
    the same values, torch's gradients (but for 0 < x <= 2**-24), and MKLDNN's layout kept."""
    if fast.enabled() and not config.mx_exact_relu():
        return fast_relu.relu(F, x)
    return F.relu(x)


def relu_into_max_pool(F, x):
    """The input a max pooling should take when ``x`` may be :func:`relu`'s output: ``x`` itself
    (precise); the fast form may swap a graph's NaN-keeping relu node for MKLDNN's ``Activation``
    there (:func:`dualdl_mx.fast.relu.relu_into_max_pool`: the pooling skips NaN either way)."""
    if fast.enabled() and not config.mx_exact_relu():
        return fast_relu.relu_into_max_pool(F, x)
    return x


def gelu(F, x, approximate: str = "none", float64: Optional[bool] = None):
    """torch's gelu: 'none' is the erf form (MXNet's ``LeakyReLU(act_type='gelu')``, exact formula
    in float64; ``float64``: whether a Symbol is float64); 'tanh' from its formula (MXNet has no op)."""
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + F.tanh(inner))
    if _exact_formula(x, float64):
        return _formula(F, _gelu_erf, x)
    return F.LeakyReLU(x, act_type="gelu")


def leaky_relu(F, x, negative_slope: float, float64: Optional[bool] = None):
    """torch's leaky_relu (exact formula in float64, MXNet's operator otherwise)."""
    if _exact_formula(x, float64):
        return _formula(F, _leaky_relu_formula, x, slope=float(negative_slope))
    return F.LeakyReLU(x, act_type="leaky", slope=negative_slope)


def elu(F, x, alpha: float, float64: Optional[bool] = None):
    """torch's elu (exact formula in float64, MXNet's operator otherwise)."""
    if _exact_formula(x, float64):
        return _formula(F, _elu_formula, x, alpha=float(alpha))
    return F.LeakyReLU(x, act_type="elu", slope=alpha)


class _Float64Formula(_Pointwise):
    """GELU, LeakyReLU, ELU: the exact formula for float64 inputs, MXNet's float32-precision
    operator otherwise. A Symbol has no dtype, so a graph takes the layer's: the dtype of its last
    ``cast()`` (Gluon's way to set a network's dtype; a parent's cast reaches its children), or of
    the NDArray it was last called with hybridized (its graph is rebuilt when that changes)."""
    _dl_dtype = "float32"

    def cast(self, dtype: Any) -> None:
        self._dl_dtype = np.dtype(dtype).name
        super().cast(dtype)

    def _dl_check(self, x: nd.NDArray) -> None:
        if self._active and x.dtype != np.dtype(self._dl_dtype):
            self._dl_dtype = np.dtype(x.dtype).name
            self._clear_cached_op()

    @property
    def _dl_float64(self) -> bool:
        return self._dl_dtype == "float64"


class _Activation(_Pointwise):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)


class ReLU(_Activation):
    """``torch.nn.ReLU``."""

    def hybrid_forward(self, F, x):
        return relu(F, x)


class Sigmoid(_Pointwise):
    """``torch.nn.Sigmoid``."""

    def hybrid_forward(self, F, x):
        return F.sigmoid(x)


class Tanh(_Pointwise):
    """``torch.nn.Tanh``."""

    def hybrid_forward(self, F, x):
        return F.tanh(x)


class GELU(_Float64Formula):
    """``torch.nn.GELU(approximate='none'|'tanh')``: 'none' is MXNet's erf GELU
    (``LeakyReLU(act_type='gelu')``, its formula in float64); 'tanh' from its formula."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def hybrid_forward(self, F, x):
        return gelu(F, x, self.approximate, self._dl_float64)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(_Float64Formula):
    """``torch.nn.LeakyReLU(negative_slope=0.01)`` (Gluon's LeakyReLU requires alpha)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = float(negative_slope), bool(inplace)

    def hybrid_forward(self, F, x):
        return leaky_relu(F, x, self.negative_slope, self._dl_float64)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(_Float64Formula):
    """``torch.nn.ELU(alpha=1.0)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)

    def hybrid_forward(self, F, x):
        return elu(F, x, self.alpha, self._dl_float64)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class SiLU(_Activation):
    """``torch.nn.SiLU``: x * sigmoid(x) (Gluon's Swish with beta=1)."""

    def hybrid_forward(self, F, x):
        return x * F.sigmoid(x)


def _legacy_softmax_dim(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1


class _SoftmaxBase(_Pointwise):
    """Softmax, LogSoftmax, Softmin: ``dim`` as torch's (a 0-d input takes dims -1 and 0); ``None``
    is torch's legacy implicit dim, from an NDArray's rank (a Symbol has none: refused)."""

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def _dl_check(self, x: nd.NDArray) -> None:
        if self.dim is not None and not -max(x.ndim, 1) <= self.dim < max(x.ndim, 1):
            raise ValueError(f"{type(self).__name__}(dim={self.dim}): dim out of range for input of "
                             f"shape {tuple(x.shape)}")

    def hybrid_forward(self, F, x):
        dim = self.dim
        if dim is None:
            if not is_ndarray(x):
                raise NotImplementedError(f"{type(self).__name__}: pass dim explicitly (the implicit dim "
                                          f"depends on the input rank, unknown under hybridize())")
            dim = _legacy_softmax_dim(x.ndim)
        return self._apply(F, x, dim)

    def _apply(self, F, x, dim: int):
        return F.softmax(x, axis=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """``torch.nn.Softmax(dim)`` (MXNet calls it ``axis``, default -1)."""


class LogSoftmax(_SoftmaxBase):
    """``torch.nn.LogSoftmax(dim)`` (MXNet calls it ``axis``, default -1). Computed as
    ``x - max - log(sum(exp(x - max)))``: MXNet's ``log_softmax`` op is off by up to 3.5e-6 from
    the float64 result (torch: 1.8e-7). :func:`dualdl_mx.ops.log_softmax`: on CPU NDArrays the
    formula in float64, one operator."""

    def _apply(self, F, x, dim: int):
        from .ops import log_softmax            # dualdl_mx.ops imports this module
        return log_softmax(x, dim)


def prelu_formula(F, x, weight):
    """torch's prelu ``relu(x) - w relu(-x)``, ``w`` (1 or C slopes) taken per element by its channel
    (dim 1) number; 0-d and 1-d NDArrays have one channel. MXNet's prelu op gives a wrong slope
    gradient inside a hybridized graph (measured 0.11 off a gradient of 0.15 after Conv2d) and keeps
    float32 precision in float64 (5e-8 relative on torch's module_db): it only numbers the channels
    here (``prelu(-1, gamma=0..C-1)``: exact integers, any rank, no shape needed), outside autograd,
    and the slopes are taken at those numbers (exact, 1e-16 in float64)."""
    if is_ndarray(x) and x.ndim < 2:
        return prelu_formula(F, x.reshape((1, -1)), weight).reshape(x.shape)
    channel = F.BlockGrad(-F.LeakyReLU(-F.ones_like(x), gamma=F.contrib.arange_like(weight), act_type="prelu"))
    return F.relu(x) - F.take(weight, channel) * F.relu(-x)


class PReLU(_Pointwise):
    """``torch.nn.PReLU(num_parameters=1, init=0.25)``: ``weight`` of shape (num_parameters,), one
    slope or one per channel (dim 1). Gluon's PReLU names it ``alpha`` and initialises it lazily.
    The formula is :func:`prelu_formula` (exact in float64, eager and hybridized)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        super().__init__()        # device/dtype: applied by dualdl.nn's factory scope (base.factory_kwargs)
        self.num_parameters, self.init = int(num_parameters), float(init)
        self.weight = self._dl_new_param("weight", (self.num_parameters,),
                                         init=mx.init.Constant(self.init))

    def _dl_check(self, x: nd.NDArray) -> None:
        check_prelu_input(self.num_parameters, x.shape)

    def hybrid_forward(self, F, x, weight):
        return prelu_formula(F, x, weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class ReLU6(_Activation):
    """``torch.nn.ReLU6``: hardtanh(x, 0, 6) (Gluon has no ReLU6 block; MXNet's clip passes a gradient
    at the bounds, torch does not: at x = 0 a gradient of 1 where torch's is 0)."""

    def hybrid_forward(self, F, x):
        from .activation_more import hardtanh_formula          # activation_more imports this module
        return hardtanh_formula(F, x, 0.0, 6.0)


class Hardswish(_Activation):
    """``torch.nn.Hardswish``: ``x * relu6(x + 3) / 6`` (MXNet has no op)."""

    def hybrid_forward(self, F, x):
        return x * F.clip(x + 3.0, 0.0, 6.0) / 6.0


class Hardsigmoid(_Activation):
    """``torch.nn.Hardsigmoid``: ``relu6(x + 3) / 6`` (MXNet's ``hard_sigmoid`` defaults to slope 0.2)."""

    def hybrid_forward(self, F, x):
        from .activation_more import _full_like, hardtanh_formula     # activation_more imports this module
        # no gradient at x = +-3, as torch; the value divided by a 6 tensor, the gradient torch's
        # ``grad * (1.0f / 6.0f)`` (its kernel's float32 constant, also in float64: 1e-8 from 1/6)
        z = hardtanh_formula(F, x + 3.0, 0.0, 6.0)
        zc = z * float(np.float32(1.0) / np.float32(6.0))
        return F.BlockGrad(F.broadcast_div(z, _full_like(F, x, 6.0))) + (zc - F.BlockGrad(zc))


def softplus(F, x, beta: float, threshold: float):
    """torch's softplus: ``log1p(exp(beta x)) / beta``, ``x`` where ``beta x > threshold``. The exp
    is taken of ``min(beta x, threshold)``, so the unused branch has no inf/NaN gradient (MXNet's
    ``softrelu`` has neither beta nor threshold)."""
    bx = x * beta
    smooth = F.log1p(F.exp(F.minimum(bx, threshold))) / beta
    return F.where(bx > threshold, x, smooth)


class Softplus(_Pointwise):
    """``torch.nn.Softplus(beta=1.0, threshold=20.0)``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)

    def hybrid_forward(self, F, x):
        return softplus(F, x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(_Activation):
    """``torch.nn.Mish``: ``x * tanh(softplus(x))`` (MXNet 1.x has no op)."""

    def hybrid_forward(self, F, x):
        return x * F.tanh(softplus(F, x, 1.0, 20.0))


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
for _name in __all__:       # MXNet's operators cannot run on an empty batch: refused, as on torch
    globals()[_name]._dl_refuses_empty = True
