"""Max, average and adaptive pooling on torch: batched input only, padding of at most half the kernel
checked at construction, and a ValueError when the input is too small for the kernel."""
from __future__ import annotations

from typing import Any, Tuple

import torch
from torch import nn

from .base import shape_error

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d"]


def _pair(v: Any, n: int) -> Tuple[int, ...]:
    return tuple(int(i) for i in v) if isinstance(v, (tuple, list)) else (int(v),) * n


class _PoolCheck:
    _n = 2
    _layout = "(N, C, H, W)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dl_validate()

    def _dl_validate(self) -> None:
        k, p = self._dl_kernel(), _pair(self.padding, self._n)
        if any(pi < 0 or pi > ki // 2 for pi, ki in zip(p, k)):
            raise ValueError(f"{type(self).__name__}: padding {p} should be at most half of the kernel size {k}")

    def _dl_kernel(self) -> Tuple[int, ...]:
        d = _pair(getattr(self, "dilation", 1), self._n)
        return tuple(di * (ki - 1) + 1 for di, ki in zip(d, _pair(self.kernel_size, self._n)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != self._n + 2:
            raise shape_error(f"{type(self).__name__}(kernel_size={self.kernel_size})", self._layout, x)
        k = self._dl_kernel()
        s, p = (_pair(v, self._n) for v in (self.stride, self.padding))
        sizes = []
        for i in range(self._n):
            h = x.shape[2 + i]
            if self.ceil_mode:
                o = -(-(h + 2 * p[i] - k[i]) // s[i]) + 1
                o -= (o - 1) * s[i] >= h + p[i]
            else:
                o = (h + 2 * p[i] - k[i]) // s[i] + 1
            sizes.append(o)
        if any(o <= 0 for o in sizes):
            raise ValueError(f"{type(self).__name__}(kernel_size={self.kernel_size}): input spatial size "
                             f"{tuple(x.shape[2:])} is too small (output would be {tuple(sizes)})")
        return super().forward(x)


class MaxPool1d(_PoolCheck, nn.MaxPool1d):
    """``torch.nn.MaxPool1d`` (batched NCW input only)."""
    _dl_layer = "MaxPool1d"
    _n = 1
    _layout = "(N, C, L)"


class MaxPool2d(_PoolCheck, nn.MaxPool2d):
    """``torch.nn.MaxPool2d`` (batched NCHW input only)."""
    _dl_layer = "MaxPool2d"


class AvgPool1d(_PoolCheck, nn.AvgPool1d):
    """``torch.nn.AvgPool1d`` (batched NCW input only)."""
    _dl_layer = "AvgPool1d"
    _n = 1
    _layout = "(N, C, L)"


class AvgPool2d(_PoolCheck, nn.AvgPool2d):
    """``torch.nn.AvgPool2d`` (batched NCHW input only)."""
    _dl_layer = "AvgPool2d"


class AdaptiveAvgPool2d(nn.AdaptiveAvgPool2d):
    """``torch.nn.AdaptiveAvgPool2d`` (batched NCHW input only)."""
    _dl_layer = "AdaptiveAvgPool2d"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise shape_error(f"AdaptiveAvgPool2d(output_size={self.output_size})", "(N, C, H, W)", x)
        return super().forward(x)
