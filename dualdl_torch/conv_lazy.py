"""Lazy convolutions on torch: ``torch.nn.LazyConv1d/2d/3d`` and ``LazyConvTranspose1d/2d/3d``,
in_channels inferred at the first call (batched or unbatched), which first runs the neutral check
(the one MXNet raises: rank, empty input, ``in_channels % groups``); the layer then becomes dualdl's
Conv*/ConvTranspose* (torch's ``cls_to_become``), with its checks."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in

from . import conv
from .conv import _ConvCheck, _ConvTransposeCheck


class _LazyCheck:
    """The neutral check of the first input before torch's ``initialize_parameters`` (torch's own
    rank error would come from its pre-hook, before any dualdl code)."""
    _n = 2

    def initialize_parameters(self, input: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        if self.has_uninitialized_params():
            C.check_lazy_conv_input(type(self).__name__, self._n, self.groups, tuple(input.shape))
        super().initialize_parameters(input, *args, **kwargs)


class LazyConv1d(_LazyCheck, _ConvCheck, nn.LazyConv1d):
    """``torch.nn.LazyConv1d``; becomes a dualdl ``Conv1d`` at the first call."""
    _n = 1
    cls_to_become = conv.Conv1d


class LazyConv2d(_LazyCheck, _ConvCheck, nn.LazyConv2d):
    """``torch.nn.LazyConv2d``; becomes a dualdl ``Conv2d`` at the first call."""
    cls_to_become = conv.Conv2d


class LazyConv3d(_LazyCheck, _ConvCheck, nn.LazyConv3d):
    """``torch.nn.LazyConv3d``; becomes a dualdl ``Conv3d`` at the first call."""
    _n = 3
    cls_to_become = conv.Conv3d


class LazyConvTranspose1d(_LazyCheck, _ConvTransposeCheck, nn.LazyConvTranspose1d):
    """``torch.nn.LazyConvTranspose1d``; becomes a dualdl ``ConvTranspose1d`` at the first call."""
    _n = 1
    cls_to_become = conv.ConvTranspose1d


class LazyConvTranspose2d(_LazyCheck, _ConvTransposeCheck, nn.LazyConvTranspose2d):
    """``torch.nn.LazyConvTranspose2d``; becomes a dualdl ``ConvTranspose2d`` at the first call."""
    cls_to_become = conv.ConvTranspose2d


class LazyConvTranspose3d(_LazyCheck, _ConvTransposeCheck, nn.LazyConvTranspose3d):
    """``torch.nn.LazyConvTranspose3d``; becomes a dualdl ``ConvTranspose3d`` at the first call."""
    _n = 3
    cls_to_become = conv.ConvTranspose3d


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
