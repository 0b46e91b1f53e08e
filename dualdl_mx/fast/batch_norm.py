"""BatchNorm's fast form on MXNet (CPU): batch statistics by dualdl's ``dl_batch_norm`` kernel,
float32 in and out with float64 sums, in one pass (and the ReLU and non-overlapping MaxPool2d that
follow it in a Sequential, :mod:`dualdl_mx.fast.sequential`).

MXNet difference hidden: MXNet 1.9 has no operator that sums a float32 batch precisely at MKLDNN's
speed; the precise form (dualdl_mx/norm_stats.py, ``_batchnorm_op_formula``) runs MXNet's operator
in float64 on a float64 copy of the input: the same numbers to float32 rounding
(tests/test_mx_fast_seam.py), CRNN step 1.25x native against 1.47x.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from . import kernels

__all__ = ["applies", "kernel_formula"]


def applies(dtype: str, compute: str, param: Any, contexts) -> bool:
    """Whether batch statistics run dualdl's ``dl_batch_norm`` kernel (:mod:`dualdl_mx.fast.kernels`):
    where MXNet's operator would run in float64 for float32 data and parameters, on CPU contexts,
    with the kernel built, loaded and switched on (:func:`~dualdl_mx.fast.kernels.available` reads
    ``DUALDL_MX_FAST`` and ``DUALDL_MX_KERNELS``)."""
    return (compute == "float64" and dtype == "float32" and np.dtype(param.dtype).name == "float32"
            and all(c.device_type == "cpu" for c in contexts) and kernels.available())


def kernel_formula(F, x, weight=None, bias=None, running_mean=None, running_var=None, *,
                              eps: float, momentum: float, channels: int, leaf: bool, relu: bool = False,
                              pool: Optional[Tuple[int, int]] = None):
    """BatchNorm with batch statistics by dualdl's ``dl_batch_norm`` kernel: float32 in and out,
    sums in float64 (exact to float32 rounding, as MXNet's operator in float64, without the float64
    copy of the input). A library operator writes its gradients whatever MXNet asks (add-to
    included), so weight and bias, and x where it is a leaf (``leaf``: an array with a gradient
    of its own or a graph input), reach it through an identity op, whose backward honours the
    request. Given the running statistics, the kernel also returns torch's update of them
    (computed in float64, rounded to float32) for the caller to copy in. ``relu``: the output is
    ``relu(BatchNorm(x))`` (NaN kept; backward passes the gradient where the output is not <= 0,
    torch's threshold_backward), in the same pass; ``pool`` (kh, kw), with ``relu``: that output
    max-pooled in (kh, kw) windows, stride the window, no padding (torch's window rule), also in
    the same pass."""
    w = F.identity(weight) if weight is not None else F.ones(shape=(channels,))
    b = F.identity(bias) if bias is not None else F.zeros(shape=(channels,))
    # a convolution's output is in MKLDNN's blocked layout, which MXNet's dispatcher of library
    # operators reorders to a new plain array at every call, forward and backward; a reshape to
    # the same shape (MKLDNN's reshape: one reorder) gives both calls the plain array
    x = F.identity(x) if leaf else F.reshape(x, shape=(-2,))
    fused = {"relu": 1} if relu else {}
    if pool is not None:
        fused["pool"] = "%d,%d" % tuple(pool)
    if running_mean is None:
        return F.dl_batch_norm(x, w, b, eps=eps, **fused)[0]
    out = F.dl_batch_norm(x, w, b, F.BlockGrad(running_mean), F.BlockGrad(running_var), eps=eps, momentum=momentum,
                          **fused)
    return [out[0], out[3], out[4]]
