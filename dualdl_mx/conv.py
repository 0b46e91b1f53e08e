"""``Conv1d``/``Conv2d`` on MXNet with PyTorch's padding (incl. asymmetric 'same', reflect/replicate),
weight layout and initialisation."""
from __future__ import annotations

import math
from typing import Union

import numpy as np

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple, to_tuple
from .base import Layer, is_ndarray

__all__ = ["Conv1d", "Conv2d"]


class _ConvNd(Layer):
    _n = 2
    _dl_cannot = {"padding_mode": (("circular",), "MXNet has no circular padding ('zeros', 'reflect' and "
                                                  "'replicate' are available)")}

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple,
                 stride: IntOrTuple = 1, padding: Union[str, IntOrTuple] = 0, dilation: IntOrTuple = 1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__()
        n, name = self._n, type(self).__name__
        C.check_conv_args(name, in_channels, out_channels, groups)
        if padding_mode not in ("zeros", "reflect", "replicate"):
            raise NotImplementedError(f"{name}: padding_mode={padding_mode!r} is not available on the "
                                      f"mxnet backend ('zeros', 'reflect' and 'replicate' are)")
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = to_tuple(kernel_size, n, "kernel_size")
        self.stride = to_tuple(stride, n, "stride")
        self.dilation = to_tuple(dilation, n, "dilation")
        self.padding_mode = padding_mode
        self._crop_first = (False,) * n
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be 'same', 'valid', an int or a tuple, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
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
        fan_in = self.in_channels // self.groups * int(np.prod(self.kernel_size))
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = self._dl_new_param(
            "weight", (self.out_channels, self.in_channels // self.groups) + self.kernel_size,
            init=self._uniform(bound))
        self.bias = self._dl_new_param("bias", (self.out_channels,), init=self._uniform(bound)) if bias else None

    def _check(self, x) -> None:
        C.check_conv_input(type(self).__name__, self.in_channels, x.shape, self.kernel_size, self.dilation,
                           self.padding, self.padding_mode, self._sides)

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


class Conv2d(_ConvNd):
    """``torch.nn.Conv2d`` on NCHW input via ``F.Convolution``; weight (out, in/groups, kh, kw)."""
    _dl_layer = "Conv2d"
    _n = 2
