"""Embedding on torch: ``torch.nn.Embedding`` with the neutral index checks the MXNet side also
makes (dualdl/nn/checks.py: MXNet clips out-of-range indices silently; both backends raise instead)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .core import torch_dtype
from .base import Layer


class Embedding(Layer, nn.Embedding):
    """``torch.nn.Embedding`` with an IndexError that names the valid range and a TypeError for
    non-integer indices (the MXNet side's messages)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        V, D = self.num_embeddings, self.embedding_dim
        C.check_embedding_dtype(V, D, _name(input), _is_integer(input))
        if input.numel():
            lo, hi = torch.aminmax(input)
            C.check_embedding_range(V, D, int(lo), int(hi))
        return super().forward(input)


def _name(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _is_integer(t: torch.Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


class EmbeddingBag(Layer, nn.EmbeddingBag):
    """``torch.nn.EmbeddingBag`` with the checks the MXNet side makes: mode at construction
    (dualdl.nn.arguments; torch: in forward); from ``dualdl.nn.checks``, integer indices in [0, V),
    the input/offsets/per_sample_weights shapes, offsets that start at 0, never decrease and
    (include_last_offset) end at the input's length, and no empty input, in forward."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: Optional[float] = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Optional[torch.Tensor] = None, include_last_offset: bool = False,
                 padding_idx: Optional[int] = None, device=None, dtype=None) -> None:
        if dtype is not None and not isinstance(dtype, torch.dtype):      # "float64" as on MXNet
            dtype = torch_dtype(dtype)
        super().__init__(num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                         _weight, include_last_offset, padding_idx, device, dtype)

    def forward(self, input: torch.Tensor, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        who = C.embedding_bag_name(self.num_embeddings, self.embedding_dim, self.mode)
        C.check_embedding_bag_input(who, self.mode, tuple(input.shape), _is_integer(input), _name(input),
                                    None if offsets is None else tuple(offsets.shape),
                                    None if per_sample_weights is None else tuple(per_sample_weights.shape),
                                    self.include_last_offset, "int64" if offsets is None else _name(offsets),
                                    offsets is None or _is_integer(offsets))
        if per_sample_weights is not None:
            C.check_embedding_bag_weights_dtype(who, _name(per_sample_weights), _name(self.weight))
        lo, hi = (int(v) for v in torch.aminmax(input))
        C.check_embedding_bag_values(who, self.num_embeddings, lo, hi,
                                     None if offsets is None else offsets.tolist(), input.shape[0],
                                     self.include_last_offset)
        return super().forward(input, offsets, per_sample_weights)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
