"""Max/average/adaptive pooling on MXNet with PyTorch's output sizes (incl. ``ceil_mode``)."""
from __future__ import annotations

from typing import Optional

import numpy as np
from mxnet import autograd

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple, to_tuple
from .base import Layer, is_ndarray

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d"]


class _PoolNd(Layer):
    _n = 2
    _type = "max"

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
                 padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        n, name = self._n, type(self).__name__
        self.kernel_size = to_tuple(kernel_size, n, "kernel_size")
        self.stride = to_tuple(stride if stride is not None else kernel_size, n, "stride")
        self.padding = to_tuple(padding, n, "padding")
        C.check_pool_args(name, self.kernel_size, self.stride, self.padding)
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
        cannot see the recording mode (record with train_mode=True there)."""
        if (is_ndarray(x) and x.dtype == np.float32 and autograd.is_recording()
                and not autograd.is_training()):
            return F.Pooling(x.astype("float64"), pool_type="max", pooling_convention="valid",
                             **kw).astype("float32")
        return F.Pooling(x, pool_type="max", pooling_convention="valid", **kw)

    def _ceil_pool(self, F, x):
        """torch's ceil_mode without MXNet's 'full' convention, which (measured) adds a last window
        starting in the right padding that torch drops, divides a clipped average window by the
        full kernel size in backward only (0.17-0.25 off), and fails in MKLDNN's backward when a
        window lies entirely in the padding. Instead: pad explicitly (right side r = min(p+s-1,
        k-1), which gives exactly torch's output size under the 'valid' convention); max pads with
        -inf; average = sum pooling / sum pooling of a mask of the elements torch counts."""
        k, s, p = self.kernel_size, self.stride, self.padding
        r = tuple(min(pi + si - 1, ki - 1) for ki, si, pi in zip(k, s, p))
        one_d = self._n == 1
        if one_d:                                   # F.pad needs 4-D: pool (N, C, 1, L) with (1, k)
            x = F.expand_dims(x, axis=2)
            k, s, p, r = (1,) + k, (1,) + s, (0,) + p, (0,) + r

        def pad(t, before, after, value):
            if not any(before) and not any(after):
                return t
            return F.pad(t, mode="constant", constant_value=value,
                         pad_width=(0, 0, 0, 0, before[0], after[0], before[1], after[1]))

        def pool(t, kind):
            return F.Pooling(t, kernel=k, stride=s, pad=(0, 0), pool_type=kind, pooling_convention="valid")

        if self._type == "max":
            out = self._max_op(F, pad(x, p, r, float("-inf")), kernel=k, stride=s, pad=(0, 0))
        else:
            total = pool(pad(x, p, r, 0.0), "sum")
            mask = F.ones_like(F.slice_axis(F.slice_axis(x, axis=0, begin=0, end=1), axis=1, begin=0, end=1))
            if self.count_include_pad:              # torch counts the padding, not what lies past it
                mask = pad(pad(mask, p, p, 1.0), (0, 0), tuple(ri - pi for ri, pi in zip(r, p)), 0.0)
            else:
                mask = pad(mask, p, r, 0.0)
            out = F.broadcast_div(total, F.BlockGrad(pool(mask, "sum")))
        return F.squeeze(out, axis=2) if one_d else out

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class _MaxPoolNd(_PoolNd):
    _type = "max"

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 dilation: IntOrTuple = 1, return_indices: bool = False, ceil_mode: bool = False) -> None:
        if to_tuple(dilation, self._n, "dilation") != (1,) * self._n:
            raise NotImplementedError(f"{type(self).__name__}: dilation != 1 is not available on the "
                                      f"mxnet backend (MXNet's Pooling has no dilation)")
        if return_indices:
            raise NotImplementedError(f"{type(self).__name__}: return_indices=True is not available on "
                                      f"the mxnet backend")
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation, self.return_indices = 1, False


class _AvgPoolNd(_PoolNd):
    _type = "avg"

    def extra_repr(self) -> str:
        return super().extra_repr() + f", count_include_pad={self.count_include_pad}"


class MaxPool1d(_MaxPoolNd):
    """``torch.nn.MaxPool1d`` (NCW); ceil_mode crops MXNet's extra last window."""
    _dl_layer = "MaxPool1d"
    _n = 1


class MaxPool2d(_MaxPoolNd):
    """``torch.nn.MaxPool2d`` (NCHW); ceil_mode crops MXNet's extra last row/column."""
    _dl_layer = "MaxPool2d"


class AvgPool1d(_AvgPoolNd):
    """``torch.nn.AvgPool1d`` (NCW); ceil_mode crops MXNet's extra last window."""
    _dl_layer = "AvgPool1d"
    _n = 1

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """``torch.nn.AvgPool2d`` (NCHW); ceil_mode crops MXNet's extra last row/column."""
    _dl_layer = "AvgPool2d"

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Optional[int] = None) -> None:
        if divisor_override is not None:
            raise NotImplementedError("AvgPool2d: divisor_override is not available on the mxnet backend")
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = None


class AdaptiveAvgPool2d(Layer):
    """``torch.nn.AdaptiveAvgPool2d``: (1, 1) is a global average pool; other sizes use
    ``contrib.AdaptiveAvgPooling2D`` (same bins as torch)."""
    _dl_layer = "AdaptiveAvgPool2d"

    def __init__(self, output_size: IntOrTuple) -> None:
        super().__init__()
        if isinstance(output_size, (int, np.integer)):
            output_size = (int(output_size),) * 2
        output_size = tuple(output_size)
        if len(output_size) != 2 or any(o is None for o in output_size):
            raise NotImplementedError(f"AdaptiveAvgPool2d: output_size must be an int or two ints on the "
                                      f"mxnet backend (None entries are not supported), got {output_size!r}")
        self.output_size = tuple(int(o) for o in output_size)

    def hybrid_forward(self, F, x):
        if is_ndarray(x):
            C.check_adaptive_pool_input(self.output_size, x.shape)
        if self.output_size == (1, 1):
            return F.mean(x, axis=(2, 3), keepdims=True)
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
