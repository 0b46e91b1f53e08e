"""Resampling and reshaping layers on torch: ``Upsample``, ``PixelShuffle``, ``Unflatten`` are the
``torch.nn`` classes, marked as dualdl layers, with the inputs the MXNet side cannot take refused with
the same message and torch's errors explained (the padding layers are in ``padding.py``). Their
arguments are checked before construction by dualdl.nn.arguments; torch honours all of its own (every
Upsample mode), the MXNet adapter declares what it cannot."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from dualdl.nn.resample_checks import check_pixel_shuffle_input, check_unflatten_input
from dualdl.nn.registry import defined_in
from .base import Layer, explained


class Upsample(Layer, nn.Upsample):
    """``torch.nn.Upsample``."""


class PixelShuffle(Layer, nn.PixelShuffle):
    """``torch.nn.PixelShuffle``."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        check_pixel_shuffle_input(self.upscale_factor, tuple(input.shape))
        return super().forward(input)


class Unflatten(Layer, nn.Unflatten):
    """``torch.nn.Unflatten`` with a ValueError when the sizes do not fit."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__(int(dim), tuple(unflattened_size))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return explained(lambda: super(Unflatten, self).forward(input), check_unflatten_input,
                         lambda: (self.dim, tuple(self.unflattened_size), input.shape))


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
