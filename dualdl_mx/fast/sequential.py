"""``Sequential``'s fast form on MXNet (CPU): a BatchNorm followed by a ReLU (and a MaxPool2d
whose windows do not overlap) runs as one pass of dualdl's BatchNorm kernel, and a ReLU followed
by a max pooling runs MKLDNN's ``Activation`` (the pooling skips NaN either way). The numbers are
those of calling the children one by one (tests/test_mx_fast_seam.py, tests/test_mx_relu_pool.py);
``Sequential`` calls this only while :func:`dualdl_mx.fast.enabled`."""
from __future__ import annotations

from typing import Any, List, Optional

import mxnet as mx
from mxnet.gluon import HybridBlock

from ..base import is_ndarray
from .relu import relu_for_max_pool

__all__ = ["forward"]


def forward(children: List[HybridBlock], x: Any) -> Any:
    """The children called in order on ``x``, fusing what :func:`_absorbs_relu`,
    :func:`_absorbs_pool` and :func:`_relu_into_max_pool` allow."""
    i = 0
    while i < len(children):
        m = children[i]
        if i + 1 < len(children) and _absorbs_relu(m, children[i + 1], x):
            pool = children[i + 2] if i + 2 < len(children) else None
            if pool is not None and not _absorbs_pool(m, pool, x):
                pool = None
            x = _call_fused(m, x, pool)
            i += 3 if pool is not None else 2
        elif i + 1 < len(children) and _relu_into_max_pool(m, children[i + 1], x):
            x = children[i + 1](relu_for_max_pool(mx.nd, x))
            i += 2
        else:
            x = m(x)
            i += 1
    return x


def _absorbs_relu(m: HybridBlock, nxt: HybridBlock, x: Any) -> bool:
    """Whether BatchNorm ``m`` computes the ``ReLU`` ``nxt`` that follows it in a Sequential, in
    its kernel's pass (MXNet difference hidden: each operator is a pass over the feature map, and
    dualdl's BatchNorm kernel cannot hand MKLDNN's relu its blocked layout; the relu pass cost
    0.07 of the demo CRNN's eager step). Not where a hook would see the BatchNorm's output or the
    ReLU's call, not for an NDArray call of a BatchNorm hybridized on its own (its cached graph
    is built once, for one caller), and not for a subclass with a forward of its own (which would
    not apply what it was asked to)."""
    from ..activation import ReLU
    from ..norm import _BatchNorm
    return (isinstance(m, _BatchNorm) and type(m).hybrid_forward is _BatchNorm.hybrid_forward
            and type(nxt) is ReLU and _unobserved(m, x) and not (nxt._forward_hooks or nxt._forward_pre_hooks))


def _relu_into_max_pool(m: HybridBlock, pool: HybridBlock, x: Any) -> bool:
    """Whether the ``ReLU`` ``m`` of a Sequential, called with an NDArray, feeds only the max
    pooling ``pool`` after it, which skips NaN whatever the relu gives it: then MKLDNN's
    ``Activation`` computes it (:func:`~dualdl_mx.fast.relu.relu_for_max_pool`; graphs get the
    same from :func:`~dualdl_mx.fast.relu.relu_into_max_pool`). Not where a hook would see the
    relu's output (on either module), not with ``ceil_mode`` (its -inf padding), and not for a pool
    MXNet's ``Pooling`` does not compute (``return_indices`` or ``dilation``: its window form keeps NaN)."""
    from ..activation import ReLU
    from ..pool import MaxPool1d, MaxPool2d, MaxPool3d
    return (is_ndarray(x) and type(m) is ReLU and type(pool) in (MaxPool1d, MaxPool2d, MaxPool3d)
            and pool._dl_pooling_op and not pool.ceil_mode and _unobserved(m, x) and _unobserved(pool, x))


def _unobserved(m: HybridBlock, x: Any) -> bool:
    """No hook sees ``m``'s call, and ``m`` is not a block hybridized on its own called with an
    NDArray (its cached graph is built once, for one caller)."""
    return (not (m._forward_hooks or m._forward_pre_hooks)
            and not (m._active and not isinstance(x, mx.sym.Symbol)))


def _absorbs_pool(bn: HybridBlock, pool: HybridBlock, x: Any) -> bool:
    """Whether BatchNorm2d ``bn``, already computing the ReLU after it, also computes the
    ``MaxPool2d`` ``pool`` after that ReLU in its kernel's pass (MXNet difference hidden: MKLDNN's
    pooling on the plain layout dualdl's kernel leaves took 1.7-1.8x the time of Gluon's on the
    blocked one, forward and backward, in the demo CRNN; fused, the full-size map is neither
    written nor read back). Windows that do not overlap only (stride = kernel size, no padding,
    floor; at most 256 elements), where backward sends each window's gradient to one element; no
    hooks on ``pool``; not for a pool MXNet's ``Pooling`` does not compute (``return_indices`` or
    ``dilation``: the fused kernel pools with MXNet's windows only)."""
    from ..norm import BatchNorm2d
    from ..pool import MaxPool2d
    return (isinstance(bn, BatchNorm2d) and type(pool) is MaxPool2d and pool.stride == pool.kernel_size
            and pool.padding == (0, 0) and not pool.ceil_mode and pool.kernel_size[0] * pool.kernel_size[1] <= 256
            and pool._dl_pooling_op and _unobserved(pool, x))


def _call_fused(m: HybridBlock, x: Any, pool: Optional[HybridBlock]) -> Any:
    """``m``'s call with the ReLU (and ``pool``) after it computed by ``m``."""
    object.__setattr__(m, "_dl_relu_after", True)
    object.__setattr__(m, "_dl_pool_after", pool)
    try:
        return m(x)
    finally:
        object.__setattr__(m, "_dl_relu_after", False)
        object.__setattr__(m, "_dl_pool_after", None)
