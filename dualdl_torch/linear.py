"""Linear, Bilinear, Identity and Flatten on torch: the ``torch.nn`` classes with the neutral checks' errors
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

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not input.numel():           # torch returns an empty output; MXNet cannot: refused on both
            C.check_linear_input(self.in_features, self.out_features, tuple(input.shape))
        return explained(lambda: torch.nn.functional.linear(input, self.weight, self.bias), C.check_linear_input,
                         lambda: (self.in_features, self.out_features, input.shape))


class Bilinear(Layer, torch.nn.Bilinear):
    """``torch.nn.Bilinear``: ``x1^T A x2 + b`` on the last axes of two inputs with the same
    leading axes (none: unbatched)."""

    def forward(self, input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
        args = lambda: (self.in1_features, self.in2_features, self.out_features, tuple(input1.shape),
                        tuple(input2.shape))
        if not input1.numel() or not input2.numel():    # torch: an empty output; MXNet cannot
            C.check_bilinear_input(*args())
        return explained(lambda: super(Bilinear, self).forward(input1, input2), C.check_bilinear_input, args)


class Flatten(Layer, nn.Flatten):
    """``torch.nn.Flatten`` with a ValueError for dims outside the input's rank."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        n = max(input.dim(), 1)
        s = self.start_dim + n if self.start_dim < 0 else self.start_dim
        e = self.end_dim + n if self.end_dim < 0 else self.end_dim
        if not (0 <= s < n and 0 <= e < n) or s > e:
            raise ValueError(f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim}): invalid for "
                             f"input of shape {tuple(input.shape)}")
        return super().forward(input)


class Identity(Layer, nn.Identity):
    """``torch.nn.Identity``."""


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
