"""``Conv1d/2d/3d`` and ``ConvTranspose1d/2d/3d`` on MXNet with PyTorch's padding (incl. asymmetric
'same', reflect/replicate, output_padding), weight layouts and initialisation, batched or unbatched
input (``_dl_unbatched_ndim``: run as a batch of one)."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple, to_tuple
from dualdl.nn.registry import defined_in
from .base import Layer, is_ndarray


def pad_spatial(F, x, sides: Sequence[Tuple[int, int]], mode: str = "constant", value: float = 0.0):
    """Pad the spatial axes of an (N, C, *spatial) tensor by ``sides`` ((before, after) per axis).
    Hides: MXNet's ``pad`` takes 4-D/5-D input only, so 1-D input goes through (N, C, 1, L)."""
    sides = tuple(tuple(sd) for sd in sides)
    if not any(sum(sd) for sd in sides):
        return x
    one_d = len(sides) == 1
    if one_d:
        x, sides = F.expand_dims(x, axis=2), ((0, 0),) + sides
    x = F.pad(x, mode=mode, constant_value=value, pad_width=(0, 0, 0, 0) + sum(sides, ()))
    return F.squeeze(x, axis=2) if one_d else x


class _ShapeChecked(Layer):
    """A layer whose input shape is checked (``_dl_check(shape)``, a neutral check) on the NDArray
    the user passes, before MXNet sees it: the shape as given (unbatched or not), eager and
    hybridized alike (a hybridized call's operators would otherwise fail with MXNet's own error).
    Sets ``_dl_unbatched_ndim`` = ``_n + 1`` (torch takes every convolution's and pool's input
    without its batch axis)."""
    _n = 2

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dl_unbatched_ndim = cls._n + 1

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        x = args[0] if args else kwargs.get("input", kwargs.get("x"))
        if is_ndarray(x):
            self._dl_check(tuple(x.shape))
        out = super().__call__(*args, **kwargs)
        return tuple(out) if isinstance(out, list) else out     # (out, indices) as torch's tuple

    def _dl_check(self, shape: Tuple[int, ...]) -> None:
        raise NotImplementedError


class _ConvNd(_ShapeChecked):
    _n = 2
    _dl_cannot = {"padding_mode": (("circular",), "MXNet has no circular padding ('zeros', 'reflect' and "
                                                  "'replicate' are available)")}

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: Union[str, IntOrTuple] = 0, dilation: IntOrTuple = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments, circular refused above
        n = self._n
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = to_tuple(kernel_size, n, "kernel_size")
        self.stride = to_tuple(stride, n, "stride")
        self.dilation = to_tuple(dilation, n, "dilation")
        self.padding_mode = padding_mode
        self._crop_first = (False,) * n
        if isinstance(padding, str):                # 'same' (stride 1) or 'valid'
            self.padding = padding
            self._sides = C.conv_sides(padding, self.kernel_size, self.dilation)  # torch: total//2 before
            # MXNet pads symmetrically: pad the larger side on both ends, drop the first output.
            self._pad = tuple(after for _, after in self._sides)
            self._crop_first = tuple(before != after for before, after in self._sides)
        else:
            self.padding = to_tuple(padding, n, "padding")
            self._pad = self.padding
            self._sides = C.conv_sides(self.padding, self.kernel_size, self.dilation)
        if padding_mode != "zeros":        # pad explicitly (F.pad reflect/edge), convolve unpadded
            self._pad, self._crop_first = (0,) * n, (False,) * n
        self._dl_weights((self.out_channels, self.in_channels // self.groups), bias)

    def _dl_weights(self, channels: Tuple[int, int], bias: bool) -> None:
        """weight (``channels`` + kernel) and bias with torch's U(+-1/sqrt(fan_in)), fan_in =
        channels[1] * prod(kernel) (a lazy layer defers them: dualdl_mx/conv_lazy.py)."""
        fan_in = channels[1] * int(np.prod(self.kernel_size))
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = self._dl_new_param("weight", channels + self.kernel_size, init=self._uniform(bound))
        self.bias = self._dl_new_param("bias", (self.out_channels,), init=self._uniform(bound)) if bias else None

    def _dl_check(self, shape: Tuple[int, ...]) -> None:
        C.check_conv_input(type(self).__name__, self.in_channels, shape, self.kernel_size, self.dilation,
                           self.padding, self.padding_mode, self._sides)

    def _explicit_pad(self, F, x):
        """torch's 'reflect'/'replicate' padding with F.pad."""
        return pad_spatial(F, x, self._sides, "reflect" if self.padding_mode == "reflect" else "edge")

    def hybrid_forward(self, F, x, weight, bias=None):
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
    _n = 1


class Conv2d(_ConvNd):
    """``torch.nn.Conv2d`` on NCHW input via ``F.Convolution``; weight (out, in/groups, kh, kw)."""
    _n = 2


class Conv3d(_ConvNd):
    """``torch.nn.Conv3d`` on NCDHW input via ``F.Convolution``; weight (out, in/groups, kd, kh, kw)."""
    _n = 3


class _ConvTransposeNd(_ShapeChecked):
    """torch's transposed convolution via ``F.Deconvolution``: same weight layout (in, out/groups,
    k...), ``adj`` = torch's ``output_padding``. MXNet refuses ``adj >= stride`` (torch allows
    ``output_padding < max(stride, dilation)``) and its float64 op is wrong with stride > 1 and
    dilation > 1: those cases convolve unpadded and crop/pad to torch's window (:meth:`_deconv`).
    ``target_shape`` is never used: it is fixed per op (torch's ``output_size=`` is per call) and
    refuses sizes that need ``output_padding > padding``."""
    _n = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple, stride: IntOrTuple = 1,
                 padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1, bias: bool = True,
                 dilation: IntOrTuple = 1, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments
        n = self._n
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = to_tuple(kernel_size, n, "kernel_size")
        self.stride = to_tuple(stride, n, "stride")
        self.padding = to_tuple(padding, n, "padding")
        self.output_padding = to_tuple(output_padding, n, "output_padding")
        self.dilation = to_tuple(dilation, n, "dilation")
        self.padding_mode = padding_mode
        # torch: kaiming_uniform(a=sqrt(5)) on (in, out/groups, k...): fan_in = out/groups * prod(k)
        self._dl_weights((self.in_channels, self.out_channels // self.groups), bias)

    _dl_weights = _ConvNd._dl_weights

    def _dl_check(self, shape: Tuple[int, ...]) -> None:
        C.check_conv_transpose_input(type(self).__name__, self.in_channels, shape, self.kernel_size, self.stride,
                                     self.padding, self.dilation, self.output_padding)

    def forward(self, x, output_size: Optional[Sequence[int]] = None):
        """``output_size=`` (torch's forward argument, here the n spatial sizes: :meth:`__call__`)
        picks the output padding for that size; a size whose padding differs from the layer's own
        runs imperatively (also when hybridized)."""
        if output_size is None:
            return super().forward(x)
        if not is_ndarray(x):
            raise NotImplementedError(f"{type(self).__name__}: output_size= needs an NDArray input on the "
                                      f"mxnet backend (a Symbol has no shape)")
        adj = C.conv_transpose_output_padding(type(self).__name__, x.shape, output_size, self.kernel_size,
                                              self.stride, self.padding, self.dilation)
        if adj == self.output_padding:
            return super().forward(x)
        from mxnet import nd
        bias = self.bias.data(x.context) if self.bias is not None else None
        return self._deconv(nd, x, self.weight.data(x.context), bias, adj)

    def __call__(self, input, output_size: Optional[Sequence[int]] = None):
        """torch's ``forward(input, output_size=None)``; ``output_size`` (n sizes, or the input's
        full shape with N and C, unbatched or not) is checked and passed on as the n sizes."""
        if output_size is None:
            return super().__call__(input)
        if is_ndarray(input):
            self._dl_check(tuple(input.shape))
            sizes = C.conv_transpose_output_padding(type(self).__name__, input.shape, output_size,
                                                    self.kernel_size, self.stride, self.padding, self.dilation)
            output_size = tuple(C.conv_transpose_output_size(s, k, st, p, d, a) for s, k, st, p, d, a in zip(
                C.batched_shape(input.shape, self._n)[2:], self.kernel_size, self.stride, self.padding,
                self.dilation, sizes))
        return super().__call__(input, output_size)

    def hybrid_forward(self, F, x, weight, bias=None):
        return self._deconv(F, x, weight, bias, self.output_padding)

    def _deconv(self, F, x, weight, bias, adj: Tuple[int, ...]):
        n = self._n
        kw = dict(kernel=self.kernel_size, dilate=self.dilation, num_filter=self.out_channels,
                  num_group=self.groups, no_bias=bias is None)
        strided_dilated = any(s > 1 for s in self.stride) and any(d > 1 for d in self.dilation)
        if not strided_dilated and all(a < s for a, s in zip(adj, self.stride)):
            return F.Deconvolution(x, weight, bias, stride=self.stride, pad=self.padding, adj=adj, **kw)
        # MXNet refuses adj >= stride (torch allows it when dilation > stride), and its float64
        # (non-MKLDNN) Deconvolution is wrong with stride > 1 and dilation > 1 (measured 7.1 off):
        # zeros between the input elements (the stride), a stride-1 unpadded deconvolution, then
        # torch's window [p, p + L) of that full output per axis, bias only past its end
        stride = self.stride
        if strided_dilated:
            x, stride = _insert_zeros(F, x, self.stride), (1,) * n
        out = F.Deconvolution(x, weight, bias, stride=stride, pad=(0,) * n, adj=(0,) * n, **kw)
        sides = []
        for i, (p, a) in enumerate(zip(self.padding, adj)):
            out = F.slice_axis(out, axis=2 + i, begin=p, end=None if a >= p else a - p)
            sides.append((0, max(a - p, 0)))
        if bias is None or not any(after for _, after in sides):
            return pad_spatial(F, out, sides)
        b = F.reshape(bias, shape=(1, -1) + (1,) * n)
        return F.broadcast_add(pad_spatial(F, F.broadcast_sub(out, b), sides), b)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        for k, zero in (("padding", 0), ("output_padding", 0), ("dilation", 1)):
            if getattr(self, k) != (zero,) * self._n:
                s += f", {k}={getattr(self, k)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


def _insert_zeros(F, x, stride: Sequence[int]):
    """``s - 1`` zeros between neighbours along each spatial axis (length (L - 1) s + 1): a strided
    transposed convolution is a stride-1 one of this. Static reshapes only (works on Symbols)."""
    for i, s in enumerate(stride):
        if s == 1:
            continue
        axis = 2 + i
        xe = F.expand_dims(x, axis=axis + 1)
        z = F.zeros_like(xe)
        x = F.concat(xe, *([z] * (s - 1)), dim=axis + 1)
        x = F.reshape(x, shape=(0,) * axis + (-3,) + (0,) * (len(stride) - 1 - i))
        x = F.slice_axis(x, axis=axis, begin=0, end=1 - s)
    return x


class ConvTranspose1d(_ConvTransposeNd):
    """``torch.nn.ConvTranspose1d`` on NCW input via ``F.Deconvolution``; weight (in, out/groups, k)."""
    _n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """``torch.nn.ConvTranspose2d`` on NCHW input via ``F.Deconvolution``; weight (in, out/groups, kh, kw)."""
    _n = 2


class ConvTranspose3d(_ConvTransposeNd):
    """``torch.nn.ConvTranspose3d`` on NCDHW input; weight (in, out/groups, kd, kh, kw). MXNet's 3-d
    ``Deconvolution`` exists only in MKLDNN's float32 form (float64: "Only 1D or 2D Deconvolution is
    natively supported"), so this one is a ``Convolution`` of the zero-interleaved input (stride),
    padded by d (k - 1) - p (+ output_padding after; cropped where negative), with the weight
    regrouped to (out, in/groups, k...) and flipped: one form for every dtype."""
    _n = 3

    def _deconv(self, F, x, weight, bias, adj: Tuple[int, ...]):
        n, g = self._n, self.groups
        cin, cout, k = self.in_channels, self.out_channels, self.kernel_size
        x = _insert_zeros(F, x, self.stride)
        sides = [(d * (ki - 1) - p, d * (ki - 1) - p + a)
                 for ki, p, d, a in zip(k, self.padding, self.dilation, adj)]
        x = pad_spatial(F, x, [(max(b, 0), max(e, 0)) for b, e in sides])
        for i, (b, e) in enumerate(sides):
            if b < 0 or e < 0:
                x = F.slice_axis(x, axis=2 + i, begin=max(-b, 0), end=e if e < 0 else None)
        w = F.reshape(weight, shape=(g, cin // g, cout // g) + k)
        w = F.reshape(F.transpose(w, axes=(0, 2, 1) + tuple(range(3, 3 + n))), shape=(cout, cin // g) + k)
        w = F.flip(w, axis=tuple(range(2, 2 + n)))
        return F.Convolution(x, w, bias, kernel=k, stride=(1,) * n, dilate=self.dilation, pad=(0,) * n,
                             num_filter=cout, num_group=g, no_bias=bias is None)


__all__ = [*defined_in(__name__), "pad_spatial"]  # the layers defined above (registered by class name)
