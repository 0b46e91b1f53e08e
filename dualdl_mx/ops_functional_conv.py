"""``dualdl.nn.functional`` on MXNet, the spatial functions: convolutions (a weight tensor),
pools (dualdl's pooling layers run as functions), ``interpolate`` (3-D and 4-D input), ``pad``,
``pixel_shuffle`` and ``embedding`` (``padding_idx``, ``max_norm``).

MXNet differences hidden: ``Convolution`` takes the kernel size and filter count as attributes, read
here from the weight (so a weight Symbol, hybridized, is refused: use the ``nn.Conv*d`` layer) and
has no ``padding='same'`` (asymmetric for even kernels: padded explicitly); ``Pooling``'s
conventions differ from torch's (ceil_mode, count_include_pad, MKLDNN's max-pool backward): the
pooling layers' forward carries their fixes, so the functions are those layers, built once per
argument set; ``take`` has no ``padding_idx``: the padding row's gradient is blocked in the graph.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Tuple

import numpy as np
from mxnet import nd

from .conv import pad_spatial
from .embedding import embedding_renorm
from .ops_base import _F, _is_nd, symbol_error


def _frozen(v: Any) -> Any:
    return tuple(_frozen(u) for u in v) if isinstance(v, (list, tuple)) else v


@functools.lru_cache(maxsize=512)
def _layer(name: str, args: tuple, kwargs: tuple, training: Optional[bool]):
    from dualdl import nn
    layer = getattr(nn, name)(*args, backend="mxnet", **dict(kwargs))
    if training is not None:
        layer.train(training)
    return layer


def layer_call(name: str, x: Any, *args: Any, training: Optional[bool] = None, **kwargs: Any) -> Any:
    """``dualdl.nn.<name>(*args, **kwargs)(x)`` on MXNet, the parameterless layer built once per
    argument set (torch's argument checks and refusals with it) and run eager or in a graph."""
    key = (name, _frozen(args), tuple(sorted((k, _frozen(v)) for k, v in kwargs.items())), training)
    return _layer(*key)(x)


# ---- convolution -----------------------------------------------------------------------------
def _ntuple(v: Any, n: int, what: str) -> Tuple[int, ...]:
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {v!r}")
        return tuple(int(u) for u in v)
    return (int(v),) * n


def _batched(op: str, n: int, input, weight, mx_op: str, layer: str, layout: str):
    """The input as a batch (an unbatched one as a batch of one) and whether it was unbatched;
    NDArrays only: MXNet's op takes the kernel size and filter count from the weight's shape."""
    if not (_is_nd(input) and _is_nd(weight)):
        raise symbol_error(op, f"MXNet's {mx_op} takes the kernel size and filter count from the weight's shape",
                           f"use dualdl.nn.{layer} in hybridized blocks")
    unbatched = input.ndim == n + 1
    x = input.expand_dims(0) if unbatched else input
    if x.ndim != n + 2 or weight.ndim != n + 2:
        raise ValueError(f"{op}: expected input of {n + 1} or {n + 2} dims and a weight of {n + 2} dims "
                         f"({layout}, *kernel), got {tuple(input.shape)} and {tuple(weight.shape)}")
    return x, unbatched


def _conv(n: int, input, weight, bias, stride, padding, dilation, groups):
    op = f"conv{n}d"
    x, unbatched = _batched(op, n, input, weight, "Convolution", f"Conv{n}d", "out, in/groups")
    k, s, d = tuple(weight.shape[2:]), _ntuple(stride, n, f"{op} stride"), _ntuple(dilation, n, f"{op} dilation")
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of ('valid', 'same') ({op})")
        if padding == "same" and s != (1,) * n:
            raise ValueError(f"padding='same' is not supported for strided convolutions ({op})")
        total = [di * (ki - 1) if padding == "same" else 0 for di, ki in zip(d, k)]
        sides = [(t // 2, t - t // 2) for t in total]
        if any(a != b for a, b in sides):               # even kernel: torch pads the extra one after
            x = pad_spatial(nd, x, sides)
            pads: Tuple[int, ...] = (0,) * n
        else:
            pads = tuple(a for a, _ in sides)
    else:
        pads = _ntuple(padding, n, f"{op} padding")
    y = nd.Convolution(x, weight, bias, kernel=k, num_filter=weight.shape[0], stride=s, pad=pads, dilate=d,
                       num_group=int(groups), no_bias=bias is None)
    return y[0] if unbatched else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(n: int, input, weight, bias, stride, padding, output_padding, groups, dilation):
    """The ``nn.ConvTranspose{n}d`` layer's deconvolution (its fixes of MXNet's Deconvolution: adj >=
    stride, float64 with stride and dilation > 1) with the given weight: a layer built once per
    shape and argument set for its settings, its forward run on these tensors."""
    x, unbatched = _batched(f"conv_transpose{n}d", n, input, weight, "Deconvolution", f"ConvTranspose{n}d",
                            "in, out/groups")
    g = int(groups)
    layer = _layer(f"ConvTranspose{n}d", (int(weight.shape[0]), int(weight.shape[1]) * g, tuple(weight.shape[2:])),
                   tuple(sorted(dict(stride=_frozen(stride), padding=_frozen(padding), groups=g, bias=bias is not None,
                                     output_padding=_frozen(output_padding), dilation=_frozen(dilation)).items())),
                   None)
    y = layer._deconv(nd, x, weight, bias, layer.output_padding)
    return y[0] if unbatched else y


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


# ---- pooling: the layers -----------------------------------------------------------------------
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return layer_call("AvgPool1d", input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return layer_call("AvgPool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return layer_call("AvgPool3d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)


def _max_pool(n: int, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    if return_indices:
        raise ValueError(f"max_pool{n}d: return_indices=True is not supported on MXNet")
    return layer_call(f"MaxPool{n}d", input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return layer_call("LPPool1d", input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return layer_call("LPPool2d", input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return layer_call("LPPool3d", input, norm_type, kernel_size, stride, ceil_mode)


def adaptive_avg_pool1d(input, output_size):
    return layer_call("AdaptiveAvgPool1d", input, output_size)


def adaptive_avg_pool2d(input, output_size):
    return layer_call("AdaptiveAvgPool2d", input, output_size)


def adaptive_avg_pool3d(input, output_size):
    return layer_call("AdaptiveAvgPool3d", input, output_size)


def _adaptive_max(n: int, input, output_size, return_indices):
    if return_indices:
        raise ValueError(f"adaptive_max_pool{n}d: return_indices=True is not supported on MXNet")
    return layer_call(f"AdaptiveMaxPool{n}d", input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max(1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max(2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max(3, input, output_size, return_indices)


def pixel_shuffle(input, upscale_factor):
    return layer_call("PixelShuffle", input, upscale_factor)


def pad(input, pad, mode="constant", value=None):
    from .ops import pad as _pad
    return _pad(input, pad, mode, value)


# ---- interpolate -----------------------------------------------------------------------------
def _one(v: Any) -> Any:
    return v[0] if isinstance(v, (tuple, list)) else v


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """NDArrays: every mode but the cubic and antialiased ones on 3-D/4-D/5-D input, torch's
    coordinates and weights (:func:`dualdl_mx.ops_resize.resize_nd`). Symbols (no shape): 4-D 'nearest'
    by one integer scale_factor and 'bilinear' (``dualdl.ops.interpolate``), 3-D 'nearest'/'linear'
    run as (N, C, 1, L); a Symbol is 3-D for 'linear' or a one-element size/scale_factor, else 4-D."""
    from .ops import interpolate as _interp
    from .ops_resize import MODES, resize_nd
    if antialias:
        raise ValueError("interpolate: antialias=True is not supported on MXNet")
    if mode not in MODES:
        raise ValueError(f"interpolate: mode {mode!r} is not supported on MXNet ({', '.join(MODES)})")
    if _is_nd(input) and not (input.ndim == 4 and mode in ("nearest", "bilinear")):
        return resize_nd(input, size, scale_factor, mode, align_corners, recompute_scale_factor)
    F = _F(input)
    if _is_nd(input):           # 4-D: dualdl.ops (UpSampling for one integer scale, else resize_nd)
        return _interp(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    three = mode == "linear" or any(isinstance(v, (tuple, list)) and len(v) == 1 for v in (size, scale_factor))
    if not three:
        return _interp(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    if mode not in ("nearest", "linear"):
        raise symbol_error("interpolate", f"mode {mode!r} needs the input's shape", "run it eagerly")
    sf = _one(scale_factor)
    if mode == "nearest" and size is None and sf is not None and float(sf).is_integer() and sf >= 1:
        return F.repeat(input, repeats=int(sf), axis=-1)            # torch's floor(dst / s) = repeat
    x4 = F.expand_dims(input, axis=2)
    y = _interp(x4, None if size is None else (1, int(_one(size))), None if sf is None else (1.0, float(sf)),
                "bilinear" if mode == "linear" else "nearest", align_corners, recompute_scale_factor, antialias)
    return F.squeeze(y, axis=2)


# ---- embedding -------------------------------------------------------------------------------
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` at ``input``; ``padding_idx``'s row gets no gradient (blocked in the graph,
    negative counted from the end); ``max_norm`` renormalises the looked-up rows of an NDArray
    weight in place first, as torch."""
    from .ops import embedding as _take
    if scale_grad_by_freq or sparse:
        raise ValueError("embedding: scale_grad_by_freq and sparse are not supported on MXNet; use "
                         "dualdl.nn.Embedding or leave them False")
    F = _F(weight)
    if _is_nd(weight) and padding_idx is not None and not -weight.shape[0] <= int(padding_idx) < weight.shape[0]:
        raise ValueError("Padding_idx must be within num_embeddings")
    if max_norm is not None:
        if not (_is_nd(weight) and _is_nd(input)):
            raise symbol_error("embedding", "max_norm renormalises the weight in place", "use dualdl.nn.Embedding")
        rows = np.unique(input.asnumpy().astype(np.int64).ravel())

        class _One:              # embedding_renorm takes a Gluon Parameter (every context): one array
            def list_data(self):
                return [weight]
        embedding_renorm(_One(), rows, float(max_norm), float(norm_type))
    if padding_idx is not None:
        rows = F.contrib.arange_like(weight, axis=0)                    # row numbers, weight's dtype
        pi = int(padding_idx)
        target = pi if pi >= 0 else F.max(rows) + float(1 + pi)
        hit = (rows == float(pi)) if pi >= 0 else F.broadcast_equal(rows, target)
        hit = F.broadcast_like(F.expand_dims(hit, axis=1), weight)
        weight = F.where(hit, F.BlockGrad(weight), weight)
    return _take(input, weight)
