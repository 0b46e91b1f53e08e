"""dualdl.ops on MXNet, functional layers: interpolate, conv2d, max_pool2d, avg_pool2d,
batch_norm, layer_norm, group_norm, scaled_dot_product_attention (torch.nn.functional's
signatures).

MXNet differences hidden: ``BilinearResize2D`` defaults to ``align_corners=True`` (torch: False;
0.08 to 0.55 max abs difference measured on [0, 1) images), here ``align_corners`` is always passed;
``UpSampling`` (nearest) takes integer scales only, other sizes gather rows/columns on NDArrays;
``Convolution`` needs the kernel size and filter count, read from the weight (so ``conv2d``
needs NDArrays); pooling runs dualdl's pooling layers' forward (their fixes of ``Pooling``); the norms are written out with biased batch variance for normalising
and unbiased for ``running_var`` as torch does (MXNet's BatchNorm op: see dualdl's BatchNorm).
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np
from mxnet import nd

from .ops_base import _F, _is_nd, symbol_error
from .ops_resize import resize_nd
from .pool import AvgPool2d, MaxPool2d
from .torch_style import symbol_dtype


def _pair(v, what: str):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{what} must be an int or a pair, got {v!r}")
        return tuple(int(u) for u in v)
    return (int(v), int(v))


# ---- interpolate -----------------------------------------------------------------------------
def _out_size(op, x, size, scale_factor):
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: exactly one of size and scale_factor must be given")
    if size is not None:
        return _pair(size, f"{op} size"), None
    sf = tuple(float(s) for s in scale_factor) if isinstance(scale_factor, (tuple, list)) \
        else (float(scale_factor),) * 2
    if not _is_nd(x):
        return None, sf
    return tuple(int(math.floor(n * s)) for n, s in zip(x.shape[2:], sf)), sf


def interpolate(input, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: Optional[bool] = None, recompute_scale_factor: Optional[bool] = None,
                antialias: bool = False):
    """4-D (N, C, H, W) input, modes 'nearest' and 'bilinear'."""
    F = _F(input)
    if antialias:
        raise ValueError("interpolate: antialias=True is not supported on MXNet")
    if mode not in ("nearest", "bilinear"):
        raise ValueError(f"interpolate: mode {mode!r} is not supported on MXNet ('nearest', 'bilinear')")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("interpolate: align_corners only has an effect with mode 'bilinear'")
    if _is_nd(input) and input.ndim != 4:
        raise ValueError(f"interpolate: MXNet supports 4-D (N, C, H, W) input only, got {input.shape}")
    out, sf = _out_size("interpolate", input, size, scale_factor)
    if recompute_scale_factor:
        sf = None
    if mode == "bilinear":
        ac = bool(align_corners)
        if _is_nd(input):               # torch's weights and coordinates (BilinearResize2D: ops_resize)
            return resize_nd(input, size, scale_factor, "bilinear", ac, recompute_scale_factor)
        if sf is not None and size is None and not all(float(s).is_integer() for s in sf):
            raise symbol_error("interpolate", "bilinear resizing by a non-integer scale_factor maps coordinates "
                               "by 1/scale_factor (torch), MXNet's by the sizes, which", "pass size=")
        if out is not None:
            return F.contrib.BilinearResize2D(input, height=out[0], width=out[1], align_corners=ac)
        return F.contrib.BilinearResize2D(input, scale_height=sf[0], scale_width=sf[1],
                                          align_corners=ac)
    if sf is not None and sf[0] == sf[1] and float(sf[0]).is_integer() and sf[0] >= 1:
        return F.UpSampling(input, scale=int(sf[0]), sample_type="nearest")
    if not _is_nd(input):
        raise symbol_error("interpolate", "nearest resizing to a size or non-integer scale needs "
                           "the input's height and width", "pass one integer scale_factor")
    return resize_nd(input, size, scale_factor, "nearest", None, recompute_scale_factor)


# ---- convolution and pooling -----------------------------------------------------------------
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    if not _is_nd(weight):
        raise symbol_error("conv2d", "the kernel size and filter count come from the weight's "
                           "shape", "use dualdl.nn.Conv2d in hybridized blocks")
    if weight.ndim != 4:
        raise ValueError(f"conv2d: weight must be 4-D (out, in/groups, kH, kW), got {weight.shape}")
    k = tuple(weight.shape[2:])
    d = _pair(dilation, "conv2d dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            total = [di * (ki - 1) for di, ki in zip(d, k)]
            if any(t % 2 for t in total) or _pair(stride, "stride") != (1, 1):
                raise ValueError("conv2d: padding='same' with an even kernel (asymmetric padding) or "
                                 "stride != 1 is not supported on MXNet")
            padding = tuple(t // 2 for t in total)
        else:
            raise ValueError(f"conv2d: padding must be 'valid', 'same' or ints, got {padding!r}")
    return nd.Convolution(input, weight, bias, kernel=k, num_filter=weight.shape[0],
                          stride=_pair(stride, "conv2d stride"), pad=_pair(padding, "conv2d padding"),
                          dilate=d, num_group=int(groups), no_bias=bias is None)


@functools.lru_cache(maxsize=256)
def _pool_layer(kind: str, kernel, stride, padding, ceil_mode: bool, count_include_pad: bool):
    """dualdl's pooling layer for these settings (stateless, cached): its forward carries the
    workarounds of MXNet's Pooling (``ceil_mode`` without the 'full' convention, whose average
    backward is 0.17-0.25 off; MKLDNN's max-pool backward under ``record(train_mode=False)``)."""
    if kind == "max":
        return MaxPool2d(kernel, stride, padding, ceil_mode=ceil_mode)
    return AvgPool2d(kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad)


def _pool(op, input, kernel_size, stride, padding, ceil_mode, kind, count_include_pad=True):
    k = _pair(kernel_size, f"{op} kernel_size")
    s = k if stride is None or stride == [] else _pair(stride, f"{op} stride")
    layer = _pool_layer(kind, k, s, _pair(padding, f"{op} padding"), bool(ceil_mode), bool(count_include_pad))
    return layer.hybrid_forward(_F(input), input)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    if _pair(dilation, "max_pool2d dilation") != (1, 1):
        raise ValueError("max_pool2d: dilation != 1 is not supported on MXNet")
    if return_indices:
        raise ValueError("max_pool2d: return_indices=True is not supported on MXNet")
    return _pool("max_pool2d", input, kernel_size, stride, padding, ceil_mode, "max")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Optional[int] = None):
    if divisor_override is not None:
        raise ValueError("avg_pool2d: divisor_override is not supported on MXNet")
    return _pool("avg_pool2d", input, kernel_size, stride, padding, ceil_mode, "avg", count_include_pad)


# ---- normalisation ---------------------------------------------------------------------------
def _affine(F, y, weight, bias, shape):
    """``y * weight + bias`` with weight/bias reshaped to ``shape`` for broadcasting."""
    if weight is not None:
        y = F.broadcast_mul(y, F.reshape(weight, shape=shape))
    if bias is not None:
        y = F.broadcast_add(y, F.reshape(bias, shape=shape))
    return y


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5):
    """Training mode normalises with the biased batch variance and updates ``running_mean`` /
    ``running_var`` (unbiased) in place, as torch; Symbols cannot be updated in place."""
    F = _F(input)
    x = F.reshape(input, shape=(0, 0, -1))                             # (N, C, L)
    if training:
        mean = F.mean(x, axis=(0, 2), keepdims=True)
        c = F.broadcast_sub(x, mean)
        var = F.mean(c * c, axis=(0, 2), keepdims=True)
        if running_mean is not None or running_var is not None:
            if not _is_nd(input):
                raise symbol_error("batch_norm", "training=True with running stats updates them in "
                                   "place and needs the batch size", "use dualdl.nn.BatchNorm2d")
            n = x.shape[0] * x.shape[2]
            if running_mean is not None:
                running_mean[:] = (1 - momentum) * running_mean + momentum * mean.reshape((-1,)).detach()
            if running_var is not None:
                unbiased = var.reshape((-1,)).detach() * (n / max(n - 1, 1))
                running_var[:] = (1 - momentum) * running_var + momentum * unbiased
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are required when training=False")
        mean, var = F.reshape(running_mean, shape=(1, -1, 1)), F.reshape(running_var, shape=(1, -1, 1))
        c = F.broadcast_sub(x, mean)
    y = F.broadcast_div(c, F.sqrt(var + float(eps)))
    return F.reshape_like(_affine(F, y, weight, bias, (1, -1, 1)), input)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    F = _F(input)
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if _is_nd(input) and tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise ValueError(f"layer_norm: normalized_shape {shape} does not match the last dims of "
                         f"input {input.shape}")
    x = F.reshape(input, shape=(-1, int(np.prod(shape))))
    c = F.broadcast_sub(x, F.mean(x, axis=1, keepdims=True))
    y = F.broadcast_div(c, F.sqrt(F.mean(c * c, axis=1, keepdims=True) + float(eps)))
    return _affine(F, F.reshape_like(y, input), weight, bias, shape)


def group_norm(input, num_groups: int, weight=None, bias=None, eps: float = 1e-5):
    F = _F(input)
    g = int(num_groups)
    if _is_nd(input) and input.shape[1] % g:
        raise ValueError(f"group_norm: {input.shape[1]} channels are not divisible by "
                         f"num_groups={g}")
    x = F.reshape(input, shape=(0, g, -1))
    c = F.broadcast_sub(x, F.mean(x, axis=2, keepdims=True))
    y = F.broadcast_div(c, F.sqrt(F.mean(c * c, axis=2, keepdims=True) + float(eps)))
    y = F.reshape_like(F.reshape(y, shape=(0, -1)), F.reshape(input, shape=(0, 0, -1)))
    return F.reshape_like(_affine(F, y, weight, bias, (1, -1, 1)), input)


# ---- attention -------------------------------------------------------------------------------
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, *, scale: Optional[float] = None,
                                 enable_gqa: bool = False):
    """``softmax(q k^T * scale + mask) v``; a bool mask marks the positions that take part, a float
    mask is added. A Symbol has no dtype: in hybridized code pass a float (additive) mask.
    Dropout (when ``dropout_p > 0``) draws from MXNet's RNG."""
    from .ops import dropout, masked_fill, matmul, softmax
    if enable_gqa:
        raise ValueError("scaled_dot_product_attention: enable_gqa=True is not supported on MXNet")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal, not both")
    F = _F(query)
    scores = matmul(query, F.swapaxes(key, dim1=-2, dim2=-1))
    if scale is None:                               # 1/sqrt(E), E counted (shape-free on Symbols)
        e = F.sum(F.ones_like(F.slice_axis(query, axis=-2, begin=0, end=1)), axis=-1, keepdims=True)
        scores = F.broadcast_mul(scores, F.rsqrt(e))
    else:
        scores = scores * float(scale)
    if is_causal:                                   # keep j <= i (torch: tril of ones(L, S))
        rows = F.reshape(F.contrib.arange_like(scores, axis=-2), shape=(-1, 1))
        cols = F.reshape(F.contrib.arange_like(scores, axis=-1), shape=(1, -1))
        scores = masked_fill(scores, F.broadcast_greater(cols, rows), float("-inf"))
    elif attn_mask is not None:
        ok = (np.bool_, np.dtype(query.dtype)) if _is_nd(query) else ()
        if _is_nd(attn_mask) and ok and np.dtype(attn_mask.dtype) not in ok:
            raise TypeError(f"scaled_dot_product_attention: attn_mask must be bool (True = takes part) "
                            f"or have the query's dtype {np.dtype(query.dtype)} (added), got "
                            f"{np.dtype(attn_mask.dtype)} (as torch)")
        # a Symbol's dtype, where it is an input of the write-once graph being traced (else None)
        mask_dtype = np.dtype(attn_mask.dtype) if _is_nd(attn_mask) else symbol_dtype(attn_mask)
        if mask_dtype == np.bool_:
            scores = masked_fill(scores, F.np.logical_not(attn_mask.as_np_ndarray()).as_nd_ndarray(),
                                 float("-inf"))
        else:                                       # float mask (or a Symbol of unknown dtype)
            scores = F.broadcast_add(scores, attn_mask)
    attn = softmax(scores, -1)
    if dropout_p > 0:
        attn = dropout(attn, dropout_p, True)
    return matmul(attn, value)
