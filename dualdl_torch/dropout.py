"""Dropout on torch: ``torch.nn.Dropout``, ``Dropout1d`` and ``Dropout2d``, marked as dualdl layers;
the channel dropouts raise a ValueError naming the layouts they take (torch: RuntimeError or a
warning)."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn.resample_checks import check_channel_dropout_input
from dualdl.nn.registry import defined_in
from .base import Layer


class Dropout(Layer, nn.Dropout):
    """``torch.nn.Dropout``."""


class Dropout1d(Layer, nn.Dropout1d):
    """``torch.nn.Dropout1d``: zeroes whole channels of (N, C, L) or (C, L)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        check_channel_dropout_input("Dropout1d", tuple(input.shape))
        return super().forward(input)


class Dropout2d(Layer, nn.Dropout2d):
    """``torch.nn.Dropout2d``: zeroes whole channels of (N, C, H, W); a 3-D input is taken as
    (N, C, L), as torch 2.13 does (with its warning)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        check_channel_dropout_input("Dropout2d", tuple(input.shape))
        return super().forward(input)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
