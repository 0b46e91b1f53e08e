"""Resampling, padding and reshaping layers on torch: ``Upsample``, ``PixelShuffle``, ``ZeroPad2d``,
``ReflectionPad2d``, ``Unflatten`` are the ``torch.nn`` classes, marked as dualdl layers, with the
inputs the MXNet side cannot take refused with the same message and torch's errors explained. Their
arguments are checked before construction by dualdl.nn.arguments; torch honours all of its own (every
Upsample mode, cropping pads), the MXNet adapter declares what it cannot."""
from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import nn

from dualdl.nn.resample_checks import (check_pad2d_input, check_pixel_shuffle_input, check_unflatten_input,
                                       pad2d_sides)
from dualdl.nn.registry import defined_in
from .base import Layer, explained


class Upsample(Layer, nn.Upsample):
    """``torch.nn.Upsample``."""


class PixelShuffle(Layer, nn.PixelShuffle):
    """``torch.nn.PixelShuffle``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_pixel_shuffle_input(self.upscale_factor, tuple(x.shape))
        return super().forward(x)


class _Pad2d(Layer):
    _reflect = False

    def __init__(self, padding: Union[int, Sequence[int]]) -> None:
        super().__init__(pad2d_sides(type(self).__name__, padding))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_pad2d_input(type(self).__name__, self.padding, tuple(x.shape), self._reflect)
        return super().forward(x)


class ZeroPad2d(_Pad2d, nn.ZeroPad2d):
    """``torch.nn.ZeroPad2d`` (negative sides crop, as torch; MXNet cannot)."""


class ReflectionPad2d(_Pad2d, nn.ReflectionPad2d):
    """``torch.nn.ReflectionPad2d``."""
    _reflect = True


class Unflatten(Layer, nn.Unflatten):
    """``torch.nn.Unflatten`` with a ValueError when the sizes do not fit."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__(int(dim), tuple(unflattened_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return explained(lambda: super(Unflatten, self).forward(x), check_unflatten_input,
                         lambda: (self.dim, tuple(self.unflattened_size), x.shape))


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
