"""``torch.nn.MultiheadAttention`` on MXNet (a hybridizable Gluon block, ``F`` = ``mx.nd`` or
``mx.sym``) with torch's parameters, init and numbers, and the masked-call base the Transformer
layers share (dualdl_mx/transformer.py).

Parameters are torch's: ``in_proj_weight`` (3E, E) (xavier-uniform), or ``q_proj_weight`` (E, E),
``k_proj_weight`` (E, kdim), ``v_proj_weight`` (E, vdim) when ``kdim``/``vdim`` differ from
``embed_dim``; ``in_proj_bias`` (3E,) (zeros); ``bias_k``/``bias_v`` (1, 1, E) (xavier-normal) with
``add_bias_kv``; ``out_proj`` (bias zeros). The computation is torch's reference path
(``F.multi_head_attention_forward``): projections (one packed GEMM for self-attention, one for
key/value when ``key is value``, as torch), ``bias_k``/``bias_v`` appended as one more key/value
step, ``add_zero_attn`` a zero key/value step (masks padded with a 0 column for each),
scores = q k^T / sqrt(head_dim) + masks, softmax, dropout, weights averaged over heads or not.

Why F ops and not gluonnlp's cells: gluonnlp's ``MultiHeadAttentionCell`` keeps separate
query/key/value Dense layers (no packed ``in_proj_weight``, names with global counters) and its
``DotProductAttentionCell`` only takes a multiplicative 0/1 mask; torch's contract needs a packed
projection, additive float masks and key-padding masks.

Masks (same meaning as dualdl's torch build): key padding masks are boolean, any dtype, nonzero =
padding. Attention masks follow torch: bool nonzero = blocked, float = added to the scores (integer
masks refused, as torch). The dtype decides, so it is read from the NDArray at call time; inside a
hybridized *parent* block (Symbols, no dtype) an attention mask is taken as additive float. Masked
scores are -1e18 on both backends (finite, no NaN rows). Unbatched inputs ((L, E) query, (S, kdim)
key, (S,) key padding mask) run as a batch of one, as torch's.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import nd
from mxnet.gluon import HybridBlock

from dualdl.nn import _transformer as T
from dualdl.nn.registry import defined_in
from .base import Layer, Module, is_ndarray
from .dropout import dropout
from .linear import Linear


class _MaskedBlock(Layer):
    """Calls HybridBlock.forward with optional (None) tensor arguments and Python flags; a change in
    which arguments are None or in the flags rebuilds the hybridized graph (Gluon caches one). A
    subclass's call takes its ``forward``'s (torch's) argument names, and says so in its signature."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        forward = cls.__dict__.get("forward")
        if forward is not None:
            def __call__(self, *args, **kw):
                return _MaskedBlock.__call__(self, *args, **kw)
            __call__.__signature__ = inspect.signature(forward)
            __call__.__doc__ = forward.__doc__
            cls.__call__ = __call__

    def __call__(self, *args, **kwargs):
        """Gluon's Block.__call__ takes positional arguments only; torch code passes masks by keyword."""
        if not kwargs:
            return super().__call__(*args)
        for hook in self._forward_pre_hooks.values():
            hook(self, args)
        out = self.forward(*args, **kwargs)
        for hook in self._forward_hooks.values():
            hook(self, args, out)
        return out

    def _dl_call(self, flags: Tuple, *args):
        fmt = (flags, tuple(a is None for a in args))
        if getattr(self, "_dl_fmt", None) != fmt:
            if getattr(self, "_dl_fmt", None) is not None:
                self._clear_cached_op()
            object.__setattr__(self, "_dl_fmt", fmt)
        return HybridBlock.forward(self, *args)


def nd_attn_mask(mask: Any, dtype) -> Any:
    """NDArray attention mask -> additive float (bool True -> -1e18; float clipped at -1e18; integer
    masks refused, as torch does)."""
    if mask is None or not is_ndarray(mask):
        return mask
    T.check_attn_mask_dtype(np.dtype(mask.dtype).name)
    if np.dtype(mask.dtype).kind == "b":
        return (mask != 0).astype(dtype) * T.MASK_FILL
    return nd.maximum(mask.astype(dtype), T.MASK_FILL)


def nd_pad(mask: Any, dtype) -> Any:
    """NDArray key padding mask -> float 1 (pad) / 0."""
    if mask is None or not is_ndarray(mask):
        return mask
    return (mask != 0).astype(dtype)


def maybe_to(block: Module, device) -> None:
    if device is not None:
        block.to(device)


def batch_of_one(tensors: Tuple[Any, ...], axis: int) -> Tuple[Any, ...]:
    """Unbatched NDArrays with a batch axis of one at ``axis``, keeping ``a is b`` between them (the
    self-attention GEMM depends on it); None stays None."""
    done: dict = {}
    out = []
    for t in tensors:
        if t is None:
            out.append(None)
            continue
        if id(t) not in done:
            done[id(t)] = t.expand_dims(axis)
        out.append(done[id(t)])
    return tuple(out)


def _pad_column(F, m):
    """A 0 column appended to the last axis of an additive mask (the bias_k / zero attention key)."""
    return F.concat(m, F.zeros_like(F.slice_axis(m, axis=-1, begin=0, end=1)), dim=-1)


class MultiheadAttention(_MaskedBlock):
    """torch.nn.MultiheadAttention on MXNet. forward(query, key, value, key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False) -> (output,
    weights or None); weights (N, L, S') averaged over heads or (N, H, L, S'), S' = S plus one for
    ``add_bias_kv`` and one for ``add_zero_attn``; unbatched (L, E) inputs as torch."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: Optional[int] = None,
                 vdim: Optional[int] = None, batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments (torch's errors)
        E = self.embed_dim = int(embed_dim)
        self.kdim = E if kdim is None else int(kdim)
        self.vdim = E if vdim is None else int(vdim)
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        self.num_heads, self.head_dim = int(num_heads), E // int(num_heads)
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        self.add_zero_attn = bool(add_zero_attn)
        if self._qkv_same_embed_dim:
            bound = math.sqrt(6.0 / (E + 3 * E))                   # xavier_uniform_ on (3E, E)
            self._dl_new_param("in_proj_weight", (3 * E, E), init=mx.init.Uniform(bound))
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            for name, d in (("q_proj_weight", E), ("k_proj_weight", self.kdim), ("v_proj_weight", self.vdim)):
                self._dl_new_param(name, (E, d), init=mx.init.Uniform(math.sqrt(6.0 / (E + d))))
            self.in_proj_weight = None
        if bias:
            self._dl_new_param("in_proj_bias", (3 * E,))
        else:
            self.in_proj_bias = None
        self.out_proj = Linear(E, E, bias=bias)
        if bias:
            self.out_proj.bias.set_data(nd.zeros((E,), dtype=self.out_proj.bias.dtype))
        if add_bias_kv:                                            # xavier_normal_ on (1, 1, E): std sqrt(1/E)
            for name in ("bias_k", "bias_v"):
                self._dl_new_param(name, (1, 1, E), init=mx.init.Normal(math.sqrt(1.0 / E)))
        else:
            self.bias_k = self.bias_v = None
        maybe_to(self, device)

    def _who(self) -> str:
        return (f"MultiheadAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"batch_first={self.batch_first})")

    def _check(self, query, key, value, key_padding_mask, attn_mask) -> bool:
        """torch's shape rules (one wording on both backends); returns whether the call is batched."""
        who = self._who()
        batched = query.ndim == 3
        for name, t, dim in (("query", query, self.embed_dim), ("key", key, self.kdim), ("value", value, self.vdim)):
            T.check_src(who, t.shape, dim, self.batch_first, name=name, unbatched=True)
        T.check_same_rank(who, query.shape, key.shape, value.shape)
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(f"{who}: key and value must have the same shape but for the features, got "
                             f"{key.shape} and {value.shape}")
        n, L = T.batch_and_time(query.shape, self.batch_first)
        _, S = T.batch_and_time(key.shape, self.batch_first)
        if key_padding_mask is not None:
            T.check_key_padding_mask(who, key_padding_mask.shape, key.shape, self.batch_first, name="key_padding_mask")
        if attn_mask is not None:
            T.check_attn_mask(who, attn_mask.shape, L, S, n or 1, self.num_heads, name="attn_mask")
        return batched

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if is_causal and attn_mask is None:
            raise ValueError(f"{self._who()}: is_causal=True needs attn_mask (the hint does not build one)")
        batched = True
        if is_ndarray(query):
            batched = self._check(query, key, value, key_padding_mask, attn_mask)
            if not batched:
                query, key, value = batch_of_one((query, key, value), 0 if self.batch_first else 1)
                if key_padding_mask is not None:
                    key_padding_mask = key_padding_mask.reshape((1, -1))
            key_padding_mask = nd_pad(key_padding_mask, query.dtype)
            attn_mask = nd_attn_mask(attn_mask, query.dtype)
        self_attention = query is key and key is value
        kv_same = key is value
        flags = (bool(need_weights), bool(average_attn_weights), self_attention, kv_same)
        if self_attention:                       # one graph input, not three copies of it
            key = value = None
        elif kv_same:
            value = None
        out = self._dl_call(flags, query, key, value, key_padding_mask, attn_mask)
        out, w = (out[0], out[1]) if need_weights else (out, None)
        if not batched:
            out = out.squeeze(axis=0 if self.batch_first else 1)
            w = None if w is None else w.squeeze(axis=0)
        return out, w

    def _project(self, F, query, key, value, self_attention: bool, kv_same: bool, params):
        """q, k, v as (N*H, L or S, D), heads n-major as torch's ``view(L, N*H, D)``."""
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        tn = 0 if self.batch_first else 1                          # axis of N in the input layout
        bias = params.get("in_proj_bias")

        def rows(t, i, j):
            return None if t is None else F.slice_axis(t, axis=0, begin=i * E, end=j * E)

        def heads(t, parts):                                       # (.., .., parts*E) -> parts x (N*H, T, D)
            t = F.transpose(F.reshape(t, shape=(0, 0, parts, H, D)), axes=(2, tn, 3, 1 - tn, 4))
            t = F.reshape(t, shape=(0, -3, -2))
            return F.split(t, num_outputs=parts, axis=0, squeeze_axis=True) if parts > 1 else \
                F.reshape(t, shape=(-3, -2))

        def fc(x, w, b, n):
            return F.FullyConnected(x, w, b, num_hidden=n, no_bias=b is None, flatten=False)

        if not self._qkv_same_embed_dim:                           # torch's _in_projection: three GEMMs
            return (heads(fc(query, params["q_proj_weight"], rows(bias, 0, 1), E), 1),
                    heads(fc(key, params["k_proj_weight"], rows(bias, 1, 2), E), 1),
                    heads(fc(value, params["v_proj_weight"], rows(bias, 2, 3), E), 1))
        w = params["in_proj_weight"]
        if self_attention:                                         # one GEMM, as torch's packed path
            return tuple(heads(fc(query, w, bias, 3 * E), 3))
        q = heads(fc(query, rows(w, 0, 1), rows(bias, 0, 1), E), 1)
        if kv_same:                                                # one GEMM for key and value, as torch
            k, v = heads(fc(key, rows(w, 1, 3), rows(bias, 1, 3), 2 * E), 2)
            return q, k, v
        return (q, heads(fc(key, rows(w, 1, 2), rows(bias, 1, 2), E), 1),
                heads(fc(value, rows(w, 2, 3), rows(bias, 2, 3), E), 1))

    def hybrid_forward(self, F, query, key=None, value=None, key_padding_mask=None, attn_mask=None, **params):
        need_weights, average, self_attention, kv_same = self._dl_fmt[0]
        H, D = self.num_heads, self.head_dim
        q, k, v = self._project(F, query, key, value, self_attention, kv_same, params)
        if attn_mask is not None:
            attn_mask = F.maximum(attn_mask, T.MASK_FILL)
        added = 0                                                  # key/value steps appended
        if self.bias_k is not None:                                # torch: cat bias_k.repeat(1, N, 1)
            k4 = F.reshape(k, shape=(-4, -1, H, -2))               # (N, H, S, D)

            def step(name):                                        # -> (N*H, 1, D)
                b = F.reshape(params[name], shape=(1, H, 1, D))
                return F.reshape(F.broadcast_like(b, k4, lhs_axes=(0,), rhs_axes=(0,)), shape=(-3, -2))
            k, v, added = F.concat(k, step("bias_k"), dim=1), F.concat(v, step("bias_v"), dim=1), added + 1
        if self.add_zero_attn:                                     # torch: a zero key and value step
            z = F.zeros_like(F.slice_axis(k, axis=1, begin=0, end=1))
            k, v, added = F.concat(k, z, dim=1), F.concat(v, z, dim=1), added + 1
        for _ in range(added):                                     # the added keys are never masked
            attn_mask = None if attn_mask is None else _pad_column(F, attn_mask)
            key_padding_mask = None if key_padding_mask is None else _pad_column(F, key_padding_mask)
        q = q * math.sqrt(1.0 / D)
        scores = F.batch_dot(q, k, transpose_b=True)               # (N*H, L, S')
        if attn_mask is not None:
            scores = F.broadcast_add(scores, attn_mask)
        if key_padding_mask is not None:
            kpm = (key_padding_mask != 0) * T.MASK_FILL                # nonzero (1, True, -inf) = pad
            kpm = F.expand_dims(F.expand_dims(kpm, axis=1), axis=1)    # (N, 1, 1, S')
            scores = F.reshape(F.broadcast_add(F.reshape(scores, shape=(-4, -1, H, -2)), kpm), shape=(-3, -2))
        w = F.softmax(scores, axis=-1)
        if self.training and self.dropout > 0:
            w = dropout(F, w, self.dropout, True)
        out = F.batch_dot(w, v)                                    # (N*H, L, D)
        out = F.reshape(out, shape=(-4, -1, H, -2))                # (N, H, L, D)
        out = F.transpose(out, axes=(0, 2, 1, 3) if self.batch_first else (2, 0, 1, 3))
        out = self.out_proj(F.reshape(out, shape=(0, 0, -3)))     # input layout, (.., .., E)
        if not need_weights:
            return out
        w4 = F.reshape(w, shape=(-4, -1, H, -2))                   # (N, H, L, S')
        return out, (F.mean(w4, axis=1) if average else w4)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
