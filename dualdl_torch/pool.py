"""Max, average and adaptive pooling on torch: batched or unbatched input, empty input refused, padding of
at most half the kernel checked at construction (dualdl.nn.arguments, before the layer is built), and
the neutral check's message (MXNet's) when the input does not fit."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in

from .conv import SHAPE, run_checked
from .base import Layer


class _PoolCheck(Layer):
    _n = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        n = self._n
        # kernel, stride, padding, dilation as n-tuples, once (the forward path only passes them on);
        # checked before construction by dualdl.nn.arguments
        self._dl_tuples = tuple(C.to_tuple(v, n, what) for v, what in (
            (self.kernel_size, "kernel_size"), (self.stride, "stride"), (self.padding, "padding"),
            (getattr(self, "dilation", 1), "dilation")))

    def forward(self, input: torch.Tensor) -> Any:
        k, s, p, d = self._dl_tuples
        x = input
        return run_checked(lambda: super(_PoolCheck, self).forward(x), x, self._n, C.check_pool_input,
                           type(self).__name__, SHAPE, k, s, p, self.ceil_mode, d)


class MaxPool1d(_PoolCheck, nn.MaxPool1d):
    """``torch.nn.MaxPool1d`` (NCW or CW input)."""
    _n = 1


class MaxPool2d(_PoolCheck, nn.MaxPool2d):
    """``torch.nn.MaxPool2d`` (NCHW or CHW input)."""


class MaxPool3d(_PoolCheck, nn.MaxPool3d):
    """``torch.nn.MaxPool3d`` (NCDHW or CDHW input)."""
    _n = 3


class AvgPool1d(_PoolCheck, nn.AvgPool1d):
    """``torch.nn.AvgPool1d`` (NCW or CW input)."""
    _n = 1


class AvgPool2d(_PoolCheck, nn.AvgPool2d):
    """``torch.nn.AvgPool2d`` (NCHW or CHW input)."""


class AvgPool3d(_PoolCheck, nn.AvgPool3d):
    """``torch.nn.AvgPool3d`` (NCDHW or CDHW input)."""
    _n = 3


class _AdaptiveCheck(Layer):
    """output_size: checked before construction by dualdl.nn.arguments (torch: in forward only)."""
    _n = 2

    def forward(self, input: torch.Tensor) -> Any:
        x = input
        return run_checked(lambda: super(_AdaptiveCheck, self).forward(x), x, self._n,
                           C.check_adaptive_pool_input, self.output_size, SHAPE, type(self).__name__,
                           self._n)


class AdaptiveAvgPool1d(_AdaptiveCheck, nn.AdaptiveAvgPool1d):
    """``torch.nn.AdaptiveAvgPool1d`` (NCW or CW input)."""
    _n = 1


class AdaptiveAvgPool2d(_AdaptiveCheck, nn.AdaptiveAvgPool2d):
    """``torch.nn.AdaptiveAvgPool2d`` (NCHW or CHW input)."""


class AdaptiveMaxPool1d(_AdaptiveCheck, nn.AdaptiveMaxPool1d):
    """``torch.nn.AdaptiveMaxPool1d`` (NCW or CW input)."""
    _n = 1


class AdaptiveMaxPool2d(_AdaptiveCheck, nn.AdaptiveMaxPool2d):
    """``torch.nn.AdaptiveMaxPool2d`` (NCHW or CHW input)."""


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
