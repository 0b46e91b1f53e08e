"""``dualdl.nn.functional`` on MXNet: ``torch.nn.functional``'s names, signatures and numbers on
NDArrays and, inside a hybridized block, on Symbols (``mx.nd`` or ``mx.sym`` from the argument).

One implementation per behaviour: a function that a dualdl layer already computes runs that layer
(built once per argument set and cached: parameterless, so one instance serves every call, eager or
inside a graph), one that ``dualdl.ops`` computes calls it, the rest are written here
(``prelu``, ``rrelu``, ``normalize``, ``cosine_similarity``, ``pairwise_distance``, ``bilinear``,
``alpha_dropout``, ``instance_norm``, ``rms_norm``) or in ``ops_functional_conv`` (``embedding``,
``interpolate``, convolutions, pools). MXNet has no in-place autograd: ``inplace=True`` returns a new
array (use the result, as ``x = F.relu(x, inplace=True)`` does).
"""
from __future__ import annotations

import functools
from typing import Any, Optional

import numpy as np

from . import ops as _ops
from .activation import prelu_formula
from .dropout import dropout as _dropout
from .ops_base import _F, _is_nd, symbol_error
from .ops_functional_conv import (  # noqa: F401  (this module is the contract's: re-exported)
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool2d,
    adaptive_max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d, conv1d, conv2d, conv3d, conv_transpose1d,
    conv_transpose2d, conv_transpose3d, embedding, interpolate,
    lp_pool1d, lp_pool2d, lp_pool3d, max_pool1d, max_pool2d, max_pool3d, pad, pixel_shuffle)
from .ops_functional_conv import layer_call as _run


# ---- activations -----------------------------------------------------------------------------
def relu(input, inplace=False):
    return _ops.relu(input)


def relu6(input, inplace=False):
    return _run("ReLU6", input)


def elu(input, alpha=1.0, inplace=False):
    return _ops.elu(input, alpha)


def selu(input, inplace=False):
    return _run("SELU", input)


def celu(input, alpha=1.0, inplace=False):
    return _run("CELU", input, alpha)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _ops.leaky_relu(input, negative_slope)


def prelu(input, weight):
    """``relu(x) - w relu(-x)``, ``w`` per channel (dim 1) or one slope, exact in float64."""
    if _is_nd(input) and _is_nd(weight):
        c = input.shape[1] if input.ndim >= 2 else 1
        if weight.size not in (1, c):
            raise ValueError(f"prelu: weight has {weight.size} slopes; expected 1 or the input's {c} channels "
                             f"(dim 1 of {tuple(input.shape)})")
    return prelu_formula(_F(input), input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Eval: leaky_relu with slope ``(lower + upper) / 2``; training: a slope drawn uniformly in
    ``[lower, upper]`` per negative element, from MXNet's RNG (other numbers than torch's)."""
    if not training:
        return _ops.leaky_relu(input, (float(lower) + float(upper)) / 2)
    F = _F(input)
    slope = F.random.uniform_like(input, low=float(lower), high=float(upper))
    return F.where(input >= 0, input, input * slope)


def glu(input, dim=-1):
    return _run("GLU", input, dim)


def gelu(input, *, approximate="none"):
    return _ops.gelu(input, approximate)


def logsigmoid(input):
    return _run("LogSigmoid", input)


def hardshrink(input, lambd=0.5):
    return _run("Hardshrink", input, lambd)


def tanhshrink(input):
    return _run("Tanhshrink", input)


def softsign(input):
    return _run("Softsign", input)


def softplus(input, beta=1.0, threshold=20.0):
    return _run("Softplus", input, beta, threshold)


def _softmax_dim(op: str, input, dim, dtype):
    """torch's legacy dim for ``dim=None`` (0 for 0-, 1- and 3-d input, else 1) and the cast to ``dtype``."""
    if dim is None:
        if not _is_nd(input):
            raise symbol_error(op, "dim=None picks torch's legacy dim from the input's rank", "pass dim")
        dim = 0 if input.ndim in (0, 1, 3) else 1
    if dtype is not None:
        input = _F(input).cast(input, dtype=np.dtype(dtype).name)
    return input, int(dim)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    x, d = _softmax_dim("softmax", input, dim, dtype)
    return _ops.softmax(x, d)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    x, d = _softmax_dim("softmin", input, dim, dtype)
    return _ops.softmax(-x, d)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    x, d = _softmax_dim("log_softmax", input, dim, dtype)
    return _ops.log_softmax(x, d)


def softshrink(input, lambd=0.5):
    return _run("Softshrink", input, lambd)


def tanh(input):
    return _ops.tanh(input)


def sigmoid(input):
    return _ops.sigmoid(input)


def hardsigmoid(input, inplace=False):
    return _run("Hardsigmoid", input)


def silu(input, inplace=False):
    return _ops.silu(input)


def mish(input, inplace=False):
    return _run("Mish", input)


def hardswish(input, inplace=False):
    return _run("Hardswish", input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _run("Hardtanh", input, min_val, max_val)


def threshold(input, threshold, value, inplace=False):
    return _run("Threshold", input, threshold, value)


# ---- distances -------------------------------------------------------------------------------
def _clamped(F, n, eps: float):
    """``max(n, eps)`` in value with the gradient of ``n`` (torch clamps the norm under no_grad)."""
    return n + F.BlockGrad(F.maximum(n, float(eps)) - n)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``x / max(||x||_p, eps)`` along ``dim`` (torch's clamp_min: no gradient through a clamped norm)."""
    if out is not None:
        raise ValueError("normalize: out= is not supported on MXNet; use the returned array")
    F = _F(input)
    n = _ops.norm(input, p, dim, True)
    return F.broadcast_div(input, F.maximum(n, float(eps)))


def _broadcast_pair(x1, x2):
    if _is_nd(x1) and _is_nd(x2) and x1.shape == x2.shape:
        return x1, x2
    F = _F(x1)
    return F.broadcast_add(x1, F.zeros_like(x2)), F.broadcast_add(x2, F.zeros_like(x1))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """torch's formula: ``sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps))`` along ``dim`` (inputs
    broadcast; the clamp passes the norm's gradient through, as torch's no_grad clamp)."""
    F = _F(x1)
    a, b = _broadcast_pair(x1, x2)
    d = int(dim)
    na = _clamped(F, F.sqrt(F.sum(a * a, axis=d, keepdims=True)), eps)
    nb = _clamped(F, F.sqrt(F.sum(b * b, axis=d, keepdims=True)), eps)
    return F.sum(F.broadcast_div(a, na) * F.broadcast_div(b, nb), axis=d)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dim (inputs broadcast), as torch."""
    F = _F(x1)
    return _ops.norm(F.broadcast_sub(x1, x2) + float(eps), p, -1, keepdim)


def pixel_unshuffle(input, downscale_factor):
    """(N, C, H r, W r) -> (N, C r^2, H, W), the inverse of pixel_shuffle: reshape codes and a
    transpose (no shape needed, so Symbols too)."""
    r = int(downscale_factor)
    F = _F(input)
    if _is_nd(input) and (input.ndim < 3 or input.shape[-1] % r or input.shape[-2] % r):
        raise ValueError(f"pixel_unshuffle expects height and width of {tuple(input.shape)} to be divisible by "
                         f"downscale_factor {r}")
    if _is_nd(input) and input.ndim == 3:
        return pixel_unshuffle(input.expand_dims(0), r)[0]
    x = F.reshape(input, shape=(0, 0, -4, -1, r, -2))                    # (N, C, H, r, W r)
    x = F.reshape(x, shape=(0, 0, 0, 0, -4, -1, r))                      # (N, C, H, r, W, r)
    x = F.transpose(x, axes=(0, 1, 3, 5, 2, 4))                          # (N, C, r, r, H, W)
    return F.reshape(F.reshape(x, shape=(0, -3, -2)), shape=(0, -3, -2))


def channel_shuffle(input, groups):
    """(N, g k, *) -> the channels of each group interleaved: (N, g, k, *) with g and k swapped."""
    g = int(groups)
    F = _F(input)
    if _is_nd(input) and input.shape[1] % g:
        raise ValueError(f"Number of channels must be divisible by groups. Got {input.shape[1]} channels and "
                         f"{g} groups.")
    x = F.reshape(input, shape=(0, -4, g, -1, -2))
    return F.reshape(F.swapaxes(x, dim1=1, dim2=2), shape=(0, -3, -2))


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """``softmax((logits + g) / tau)`` with Gumbel noise ``g = -log(Exp(1))`` from MXNet's RNG; ``hard``:
    the one-hot of the maximum, with the soft sample's gradient (straight through), as torch."""
    F = _F(logits)
    g = -F.log(F.random.exponential_like(F.BlockGrad(logits)))
    y = _ops.softmax((logits + g) / float(tau), int(dim))
    if not hard:
        return y
    one = F.broadcast_equal(y, F.max(y, axis=int(dim), keepdims=True))
    return one - F.BlockGrad(y) + y


def one_hot(tensor, num_classes=-1):
    return _ops.one_hot(tensor, num_classes)


# ---- linear and dropout ----------------------------------------------------------------------
def linear(input, weight, bias=None):
    return _ops.linear(input, weight, bias)


def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1^T W_o x2 + b_o``: ``dot`` of x1 (M, I) with W as (I, O, J), times x2, summed over J."""
    F = _F(input1)
    a = F.reshape(input1, shape=(-1, 0), reverse=True)                  # (M, I)
    b = F.reshape(input2, shape=(-1, 0), reverse=True)                  # (M, J)
    t = F.dot(a, F.transpose(weight, axes=(1, 0, 2)))                   # (M, O, J)
    y = F.sum(F.broadcast_mul(t, F.expand_dims(b, axis=1)), axis=2)     # (M, O)
    if bias is not None:
        y = F.broadcast_add(y, F.reshape(bias, shape=(1, -1)))
    return F.reshape_like(y, input1, lhs_begin=0, lhs_end=1, rhs_begin=0, rhs_end=-1)


def _check_p(op: str, p: float) -> float:
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p} ({op})")
    return float(p)


def dropout(input, p=0.5, training=True, inplace=False):
    return _dropout(_F(input), input, _check_p("dropout", p), bool(training))


def _channel_dropout(name: str, input, p, training):
    """The channel dropout layer (its unbatched inputs and ranks), in train or eval mode."""
    p = _check_p(name.lower(), p)
    if not training or p == 0.0:
        return _dropout(_F(input), input, p, False)
    return _run(name, input, p, training=True)


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout("Dropout1d", input, p, training)


def dropout2d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout("Dropout2d", input, p, training)


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _channel_dropout("Dropout3d", input, p, training)


_SELU_ALPHA_SCALE = 1.7580993408473766      # torch's alpha' = SELU scale * alpha


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """torch's alpha dropout: dropped elements set to ``-alpha'``, then ``a x + b`` keeps mean and
    variance (``a = ((1 - p)(1 + p alpha'^2))^-1/2``); masks from MXNet's RNG."""
    p = _check_p("alpha_dropout", p)
    F = _F(input)
    if not training or p == 0.0:
        return _dropout(F, input, p, False)
    if p == 1.0:
        return input * 0.0
    keep = F.random.uniform_like(input) >= p
    a = 1.0 / np.sqrt((_SELU_ALPHA_SCALE ** 2 * p + 1) * (1 - p))
    return input * keep * a + (keep - 1.0) * (_SELU_ALPHA_SCALE * a) + _SELU_ALPHA_SCALE * a * p


# ---- normalisation ---------------------------------------------------------------------------
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-05):
    return _ops.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-05):
    """Each (sample, channel) normalised over its own positions (biased variance); with running
    statistics, ``use_input_stats`` updates them as torch (instance means and unbiased variances
    averaged over the batch; NDArrays only), else normalises by them."""
    F = _F(input)
    x = F.reshape(input, shape=(0, 0, -1))                              # (N, C, L)
    if use_input_stats:
        mean = F.mean(x, axis=2, keepdims=True)
        c = F.broadcast_sub(x, mean)
        var = F.mean(c * c, axis=2, keepdims=True)
        if running_mean is not None or running_var is not None:
            if not _is_nd(input):
                raise symbol_error("instance_norm", "updating running statistics in place needs NDArrays",
                                   "use dualdl.nn.InstanceNorm with track_running_stats=True")
            n = x.shape[2]
            m = float(momentum)
            if running_mean is not None:
                running_mean[:] = (1 - m) * running_mean + m * mean.mean(axis=0).reshape((-1,)).detach()
            if running_var is not None:
                unbiased = var.mean(axis=0).reshape((-1,)).detach() * (n / max(n - 1, 1))
                running_var[:] = (1 - m) * running_var + m * unbiased
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: running_mean and running_var are required when use_input_stats=False")
        c = F.broadcast_sub(x, F.reshape(running_mean, shape=(1, -1, 1)))
        var = F.reshape(running_var, shape=(1, -1, 1))
    y = F.broadcast_div(c, F.sqrt(var + float(eps)))
    if weight is not None:
        y = F.broadcast_mul(y, F.reshape(weight, shape=(1, -1, 1)))
    if bias is not None:
        y = F.broadcast_add(y, F.reshape(bias, shape=(1, -1, 1)))
    return F.reshape_like(y, input)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    return _ops.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    return _ops.group_norm(input, num_groups, weight, bias, eps)


def _machine_eps(F, x):
    """The machine epsilon of ``x``'s dtype as a tensor of x's dtype, found in the graph (a Symbol has
    no dtype): ``(1 + 2^-52) - 1`` is 2^-52 in float64 and 0 in float32 (then 2^-23)."""
    one = F.ones_like(F.reshape(F.slice_axis(F.reshape(x, shape=(-1,)), axis=0, begin=0, end=1), shape=(1,)))
    tiny = (one + 2.0 ** -52) - one
    return F.where(tiny > 0, tiny, one * 2.0 ** -23)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last ``len(normalized_shape)`` dims;
    ``eps=None`` is the machine epsilon of the input's dtype (as torch), eager and in a graph."""
    F = _F(input)
    shape = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    if _is_nd(input) and tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise ValueError(f"rms_norm: normalized_shape {shape} does not match the last dims of input "
                         f"{tuple(input.shape)}")
    axes = tuple(range(-len(shape), 0))
    ms = F.mean(F.square(input), axis=axes, keepdims=True)
    if eps is None:
        ms = F.broadcast_add(ms, _machine_eps(F, input))
    else:
        ms = ms + float(eps)
    y = F.broadcast_mul(input, F.rsqrt(ms))
    return F.broadcast_mul(y, weight) if weight is not None else y


def local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0):
    return _run("LocalResponseNorm", input, size, alpha, beta, k)


# ---- attention -------------------------------------------------------------------------------
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *,
                                 scale=None, enable_gqa=False):
    return _ops.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                             scale=scale, enable_gqa=enable_gqa)
