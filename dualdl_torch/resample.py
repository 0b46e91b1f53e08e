"""Resampling, padding and reshaping layers on torch: ``Upsample``, ``PixelShuffle``, ``ZeroPad2d``,
``ReflectionPad2d``, ``Unflatten`` are the ``torch.nn`` classes, marked as dualdl layers, with the
arguments and inputs the MXNet side cannot take refused with the same message (modes other than
nearest/bilinear, cropping pads) and torch's RuntimeErrors explained."""
from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import nn

from dualdl.nn.checks import explain
from dualdl.nn.resample_checks import (check_pad2d_input, check_pixel_shuffle_input, check_upsample_args,
                                       check_unflatten_input, pad2d_sides, unflatten_sizes)
from dualdl.nn.registry import defined_in
from .base import Layer


def _explained(run, check, *args):
    try:
        return run()
    except RuntimeError:               # explained only on failure: the check is off the hot path
        err = explain(check, *args)
        if err:
            raise err from None
        raise


class Upsample(Layer, nn.Upsample):
    """``torch.nn.Upsample``, modes 'nearest' and 'bilinear' (what MXNet can run)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None,
                 recompute_scale_factor=None) -> None:
        check_upsample_args(size, scale_factor, mode, align_corners)
        super().__init__(size, scale_factor, mode, align_corners, recompute_scale_factor)


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
    """``torch.nn.ZeroPad2d`` (no cropping: MXNet cannot)."""


class ReflectionPad2d(_Pad2d, nn.ReflectionPad2d):
    """``torch.nn.ReflectionPad2d``."""
    _reflect = True


class Unflatten(Layer, nn.Unflatten):
    """``torch.nn.Unflatten`` with a ValueError when the sizes do not fit."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__(int(dim), unflatten_sizes(unflattened_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _explained(lambda: super(Unflatten, self).forward(x), check_unflatten_input, self.dim,
                          tuple(self.unflattened_size), tuple(x.shape))


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
