"""MXNet/Gluon implementations of dualdl's core layers and containers (PyTorch semantics).

Every class is a ``HybridBlock`` (a :class:`dualdl_mx.nn.Layer`) with torch's constructor, parameter
names/shapes/registration order and default initialisation; shape checks run on NDArray inputs
only (a Symbol has no shape). What each one hides is listed in ``dualdl.nn.layers.LAYERS``.
"""
from __future__ import annotations

import math
import os
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
import mxnet as mx
from mxnet import autograd

from dualdl.nn.checks import check_not_empty

from . import compiled
from .nn import Layer, is_ndarray, shape_error

# opt-in: MXNet's fused BatchNorm operator in NDArray mode (faster, less precise; see _BatchNorm)
_FUSED_BATCHNORM = os.environ.get("DUALDL_MX_FUSED_BATCHNORM", "0") == "1"

__all__ = [
    "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Dropout", "Embedding", "Flatten", "Identity",
    "ReLU", "Sigmoid", "Tanh", "GELU", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
]
__all__ += ["Sequential", "ModuleList", "ModuleDict"]    # from .containers

IntOrTuple = Union[int, Sequence[int]]


def _tuple(v: IntOrTuple, n: int, what: str) -> Tuple[int, ...]:
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    t = tuple(int(i) for i in v)
    if len(t) != n:
        raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {v!r}")
    return t


# ---------------------------------------------------------------------------------------------
# Convolutions
# ---------------------------------------------------------------------------------------------
class _ConvNd(Layer):
    _n = 2
    _layout = "(N, C_in, H, W)"

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: Union[str, IntOrTuple] = 0, dilation: IntOrTuple = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros") -> None:
        super().__init__()
        n, name = self._n, type(self).__name__
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) "
                             f"must be divisible by groups ({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate"):
            raise NotImplementedError(f"{name}: padding_mode={padding_mode!r} is not available on the "
                                      f"mxnet backend ('zeros', 'reflect' and 'replicate' are)")
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride, n, "stride")
        self.dilation = _tuple(dilation, n, "dilation")
        self.padding_mode = padding_mode
        self._crop_first = (False,) * n
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
            totals = [d * (k - 1) if padding == "same" else 0
                      for d, k in zip(self.dilation, self.kernel_size)]
            self._sides = tuple((t // 2, t - t // 2) for t in totals)    # torch: total//2 before
            # MXNet pads symmetrically: pad the larger side on both ends, drop the first output.
            self._pad = tuple(t - t // 2 for t in totals)
            self._crop_first = tuple(t % 2 == 1 for t in totals)
        else:
            self.padding = _tuple(padding, n, "padding")
            self._pad = self.padding
            self._sides = tuple((q, q) for q in self.padding)
        if padding_mode != "zeros":        # pad explicitly (F.pad reflect/edge), convolve unpadded
            self._pad, self._crop_first = (0,) * n, (False,) * n
        fan_in = self.in_channels // self.groups * int(np.prod(self.kernel_size))
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = self._dl_new_param(
            "weight", (self.out_channels, self.in_channels // self.groups) + self.kernel_size,
            init=self._uniform(bound))
        self.bias = self._dl_new_param("bias", (self.out_channels,), init=self._uniform(bound)) if bias else None

    def _check(self, x) -> None:
        n, shape = self._n, x.shape                  # (each .shape is a ctypes call on MXNet)
        if len(shape) != n + 2 or shape[1] != self.in_channels:
            raise shape_error(f"{type(self).__name__}(in_channels={self.in_channels})",
                              self._layout.replace("C_in", str(self.in_channels)), x)
        check_not_empty(f"{type(self).__name__}(in_channels={self.in_channels})", shape)
        for i in range(n):
            eff = self.dilation[i] * (self.kernel_size[i] - 1) + 1
            if shape[2 + i] + sum(self._sides[i]) < eff:
                raise ValueError(f"{type(self).__name__}: input spatial size {tuple(x.shape[2:])} (padded "
                                 f"by {self._sides}) is smaller than the kernel {self.kernel_size} "
                                 f"(dilation {self.dilation})")
            if self.padding_mode == "reflect" and max(self._sides[i]) >= shape[2 + i]:
                raise ValueError(f"{type(self).__name__}: padding_mode='reflect' needs padding < input "
                                 f"size, got padding {self._sides} for input {tuple(x.shape[2:])}")

    def _explicit_pad(self, F, x):
        """torch's 'reflect'/'replicate' padding with F.pad (4-D only: 1-D input goes via (N, C, 1, L))."""
        sides = ((0, 0),) * (2 - self._n) + self._sides
        x4 = F.expand_dims(x, axis=2) if self._n == 1 else x
        x4 = F.pad(x4, mode="reflect" if self.padding_mode == "reflect" else "edge",
                   pad_width=(0, 0, 0, 0) + sides[0] + sides[1])
        return F.squeeze(x4, axis=2) if self._n == 1 else x4

    def hybrid_forward(self, F, x, weight, bias=None):
        if is_ndarray(x):
            self._check(x)
        if self.padding_mode != "zeros" and any(sum(sd) for sd in self._sides):
            x = self._explicit_pad(F, x)
        out = F.Convolution(x, weight, bias, kernel=self.kernel_size, stride=self.stride,
                            dilate=self.dilation, pad=self._pad, num_filter=self.out_channels,
                            num_group=self.groups, no_bias=bias is None)
        for i, crop in enumerate(self._crop_first):
            if crop:
                out = F.slice_axis(out, axis=2 + i, begin=1, end=None)
        return out

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv1d(_ConvNd):
    """``torch.nn.Conv1d`` on NCW input via ``F.Convolution``; weight (out, in/groups, k)."""
    _dl_layer = "Conv1d"
    _n = 1
    _layout = "(N, C_in, L)"


class Conv2d(_ConvNd):
    """``torch.nn.Conv2d`` on NCHW input via ``F.Convolution``; weight (out, in/groups, kh, kw)."""
    _dl_layer = "Conv2d"
    _n = 2


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------
class _PoolNd(Layer):
    _n = 2
    _type = "max"
    _layout = "(N, C, H, W)"

    def __init__(self, kernel_size: IntOrTuple, stride: Optional[IntOrTuple] = None,
                 padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        n, name = self._n, type(self).__name__
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride if stride is not None else kernel_size, n, "stride")
        self.padding = _tuple(padding, n, "padding")
        if any(k <= 0 for k in self.kernel_size) or any(s <= 0 for s in self.stride):
            raise ValueError(f"{name}: kernel_size and stride must be positive, got "
                             f"{self.kernel_size} and {self.stride}")
        if any(p < 0 or p > k // 2 for p, k in zip(self.padding, self.kernel_size)):
            raise ValueError(f"{name}: padding {self.padding} should be at most half of the kernel "
                             f"size {self.kernel_size}")
        self.ceil_mode, self.count_include_pad = bool(ceil_mode), bool(count_include_pad)

    def _torch_size(self, size: int, i: int) -> int:
        k, s, p = self.kernel_size[i], self.stride[i], self.padding[i]
        if self.ceil_mode:
            out = -(-(size + 2 * p - k) // s) + 1
            if (out - 1) * s >= size + p:
                out -= 1
            return out
        return (size + 2 * p - k) // s + 1

    def _check(self, x) -> None:
        name, shape = type(self).__name__, x.shape
        if len(shape) != self._n + 2:
            raise shape_error(f"{name}(kernel_size={self.kernel_size})", self._layout, x)
        sizes = [self._torch_size(shape[2 + i], i) for i in range(self._n)]
        if any(o <= 0 for o in sizes):
            raise ValueError(f"{name}(kernel_size={self.kernel_size}): input spatial size "
                             f"{tuple(x.shape[2:])} is too small (output would be {tuple(sizes)})")

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
        if _tuple(dilation, self._n, "dilation") != (1,) * self._n:
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
    _layout = "(N, C, L)"


class MaxPool2d(_MaxPoolNd):
    """``torch.nn.MaxPool2d`` (NCHW); ceil_mode crops MXNet's extra last row/column."""
    _dl_layer = "MaxPool2d"


class AvgPool1d(_AvgPoolNd):
    """``torch.nn.AvgPool1d`` (NCW); ceil_mode crops MXNet's extra last window."""
    _dl_layer = "AvgPool1d"
    _n = 1
    _layout = "(N, C, L)"

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
        if is_ndarray(x) and x.ndim != 4:
            raise shape_error(f"AdaptiveAvgPool2d(output_size={self.output_size})", "(N, C, H, W)", x)
        if self.output_size == (1, 1):
            return F.mean(x, axis=(2, 3), keepdims=True)
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


# ---------------------------------------------------------------------------------------------
# Normalisation, dropout, embedding
# ---------------------------------------------------------------------------------------------
class _BatchNorm(Layer):
    """torch's BatchNorm on MXNet.

    Non-hybridized (NDArray) it is exactly torch's: batch statistics in train mode, running
    statistics updated *in forward* with the unbiased batch variance and torch's momentum (weight
    of the new value); eval mode uses the running statistics. ``train()``/``eval()`` decide, not
    ``autograd.record()``.

    Hybridized (Symbol), outputs and gradients are the same (batch statistics in train mode,
    inside ``autograd.record()`` or not), but a graph cannot assign to the running statistics, so
    MXNet's fused ``BatchNorm`` op (``momentum=1-m``, its output multiplied by 0) updates them,
    fed 2 rows (mean -/+ std) whose biased variance is the unbiased one of the batch: the values
    are torch's, but they are updated only inside ``autograd.record()``, when backward runs
    (Gluon's rule), not by a forward alone. Eval mode uses the fused op on the running statistics.
    """
    _layouts = ("(N, C, H, W)",)
    _ndims: Tuple[int, ...] = (4,)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *, bias: bool = True) -> None:
        super().__init__()
        name = type(self).__name__
        if momentum is None:
            raise NotImplementedError(f"{name}: momentum=None (cumulative average) is not supported by "
                                      f"dualdl; pass a float")
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        c = (self.num_features,)
        self.weight = self._dl_new_param("weight", c, init=mx.init.One()) if affine else None
        self.bias = self._dl_new_param("bias", c, init=mx.init.Zero()) if affine and bias else None
        if track_running_stats:
            self.running_mean = self._dl_new_param("running_mean", c, init=mx.init.Zero(), buffer=True)
            self.running_var = self._dl_new_param("running_var", c, init=mx.init.One(), buffer=True)
        else:
            self.running_mean = self.running_var = None

    def _check(self, x) -> None:
        if x.ndim not in self._ndims or x.shape[1] != self.num_features:
            layouts = " or ".join(l.replace("C", str(self.num_features), 1) for l in self._layouts)
            raise shape_error(f"{type(self).__name__}({self.num_features})", layouts, x)

    def _fused(self, F, x, weight, bias, running_mean, running_var, use_global_stats: bool):
        c = (self.num_features,)
        return F.BatchNorm(x, weight if weight is not None else F.ones(shape=c),
                           bias if bias is not None else F.zeros(shape=c), running_mean, running_var,
                           eps=self.eps, momentum=1.0 - self.momentum, fix_gamma=False,
                           use_global_stats=use_global_stats, axis=1)

    def _imperative(self, x, weight, bias, running_mean, running_var):
        """NDArray mode, torch's exact semantics: batch statistics in train mode (``train()``/
        ``eval()`` decide, not ``record()``), running statistics updated in forward with the
        unbiased variance. Batch statistics run MXNet's fused ``BatchNorm`` operator in float64
        (:func:`_batchnorm_op_formula`): in float32 the operator (MKLDNN) is 10x less precise than
        torch (5e-7..1e-5 measured, torch 1e-7; its float32 sums), which makes long runs drift
        apart between backends; in float64 it is exact to float32 rounding (<= 6e-8 of the largest
        value, torch's <= 1.1e-7 on well-conditioned inputs and 1e-4 at mean/std = 1e4), and at
        1.0 ms against 0.82 ms float32 on (16, 16, 8, 32) costs 1.2x, where the GEMM form
        (:func:`_gemm_batchnorm`, kept for running statistics) cost 2.9x. The price is memory:
        backward keeps the float64 copy of the input (2x a float32 input's bytes; the GEMM form
        kept several float32 intermediates). An ``autograd.Function``
        with BN's closed-form backward hung MXNet's threaded engine (apache/mxnet#15844) and is
        not used. ``DUALDL_MX_FUSED_BATCHNORM=1`` runs the operator in the input's dtype instead
        (faster, less precise; eval mode then uses the operator with the running statistics)."""
        dtype = np.dtype(x.dtype).name
        compute = dtype if _FUSED_BATCHNORM and dtype != "float16" else "float64"
        if _FUSED_BATCHNORM and self.track_running_stats and not self.training:
            return mx.nd.BatchNorm(x, *self._affine(weight, bias, x.context), running_mean, running_var,
                                   eps=self.eps, fix_gamma=False, use_global_stats=True, axis=1)
        track = self.training and self.track_running_stats
        if self.training or not self.track_running_stats:
            n = x.size // self.num_features
            aux_mean, aux_var = _aux_scratch(self.num_features, x.context, compute)
            with autograd.train_mode():                 # batch statistics whatever record() says
                out = compiled.run(_batchnorm_op_formula, dict(
                    x=x, weight=weight, bias=bias, aux_mean=aux_mean, aux_var=aux_var,
                    running_mean=running_mean if track else None, running_var=running_var if track else None),
                    eps=self.eps, momentum=self.momentum, bessel=n / (n - 1), dtype=dtype, compute=compute)
            if not track:
                return out
            y, new_mean, new_var = out
            with autograd.pause():
                new_mean.copyto(running_mean)
                new_var.copyto(running_var)
            return y
        return compiled.run(_batchnorm_running_formula, dict(x=x, weight=weight, bias=bias,
                                                             running_mean=running_mean, running_var=running_var),
                            eps=self.eps)

    def _affine(self, weight, bias, ctx):
        c = (self.num_features,)
        return (weight if weight is not None else mx.nd.ones(c, ctx=ctx),
                bias if bias is not None else mx.nd.zeros(c, ctx=ctx))

    def hybrid_forward(self, F, x, weight=None, bias=None, running_mean=None, running_var=None):
        if is_ndarray(x):
            self._check(x)
            n = x.size // self.num_features
            if self.training and n <= 1:
                raise ValueError(f"{type(self).__name__}: expected more than 1 value per channel when "
                                 f"training, got input of shape {tuple(x.shape)}")
            return self._imperative(x, weight, bias, running_mean, running_var)
        if self.track_running_stats and not self.training:
            return self._fused(F, x, weight, bias, running_mean, running_var, True)
        return self._symbolic(F, x, weight, bias, running_mean, running_var)

    def _gemm_form(self, F, x, weight, bias, mean=None, var=None, update=None):
        return _gemm_batchnorm(F, x, weight, bias, self.eps, mean, var, update)

    def _symbolic(self, F, x, weight, bias, running_mean, running_var):
        """Hybridized, batch statistics (:meth:`_gemm_form`). The running statistics need an
        assignment a graph cannot make: MXNet's fused op updates them (its output x 0), fed the 2
        rows ``mean -/+ std`` whose biased variance is the batch's unbiased one (the op uses the
        biased); so they change only when backward runs inside ``record()`` (Gluon's rule)."""
        def update(F, mean, var, n_):
            bessel = n_ / (F.relu(n_ - 2.0) + 1.0)                          # n/(n-1); 1 when n == 1, not inf
            std = F.sqrt(F.broadcast_mul(var, bessel))
            rows = F.transpose(F.concat(mean - std, mean + std, dim=1))     # (2, C)
            fused = self._fused(F, rows, weight, bias, running_mean, running_var, False)
            return F.reshape(F.sum(fused, axis=0), shape=(-1, 1)) * 0.0
        track = self.training and self.track_running_stats
        return self._gemm_form(F, x, weight, bias, update=update if track else None)[0]

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


def _gemm_batchnorm(F, x, weight, bias, eps: float, mean=None, var=None, update=None):
    """BatchNorm on the (C, n) view of x (``F`` = nd or sym) with every per-channel reduction and
    broadcast written as a GEMM with a ones row: MXNet's reductions (and the backward of its
    broadcast ops, which reduces) are 4-10x slower than a GEMV on CPU, even over a contiguous
    axis. Batch statistics (two-pass: mean, then the mean square of the centred data) unless
    ``mean``/``var`` (C, 1) are given; ``update(F, mean, var, n)`` may return a (C, 1) zero that
    ties a running-statistics op into the graph. Returns (y, mean, biased var)."""
    moved = F.swapaxes(x, 0, 1)
    flat = F.reshape(moved, shape=(0, -1))                              # (C, n)
    ones = F.ones_like(F.slice_axis(flat, axis=0, begin=0, end=1))    # (1, n)
    if mean is None:
        n_ = F.reshape(F.sum(ones), shape=(1, 1))
        mean = F.broadcast_div(F.dot(flat, ones, transpose_b=True), n_)
        xc = flat - F.dot(mean, ones)
        var = F.broadcast_div(F.dot(F.square(xc), ones, transpose_b=True), n_)
    else:
        xc = flat - F.dot(mean, ones)
    scale = F.rsqrt(var + eps)
    if weight is not None:
        scale = scale * F.reshape(weight, shape=(-1, 1))
    if update is not None:
        scale = scale + update(F, mean, var, n_)
    y = xc * F.dot(scale, ones)
    if bias is not None:
        y = y + F.dot(F.reshape(bias, shape=(-1, 1)), ones)
    return F.swapaxes(F.reshape_like(y, moved), 0, 1), mean, var


def _batchnorm_running_formula(F, x, running_mean, running_var, weight=None, bias=None, *, eps: float):
    """Eager BatchNorm with the running statistics (eval mode) as one compiled graph: the GEMM
    form, which keeps gradients precise when an eval-mode BatchNorm is fine-tuned through."""
    c = (-1, 1)
    return _gemm_batchnorm(F, x, weight, bias, eps, F.reshape(running_mean, shape=c),
                           F.reshape(running_var, shape=c))[0]


_AUX_SCRATCH: dict = {}


def _aux_scratch(c: int, ctx, dtype: str) -> Tuple[Any, Any]:
    """(C,) arrays for the operator's moving statistics, which it updates in train mode: dualdl
    keeps torch's running statistics itself, so these only absorb the writes."""
    key = (c, ctx, dtype)
    pair = _AUX_SCRATCH.get(key)
    if pair is None:
        pair = _AUX_SCRATCH[key] = (mx.nd.zeros((c,), ctx=ctx, dtype=dtype),
                                    mx.nd.ones((c,), ctx=ctx, dtype=dtype))
    return pair


def _batchnorm_op_formula(F, x, aux_mean, aux_var, weight=None, bias=None, running_mean=None,
                          running_var=None, *, eps: float, momentum: float, bessel: float, dtype: str,
                          compute: str):
    """BatchNorm with batch statistics: MXNet's fused operator in the ``compute`` dtype (float64:
    exact to float32 rounding; run under train_mode, moving statistics into the scratch ``aux_*``),
    cast back to ``dtype``. Given the running statistics, also returns torch's update of them
    (momentum-weighted, unbiased variance ``var * bessel``, computed in ``compute``; torch computes
    it in float64 on CPU) for the caller to copy in."""
    def cast(t, to):
        return t if to == dtype and compute == dtype else F.cast(t, dtype=to)
    w = cast(weight, compute) if weight is not None else F.ones_like(aux_var)
    b = cast(bias, compute) if bias is not None else F.zeros_like(aux_mean)
    y, mean, inv_std = F.BatchNorm(cast(x, compute), w, b, aux_mean, aux_var, eps=eps, fix_gamma=False,
                                   use_global_stats=False, output_mean_var=True, axis=1)
    y = cast(y, dtype)
    if running_mean is None:
        return y
    var = 1.0 / F.square(inv_std) - eps                                  # the biased batch variance
    m = momentum
    new_mean = (1 - m) * cast(running_mean, compute) + m * mean
    new_var = (1 - m) * cast(running_var, compute) + m * (var * bessel)
    return [y, F.BlockGrad(cast(F.reshape(new_mean, shape=(-1,)), dtype)),
            F.BlockGrad(cast(F.reshape(new_var, shape=(-1,)), dtype))]


class BatchNorm1d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm1d`` ((N, C) or (N, C, L))")
    _dl_layer = "BatchNorm1d"
    _layouts = ("(N, C)", "(N, C, L)")
    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm2d`` ((N, C, H, W))")
    _dl_layer = "BatchNorm2d"


class LayerNorm(Layer):
    """``torch.nn.LayerNorm`` over the last ``len(normalized_shape)`` axes (Gluon's LayerNorm takes
    one axis and calls its parameters gamma/beta)."""
    _dl_layer = "LayerNorm"

    def __init__(self, normalized_shape: IntOrTuple, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True) -> None:
        super().__init__()
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps, self.elementwise_affine = float(eps), bool(elementwise_affine)
        shape = self.normalized_shape
        self.weight = self._dl_new_param("weight", shape, init=mx.init.One()) if elementwise_affine else None
        self.bias = (self._dl_new_param("bias", shape, init=mx.init.Zero())
                     if elementwise_affine and bias else None)

    def hybrid_forward(self, F, x, weight=None, bias=None):
        k = len(self.normalized_shape)
        if is_ndarray(x) and (x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.normalized_shape):
            raise shape_error(f"LayerNorm({self.normalized_shape})",
                              "(*, " + ", ".join(map(str, self.normalized_shape)) + ")", x)
        if k == 1 and weight is not None and bias is not None:
            return F.LayerNorm(x, weight, bias, axis=-1, eps=self.eps)
        axes = tuple(range(-k, 0))
        xc = F.broadcast_sub(x, F.mean(x, axis=axes, keepdims=True))
        var = F.mean(F.square(xc), axis=axes, keepdims=True)
        y = F.broadcast_div(xc, F.sqrt(var + self.eps))
        if weight is not None:
            y = F.broadcast_mul(y, weight)
        if bias is not None:
            y = F.broadcast_add(y, bias)
        return y

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Layer):
    """``torch.nn.Dropout``: active in train mode (``module.train()``), identity in eval mode,
    whatever ``autograd.record()`` says (Gluon's Dropout follows ``record()``)."""
    _dl_layer = "Dropout"

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = float(p), bool(inplace)

    def hybrid_forward(self, F, x):
        if not self.training or self.p == 0.0:
            return x if is_ndarray(x) else F.identity(x)
        if self.p == 1.0:                     # MXNet's 1/(1-p) scaling would give NaN
            return F.zeros_like(x)
        return F.Dropout(x, p=self.p, mode="always")

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Embedding(Layer):
    """``torch.nn.Embedding``: weight (V, D) ~ N(0, 1) (Gluon: U(+-0.07)); integer indices only;
    an index outside [0, V) raises IndexError (MXNet clips it silently); ``padding_idx`` row is
    zero at init and gets no gradient (Gluon has no padding_idx)."""
    _dl_layer = "Embedding"

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be within [-{num_embeddings}, "
                                 f"{num_embeddings}), got {padding_idx}")
            padding_idx = int(padding_idx) % self.num_embeddings
        self.padding_idx = padding_idx
        self.weight = self._dl_new_param("weight", (self.num_embeddings, self.embedding_dim),
                                         init=mx.init.Normal(1.0))
        if padding_idx is not None:
            for d in self.weight.list_data():
                d[padding_idx] = 0

    def _check(self, x) -> None:
        name = f"Embedding({self.num_embeddings}, {self.embedding_dim})"
        if not np.issubdtype(np.dtype(x.dtype), np.integer):
            raise TypeError(f"{name}: indices must be an integer tensor (int32/int64), got {np.dtype(x.dtype)}; "
                            f"MXNet would silently truncate float indices")
        if x.size:
            lo, hi = (int(v) for v in mx.nd.concat(x.min().reshape((1,)), x.max().reshape((1,)),
                                                   dim=0).asnumpy())           # one sync
            if lo < 0 or hi >= self.num_embeddings:
                bad = lo if lo < 0 else hi
                raise IndexError(f"{name}: index {bad} is out of range [0, {self.num_embeddings}) "
                                 f"(MXNet would clip it silently)")

    def hybrid_forward(self, F, x, weight):
        if is_ndarray(x):
            self._check(x)
        pi = self.padding_idx
        if pi is not None:          # no gradient into the padding row, as torch
            parts = []
            if pi > 0:
                parts.append(F.slice_axis(weight, axis=0, begin=0, end=pi))
            parts.append(F.BlockGrad(F.slice_axis(weight, axis=0, begin=pi, end=pi + 1)))
            if pi + 1 < self.num_embeddings:
                parts.append(F.slice_axis(weight, axis=0, begin=pi + 1, end=None))
            weight = F.concat(*parts, dim=0) if len(parts) > 1 else parts[0]
        return F.Embedding(x, weight, input_dim=self.num_embeddings, output_dim=self.embedding_dim)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


# ---------------------------------------------------------------------------------------------
# Shape utilities and activations
# ---------------------------------------------------------------------------------------------
class Flatten(Layer):
    """``torch.nn.Flatten(start_dim=1, end_dim=-1)`` (Gluon's Flatten always keeps axis 0 only).
    Hybridized, ``end_dim`` must be -1 or non-negative (a Symbol's rank is unknown)."""
    _dl_layer = "Flatten"

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def hybrid_forward(self, F, x):
        s, e = self.start_dim, self.end_dim
        if is_ndarray(x):
            nd_ = max(x.ndim, 1)
            s_, e_ = s + nd_ if s < 0 else s, e + nd_ if e < 0 else e
            if not (0 <= s_ < nd_ and 0 <= e_ < nd_) or s_ > e_:
                raise ValueError(f"Flatten(start_dim={s}, end_dim={e}): invalid for input of shape "
                                 f"{tuple(x.shape)}")
            shp = tuple(x.shape)
            if not x.ndim:
                return x.reshape((1,))
            return x.reshape(shp[:s_] + (int(np.prod(shp[s_:e_ + 1])),) + shp[e_ + 1:])
        if s < 0 or (e < 0 and e != -1):
            raise NotImplementedError(f"Flatten(start_dim={s}, end_dim={e}): negative dims other than "
                                      f"end_dim=-1 need the input rank, unknown under hybridize()")
        if e == -1:
            return F.flatten(x) if s == 1 else F.reshape(x, shape=(0,) * s + (-1,))
        for _ in range(e - s):
            x = F.reshape(x, shape=(0,) * s + (-3, -2))
        return x if e > s else F.identity(x)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Layer):
    """``torch.nn.Identity``: returns its input (constructor arguments are ignored)."""
    _dl_layer = "Identity"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def hybrid_forward(self, F, x):
        return x if is_ndarray(x) else F.identity(x)


class _Activation(Layer):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)


class ReLU(_Activation):
    """``torch.nn.ReLU``."""
    _dl_layer = "ReLU"

    def hybrid_forward(self, F, x):
        return F.relu(x)


class Sigmoid(Layer):
    """``torch.nn.Sigmoid``."""
    _dl_layer = "Sigmoid"

    def hybrid_forward(self, F, x):
        return F.sigmoid(x)


class Tanh(Layer):
    """``torch.nn.Tanh``."""
    _dl_layer = "Tanh"

    def hybrid_forward(self, F, x):
        return F.tanh(x)


class GELU(Layer):
    """``torch.nn.GELU(approximate='none'|'tanh')``: 'none' is MXNet's erf GELU
    (``LeakyReLU(act_type='gelu')``); 'tanh' is computed from its formula (MXNet has no op)."""
    _dl_layer = "GELU"

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def hybrid_forward(self, F, x):
        if self.approximate == "none":
            return F.LeakyReLU(x, act_type="gelu")
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + F.tanh(inner))

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Layer):
    """``torch.nn.LeakyReLU(negative_slope=0.01)`` (Gluon's LeakyReLU requires alpha)."""
    _dl_layer = "LeakyReLU"

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = float(negative_slope), bool(inplace)

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="leaky", slope=self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Layer):
    """``torch.nn.ELU(alpha=1.0)``."""
    _dl_layer = "ELU"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), bool(inplace)

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="elu", slope=self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class SiLU(_Activation):
    """``torch.nn.SiLU``: x * sigmoid(x) (Gluon's Swish with beta=1)."""
    _dl_layer = "SiLU"

    def hybrid_forward(self, F, x):
        return x * F.sigmoid(x)


def _legacy_softmax_dim(ndim: int) -> int:
    return 0 if ndim in (0, 1, 3) else 1


class _SoftmaxBase(Layer):
    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def hybrid_forward(self, F, x):
        dim = self.dim
        if is_ndarray(x):
            if dim is None:
                dim = _legacy_softmax_dim(x.ndim)
            elif not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
                raise ValueError(f"{type(self).__name__}(dim={self.dim}): dim out of range for input of "
                                 f"shape {tuple(x.shape)}")
        elif dim is None:
            raise NotImplementedError(f"{type(self).__name__}: pass dim explicitly (the implicit dim "
                                      f"depends on the input rank, unknown under hybridize())")
        return self._apply(F, x, dim)

    def _apply(self, F, x, dim: int):
        return F.softmax(x, axis=dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """``torch.nn.Softmax(dim)`` (MXNet calls it ``axis``, default -1)."""
    _dl_layer = "Softmax"


class LogSoftmax(_SoftmaxBase):
    """``torch.nn.LogSoftmax(dim)`` (MXNet calls it ``axis``, default -1). Computed as
    ``x - max - log(sum(exp(x - max)))``: MXNet's ``log_softmax`` op is off by up to 3.5e-6 from
    the float64 result (torch: 1.8e-7)."""
    _dl_layer = "LogSoftmax"

    def _apply(self, F, x, dim: int):
        xs = F.broadcast_sub(x, F.max(x, axis=dim, keepdims=True))
        return F.broadcast_sub(xs, F.log(F.sum(F.exp(xs), axis=dim, keepdims=True)))


from .containers import *  # noqa: F401,F403,E402
