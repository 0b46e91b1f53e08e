"""The padding layers on torch: ``ConstantPad1d/2d/3d``, ``ZeroPad1d/2d/3d``, ``ReflectionPad1d/2d/3d``,
``ReplicationPad1d/2d/3d``, ``CircularPad1d/2d/3d`` are the ``torch.nn`` classes, marked as dualdl
layers. torch honours every padding (negative sides crop); what its forward fails on (a wrong rank,
a reflect pad as large as its dim, a circular pad wrapping twice or cropping to nothing, which
torch's own check lets through to an internal error or uninitialised memory, a crop to nothing) is refused before it runs with the error the MXNet adapter
raises for the same input (dualdl.nn.resample_checks); an input or output with no elements is
refused on both backends (MXNet cannot run one). Arguments are checked before construction by
dualdl.nn.arguments."""
from __future__ import annotations

from typing import Sequence, Union

import torch
from torch import nn

from dualdl.nn.registry import defined_in
from dualdl.nn.resample_checks import check_pad_input, pad_sides
from .base import Layer

Padding = Union[int, Sequence[int]]


class _PadCheck(Layer):
    """``padding`` as torch stores it; the input checked before torch's forward."""

    def __init__(self, padding: Padding, *value: float) -> None:
        super().__init__(pad_sides(type(self).__name__, padding), *value)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        check_pad_input(type(self).__name__, tuple(self.padding), tuple(input.shape))
        return super().forward(input)


class ConstantPad1d(_PadCheck, nn.ConstantPad1d):
    """``torch.nn.ConstantPad1d``."""

    def __init__(self, padding: Padding, value: float) -> None:
        super().__init__(padding, value)


class ConstantPad2d(_PadCheck, nn.ConstantPad2d):
    """``torch.nn.ConstantPad2d``."""

    def __init__(self, padding: Padding, value: float) -> None:
        super().__init__(padding, value)


class ConstantPad3d(_PadCheck, nn.ConstantPad3d):
    """``torch.nn.ConstantPad3d``."""

    def __init__(self, padding: Padding, value: float) -> None:
        super().__init__(padding, value)


class ZeroPad1d(_PadCheck, nn.ZeroPad1d):
    """``torch.nn.ZeroPad1d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ZeroPad2d(_PadCheck, nn.ZeroPad2d):
    """``torch.nn.ZeroPad2d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ZeroPad3d(_PadCheck, nn.ZeroPad3d):
    """``torch.nn.ZeroPad3d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ReflectionPad1d(_PadCheck, nn.ReflectionPad1d):
    """``torch.nn.ReflectionPad1d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ReflectionPad2d(_PadCheck, nn.ReflectionPad2d):
    """``torch.nn.ReflectionPad2d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ReflectionPad3d(_PadCheck, nn.ReflectionPad3d):
    """``torch.nn.ReflectionPad3d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ReplicationPad1d(_PadCheck, nn.ReplicationPad1d):
    """``torch.nn.ReplicationPad1d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ReplicationPad2d(_PadCheck, nn.ReplicationPad2d):
    """``torch.nn.ReplicationPad2d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class ReplicationPad3d(_PadCheck, nn.ReplicationPad3d):
    """``torch.nn.ReplicationPad3d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class CircularPad1d(_PadCheck, nn.CircularPad1d):
    """``torch.nn.CircularPad1d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class CircularPad2d(_PadCheck, nn.CircularPad2d):
    """``torch.nn.CircularPad2d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


class CircularPad3d(_PadCheck, nn.CircularPad3d):
    """``torch.nn.CircularPad3d``."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
