"""More normalisation layers on MXNet with torch's parameters and numbers: ``RMSNorm`` (MXNet 1.9
has no RMS norm op) and ``LocalResponseNorm`` (MXNet's ``LRN`` op takes 4-d float32 input only,
raises on float64, and centres an even window otherwise than torch: 0.69 off at size 2, alpha 0.1,
measured; here torch's formula on any (N, C, *) input)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import mxnet as mx

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple
from dualdl.nn.registry import defined_in
from .base import is_ndarray
from .norm_stats import _CheckedCall


class RMSNorm(_CheckedCall):
    """``torch.nn.RMSNorm``: ``x / sqrt(mean(x^2) + eps) * weight`` over the last
    ``len(normalized_shape)`` axes (any leading axes, none included), torch's composite formula op
    for op. ``eps=None`` is the machine epsilon of the input's dtype, as torch: eager the input's;
    hybridized (a Symbol has no dtype) the weight's, or without one the dtype of the layer's last
    ``cast()`` (float32 by default)."""

    _dl_dtype = "float32"

    def __init__(self, normalized_shape: IntOrTuple, eps: Optional[float] = None, elementwise_affine: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = None if eps is None else float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = (self._dl_new_param("weight", self.normalized_shape, init=mx.init.One())
                       if elementwise_affine else None)

    def cast(self, dtype: Any) -> None:
        self._dl_dtype = np.dtype(dtype).name
        super().cast(dtype)

    def _dl_check_call(self, x, *args) -> None:
        C.check_rmsnorm_input(self.normalized_shape, x.shape)

    def hybrid_forward(self, F, x, weight=None):
        if self.eps is not None:
            eps = self.eps
        else:
            dtype = x.dtype if is_ndarray(x) else (self.weight.dtype if self.weight is not None else self._dl_dtype)
            eps = float(np.finfo(np.dtype(dtype) if np.dtype(dtype) != np.float16 else np.float32).eps)
        axes = tuple(range(-len(self.normalized_shape), 0))
        y = F.broadcast_mul(x, F.rsqrt(F.mean(F.square(x), axis=axes, keepdims=True) + eps))
        return F.broadcast_mul(y, weight) if weight is not None else y

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(_CheckedCall):
    """``torch.nn.LocalResponseNorm``: ``x / (k + alpha * mean of x^2 over size channels)^beta``,
    the window centred as torch's (size // 2 channels before, (size - 1) // 2 after, zeros
    outside, the mean always over ``size``), on (N, C, *) with at least 3 axes: the squares viewed
    (N, 1, C, -1), zero-padded along C and average-pooled with a (size, 1) window, as torch's
    avg_pool2d/3d."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = int(size), float(alpha), float(beta), float(k)

    def _dl_check_call(self, x, *args) -> None:
        C.check_local_response_norm_input(self.size, x.shape)

    def hybrid_forward(self, F, x):
        s = self.size
        sq = F.reshape(F.expand_dims(F.square(x), axis=1), shape=(0, 0, 0, -1))  # (N, 1, C, M)
        sq = F.pad(sq, mode="constant", pad_width=(0, 0, 0, 0, s // 2, (s - 1) // 2, 0, 0), constant_value=0)
        avg = F.Pooling(sq, kernel=(s, 1), stride=(1, 1), pool_type="avg", count_include_pad=True)
        div = F.power(F.reshape_like(avg, x) * self.alpha + self.k, self.beta)
        return x / div

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
