"""Max/average pooling (1-3 d) and adaptive pooling on MXNet with PyTorch's output sizes (incl.
``ceil_mode``) and adaptive bins."""
from __future__ import annotations

import numbers
from typing import Any, Optional, Tuple

import numpy as np
from mxnet import autograd

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple, to_tuple
from dualdl.nn.registry import defined_in
from .activation import relu_into_max_pool
from .base import Layer, is_ndarray
from .conv import pad_spatial

# values torch honours and these layers cannot (``_dl_cannot``; invalid values were refused before, as
# torch refuses them, by dualdl.nn.arguments)
_RETURN_INDICES = (lambda v, bound: bool(v), "MXNet's pooling operators return no indices")
_NONE_SIZE = (lambda v, bound: v is None or (isinstance(v, (tuple, list)) and None in v),
              "None (keep that axis's input size) needs the input's shape, which a hybridized MXNet graph "
              "does not have; give every output size")


def _output_sizes(output_size: Any, n: int) -> Tuple[int, ...]:
    """An int or n ints as n ints (checked by dualdl.nn.arguments; None refused by ``_dl_cannot``)."""
    if isinstance(output_size, numbers.Integral):
        return (int(output_size),) * n
    return tuple(int(o) for o in output_size)


class _PoolNd(Layer):
    _n = 2
    _type = "max"

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
                 padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments
        n = self._n
        self.kernel_size = to_tuple(kernel_size, n, "kernel_size")
        self.stride = to_tuple(stride if stride is not None else kernel_size, n, "stride")
        self.padding = to_tuple(padding, n, "padding")
        self.ceil_mode, self.count_include_pad = bool(ceil_mode), bool(count_include_pad)

    def _check(self, x) -> None:
        C.check_pool_input(type(self).__name__, x.shape, self.kernel_size, self.stride, self.padding,
                           self.ceil_mode)

    def hybrid_forward(self, F, x):
        if is_ndarray(x):
            self._check(x)
        if self.ceil_mode:
            return self._ceil_pool(F, x)
        if self._type == "max":
            return self._max_op(F, x, kernel=self.kernel_size, stride=self.stride, pad=self.padding)
        return F.Pooling(x, kernel=self.kernel_size, stride=self.stride, pad=self.padding, pool_type="avg",
                         pooling_convention="valid", count_include_pad=self.count_include_pad)

    @staticmethod
    def _max_op(F, x, **kw):
        """Max pooling. Under ``autograd.record(train_mode=False)`` MKLDNN's float32 max-pooling
        backward sends gradients to the wrong elements (measured 3.9 off): on NDArrays that case
        pools in float64 (no MKLDNN; exact) and casts back. Not done under hybridize(): a graph
        cannot see the recording mode (record with train_mode=True there). In a graph, relu's
        NaN-keeping form right before it becomes MKLDNN's ``Activation``
        (:func:`~dualdl_mx.activation.relu_into_max_pool`): the pooling skips NaN either way."""
        if (is_ndarray(x) and x.dtype == np.float32 and autograd.is_recording()
                and not autograd.is_training()):
            return F.Pooling(x.astype("float64"), pool_type="max", pooling_convention="valid",
                             **kw).astype("float32")
        return F.Pooling(relu_into_max_pool(F, x), pool_type="max", pooling_convention="valid", **kw)

    def _ceil_pool(self, F, x):
        """torch's ceil_mode without MXNet's 'full' convention, which (measured) adds a last window
        starting in the right padding that torch drops, divides a clipped average window by the
        full kernel size in backward only (0.17-0.25 off), and fails in MKLDNN's backward when a
        window lies entirely in the padding. Instead: pad explicitly (right side r = min(p+s-1,
        k-1), which gives exactly torch's output size under the 'valid' convention); max pads with
        -inf; average = sum pooling / sum pooling of a mask of the elements torch counts."""
        k, s, p = self.kernel_size, self.stride, self.padding
        r = tuple(min(pi + si - 1, ki - 1) for ki, si, pi in zip(k, s, p))
        zero = (0,) * self._n

        def pad(t, before, after, value):
            return pad_spatial(F, t, tuple(zip(before, after)), "constant", value)

        def pool(t, kind):
            return F.Pooling(t, kernel=k, stride=s, pad=zero, pool_type=kind, pooling_convention="valid")

        if self._type == "max":
            return self._max_op(F, pad(x, p, r, float("-inf")), kernel=k, stride=s, pad=zero)
        total = pool(pad(x, p, r, 0.0), "sum")
        mask = F.ones_like(F.slice_axis(F.slice_axis(x, axis=0, begin=0, end=1), axis=1, begin=0, end=1))
        if self.count_include_pad:              # torch counts the padding, not what lies past it
            mask = pad(pad(mask, p, p, 1.0), zero, tuple(ri - pi for ri, pi in zip(r, p)), 0.0)
        else:
            mask = pad(mask, p, r, 0.0)
        return F.broadcast_div(total, F.BlockGrad(pool(mask, "sum")))

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class _MaxPoolNd(_PoolNd):
    _type = "max"
    _dl_cannot = {"dilation": (lambda v, bound: any(d != 1 for d in (v if isinstance(v, (tuple, list)) else [v])),
                               "MXNet's Pooling has no dilation"),
                  "return_indices": _RETURN_INDICES}

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 dilation: IntOrTuple = 1, return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation, self.return_indices = 1, False


class _AvgPoolNd(_PoolNd):
    _type = "avg"

    def extra_repr(self) -> str:
        return super().extra_repr() + f", count_include_pad={self.count_include_pad}"


class MaxPool1d(_MaxPoolNd):
    """``torch.nn.MaxPool1d`` (NCW); ceil_mode crops MXNet's extra last window."""
    _n = 1


class MaxPool2d(_MaxPoolNd):
    """``torch.nn.MaxPool2d`` (NCHW); ceil_mode crops MXNet's extra last row/column."""


class AvgPool1d(_AvgPoolNd):
    """``torch.nn.AvgPool1d`` (NCW); ceil_mode crops MXNet's extra last window."""
    _n = 1

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class _AvgPoolDivisor(_AvgPoolNd):
    """2-d/3-d average pooling: torch's signature has ``divisor_override`` (MXNet's Pooling has none)."""
    _dl_cannot = {"divisor_override": (lambda v, bound: v is not None, "MXNet's Pooling has no divisor override")}

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Optional[int] = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = None


class AvgPool2d(_AvgPoolDivisor):
    """``torch.nn.AvgPool2d`` (NCHW); ceil_mode crops MXNet's extra last row/column."""


class MaxPool3d(_MaxPoolNd):
    """``torch.nn.MaxPool3d`` (NCDHW); ceil_mode as MaxPool2d."""
    _n = 3


class AvgPool3d(_AvgPoolDivisor):
    """``torch.nn.AvgPool3d`` (NCDHW); ceil_mode as AvgPool2d."""
    _n = 3


class AdaptiveAvgPool2d(Layer):
    """``torch.nn.AdaptiveAvgPool2d``: (1, 1) is a global average pool; other sizes use
    ``contrib.AdaptiveAvgPooling2D`` (same bins as torch)."""
    _dl_cannot = {"output_size": _NONE_SIZE}

    def __init__(self, output_size: IntOrTuple) -> None:
        super().__init__()
        self.output_size = _output_sizes(output_size, 2)

    def hybrid_forward(self, F, x):
        if is_ndarray(x):
            C.check_adaptive_pool_input(self.output_size, x.shape)
        if self.output_size == (1, 1):
            return F.mean(x, axis=(2, 3), keepdims=True)
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _AdaptivePoolNd(Layer):
    """Adaptive pooling over the last ``_n`` axes with torch's bins (bin i of L into o covers
    [floor(i L / o), ceil((i + 1) L / o)), :func:`dualdl.nn.checks.adaptive_bins`). 1-d input runs
    as (N, C, 1, L). Works on Symbols (no shape needed)."""
    _n = 1
    _dl_cannot = {"output_size": _NONE_SIZE}

    def __init__(self, output_size: IntOrTuple, return_indices: bool = False) -> None:
        super().__init__()
        n = self._n
        self._sizes = _output_sizes(output_size, n)
        self.output_size = self._sizes[0] if n == 1 else self._sizes
        self.return_indices = False

    def hybrid_forward(self, F, x):
        if is_ndarray(x):
            C.check_adaptive_pool_input(self.output_size, x.shape, type(self).__name__, self._n)
        if self._n == 1:
            return F.squeeze(self._pool2d(F, F.expand_dims(x, axis=2), (1,) + self._sizes), axis=2)
        return self._pool2d(F, x, self._sizes)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePoolNd):
    """``torch.nn.AdaptiveAvgPool1d`` (NCW) via ``contrib.AdaptiveAvgPooling2D`` on (N, C, 1, L)
    (MXNet has no 1-d adaptive pooling; same bins as torch)."""

    def __init__(self, output_size: int) -> None:
        super().__init__(output_size)
        del self.return_indices

    @staticmethod
    def _pool2d(F, x, size):
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=size)


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    _dl_cannot = {**_AdaptivePoolNd._dl_cannot, "return_indices": _RETURN_INDICES}

    @staticmethod
    def _pool2d(F, x, size):
        """MXNet has no adaptive max pooling: ``ROIPooling`` with one region per sample covering the
        whole map has torch's bins (measured equal for H 1..13, W 1..10, every output size up to 7,
        float32 and float64, forward and gradient). The region is built from the input (arange_like:
        no shape needed, so hybridized graphs work)."""
        last = lambda axis: F.max(F.contrib.arange_like(x, axis=axis))      # size - 1, x's dtype
        batch = F.contrib.arange_like(x, axis=0)
        zero = F.zeros_like(batch)
        rois = F.stack(batch, zero, zero, F.broadcast_add(zero, last(3)), F.broadcast_add(zero, last(2)), axis=1)
        return F.ROIPooling(x, F.BlockGrad(rois), pooled_size=size, spatial_scale=1.0)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """``torch.nn.AdaptiveMaxPool1d`` (NCW) with torch's bins via ROIPooling on (N, C, 1, L)."""


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """``torch.nn.AdaptiveMaxPool2d`` (NCHW) with torch's bins via ROIPooling."""
    _n = 2


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
