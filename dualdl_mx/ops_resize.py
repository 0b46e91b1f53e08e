"""Resizing NDArrays with torch's coordinates, every mode ``F.interpolate`` has on 1-3 spatial axes
except the cubic and antialiased ones: 'nearest', 'nearest-exact', 'linear'/'bilinear'/'trilinear'
(``align_corners`` either way), 'area'. One axis at a time: ``take`` of the source indices (and, for
the linear modes, the two taps times their weights), computed on the host in the output dtype as torch
computes them. MXNet's own operators differ: ``BilinearResize2D`` computes its weights in float32 (1.2e-6
off in float64) and maps a non-integer ``scale_factor`` by the sizes, not 1/scale_factor as torch (1.03 off
at x1.5); ``UpSampling`` takes integer scales of 4-D input only."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import numpy as np
from mxnet import nd

from dualdl.nn.resample_checks import check_align_corners
from .fast.host import host_array

LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}
MODES = ("nearest", "nearest-exact", "area", *LINEAR_MODES)


def _ratio(n_in: int, n_out: int, scale: Optional[float], t) -> np.generic:
    """torch's ``compute_scales_value``: 1/scale_factor when given, else in/out (in the op's type)."""
    return t(1.0 / scale) if scale else t(n_in) / t(n_out)


def nearest_index(n_in: int, n_out: int, scale: Optional[float], exact: bool = False) -> np.ndarray:
    """torch's 'nearest' ``floor(dst * ratio)`` ('nearest-exact': ``floor((dst + 0.5) * ratio)``), clipped,
    in float32 as torch's kernels."""
    r = _ratio(n_in, n_out, scale, np.float32)
    dst = np.arange(n_out, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0))
    return np.minimum(np.floor(dst * r).astype(np.int64), n_in - 1)


def linear_taps(n_in: int, n_out: int, scale: Optional[float], align_corners: bool, dtype):
    """torch's linear interpolation along one axis (``area_pixel_compute_source_index``) in the
    output dtype: the two source indices and weights of each output position."""
    t = np.dtype(dtype).type
    dst = np.arange(n_out).astype(t)
    if align_corners:
        src = dst * (t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0))
    else:
        src = np.maximum((dst + t(0.5)) * _ratio(n_in, n_out, scale, t) - t(0.5), t(0))
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    lam1 = (src - i0.astype(t)).astype(t)
    return i0, np.minimum(i0 + 1, n_in - 1), (t(1) - lam1).astype(t), lam1


def output_size(op: str, shape: Sequence[int], size, scale_factor) -> Tuple[Tuple[int, ...], Optional[tuple]]:
    """torch's output sizes (``floor(in * scale)``) and the scales, per spatial axis."""
    n = len(shape) - 2
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size and scale_factor must be given")

    def per_axis(v, what):
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
        if len(v) != n:
            raise ValueError(f"{op}: {what} has {len(v)} elements for input with {n} spatial dims {tuple(shape)}")
        return v
    if size is not None:
        return tuple(int(s) for s in per_axis(size, "size")), None
    sf = tuple(float(s) for s in per_axis(scale_factor, "scale_factor"))
    return tuple(int(math.floor(m * s)) for m, s in zip(shape[2:], sf)), sf


def resize_nd(x, size, scale_factor, mode: str, align_corners: Optional[bool], recompute_scale_factor=None):
    """``F.interpolate`` of an NDArray (N, C, *spatial) with torch's numbers (modes: :data:`MODES`)."""
    n = x.ndim - 2
    if mode in LINEAR_MODES and LINEAR_MODES[mode] != n:
        raise ValueError(f"interpolate: got {x.ndim}D input, but {mode} mode needs {LINEAR_MODES[mode] + 2}D input")
    check_align_corners(mode, align_corners)     # mode is one of MODES: no cubic one
    out, sf = output_size("interpolate", x.shape, size, scale_factor)
    if mode == "area":
        from .ops_functional_conv import layer_call
        return layer_call(f"AdaptiveAvgPool{n}d", x, out if n > 1 else out[0])
    if recompute_scale_factor:
        sf = None
    ctx = x.context
    for axis, (n_in, n_out) in enumerate(zip(x.shape[2:], out)):
        scale = sf[axis] if sf else None
        if mode in LINEAR_MODES:
            i0, i1, w0, w1 = linear_taps(n_in, n_out, scale, bool(align_corners), x.dtype)
            shape = [1] * x.ndim
            shape[axis + 2] = n_out
            a = nd.take(x, host_array(i0, ctx, "int64"), axis=axis + 2)
            b = nd.take(x, host_array(i1, ctx, "int64"), axis=axis + 2)
            x = nd.broadcast_mul(a, host_array(w0.reshape(shape), ctx, x.dtype)) + \
                nd.broadcast_mul(b, host_array(w1.reshape(shape), ctx, x.dtype))
        elif n_in != n_out or scale:
            idx = nearest_index(n_in, n_out, scale, exact=mode == "nearest-exact")
            x = nd.take(x, host_array(idx, ctx, "int64"), axis=axis + 2)
    return x
