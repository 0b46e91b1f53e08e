"""Max/average pooling (1-3 d) and adaptive pooling on MXNet with PyTorch's output sizes (incl.
``ceil_mode``), adaptive bins (``None``: keep that axis), ``return_indices`` and ``dilation`` (max),
``divisor_override`` (average), batched or unbatched input (``_dl_unbatched_ndim``)."""
from __future__ import annotations

import numbers
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
from mxnet import autograd

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple, to_tuple
from dualdl.nn.registry import defined_in
from .activation import relu_into_max_pool
from .base import is_ndarray
from .conv import _ShapeChecked, pad_spatial

# values torch honours and these layers cannot (``_dl_cannot``; invalid values were refused before, as
# torch refuses them, by dualdl.nn.arguments)
_RETURN_INDICES = (lambda v, bound: bool(v), "MXNet's adaptive pooling (ROIPooling) returns no indices, and "
                   "the windows of its bins depend on the input's size, which a hybridized graph does not have")


def _output_sizes(output_size: Any, n: int) -> Tuple[Optional[int], ...]:
    """An int, None or n of them as n entries (checked by dualdl.nn.arguments); None keeps that axis."""
    if output_size is None or isinstance(output_size, numbers.Integral):
        return (output_size,) * n
    return tuple(None if o is None else int(o) for o in output_size)


def window_slices(F, x, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
                  before: Sequence[int], after: Sequence[int], value: float) -> List[Any]:
    """The pooling windows of an (N, C, *spatial) tensor as prod(kernel) tensors (N, C, *out), one
    per kernel offset in torch's scan order (last axis fastest): ``x`` padded by ``value``, sliced
    with the stride from each offset, cropped to the last offset's (the output's) size. No shapes
    needed (works on Symbols)."""
    n = len(kernel)
    xp = pad_spatial(F, x, tuple(zip(before, after)), "constant", value)
    offsets = [()]
    for k, d in zip(kernel, dilation):
        offsets = [o + (j * d,) for o in offsets for j in range(k)]
    def cut(off):
        return F.slice(xp, begin=(None, None) + off, end=(None,) * (n + 2), step=(1, 1) + tuple(stride))
    last = cut(offsets[-1])
    return [F.slice_like(cut(o), last, axes=tuple(range(2, 2 + n))) for o in offsets[:-1]] + [last]


def flat_index_map(F, x):
    """(1, 1, *spatial) float64: the flat index of each element in the spatial axes (torch's
    ``return_indices`` convention), built from ``x`` without its shape."""
    x0 = F.slice_axis(F.slice_axis(x, axis=0, begin=0, end=1), axis=1, begin=0, end=1)
    return F.reshape_like(F.contrib.arange_like(F.reshape(F.cast(x0, dtype="float64"), shape=(-1,))), x0)


def pick_windows(F, windows: Sequence[Any], index_windows: Sequence[Any]):
    """The first maximum of each window (torch's choice: a later equal value does not replace it) and
    its flat index (int64): ``argmax`` over the stacked windows, the value and index picked there,
    so the gradient reaches that element only, as torch's."""
    vals = F.stack(*windows, axis=-1)
    at = F.BlockGrad(F.argmax(vals, axis=-1, keepdims=True))
    idx = F.broadcast_like(F.stack(*index_windows, axis=-1), vals)
    out = F.pick(vals, at, axis=-1, keepdims=False)
    return out, F.cast(F.pick(idx, at, axis=-1, keepdims=False), dtype="int64")


class _PoolNd(_ShapeChecked):
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

    def _dl_check(self, shape: Tuple[int, ...]) -> None:
        C.check_pool_input(type(self).__name__, shape, self.kernel_size, self.stride, self.padding,
                           self.ceil_mode, getattr(self, "dilation", None))

    def hybrid_forward(self, F, x):
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

    def _ceil_pool(self, F, x, kind: Optional[str] = None):
        """torch's ceil_mode without MXNet's 'full' convention, which (measured) adds a last window
        starting in the right padding that torch drops, divides a clipped average window by the
        full kernel size in backward only (0.17-0.25 off), and fails in MKLDNN's backward when a
        window lies entirely in the padding. Instead: pad explicitly (right side r = min(p+s-1,
        k-1), which gives exactly torch's output size under the 'valid' convention); max pads with
        -inf; average = sum pooling / sum pooling of a mask of the elements torch counts."""
        k, s, p = self.kernel_size, self.stride, self.padding
        r = self._ceil_right()
        zero = (0,) * self._n

        def pad(t, before, after, value):
            return pad_spatial(F, t, tuple(zip(before, after)), "constant", value)

        def pool(t, kind):
            return F.Pooling(t, kernel=k, stride=s, pad=zero, pool_type=kind, pooling_convention="valid")

        if (kind or self._type) == "max":
            return self._max_op(F, pad(x, p, r, float("-inf")), kernel=k, stride=s, pad=zero)
        total = pool(pad(x, p, r, 0.0), "sum")
        mask = F.ones_like(F.slice_axis(F.slice_axis(x, axis=0, begin=0, end=1), axis=1, begin=0, end=1))
        if self.divisor_override is not None:
            return total / float(self.divisor_override)
        if self.count_include_pad:              # torch counts the padding, not what lies past it
            mask = pad(pad(mask, p, p, 1.0), zero, tuple(ri - pi for ri, pi in zip(r, p)), 0.0)
        else:
            mask = pad(mask, p, r, 0.0)
        return F.broadcast_div(total, F.BlockGrad(pool(mask, "sum")))

    def _ceil_right(self, kernel: Optional[Sequence[int]] = None) -> Tuple[int, ...]:
        """The right padding that gives torch's ceil_mode output size under the 'valid' convention
        (checked against :func:`~dualdl.nn.checks.pool_output_size` for every size, kernel,
        dilation, stride and padding up to 30/5/3/4/half the kernel)."""
        k = kernel or self.kernel_size
        return tuple(min(pi + si - 1, ki - 1) for ki, si, pi in zip(k, self.stride, self.padding))

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class _MaxPoolNd(_PoolNd):
    """Max pooling: MXNet's ``Pooling``; with ``return_indices`` or ``dilation`` (which Pooling
    lacks) the windows are sliced out of the -inf padded input (:func:`window_slices`) and the first
    maximum picked with its flat index (:func:`pick_windows`). That form propagates NaN (the first
    NaN of a window; torch's last) where ``Pooling`` skips it."""
    _type = "max"

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 dilation: IntOrTuple = 1, return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.dilation = to_tuple(dilation, self._n, "dilation")
        self.return_indices = bool(return_indices)

    @property
    def _dl_pooling_op(self) -> bool:
        """Whether MXNet's ``Pooling`` computes this pooling (no indices, no dilation)."""
        return not self.return_indices and self.dilation == (1,) * self._n

    def _check(self, x) -> None:
        """Called by a BatchNorm2d whose fast kernel computes the ReLU and this pooling after it
        (dualdl_mx/fast/sequential.py ``_absorbs_pool``), which pools with MXNet's windows only."""
        if not self._dl_pooling_op:
            raise NotImplementedError(
                f"{type(self).__name__}(dilation={self.dilation}, return_indices={self.return_indices}) after "
                f"BatchNorm2d and ReLU in a Sequential: the fast fused form (DUALDL_MX_FAST) pools without "
                f"dilation or indices; run with DUALDL_MX_FAST=0")
        self._dl_check(tuple(x.shape))

    def hybrid_forward(self, F, x):
        if self._dl_pooling_op:
            return super().hybrid_forward(F, x)
        k, d = self.kernel_size, self.dilation
        eff = tuple(di * (ki - 1) + 1 for ki, di in zip(k, d))
        right = self._ceil_right(eff) if self.ceil_mode else self.padding
        win = lambda t, value: window_slices(F, t, k, self.stride, d, self.padding, right, value)
        out, idx = pick_windows(F, win(x, float("-inf")), win(flat_index_map(F, x), -1.0))
        return (out, idx) if self.return_indices else out

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class _AvgPoolNd(_PoolNd):
    _type = "avg"
    divisor_override: Optional[int] = None

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
    """2-d/3-d average pooling: torch's ``divisor_override`` (MXNet's Pooling has none) is sum
    pooling (zero padding) divided by it."""

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: Optional[int] = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def hybrid_forward(self, F, x):
        if self.divisor_override is None or self.ceil_mode:
            return super().hybrid_forward(F, x)
        total = F.Pooling(x, kernel=self.kernel_size, stride=self.stride, pad=self.padding, pool_type="sum",
                          pooling_convention="valid")
        return total / float(self.divisor_override)


class AvgPool2d(_AvgPoolDivisor):
    """``torch.nn.AvgPool2d`` (NCHW); ceil_mode crops MXNet's extra last row/column."""


class MaxPool3d(_MaxPoolNd):
    """``torch.nn.MaxPool3d`` (NCDHW); ceil_mode as MaxPool2d."""
    _n = 3


class AvgPool3d(_AvgPoolDivisor):
    """``torch.nn.AvgPool3d`` (NCDHW); ceil_mode as AvgPool2d."""
    _n = 3


class _AdaptivePoolNd(_ShapeChecked):
    """Adaptive pooling over the last ``_n`` axes with torch's bins (bin i of L into o covers
    [floor(i L / o), ceil((i + 1) L / o)), :func:`dualdl.nn.checks.adaptive_bins`), by a 2-d
    operator (``_pool2d``: ``contrib.AdaptiveAvgPooling2D``, or ROIPooling for max). 1-d input runs
    as (N, C, 1, L); 3-d input pools (H, W) with the depth as channels, then D. An axis whose
    output size is None keeps its input size (identity bins): it is not pooled, and a lone pooled
    axis runs as a 1-d pool (:func:`_pool_axis`). Works on Symbols (no shape needed)."""
    _n = 1

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        n = self._n
        self._sizes = _output_sizes(output_size, n)
        self.output_size = self._sizes[0] if n == 1 else self._sizes
        self.return_indices = False

    def _dl_check(self, shape: Tuple[int, ...]) -> None:
        C.check_adaptive_pool_input(self.output_size, shape, type(self).__name__, self._n)

    def hybrid_forward(self, F, x):
        sizes, n = self._sizes, self._n
        pooled = [i for i, o in enumerate(sizes) if o is not None]
        if n == 2 and len(pooled) == 2:
            return self._pool2d(F, x, sizes)
        if n == 3 and 1 in pooled and 2 in pooled:
            y = F.reshape(x, shape=(-3, 0, 0, 0))                  # (N C, D, H, W): D as channels
            y = F.reshape_like(self._pool2d(F, y, sizes[1:]), x, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2)
            return y if sizes[0] is None else _pool_axis(F, y, 2, 5, sizes[0], self._pool2d)
        if n == 1 and pooled:
            return F.squeeze(self._pool2d(F, F.expand_dims(x, axis=2), (1, sizes[0])), axis=2)
        for i in pooled:
            x = _pool_axis(F, x, 2 + i, n + 2, sizes[i], self._pool2d)
        return x

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


def _pool_axis(F, x, axis: int, rank: int, size: int, pool2d):
    """Adaptive pooling of one axis of ``x`` (of rank ``rank``) to ``size`` by ``pool2d`` on
    (M, 1, 1, L): the axis moved last and every other one merged into M, restored after
    (reshape_like: no shapes needed)."""
    perm = tuple(i for i in range(rank) if i != axis) + (axis,)
    t = F.transpose(x, axes=perm)
    y = pool2d(F, F.reshape(t, shape=(-1, 1, 1, 0), reverse=True), (1, size))
    y = F.reshape_like(y, t, lhs_begin=0, lhs_end=3, rhs_begin=0, rhs_end=rank - 1)
    return F.transpose(y, axes=tuple(int(i) for i in np.argsort(perm)))


class _AdaptiveAvgPoolNd(_AdaptivePoolNd):
    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)
        del self.return_indices

    @staticmethod
    def _pool2d(F, x, size):
        if tuple(size) == (1, 1):                   # a global average
            return F.mean(x, axis=(2, 3), keepdims=True)
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """``torch.nn.AdaptiveAvgPool1d`` (NCW) via ``contrib.AdaptiveAvgPooling2D`` on (N, C, 1, L)
    (MXNet has no 1-d adaptive pooling; same bins as torch)."""


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """``torch.nn.AdaptiveAvgPool2d``: ``contrib.AdaptiveAvgPooling2D`` (same bins as torch), (1, 1)
    a global mean."""
    _n = 2


class _AdaptiveMaxPoolNd(_AdaptivePoolNd):
    _dl_cannot = {"return_indices": _RETURN_INDICES}

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
