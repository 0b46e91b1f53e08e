"""``Dropout``, ``Dropout1d`` and ``Dropout2d`` on MXNet: follow ``train()``/``eval()`` (torch),
not ``autograd.record()`` (Gluon)."""
from __future__ import annotations

from typing import Tuple

from dualdl.nn.resample_checks import channel_dropout_axes, check_channel_dropout_input
from dualdl.nn.registry import defined_in
from .base import Layer, is_ndarray


def dropout(F, x, p: float, training: bool, axes: Tuple[int, ...] = ()):
    """torch's dropout with ``F`` = nd or sym: identity unless ``training``; ``p = 1`` gives
    ``x * 0`` as torch (MXNet's Dropout scales by 1/(1-p): NaN), which keeps the graph connected
    (zero gradients upstream; ``zeros_like`` cuts it and MXNet's backward then crashes).
    ``axes``: the axes one mask value covers (channel dropout)."""
    if not training or p == 0.0:
        return x if is_ndarray(x) else F.identity(x)
    if p == 1.0:
        return x * 0.0
    return F.Dropout(x, p=p, mode="always", axes=axes)


class Dropout(Layer):
    """``torch.nn.Dropout``: active in train mode (``module.train()``), identity in eval mode,
    whatever ``autograd.record()`` says (Gluon's Dropout follows ``record()``)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()              # p in [0, 1]: checked by dualdl.nn.arguments (torch's message)
        self.p, self.inplace = float(p), bool(inplace)

    def hybrid_forward(self, F, x):
        return dropout(F, x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    """Zeroes whole channels: one mask value per (sample, channel), shared by the dims after the
    channel dim (MXNet's ``Dropout(axes=...)``), scaled by 1/(1-p) as torch."""

    def hybrid_forward(self, F, x):
        name = type(self).__name__
        if is_ndarray(x):
            check_channel_dropout_input(name, x.shape)
        axes = channel_dropout_axes(name, x.ndim if is_ndarray(x) else None)
        return dropout(F, x, self.p, self.training, axes)


class Dropout1d(_ChannelDropout):
    """``torch.nn.Dropout1d``: (N, C, L) or (C, L); hybridized, (N, C, L)."""


class Dropout2d(_ChannelDropout):
    """``torch.nn.Dropout2d``: (N, C, H, W), or (N, C, L) as torch 2.13 takes a 3-D input;
    hybridized, (N, C, H, W)."""


__all__ = [*defined_in(__name__), "dropout"]  # the layers defined above (registered by class name)
