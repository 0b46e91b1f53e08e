"""Activations on torch: the ``torch.nn`` classes marked as dualdl layers (GELU's ``approximate`` is
checked at construction by dualdl.nn.arguments; torch only at forward), PReLU explains a channel
mismatch."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn.checks import check_not_empty
from dualdl.nn.resample_checks import check_prelu_input
from dualdl.nn.registry import defined_in
from .base import Layer, explained


class _RefusesEmpty(Layer, nn.Module):
    """Hides: torch runs an activation on an empty batch; MXNet 1.x cannot (its operators raise on
    a 0 in the shape, even ``attach_grad``), so dualdl refuses it on both."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not input.numel():
            check_not_empty(self._dl_layer, tuple(input.shape))
        return super().forward(input)


def _simple(name: str, base: type, module: str = __name__) -> type:
    """``torch.nn.<name>`` as the dualdl layer of that name, defined in ``module``."""
    return type(name, (_RefusesEmpty, base), {"__module__": module, "__doc__": f"``torch.nn.{name}``."})


class GELU(_RefusesEmpty, nn.GELU):
    """``torch.nn.GELU``; an unknown ``approximate`` fails at construction (torch: at forward)."""


class PReLU(_RefusesEmpty, nn.PReLU):
    """``torch.nn.PReLU`` with a ValueError naming the expected channels (torch: RuntimeError)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return explained(lambda: super(PReLU, self).forward(input), check_prelu_input,
                         lambda: (self.num_parameters, input.shape))


# the torch.nn classes used as they are (marked as the dualdl layer of the same name)
_SIMPLE = ("ReLU", "Sigmoid", "Tanh", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
           "ReLU6", "Hardswish", "Hardsigmoid", "Softplus", "Mish")
globals().update({name: _simple(name, getattr(nn, name)) for name in _SIMPLE})


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
