"""More pools on torch: ``LPPool1d/2d/3d``, ``FractionalMaxPool2d/3d``, ``AdaptiveAvgPool3d``,
``AdaptiveMaxPool3d``: torch's layers, batched or unbatched, empty input refused (MXNet cannot run
it) and, when torch's own call fails, the neutral check's message (the one MXNet raises)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in

from .base import Layer
from .conv import SHAPE, run_checked
from .pool import _AdaptiveCheck


class AdaptiveAvgPool3d(_AdaptiveCheck, nn.AdaptiveAvgPool3d):
    """``torch.nn.AdaptiveAvgPool3d`` (NCDHW or CDHW input)."""
    _n = 3


class AdaptiveMaxPool3d(_AdaptiveCheck, nn.AdaptiveMaxPool3d):
    """``torch.nn.AdaptiveMaxPool3d`` (NCDHW or CDHW input)."""
    _n = 3


class _LPPoolCheck(Layer):
    """Arguments: checked before construction by dualdl.nn.arguments (torch: in forward only)."""
    _n = 2

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        n, x = self._n, input
        k = C.to_tuple(self.kernel_size, n, "kernel_size")
        s = k if self.stride is None else C.to_tuple(self.stride, n, "stride")
        return run_checked(lambda: super(_LPPoolCheck, self).forward(x), x, n, C.check_pool_input,
                           type(self).__name__, SHAPE, k, s, (0,) * n, self.ceil_mode)


class LPPool1d(_LPPoolCheck, nn.LPPool1d):
    """``torch.nn.LPPool1d`` (NCW or CW input)."""
    _n = 1


class LPPool2d(_LPPoolCheck, nn.LPPool2d):
    """``torch.nn.LPPool2d`` (NCHW or CHW input)."""


class LPPool3d(_LPPoolCheck, nn.LPPool3d):
    """``torch.nn.LPPool3d`` (NCDHW or CDHW input)."""
    _n = 3


def check_fractional(name: str, shape: Sequence[int], kernel_size: Sequence[int],
                     output_size: Optional[Sequence[int]], output_ratio: Optional[Sequence[float]],
                     dtype: str, samples: Optional[torch.Tensor]) -> None:
    """The neutral checks of a fractional max pool's input (and given ``_random_samples``)."""
    C.fractional_output_size(name, shape, kernel_size, output_size, output_ratio)
    C.check_fractional_pool_input(name, shape, len(kernel_size), None if samples is None else tuple(samples.shape),
                                  dtype, None if samples is None else str(samples.dtype).replace("torch.", ""))


class _FractionalCheck(Layer):
    _n = 2

    def forward(self, input: torch.Tensor) -> Any:
        x, n = input, self._n
        k = C.to_tuple(self.kernel_size, n, "kernel_size")
        return run_checked(lambda: super(_FractionalCheck, self).forward(x), x, n, check_fractional,
                           type(self).__name__, SHAPE, k, self.output_size, self.output_ratio,
                           str(x.dtype).replace("torch.", ""), self._random_samples)


class FractionalMaxPool2d(_FractionalCheck, nn.FractionalMaxPool2d):
    """``torch.nn.FractionalMaxPool2d`` (NCHW or CHW input)."""


class FractionalMaxPool3d(_FractionalCheck, nn.FractionalMaxPool3d):
    """``torch.nn.FractionalMaxPool3d`` (NCDHW or CDHW input)."""
    _n = 3


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
