"""Embedding on torch: ``torch.nn.Embedding`` with the neutral index checks the MXNet side also
makes (dualdl/nn/checks.py: MXNet clips out-of-range indices silently; both backends raise instead)."""
from __future__ import annotations

import torch
from torch import nn

from dualdl.nn import checks as C

__all__ = ["Embedding"]


class Embedding(nn.Embedding):
    """``torch.nn.Embedding`` with an IndexError that names the valid range and a TypeError for
    non-integer indices (the MXNet side's messages)."""
    _dl_layer = "Embedding"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        V, D = self.num_embeddings, self.embedding_dim
        integer = not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
        C.check_embedding_dtype(V, D, str(x.dtype).replace("torch.", ""), integer)
        if x.numel():
            lo, hi = torch.aminmax(x)
            C.check_embedding_range(V, D, int(lo), int(hi))
        return super().forward(x)
