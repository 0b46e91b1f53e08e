"""The norm layers on torch: the ``torch.nn`` classes with dualdl's neutral checks
(``dualdl/nn/norm_checks.py``), so a bad input gets the MXNet adapter's message word for word. Their
arguments are torch's own (momentum=None, torch's cumulative average, included); the MXNet adapter
declares what it cannot honour."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .base import Layer, explained


class _BNCheck(Layer):
    def _check_input_dim(self, input: torch.Tensor) -> None:
        """torch's own up-front hook (rank), here the neutral rank/channel/empty/values-per-channel
        check (torch returns an empty output for an empty batch; MXNet cannot: refused on both)."""
        C.check_batchnorm_input(self._dl_layer, self.num_features, tuple(input.shape), self.training)


class BatchNorm1d(_BNCheck, nn.BatchNorm1d):
    """``torch.nn.BatchNorm1d`` ((N, C) or (N, C, L))."""


class BatchNorm2d(_BNCheck, nn.BatchNorm2d):
    """``torch.nn.BatchNorm2d`` ((N, C, H, W))."""


class BatchNorm3d(_BNCheck, nn.BatchNorm3d):
    """``torch.nn.BatchNorm3d`` ((N, C, D, H, W))."""


class LayerNorm(Layer, nn.LayerNorm):
    """``torch.nn.LayerNorm`` with the neutral error for a trailing shape that does not match."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not input.numel():           # torch normalises an empty batch; MXNet cannot: refused on both
            C.check_layernorm_input(self.normalized_shape, tuple(input.shape))
        return explained(lambda: super(LayerNorm, self).forward(input), C.check_layernorm_input,
                         lambda: (self.normalized_shape, input.shape))


class GroupNorm(Layer, nn.GroupNorm):
    """``torch.nn.GroupNorm``; (N, C, *) checked up front (torch normalises an empty batch, which
    MXNet cannot); its arguments are checked before construction by dualdl.nn.arguments."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        C.check_groupnorm_input(self.num_groups, self.num_channels, tuple(input.shape))
        return super().forward(input)


class _INCheck(Layer):
    def _check_input_dim(self, input: torch.Tensor) -> None:
        """torch's own up-front hook, here the neutral check (the MXNet side's words): batched or
        unbatched rank, the channel count where a weight or running statistics need it (torch
        warns itself about another count without them), no empty input (MXNet cannot run one),
        more than 1 spatial element when normalising by the input's own statistics."""
        C.check_instancenorm_input(self._dl_layer, self.num_features, tuple(input.shape),
                                   self.training or not self.track_running_stats, self.affine,
                                   self.track_running_stats)


class InstanceNorm1d(_INCheck, nn.InstanceNorm1d):
    """``torch.nn.InstanceNorm1d`` ((N, C, L) or unbatched (C, L))."""


class InstanceNorm2d(_INCheck, nn.InstanceNorm2d):
    """``torch.nn.InstanceNorm2d`` ((N, C, H, W) or unbatched (C, H, W))."""


class InstanceNorm3d(_INCheck, nn.InstanceNorm3d):
    """``torch.nn.InstanceNorm3d`` ((N, C, D, H, W) or unbatched (C, D, H, W))."""


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
