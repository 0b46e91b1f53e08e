"""Embedding on torch: ``torch.nn.Embedding`` with the index checks the MXNet side also makes
(MXNet clips out-of-range indices silently; both backends raise instead)."""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["Embedding"]


class Embedding(nn.Embedding):
    """``torch.nn.Embedding`` with an IndexError that names the valid range and a TypeError for
    non-integer indices."""
    _dl_layer = "Embedding"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        name = f"Embedding({self.num_embeddings}, {self.embedding_dim})"
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise TypeError(f"{name}: indices must be an integer tensor (int32/int64), got {x.dtype}")
        if x.numel():
            lo, hi = (int(v) for v in torch.aminmax(x))
            if lo < 0 or hi >= self.num_embeddings:
                bad = lo if lo < 0 else hi
                raise IndexError(f"{name}: index {bad} is out of range [0, {self.num_embeddings})")
        return super().forward(x)
