"""Activations on torch: the ``torch.nn`` classes marked as dualdl layers; GELU checks
``approximate`` at construction (torch only at forward), PReLU explains a channel mismatch."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn.checks import check_not_empty, explain
from dualdl.nn.resample_checks import check_prelu_input
from dualdl.nn.registry import defined_in
from .base import Layer


class _RefusesEmpty(Layer, nn.Module):
    """Hides: torch runs an activation on an empty batch; MXNet 1.x cannot (its operators raise on
    a 0 in the shape, even ``attach_grad``), so dualdl refuses it on both."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.numel():
            check_not_empty(self._dl_layer, tuple(x.shape))
        return super().forward(x)


def _simple(name: str, base: type) -> type:
    return type(name, (_RefusesEmpty, base), {"__module__": __name__, "__doc__": f"``torch.nn.{name}``."})


class GELU(_RefusesEmpty, nn.GELU):
    """``torch.nn.GELU``; an unknown ``approximate`` fails at construction (torch: at forward)."""

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        super().__init__(approximate)


class PReLU(_RefusesEmpty, nn.PReLU):
    """``torch.nn.PReLU`` with a ValueError naming the expected channels (torch: RuntimeError)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        try:
            return super().forward(x)
        except RuntimeError:
            err = explain(check_prelu_input, self.num_parameters, tuple(x.shape))
            if err:
                raise err from None
            raise


# the torch.nn classes used as they are (marked as the dualdl layer of the same name)
_SIMPLE = ("ReLU", "Sigmoid", "Tanh", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
           "ReLU6", "Hardswish", "Hardsigmoid", "Softplus", "Mish")
globals().update({name: _simple(name, getattr(nn, name)) for name in _SIMPLE})


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
