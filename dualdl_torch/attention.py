"""``torch.nn.MultiheadAttention`` on torch with dualdl's masking, and the mask helpers the
Transformer layers share (dualdl_torch/transformer.py).

What the subclass changes relative to plain torch (and why):
- it always runs torch's reference path (``F.multi_head_attention_forward``); the fused fast path
  (eval + no grad) computes padded positions differently;
- masks: ``key_padding_mask`` is boolean (True/nonzero = padding, any dtype); a bool attention mask
  blocks where True, a float one is added. Masked scores get -1e18 instead of -inf, so a fully
  masked row is finite, not NaN (any other row has torch's numbers: exp(-1e18 - max) is 0);
- input shapes are checked (batched (L, N, E) or torch's unbatched (L, E)); errors name the layer,
  the expected layout and the shape received.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from dualdl.nn import _transformer as T
from dualdl.nn.registry import defined_in
from .base import Layer


def attn_mask_additive(mask: Optional[torch.Tensor], dtype: torch.dtype) -> Optional[torch.Tensor]:
    """torch's mask convention with a finite fill: bool True -> -1e18, float -> added (>= -1e18)."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, T.MASK_FILL)
    if not mask.is_floating_point():
        T.check_attn_mask_dtype(str(mask.dtype).rsplit(".", 1)[-1])
    return mask.to(dtype).clamp(min=T.MASK_FILL)


def pad_bool(key_padding_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    if key_padding_mask is None:
        return None
    return key_padding_mask if key_padding_mask.dtype == torch.bool else key_padding_mask != 0


def pad_additive(pad: Optional[torch.Tensor], dtype: torch.dtype) -> Optional[torch.Tensor]:
    if pad is None:
        return None
    return torch.zeros(pad.shape, dtype=dtype, device=pad.device).masked_fill(pad, T.MASK_FILL)


def _to_tnc(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    """batch_first -> (L, N, E), keeping ``query is key is value`` / ``key is value`` as torch's own
    MultiheadAttention does: F.multi_head_attention_forward then projects self-attention with one
    packed GEMM (separate GEMMs round differently, up to 7e-6 relative after a few layers)."""
    if key is value:
        if query is key:
            query = key = value = query.transpose(0, 1)
        else:
            query, key = query.transpose(0, 1), key.transpose(0, 1)
            value = key
        return query, key, value
    return query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)


class MultiheadAttention(Layer, torch.nn.MultiheadAttention):
    """``torch.nn.MultiheadAttention`` (packed ``in_proj_weight`` (3E, E), or q/k/v_proj_weight for
    ``kdim``/``vdim``; ``bias_k``/``bias_v``, ``add_zero_attn``; ``out_proj``), always on torch's
    reference path. ``key_padding_mask``: True/nonzero = padded key. Masked scores get -1e18 (finite)
    on both backends. Unbatched (L, E) query/key/value as torch."""

    def _who(self) -> str:
        return (f"MultiheadAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"batch_first={self.batch_first})")

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: Optional[torch.Tensor] = None, need_weights: bool = True,
                attn_mask: Optional[torch.Tensor] = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        who = self._who()
        for name, t, dim in (("query", query, self.embed_dim), ("key", key, self.kdim),
                             ("value", value, self.vdim)):
            T.check_src(who, tuple(t.shape), dim, self.batch_first, name=name, unbatched=True)
        T.check_same_rank(who, tuple(query.shape), tuple(key.shape), tuple(value.shape))
        if tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
            raise ValueError(f"{who}: key and value must have the same shape but for the features, got "
                             f"{tuple(key.shape)} and {tuple(value.shape)}")
        if key_padding_mask is not None:
            T.check_key_padding_mask(who, tuple(key_padding_mask.shape), tuple(key.shape), self.batch_first,
                                     name="key_padding_mask")
        n, L = T.batch_and_time(tuple(query.shape), self.batch_first)
        _, S = T.batch_and_time(tuple(key.shape), self.batch_first)
        if attn_mask is not None:
            T.check_attn_mask(who, tuple(attn_mask.shape), L, S, n or 1, self.num_heads, name="attn_mask")
        kpm = pad_additive(pad_bool(key_padding_mask), query.dtype)
        am = attn_mask_additive(attn_mask, query.dtype)
        transpose = self.batch_first and query.dim() == 3           # torch: unbatched is never transposed
        if transpose:
            query, key, value = _to_tnc(query, key, value)
        out, w = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
            self.out_proj.bias, training=self.training, key_padding_mask=kpm, need_weights=need_weights,
            attn_mask=am, average_attn_weights=average_attn_weights, is_causal=is_causal,
            use_separate_proj_weight=not self._qkv_same_embed_dim, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight)
        if transpose:
            out = out.transpose(0, 1)
        return out, w


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
