"""``Dropout`` on MXNet: follows ``train()``/``eval()`` (torch), not ``autograd.record()`` (Gluon)."""
from __future__ import annotations

from .base import Layer, is_ndarray

__all__ = ["Dropout", "dropout"]


def dropout(F, x, p: float, training: bool):
    """torch's dropout with ``F`` = nd or sym: identity unless ``training``; ``p = 1`` gives
    ``x * 0`` as torch (MXNet's Dropout scales by 1/(1-p): NaN), which keeps the graph connected
    (zero gradients upstream; ``zeros_like`` cuts it and MXNet's backward then crashes)."""
    if not training or p == 0.0:
        return x if is_ndarray(x) else F.identity(x)
    if p == 1.0:
        return x * 0.0
    return F.Dropout(x, p=p, mode="always")


class Dropout(Layer):
    """``torch.nn.Dropout``: active in train mode (``module.train()``), identity in eval mode,
    whatever ``autograd.record()`` says (Gluon's Dropout follows ``record()``)."""
    _dl_layer = "Dropout"

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = float(p), bool(inplace)

    def hybrid_forward(self, F, x):
        return dropout(F, x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
