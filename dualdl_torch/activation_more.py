"""More activations (issue 34) on torch: the ``torch.nn`` classes marked as dualdl layers, each
refusing an empty input as the MXNet adapter must (``_RefusesEmpty``). Softshrink's negative
``lambd`` and CELU's ``alpha=0`` fail at construction (dualdl.nn.arguments; torch: at forward)."""
from __future__ import annotations

from torch import nn

from dualdl.nn.registry import defined_in
from .activation import _simple

_SIMPLE = ("GLU", "Hardtanh", "Hardshrink", "Softshrink", "Tanhshrink", "Threshold", "Softmin", "Softsign",
           "LogSigmoid", "CELU", "SELU", "Softmax2d")
globals().update({name: _simple(name, getattr(nn, name), __name__) for name in _SIMPLE})

__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
