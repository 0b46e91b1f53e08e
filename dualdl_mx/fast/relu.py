"""The fast forms of relu on MXNet (CPU): MKLDNN's operators where MXNet's ``relu`` op costs a
layout reorder, with relu's values and (but for the cases below) torch's gradients.

MXNet difference hidden: MXNet's ``relu`` op keeps NaN but is no MKLDNN operator: after a
Convolution (MKLDNN's blocked layout) it reorders its input, and its kernel costs ~3x a copy;
MKLDNN's ``Activation(relu)`` maps NaN to 0. The precise form is :func:`dualdl_mx.activation.relu`;
these run only while :func:`dualdl_mx.fast.enabled` (and ``DUALDL_MX_EXACT_RELU`` is not 1).
"""
from __future__ import annotations

import json
from typing import Any

import mxnet as mx
import numpy as np

from ..base import is_ndarray

__all__ = ["relu", "relu_into_max_pool", "relu_for_max_pool"]


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
    input with ``DUALDL_MX_EXACT_RELU=1`` or ``DUALDL_MX_FAST=0`` (the precise form)."""
    if not _feature_map(x):
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
    if is_ndarray(x):
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
    if not _feature_map(x):
        return relu(F, x)
    return F.Activation(x, act_type="relu")
