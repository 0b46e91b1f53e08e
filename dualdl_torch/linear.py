"""Linear, Identity and Flatten on torch: the ``torch.nn`` classes with the neutral checks' errors
(dualdl/nn/checks.py, the MXNet side's words), which name the layer, the expected shape and the
shape received (torch raises a RuntimeError without the layout)."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .base import Layer, explained


class Linear(Layer, torch.nn.Linear):
    """``torch.nn.Linear``: applies to the last axis."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.numel():               # torch returns an empty output; MXNet cannot: refused on both
            C.check_linear_input(self.in_features, self.out_features, tuple(x.shape))
        return explained(lambda: torch.nn.functional.linear(x, self.weight, self.bias), C.check_linear_input,
                         lambda: (self.in_features, self.out_features, x.shape))


class Flatten(Layer, nn.Flatten):
    """``torch.nn.Flatten`` with a ValueError for dims outside the input's rank."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = max(x.dim(), 1)
        s = self.start_dim + n if self.start_dim < 0 else self.start_dim
        e = self.end_dim + n if self.end_dim < 0 else self.end_dim
        if not (0 <= s < n and 0 <= e < n) or s > e:
            raise ValueError(f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim}): invalid for "
                             f"input of shape {tuple(x.shape)}")
        return super().forward(x)


class Identity(Layer, nn.Identity):
    """``torch.nn.Identity``."""


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
