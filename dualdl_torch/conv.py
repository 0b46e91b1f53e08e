"""Conv1d and Conv2d on torch: batched input only (torch also takes unbatched, MXNet does not), and
a ValueError naming the layer, the layout and the shape when the input or the kernel does not fit."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn.checks import empty_batch_error

from .base import shape_error

__all__ = ["Conv1d", "Conv2d"]


class _ConvCheck:
    _n = 2
    _layout = "(N, C_in, H, W)"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != self._n + 2 or x.shape[1] != self.in_channels:
            raise shape_error(f"{type(self).__name__}(in_channels={self.in_channels})",
                              self._layout.replace("C_in", str(self.in_channels)), x)
        if not x.numel():
            raise empty_batch_error(f"{type(self).__name__}(in_channels={self.in_channels})", tuple(x.shape))
        for i in range(self._n):
            eff = self.dilation[i] * (self.kernel_size[i] - 1) + 1
            pad = eff - 1 if self.padding == "same" else 0 if self.padding == "valid" else 2 * self.padding[i]
            if x.shape[2 + i] + pad < eff:
                raise ValueError(f"{type(self).__name__}: input spatial size {tuple(x.shape[2:])} "
                                 f"(padded by {self.padding}) is smaller than the kernel "
                                 f"{self.kernel_size} (dilation {self.dilation})")
            if self.padding_mode == "reflect" and pad - pad // 2 >= x.shape[2 + i]:
                raise ValueError(f"{type(self).__name__}: padding_mode='reflect' needs padding < input "
                                 f"size, got padding {self.padding} for input {tuple(x.shape[2:])}")
        return super().forward(x)


class Conv1d(_ConvCheck, nn.Conv1d):
    """``torch.nn.Conv1d`` (batched NCW input only)."""
    _dl_layer = "Conv1d"
    _n = 1
    _layout = "(N, C_in, L)"


class Conv2d(_ConvCheck, nn.Conv2d):
    """``torch.nn.Conv2d`` (batched NCHW input only)."""
    _dl_layer = "Conv2d"
