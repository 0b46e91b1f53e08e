"""``Dropout``, ``Dropout1d`` and ``Dropout2d`` on MXNet: follow ``train()``/``eval()`` (torch),
not ``autograd.record()`` (Gluon); 0-d inputs (Dropout) and unbatched (C, L) inputs (Dropout1d)
as torch, eager and hybridized."""
from __future__ import annotations

from typing import Tuple

from dualdl.nn.resample_checks import channel_dropout_axes, check_channel_dropout_input
from dualdl.nn.registry import defined_in
from .activation import _Pointwise
from .base import is_ndarray


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


class Dropout(_Pointwise):
    """``torch.nn.Dropout``: active in train mode (``module.train()``), identity in eval mode,
    whatever ``autograd.record()`` says (Gluon's Dropout follows ``record()``). A 0-d input runs
    as shape (1,) (:class:`~dualdl_mx.activation._Pointwise`: MXNet has no 0-d arrays)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()              # p in [0, 1]: checked by dualdl.nn.arguments (torch's message)
        self.p, self.inplace = float(p), bool(inplace)

    def hybrid_forward(self, F, x):
        return dropout(F, x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    """Zeroes whole channels: one mask value per (sample, channel), shared by the dims after the
    channel dim (MXNet's ``Dropout(axes=...)``), scaled by 1/(1-p) as torch. The input's rank is
    checked in its own shape (before an unbatched one is run as a batch of one)."""

    def _dl_check(self, x) -> None:
        check_channel_dropout_input(type(self).__name__, x.shape)

    def hybrid_forward(self, F, x):
        name = type(self).__name__
        axes = channel_dropout_axes(name, x.ndim if is_ndarray(x) else None)
        return dropout(F, x, self.p, self.training, axes)


class Dropout1d(_ChannelDropout):
    """``torch.nn.Dropout1d``: (N, C, L), or (C, L) run as a batch of one (eager and hybridized;
    a graph inside a parent takes (N, C, L))."""
    _dl_unbatched_ndim = 2


class Dropout2d(_ChannelDropout):
    """``torch.nn.Dropout2d``: (N, C, H, W), or (N, C, L) as torch 2.13 takes a 3-D input. Both
    are run as (N, C, H * W or L) with one mask value per (N, C), so that one graph takes either
    rank (a Symbol has none)."""

    def hybrid_forward(self, F, x):
        if not self.training or self.p == 0.0:
            return dropout(F, x, self.p, self.training)
        flat = F.reshape(x, shape=(0, 0, -1))
        return F.reshape_like(dropout(F, flat, self.p, self.training, (2,)), x)


__all__ = [*defined_in(__name__), "dropout"]  # the layers defined above (registered by class name)
