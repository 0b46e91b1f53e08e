"""More normalisation layers on torch: RMSNorm and LocalResponseNorm, the ``torch.nn`` classes with
the neutral input checks (dualdl/nn/norm_checks.py), so a bad input gets the MXNet adapter's
message word for word (torch: a RuntimeError without the layout, an empty output for an empty
batch, which MXNet cannot run)."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .base import Layer, explained


class RMSNorm(Layer, nn.RMSNorm):
    """``torch.nn.RMSNorm`` over the last ``len(normalized_shape)`` axes (eps=None: the input
    dtype's machine epsilon, as torch)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.numel():               # torch returns an empty output; MXNet cannot: refused on both
            C.check_rmsnorm_input(self.normalized_shape, tuple(x.shape))
        return explained(lambda: super(RMSNorm, self).forward(x), C.check_rmsnorm_input,
                         lambda: (self.normalized_shape, x.shape))


class LocalResponseNorm(Layer, nn.LocalResponseNorm):
    """``torch.nn.LocalResponseNorm`` ((N, C, *), at least 3 axes)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        C.check_local_response_norm_input(self.size, tuple(input.shape))
        return super().forward(input)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
