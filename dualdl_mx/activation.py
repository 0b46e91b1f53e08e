"""Activations on MXNet with PyTorch's names and defaults: ReLU ... LogSoftmax, PReLU, ReLU6,
Hardswish, Hardsigmoid, Softplus, Mish."""
from __future__ import annotations

import json
import math
from typing import Any, Optional

import mxnet as mx
import numpy as np

from dualdl import config
from dualdl.nn.resample_checks import check_prelu_input
from dualdl.nn.registry import defined_in
from .fast import compiled
from .base import Layer, is_ndarray


# ---- GELU, LeakyReLU, ELU: MXNet's LeakyReLU operator is fast but keeps float32 precision --------
def _exact_formula(x) -> bool:
    """True for float64 NDArrays. MXNet's ``LeakyReLU`` operator (act_type gelu/leaky/elu) keeps
    float32 precision in float64 (slope as a float32, erf in float32: up to 5.8e-7 off torch); its
    exact formulas cost 2.5-15x the operator in float32, which keeps it. A Symbol has no dtype: it
    runs the operator (a hybridized float64 model keeps the float32-precision activations)."""
    return is_ndarray(x) and x.dtype == np.float64


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


# operators whose output MKLDNN may keep in its blocked layout (what a Convolution starts)
_BLOCKED_LAYOUT_OPS = frozenset({"Convolution", "Deconvolution", "BatchNorm", "Pooling", "Activation", "LeakyReLU"})


def _head_node(sym: Any) -> dict:
    """The JSON node of the operator that computes a Symbol (``op``, ``attrs``), from a one-node
    copy of its head (the whole graph's JSON would make building a graph of k relus O(k^2): 3.3 s
    against 0.7 s for 150 blocks)."""
    if sym.get_children() is None:             # a variable (MXNet's one-node copy of one crashes)
        return {"op": "null", "attrs": {}}
    return json.loads(sym._gen_atomic_symbol().tojson())["nodes"][-1]


def _producer_op(sym: Any) -> str:
    """The operator that computes a Symbol (:func:`_head_node`)."""
    return _head_node(sym)["op"]


# DUALDL_MX_EXACT_RELU=1: the relu op everywhere (read once, as DUALDL_MX_FUSED_BATCHNORM)
_EXACT_RELU = config.mx_exact_relu()


def _feature_map(x: Any) -> bool:
    """True where MKLDNN's relu form pays (measured): a float32 NDArray of 3 or more dims
    (conv-style feature maps; after a Convolution in MKLDNN's blocked layout the ``relu`` op
    reorders it); a Symbol computed by a Convolution, BatchNorm, Pooling or activation operator
    (floating point only). 2-D outputs (Linear's) keep the ``relu`` op: there MKLDNN's operator
    measured 3% slower (MLP step); so do other dtypes (MKLDNN has float32 only; ``LeakyReLU``
    refuses integers)."""
    if is_ndarray(x):
        return x.ndim >= 3 and x.dtype == np.float32
    try:
        return _producer_op(x) in _BLOCKED_LAYOUT_OPS
    except (AttributeError, KeyError, IndexError, ValueError, mx.base.MXNetError):
        return False


def relu(F, x):
    """torch's relu, NaN kept. MXNet's ``relu`` op keeps NaN but is no MKLDNN operator: after a
    Convolution (MKLDNN's blocked layout) it reorders its input, and its kernel costs ~3x a copy.
    ``Activation(relu)`` and ``LeakyReLU(leaky, slope=0)`` (MKLDNN) map NaN to 0. On feature maps
    (:func:`_feature_map`) MKLDNN's ``LeakyReLU(act_type='elu', slope=-0.0)``,
    ``x > 0 ? x : -0.0 * expm1(x)``, is relu with NaN kept (``-0.0 * NaN``): torch's values, and in
    float32 torch's input gradients bit for bit (1 for x > 0 and at NaN, 0 else; MXNet's ``relu``
    op gives NaN at NaN), except for 0 < x <= 2**-24 (6e-8), where its backward gives 0
    (measured: the branch is taken on ``exp(x) > 1``). Zeros may differ in sign (equal as
    numbers): +0 for x = -0 (as MXNet's ``relu`` op) and -0 for x in (-1e-7, 0). Other inputs
    (2-D, float64, integer, a graph's input variable) keep the ``relu`` op, and so does every
    input with ``DUALDL_MX_EXACT_RELU=1``."""
    if _EXACT_RELU or not _feature_map(x):
        return F.relu(x)
    return F.LeakyReLU(x, act_type="elu", slope=-0.0)


def _is_nan_keeping_relu(node: dict) -> bool:
    """Whether a graph node is :func:`relu`'s MKLDNN form (``LeakyReLU``, elu, slope 0)."""
    attrs = node.get("attrs") or {}
    try:
        return node["op"] == "LeakyReLU" and attrs.get("act_type") == "elu" and float(attrs["slope"]) == 0.0
    except (KeyError, ValueError):
        return False


def relu_into_max_pool(F, x):
    """The input a max pooling should take when ``x`` may be :func:`relu`'s NaN-keeping form:
    ``Activation(relu)`` of the relu's own input in a graph where ``x`` is that form (Symbols), else
    ``x``. MXNet's max pooling skips NaN whatever the relu gives it (docs/differences.md): for
    relu's outputs, all >= 0, the pooled values and the gradients are those of the NaN-keeping form
    bit for bit (tests/test_mx_relu_pool.py), and MKLDNN's ``Activation``, which maps NaN to 0
    without the form's exp, costs 2.6% less of a hybridized LeNet step (benchmarks/findings.md).
    Two exceptions: a window that is all NaN pools to 0 and passes no gradient (after the form:
    float32's lowest value, and the window's gradient to its first element; torch: NaN, and the
    gradient to its last), and a tiny maximum 0 < x <= 2**-24 gets torch's gradient 1 (the form:
    0). The relu node stays in the graph for its other consumers, if any, so they keep NaN.
    NDArrays are unchanged: the relu has run when the pooling is called."""
    if _EXACT_RELU or is_ndarray(x):
        return x
    try:
        if _is_nan_keeping_relu(_head_node(x)):
            return F.Activation(x.get_children()[0], act_type="relu")
    except (AttributeError, KeyError, IndexError, ValueError, mx.base.MXNetError):
        pass
    return x


def relu_for_max_pool(F, x):
    """``relu(x)`` for a caller that knows the result goes into a max pooling and nowhere else
    (``Sequential``'s ReLU then MaxPool, eager): MKLDNN's ``Activation`` where :func:`relu` would
    take its NaN-keeping form, with the results :func:`relu_into_max_pool` gives graphs."""
    if _EXACT_RELU or not _feature_map(x):
        return relu(F, x)
    return F.Activation(x, act_type="relu")


def gelu(F, x, approximate: str = "none"):
    """torch's gelu: 'none' is the erf form (MXNet's ``LeakyReLU(act_type='gelu')``, exact formula
    in float64); 'tanh' from its formula (MXNet has no op)."""
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + F.tanh(inner))
    if _exact_formula(x):
        return compiled.run(_gelu_erf, {"x": x})
    return F.LeakyReLU(x, act_type="gelu")


def leaky_relu(F, x, negative_slope: float):
    """torch's leaky_relu (exact formula in float64, MXNet's operator otherwise)."""
    if _exact_formula(x):
        return compiled.run(_leaky_relu_formula, {"x": x}, slope=float(negative_slope))
    return F.LeakyReLU(x, act_type="leaky", slope=negative_slope)


def elu(F, x, alpha: float):
    """torch's elu (exact formula in float64, MXNet's operator otherwise)."""
    if _exact_formula(x):
        return compiled.run(_elu_formula, {"x": x}, alpha=float(alpha))
    return F.LeakyReLU(x, act_type="elu", slope=alpha)


class _Activation(Layer):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)


class ReLU(_Activation):
    """``torch.nn.ReLU``."""

    def hybrid_forward(self, F, x):
        return relu(F, x)


class Sigmoid(Layer):
    """``torch.nn.Sigmoid``."""

    def hybrid_forward(self, F, x):
        return F.sigmoid(x)


class Tanh(Layer):
    """``torch.nn.Tanh``."""

    def hybrid_forward(self, F, x):
        return F.tanh(x)


class GELU(Layer):
    """``torch.nn.GELU(approximate='none'|'tanh')``: 'none' is MXNet's erf GELU
    (``LeakyReLU(act_type='gelu')``, its formula on float64 NDArrays); 'tanh' from its formula."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def hybrid_forward(self, F, x):
        return gelu(F, x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Layer):
    """``torch.nn.LeakyReLU(negative_slope=0.01)`` (Gluon's LeakyReLU requires alpha)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = float(negative_slope), bool(inplace)

    def hybrid_forward(self, F, x):
        return leaky_relu(F, x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Layer):
    """``torch.nn.ELU(alpha=1.0)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)

    def hybrid_forward(self, F, x):
        return elu(F, x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class SiLU(_Activation):
    """``torch.nn.SiLU``: x * sigmoid(x) (Gluon's Swish with beta=1)."""

    def hybrid_forward(self, F, x):
        return x * F.sigmoid(x)


def _legacy_softmax_dim(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1


class _SoftmaxBase(Layer):
    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def hybrid_forward(self, F, x):
        dim = self.dim
        if is_ndarray(x):
            if dim is None:
                dim = _legacy_softmax_dim(x.ndim)
            elif not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
                raise ValueError(f"{type(self).__name__}(dim={self.dim}): dim out of range for input of "
                                 f"shape {tuple(x.shape)}")
        elif dim is None:
            raise NotImplementedError(f"{type(self).__name__}: pass dim explicitly (the implicit dim "
                                      f"depends on the input rank, unknown under hybridize())")
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


class PReLU(Layer):
    """``torch.nn.PReLU(num_parameters=1, init=0.25)``: ``weight`` of shape (num_parameters,), one
    slope or one per channel (dim 1). Gluon's PReLU names it ``alpha`` and initialises it lazily.

    Written as ``relu(x) + w * min(x, 0)``, with ``w`` broadcast over the channel dim by MXNet's
    prelu op applied to a constant -1: the prelu op applied to ``x`` itself gives a wrong slope
    gradient inside a hybridized graph (measured 0.11 off a gradient of 0.15 after Conv2d, in a
    bound Symbol too; eager it is right)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        super().__init__()        # device/dtype: applied by dualdl.nn's factory scope (base.factory_kwargs)
        self.num_parameters, self.init = int(num_parameters), float(init)
        self.weight = self._dl_new_param("weight", (self.num_parameters,),
                                         init=mx.init.Constant(self.init))

    def hybrid_forward(self, F, x, weight):
        if is_ndarray(x):
            check_prelu_input(self.num_parameters, x.shape)
            if x.ndim < 2:                                   # MXNet's prelu wants a channel axis
                return self.hybrid_forward(F, x.reshape((1, -1)), weight).reshape(x.shape)
        minus_w = F.LeakyReLU(-F.ones_like(x), gamma=weight, act_type="prelu")     # -w, x's shape
        return F.relu(x) + minus_w * F.relu(-x)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class ReLU6(_Activation):
    """``torch.nn.ReLU6``: ``clip(x, 0, 6)`` (Gluon has no ReLU6 block)."""

    def hybrid_forward(self, F, x):
        return F.clip(x, 0.0, 6.0)


class Hardswish(_Activation):
    """``torch.nn.Hardswish``: ``x * relu6(x + 3) / 6`` (MXNet has no op)."""

    def hybrid_forward(self, F, x):
        return x * F.clip(x + 3.0, 0.0, 6.0) / 6.0


class Hardsigmoid(_Activation):
    """``torch.nn.Hardsigmoid``: ``relu6(x + 3) / 6`` (MXNet's ``hard_sigmoid`` defaults to slope 0.2)."""

    def hybrid_forward(self, F, x):
        return F.clip(x + 3.0, 0.0, 6.0) / 6.0


def softplus(F, x, beta: float, threshold: float):
    """torch's softplus: ``log1p(exp(beta x)) / beta``, ``x`` where ``beta x > threshold``. The exp
    is taken of ``min(beta x, threshold)``, so the unused branch has no inf/NaN gradient (MXNet's
    ``softrelu`` has neither beta nor threshold)."""
    bx = x * beta
    smooth = F.log1p(F.exp(F.minimum(bx, threshold))) / beta
    return F.where(bx > threshold, x, smooth)


class Softplus(Layer):
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
