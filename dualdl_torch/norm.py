"""BatchNorm1d/2d and LayerNorm on torch: the ``torch.nn`` classes with layout checks, BatchNorm's
"more than 1 value per channel" as a ValueError, and momentum=None (torch's cumulative average,
which MXNet lacks) refused."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

from .base import shape_error

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm"]


class _BNCheck:
    _layouts: Tuple[str, ...] = ("(N, C, H, W)",)
    _ndims: Tuple[int, ...] = (4,)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        if momentum is None:
            raise NotImplementedError(f"{type(self).__name__}: momentum=None (cumulative average) is not "
                                      f"supported by dualdl; pass a float")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() not in self._ndims or x.shape[1] != self.num_features:
            layouts = " or ".join(l.replace("C", str(self.num_features), 1) for l in self._layouts)
            raise shape_error(f"{type(self).__name__}({self.num_features})", layouts, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if self.training and x.numel() // max(self.num_features, 1) <= 1:
            raise ValueError(f"{type(self).__name__}: expected more than 1 value per channel when "
                             f"training, got input of shape {tuple(x.shape)}")
        return super().forward(x)


class BatchNorm1d(_BNCheck, nn.BatchNorm1d):
    """``torch.nn.BatchNorm1d`` ((N, C) or (N, C, L)); momentum=None is rejected."""
    _dl_layer = "BatchNorm1d"
    _layouts = ("(N, C)", "(N, C, L)")
    _ndims = (2, 3)


class BatchNorm2d(_BNCheck, nn.BatchNorm2d):
    """``torch.nn.BatchNorm2d`` ((N, C, H, W)); momentum=None is rejected."""
    _dl_layer = "BatchNorm2d"


class LayerNorm(nn.LayerNorm):
    """``torch.nn.LayerNorm`` with a ValueError for a trailing shape that does not match."""
    _dl_layer = "LayerNorm"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if x.dim() < k or tuple(x.shape[x.dim() - k:]) != tuple(self.normalized_shape):
            raise shape_error(f"LayerNorm({tuple(self.normalized_shape)})",
                              "(*, " + ", ".join(map(str, self.normalized_shape)) + ")", x)
        return super().forward(x)
