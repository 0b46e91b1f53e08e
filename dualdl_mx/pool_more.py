"""More pools on MXNet: ``LPPool1d/2d/3d`` (torch's formula on average pooling),
``FractionalMaxPool2d/3d`` (MXNet has none: windows gathered by index) and the 3-d adaptive pools
(separable: (H, W), then D), batched or unbatched input (``_dl_unbatched_ndim``)."""
from __future__ import annotations

import math
import numbers
from typing import Any, List, Optional, Tuple

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple, to_tuple
from dualdl.nn.registry import defined_in
from .base import is_ndarray
from .conv import _ShapeChecked
from .pool import _AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd, _AvgPoolNd


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """``torch.nn.AdaptiveAvgPool3d`` (NCDHW): ``contrib.AdaptiveAvgPooling2D`` over (H, W) with D as
    channels, then over D (the mean of means: torch's bins, separable); None keeps that axis."""
    _n = 3


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """``torch.nn.AdaptiveMaxPool3d`` (NCDHW): ROIPooling over (H, W), then over D (the max of maxima:
    torch's bins); None keeps that axis."""
    _n = 3


class _LPPoolNd(_AvgPoolNd):
    """torch's power-average pooling, composed as torch composes it: ``x ** p``, average pooling
    (padding 0, ``ceil_mode``), ``sign(out) * relu(|out|)`` times the kernel volume, ``** (1 / p)``;
    ``p`` = inf / -inf: max pooling of |x| / -|x|. MXNet's ``Pooling(pool_type='lp')`` is another
    formula (no average, no sign/relu guard). The sign's gradient is blocked (torch's sign has
    none: at a NaN window it must not multiply NaN into the gradient)."""

    def __init__(self, norm_type: float, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
                 ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, 0, ceil_mode, True)
        self.norm_type = norm_type

    def hybrid_forward(self, F, x):
        p = self.norm_type
        if p in (math.inf, -math.inf):
            pool = (lambda t: self._ceil_pool(F, t, "max")) if self.ceil_mode else (
                lambda t: self._max_op(F, t, kernel=self.kernel_size, stride=self.stride, pad=self.padding))
            return pool(F.abs(x)) if p > 0 else -pool(-F.abs(x))
        out = super().hybrid_forward(F, x ** p)
        volume = float(math.prod(self.kernel_size))
        return ((F.BlockGrad(F.sign(out)) * F.relu(F.abs(out))) * volume) ** (1.0 / p)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """``torch.nn.LPPool1d`` (NCW or CW)."""
    _n = 1


class LPPool2d(_LPPoolNd):
    """``torch.nn.LPPool2d`` (NCHW or CHW)."""
    _n = 2


class LPPool3d(_LPPoolNd):
    """``torch.nn.LPPool3d`` (NCDHW or CDHW)."""
    _n = 3


# torch's order of the samples of one (sample, channel): 2-d (W, H), 3-d (T, H, W)
_SAMPLE_OF_AXIS = {2: (1, 0), 3: (0, 1, 2)}


class _FractionalMaxPoolNd(_ShapeChecked):
    """torch's fractional max pooling (MXNet has none). Per (sample, channel) and spatial axis, from
    its sample u: window i starts at int((i + u) alpha) - int(u alpha), alpha = (L - k) / (o - 1)
    (in the input's dtype, as torch's kernel), the last at L - k. The windows' elements are
    gathered by their flat index (``take``) and the first maximum picked (argmax), so the values,
    the gradient (to that element only, overlapping windows adding up) and ``return_indices`` are
    torch's. ``_random_samples`` given (a buffer, as torch's): those; else drawn from MXNet's
    generator at each call. The input sizes come from ``arange_like`` (no shape needed); only
    ``output_ratio`` needs the input's shape: taken from the NDArray the layer is called with (a
    hybridized graph is rebuilt when it changes), refused inside a parent's graph."""
    _n = 2

    def __init__(self, kernel_size: IntOrTuple, output_size: Optional[IntOrTuple] = None,
                 output_ratio: Any = None, return_indices: bool = False, _random_samples: Any = None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments
        n = self._n
        self.kernel_size = to_tuple(kernel_size, n, "kernel_size")
        self.output_size = None if output_size is None else to_tuple(output_size, n, "output_size")
        self.output_ratio = None if output_ratio is None else (
            (float(output_ratio),) * n if isinstance(output_ratio, numbers.Real) else tuple(output_ratio))
        self.return_indices = bool(return_indices)
        self._dl_sizes = self.output_size
        if _random_samples is not None:
            self.register_buffer("_random_samples", _random_samples)
        else:
            self._random_samples = None

    def _dl_check(self, shape: Tuple[int, ...]) -> None:
        name = type(self).__name__
        sizes = C.fractional_output_size(name, shape, self.kernel_size, self.output_size, self.output_ratio)
        if any(o <= 0 for o in sizes):
            raise ValueError(f"{name}: output size {sizes} for input {shape}: MXNet's operators cannot make "
                             f"an empty output")
        if self.output_ratio is not None and sizes != self._dl_sizes:
            self._dl_sizes = sizes          # the graph is built for these sizes
            self._clear_cached_op()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        x = args[0] if args else kwargs.get("input", kwargs.get("x"))
        samples = self._random_samples
        if is_ndarray(x) and samples is not None:
            data = samples.data(x.context)
            C.check_fractional_pool_input(type(self).__name__, tuple(x.shape), self._n, data.shape,
                                          x.dtype.__name__, data.dtype.__name__)
        return super().__call__(*args, **kwargs)

    def hybrid_forward(self, F, x, _random_samples=None):
        n, k, sizes = self._n, self.kernel_size, self._dl_sizes
        if sizes is None:
            raise NotImplementedError(f"{type(self).__name__}(output_ratio={self.output_ratio}): the output "
                                      f"size needs the input's shape, which a Symbol inside a hybridized "
                                      f"parent does not have; give output_size, or call the layer itself")
        if _random_samples is None:
            one = F.slice_axis(F.reshape(x, shape=(0, 0, -1)), axis=2, begin=0, end=1)    # (N, C, 1)
            u = F.concat(*[F.random.uniform_like(one) for _ in range(n)], dim=2)
        else:
            u = F.slice_like(_random_samples, x, axes=(0,))
        u = F.reshape(u, shape=(-3, 0))                                                # (N C, n)
        lengths = [F.max(F.contrib.arange_like(x, axis=2 + a)) + 1.0 for a in range(n)]   # (1,), x's dtype
        pos = [self._positions(F, x, a, F.slice_axis(u, axis=1, begin=j, end=j + 1), lengths[a])
               for a, j in enumerate(_SAMPLE_OF_AXIS[n])]                              # (N C, o, k) each
        sizes64 = [F.cast(length, dtype="float64") for length in lengths]
        idx = pos[0]
        for a in range(1, n):               # (M, o0..oa, k0..ka) -> row-major flat index over axes 0..a
            idx = F.broadcast_add(F.broadcast_mul(F.expand_dims(F.expand_dims(idx, axis=2), axis=4), sizes64[a]),
                                  F.expand_dims(F.expand_dims(pos[a], axis=1), axis=3))
            idx = F.reshape(idx, shape=(0, -3, -3))
        plane = sizes64[0]
        for length in sizes64[1:]:
            plane = plane * length
        rows = F.cast(F.contrib.arange_like(idx, axis=0), dtype="float64")
        flat = F.broadcast_add(idx, F.reshape(F.broadcast_mul(rows, plane), shape=(-1, 1, 1)))
        vals = F.take(F.reshape(x, shape=(-1,)), flat)                                 # (M, O, K)
        at = F.BlockGrad(F.argmax(vals, axis=2, keepdims=True))
        out = self._unflatten(F, F.pick(vals, at, axis=2), x, sizes)
        if not self.return_indices:
            return out
        return out, self._unflatten(F, F.cast(F.pick(idx, at, axis=2), dtype="int64"), x, sizes)

    def _positions(self, F, x, a: int, u, length):
        """(N C, o, k) float64: the input positions of axis ``a``'s windows (torch's starts from
        the samples ``u`` (N C, 1), computed in the input's dtype)."""
        o, k = self._dl_sizes[a], self.kernel_size[a]
        last = F.broadcast_add(F.zeros_like(u), length - k)                             # (M, 1): L - k
        if o > 1:
            i = F.reshape(F.slice_axis(F.contrib.arange_like(x, axis=2 + a), axis=0, begin=0, end=o - 1),
                          shape=(1, -1))
            alpha = (length - k) / float(o - 1)
            starts = F.broadcast_sub(F.floor(F.broadcast_mul(F.broadcast_add(i, u), alpha)),
                                     F.floor(F.broadcast_mul(u, alpha)))
            last = F.concat(starts, last, dim=1)                                         # (M, o)
        offsets = F.reshape(F.slice_axis(F.contrib.arange_like(x, axis=2 + a), axis=0, begin=0, end=k),
                            shape=(1, 1, -1))
        return F.cast(F.broadcast_add(F.expand_dims(last, axis=2), offsets), dtype="float64")

    @staticmethod
    def _unflatten(F, y, x, sizes):
        """(N C, O) -> (N, C, *sizes)."""
        y = F.reshape(y, shape=(0,) + tuple(sizes))
        return F.reshape_like(y, x, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=2)

    def extra_repr(self) -> str:
        what = f"output_size={self.output_size}" if self.output_size is not None else \
            f"output_ratio={self.output_ratio}"
        return f"kernel_size={self.kernel_size}, {what}"


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """``torch.nn.FractionalMaxPool2d`` (NCHW or CHW)."""
    _n = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """``torch.nn.FractionalMaxPool3d`` (NCDHW or CDHW)."""
    _n = 3


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
