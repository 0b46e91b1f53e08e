"""Transformer encoder layers on MXNet with PyTorch's names, shapes, init and numbers.

``MultiheadAttention``, ``TransformerEncoderLayer``, ``TransformerEncoder`` and ``PositionalEncoding``
are hybridizable Gluon blocks (``F`` = ``mx.nd`` or ``mx.sym``) whose parameters are torch's:
``self_attn.in_proj_weight`` (3E, E), ``self_attn.in_proj_bias`` (3E,), ``self_attn.out_proj.*``,
``linear1.*``, ``linear2.*``, ``norm1.*``, ``norm2.*``; the encoder's ``layers.{i}.…`` (+ ``norm.*``).

Why F ops and not gluonnlp's cells: gluonnlp's ``MultiHeadAttentionCell`` keeps separate
query/key/value Dense layers (no packed ``in_proj_weight``, names with global counters) and its
``DotProductAttentionCell`` only takes a multiplicative 0/1 mask; torch's contract needs a packed
projection, additive float masks and key-padding masks, and dropout exactly where torch puts it
(attention weights, after the attention block, after the activation, after ``linear2``). The math is
the same as gluonnlp's (scores = q k^T / sqrt(head_dim), masked with -1e18, softmax, heads as
contiguous slices), which ``tests/test_parity_transformer.py`` checks against a real gluonnlp cell.

Masks (same meaning as dualdl's torch build): key padding masks are boolean, any dtype, nonzero =
padding; ``valid_length`` (Gluon's convention) may be given instead. Attention masks follow torch:
bool/int nonzero = blocked, float = added to the scores. The dtype decides, so it is read from the
NDArray at call time; inside a hybridized *parent* block (Symbols, no dtype) an attention mask is
taken as additive float. Masked scores are -1e18 on both backends (finite, no NaN rows).
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import nd
from mxnet.gluon import HybridBlock

from dualdl.nn import _transformer as T
from dualdl.devices import device as _parse_device
from dualdl.nn.registry import defined_in
from .activation import gelu
from .base import Layer, Module, is_ndarray
from .containers import ModuleList
from .core import native_device
from .fast.host import host_array
from .dropout import Dropout, dropout
from .linear import Linear
from .norm import LayerNorm


class _MaskedBlock(Layer):
    """Calls HybridBlock.forward with optional (None) tensor arguments and Python flags; a change in
    which arguments are None or in the flags rebuilds the hybridized graph (Gluon caches one)."""

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


def _nd_attn_mask(mask: Any, dtype) -> Any:
    """NDArray attention mask -> additive float (bool True -> -1e18; float clipped at -1e18; integer
    masks refused, as torch does)."""
    if mask is None or not is_ndarray(mask):
        return mask
    T.check_attn_mask_dtype(np.dtype(mask.dtype).name)
    if np.dtype(mask.dtype).kind == "b":
        return (mask != 0).astype(dtype) * T.MASK_FILL
    return nd.maximum(mask.astype(dtype), T.MASK_FILL)


def _nd_pad(mask: Any, dtype) -> Any:
    """NDArray key padding mask -> float 1 (pad) / 0."""
    if mask is None or not is_ndarray(mask):
        return mask
    return (mask != 0).astype(dtype)


def _zero_padded(F, x, pad, batch_first: bool):
    if pad is None:
        return x
    keep = 1 - pad                                    # (N, T)
    if not batch_first:
        keep = F.transpose(keep)                      # (T, N)
    keep = F.broadcast_like(F.expand_dims(keep, axis=-1), x)
    return F.where(keep, x, F.zeros_like(x))          # exact +0 (x * 0 would give -0 and NaN * 0)


def _activation(F, x, kind: str):
    return F.relu(x) if kind == "relu" else gelu(F, x)       # erf gelu, as torch (exact in float64)


class MultiheadAttention(_MaskedBlock):
    """torch.nn.MultiheadAttention on MXNet: packed ``in_proj_weight`` (3E, E) (xavier-uniform),
    ``in_proj_bias`` (zeros), ``out_proj`` Linear (bias zeros). forward(query, key, value,
    key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True,
    is_causal=False) -> (output, weights or None); weights (N, L, S) averaged over heads or
    (N, H, L, S). kdim/vdim other than embed_dim, add_bias_kv and add_zero_attn are declared refused."""
    _dl_cannot = {
        "add_bias_kv": (lambda v, bound: bool(v), "no bias_k/bias_v rows in dualdl's MXNet attention"),
        "add_zero_attn": (lambda v, bound: bool(v), "no zero attention row in dualdl's MXNet attention"),
        "kdim": (lambda v, bound: v not in (None, bound["embed_dim"]),
                 "dualdl's MXNet attention packs q/k/v in one in_proj_weight (3E, E): kdim must be embed_dim"),
        "vdim": (lambda v, bound: v not in (None, bound["embed_dim"]),
                 "dualdl's MXNet attention packs q/k/v in one in_proj_weight (3E, E): vdim must be embed_dim"),
    }

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: Optional[int] = None,
                 vdim: Optional[int] = None, batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments (torch's errors)
        E = self.embed_dim = int(embed_dim)
        self.num_heads, self.head_dim = int(num_heads), E // int(num_heads)
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        bound = math.sqrt(6.0 / (E + 3 * E))                       # xavier_uniform_ on (3E, E)
        self.in_proj_weight = self._dl_new_param("in_proj_weight", (3 * E, E), init=mx.init.Uniform(bound))
        self.in_proj_bias = self._dl_new_param("in_proj_bias", (3 * E,)) if bias else None
        self.out_proj = Linear(E, E, bias=bias)
        if bias:
            self.out_proj.bias.set_data(nd.zeros((E,)))
        _maybe_to(self, device)

    def _who(self) -> str:
        return (f"MultiheadAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"batch_first={self.batch_first})")

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if is_causal and attn_mask is None:
            raise ValueError(f"{self._who()}: is_causal=True needs attn_mask (the hint does not build one)")
        if is_ndarray(query):
            who = self._who()
            for name, t in (("query", query), ("key", key), ("value", value)):
                T.check_src(who, t.shape, self.embed_dim, self.batch_first, name=name)
            if key.shape != value.shape:
                raise ValueError(f"{who}: key and value must have the same shape, got {key.shape} and {value.shape}")
            n, L = (query.shape[0], query.shape[1]) if self.batch_first else (query.shape[1], query.shape[0])
            S = key.shape[1] if self.batch_first else key.shape[0]
            if key_padding_mask is not None:
                T.check_key_padding_mask(who, key_padding_mask.shape, key.shape, self.batch_first,
                                         name="key_padding_mask")
            if attn_mask is not None:
                T.check_attn_mask(who, attn_mask.shape, L, S, n, self.num_heads, name="attn_mask")
            key_padding_mask = _nd_pad(key_padding_mask, query.dtype)
            attn_mask = _nd_attn_mask(attn_mask, query.dtype)
        self_attention = query is key and key is value
        flags = (bool(need_weights), bool(average_attn_weights), self_attention)
        if self_attention:                       # one graph input, not three copies of it
            key = value = None
        out = self._dl_call(flags, query, key, value, key_padding_mask, attn_mask)
        return (out[0], out[1]) if need_weights else (out, None)

    def hybrid_forward(self, F, query, key, value, key_padding_mask=None, attn_mask=None,
                       in_proj_weight=None, in_proj_bias=None):
        need_weights, average, self_attention = self._dl_fmt[0]
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        # Inputs stay in their layout ((L, N, E), or (N, L, E) if batch_first): the projections take
        # any leading axes, and one transpose per projection (one in all for self-attention) moves
        # the heads out; one more puts them back. Same values as torch (heads = contiguous slices).
        tn = 0 if self.batch_first else 1                          # axis of N in the input layout
        if self_attention:                                         # one GEMM, as torch's packed path
            proj = F.FullyConnected(query, in_proj_weight, in_proj_bias, num_hidden=3 * E,
                                    no_bias=in_proj_bias is None, flatten=False)
            qkv = F.transpose(F.reshape(proj, shape=(0, 0, 3, H, D)), axes=(2, tn, 3, 1 - tn, 4))
            q, k, v = F.split(F.reshape(qkv, shape=(0, -3, -2)), num_outputs=3, axis=0, squeeze_axis=True)
        else:
            def part(x, i):                                        # -> (N*H, L, D)
                w = F.slice_axis(in_proj_weight, axis=0, begin=i * E, end=(i + 1) * E)
                b = None if in_proj_bias is None else F.slice_axis(in_proj_bias, axis=0, begin=i * E,
                                                                   end=(i + 1) * E)
                t = F.FullyConnected(x, w, b, num_hidden=E, no_bias=b is None, flatten=False)
                t = F.transpose(F.reshape(t, shape=(0, 0, H, D)), axes=(tn, 2, 1 - tn, 3))
                return F.reshape(t, shape=(-3, -2))
            q, k, v = part(query, 0), part(key, 1), part(value, 2)
        q = q * math.sqrt(1.0 / D)
        scores = F.batch_dot(q, k, transpose_b=True)               # (N*H, L, S)
        if attn_mask is not None:
            scores = F.broadcast_add(scores, F.maximum(attn_mask, T.MASK_FILL))
        if key_padding_mask is not None:
            kpm = (key_padding_mask != 0) * T.MASK_FILL                # nonzero (1, True, -inf) = pad
            kpm = F.expand_dims(F.expand_dims(kpm, axis=1), axis=1)    # (N, 1, 1, S)
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
        w4 = F.reshape(w, shape=(-4, -1, H, -2))                   # (N, H, L, S)
        return out, (F.mean(w4, axis=1) if average else w4)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


def _maybe_to(block: Module, device) -> None:
    if device is not None:
        block.to(device)


class _TransformerLayer(_MaskedBlock):
    """What the encoder and decoder layers share (torch's constructor signature, the same for both),
    in torch's registration order: the attention
    blocks named in ``_dl_attn`` (``self_attn``, then ``multihead_attn`` for the decoder),
    ``linear1``, ``dropout``, ``linear2``, ``norm1..k``, ``dropout1..k`` (k = attention blocks + 1)."""
    _dl_attn: Tuple[str, ...] = ("self_attn",)
    _dl_cannot = {"activation": (lambda v, bound: not isinstance(v, str),
                                 "dualdl's MXNet layers take the names 'relu' and 'gelu', not a "
                                 "(torch) function")}

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", layer_norm_eps: float = 1e-5, batch_first: Optional[bool] = None,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None,
                 layout: Optional[str] = None) -> None:
        super().__init__()
        who = f"{self._dl_layer}(d_model={d_model}, nhead={nhead})"
        self.activation = activation     # 'relu' or 'gelu' (dualdl.nn.arguments; a function: _dl_cannot)
        self.batch_first = T.resolve_batch_first(batch_first, layout, who)
        self.d_model, self.nhead, self.norm_first = int(d_model), int(nhead), bool(norm_first)
        self._dl_config = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward, dropout=dropout,
                               activation=self.activation, layer_norm_eps=layer_norm_eps,
                               batch_first=self.batch_first, norm_first=norm_first, bias=bias)
        for name in self._dl_attn:
            setattr(self, name, MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                   batch_first=self.batch_first))
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        k = len(self._dl_attn) + 1
        for i in range(1, k + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        for i in range(1, k + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        _maybe_to(self, device)

    def _who(self) -> str:
        return f"{self._dl_layer}(d_model={self.d_model}, nhead={self.nhead}, batch_first={self.batch_first})"

    def _sa_block(self, x, attn_mask, pad):
        return self.dropout1(self.self_attn(x, x, x, pad, False, attn_mask)[0])

    def _ff_block(self, F, x):
        out = self.linear2(self.dropout(_activation(F, self.linear1(x), self.activation)))
        return getattr(self, f"dropout{len(self._dl_attn) + 1}")(out)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, nhead={self.nhead}, activation={self.activation!r}, "
                f"norm_first={self.norm_first}, batch_first={self.batch_first}")


class TransformerEncoderLayer(_TransformerLayer):
    """torch.nn.TransformerEncoderLayer on MXNet (post-LN unless ``norm_first``; relu or gelu).

    ``dropout`` defaults to 0.1 on both backends (torch's default; gluonnlp's was 0.0: pass
    ``dropout=0.0`` to reproduce a gluonnlp model). ``layout='NTC'|'TNC'`` may be given instead of
    ``batch_first`` (default TNC, torch's). forward(src, src_mask=None, src_key_padding_mask=None,
    is_causal=False, valid_length=None): padding as ``src_key_padding_mask`` (N, T), nonzero =
    padding (torch's convention), or ``valid_length`` (N,) (Gluon's); padded output positions are 0.
    """

    def _checked(self, who: str, src, src_mask, src_key_padding_mask, is_causal, valid_length):
        """Validate NDArray inputs and canonicalise masks (Symbols pass through unchecked)."""
        T.check_pair(who, src_key_padding_mask, valid_length)
        if is_causal and src_mask is None:
            raise ValueError(f"{who}: is_causal=True needs a mask (the hint does not build one)")
        if not is_ndarray(src):
            return src_mask, src_key_padding_mask, valid_length
        T.check_src(who, src.shape, self.d_model, self.batch_first)
        n, t = (src.shape[0], src.shape[1]) if self.batch_first else (src.shape[1], src.shape[0])
        if src_mask is not None:
            T.check_attn_mask(who, src_mask.shape, t, t, n, self.nhead)
        if src_key_padding_mask is not None:
            T.check_key_padding_mask(who, src_key_padding_mask.shape, src.shape, self.batch_first)
        if valid_length is not None:
            T.check_valid_length(who, valid_length.shape, src.shape, self.batch_first)
            valid_length = valid_length.astype(src.dtype)
        return (_nd_attn_mask(src_mask, src.dtype), _nd_pad(src_key_padding_mask, src.dtype), valid_length)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False,
                valid_length=None):
        am, pad, vl = self._checked(self._who(), src, src_mask, src_key_padding_mask, is_causal, valid_length)
        return self._dl_call((), src, am, pad, vl)

    def _pad(self, F, x, pad, valid_length):
        """Float (N, T) padding mask, 1 = pad, from a mask (nonzero = pad) or valid_length."""
        if valid_length is None:
            return None if pad is None else (pad != 0)
        steps = F.contrib.arange_like(x, axis=1 if self.batch_first else 0)          # (T,)
        return F.broadcast_greater_equal(F.reshape(steps, shape=(1, -1)), F.reshape(valid_length, shape=(-1, 1)))

    def hybrid_forward(self, F, x, attn_mask=None, pad=None, valid_length=None):
        pad = self._pad(F, x, pad, valid_length)
        return self._layer(F, x, attn_mask, pad)

    def _layer(self, F, x, attn_mask, pad):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), attn_mask, pad)
            x = x + self._ff_block(F, self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, attn_mask, pad))
            x = self.norm2(x + self._ff_block(F, x))
        return _zero_padded(F, x, pad, self.batch_first)


class TransformerEncoder(_MaskedBlock):
    """torch.nn.TransformerEncoder on MXNet: ``num_layers`` copies of ``encoder_layer`` (each starting
    with its weights, as torch's deepcopy does; the template itself is not a child), then ``norm``.
    forward(src, mask=None, src_key_padding_mask=None, is_causal=None, valid_length=None); padded
    output positions are 0 (also after ``norm``)."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Optional[HybridBlock] = None,
                 enable_nested_tensor: bool = False, mask_check: bool = True) -> None:
        super().__init__()
        self.num_layers = T.check_encoder_args("mxnet", isinstance(encoder_layer, TransformerEncoderLayer),
                                               encoder_layer, num_layers, enable_nested_tensor)
        self.layers = ModuleList([_clone_layer(encoder_layer) for _ in range(self.num_layers)])
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = False, mask_check

    def _who(self) -> str:
        f = self.layers[0]
        return (f"TransformerEncoder(num_layers={self.num_layers}, d_model={f.d_model}, nhead={f.nhead}, "
                f"batch_first={f.batch_first})")

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: Optional[bool] = None,
                valid_length=None):
        am, pad, vl = self.layers[0]._checked(self._who(), src, mask, src_key_padding_mask, bool(is_causal),
                                              valid_length)
        return self._dl_call((), src, am, pad, vl)

    def hybrid_forward(self, F, x, attn_mask=None, pad=None, valid_length=None):
        first = self.layers[0]
        pad = first._pad(F, x, pad, valid_length)
        for layer in self.layers:
            x = layer(x, attn_mask, pad)
        if self.norm is not None:
            x = _zero_padded(F, self.norm(x), pad, first.batch_first)
        return x


def _clone_layer(layer: _TransformerLayer) -> _TransformerLayer:
    """A new layer with ``layer``'s configuration, contexts, mode and weights (torch's deepcopy)."""
    new = type(layer)(**layer._dl_config)
    ctxs = layer._dl_contexts()
    if ctxs != new._dl_contexts():
        new.to(ctxs)
    src = layer._collect_params_with_prefix()
    for name, p in new._collect_params_with_prefix().items():
        p.set_data(src[name].data(src[name].list_ctx()[0]).copy())
    new.train(layer.training)
    return new


def _nd_shape(t: Any):
    return None if t is None else tuple(t.shape)


def _decoder_masks(who: str, d_model: int, nhead: int, batch_first: bool, tgt, memory, tgt_mask, memory_mask,
                   tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal) -> Tuple:
    """Check a decoder call (NDArrays; Symbols pass unchecked) and canonicalise its masks: additive
    float attention masks, float 0/1 padding masks."""
    if not is_ndarray(tgt):
        return tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask
    T.check_decoder_inputs(who, tgt.shape, _nd_shape(memory), d_model, nhead, batch_first, _nd_shape(tgt_mask),
                           _nd_shape(memory_mask), _nd_shape(tgt_key_padding_mask),
                           _nd_shape(memory_key_padding_mask), bool(tgt_is_causal), bool(memory_is_causal))
    return (_nd_attn_mask(tgt_mask, tgt.dtype), _nd_attn_mask(memory_mask, tgt.dtype),
            _nd_pad(tgt_key_padding_mask, tgt.dtype), _nd_pad(memory_key_padding_mask, tgt.dtype))


class TransformerDecoderLayer(_TransformerLayer):
    """torch.nn.TransformerDecoderLayer on MXNet: ``self_attn`` (on tgt), ``multihead_attn`` (tgt
    queries, memory keys/values), FFN; post-LN unless ``norm_first``; relu or gelu; dropout 0.1 by
    default (torch's). forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False); masks as torch's
    (bool True = blocked, float added; key padding nonzero = pad). Padded tgt positions are not zeroed
    (torch's decoder does not zero them)."""
    _dl_attn = ("self_attn", "multihead_attn")

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        masks = _decoder_masks(self._who(), self.d_model, self.nhead, self.batch_first, tgt, memory, tgt_mask,
                               memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
                               memory_is_causal)
        return self._dl_call((), tgt, memory, *masks)

    def hybrid_forward(self, F, x, memory, tgt_mask=None, memory_mask=None, tgt_pad=None, memory_pad=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_pad)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_pad)
            x = x + self._ff_block(F, self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_pad))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_pad))
            x = self.norm3(x + self._ff_block(F, x))
        return x

    def _mha_block(self, x, memory, attn_mask, pad):
        return self.dropout2(self.multihead_attn(x, memory, memory, pad, False, attn_mask)[0])


class TransformerDecoder(_MaskedBlock):
    """torch.nn.TransformerDecoder on MXNet: ``num_layers`` copies of ``decoder_layer`` (each starting
    with its weights, as torch's deepcopy; the template is not a child), then ``norm``. forward(tgt,
    memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=None, memory_is_causal=False)."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Optional[HybridBlock] = None) -> None:
        super().__init__()
        self.num_layers = T.check_stack_args("TransformerDecoder", "decoder_layer", "TransformerDecoderLayer",
                                             "mxnet", isinstance(decoder_layer, TransformerDecoderLayer),
                                             decoder_layer, num_layers)
        self.layers = ModuleList([_clone_layer(decoder_layer) for _ in range(self.num_layers)])
        self.norm = norm

    def _who(self) -> str:
        f = self.layers[0]
        return (f"TransformerDecoder(num_layers={self.num_layers}, d_model={f.d_model}, nhead={f.nhead}, "
                f"batch_first={f.batch_first})")

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: Optional[bool] = None, memory_is_causal: bool = False):
        f = self.layers[0]
        masks = _decoder_masks(self._who(), f.d_model, f.nhead, f.batch_first, tgt, memory, tgt_mask, memory_mask,
                               tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal)
        return self._dl_call((), tgt, memory, *masks)

    def hybrid_forward(self, F, x, memory, tgt_mask=None, memory_mask=None, tgt_pad=None, memory_pad=None):
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_pad, memory_pad)
        return x if self.norm is None else self.norm(x)


def _xavier_uniform(block: Module) -> None:
    """torch.nn.Transformer._reset_parameters: xavier-uniform on every parameter with more than one
    axis (fans of a 2-D weight (out, in): in and out)."""
    for _, p in block.named_parameters():
        if len(p.shape) > 1:
            fan_out, fan_in = p.shape[0], int(np.prod(p.shape[1:]))
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            p.set_data(nd.random.uniform(-bound, bound, shape=p.shape, dtype=p.dtype))


class Transformer(_MaskedBlock):
    """torch.nn.Transformer on MXNet: ``encoder`` (dualdl TransformerEncoder + final LayerNorm) and
    ``decoder`` (TransformerDecoder + final LayerNorm), torch's names; every parameter with more than
    one axis re-drawn xavier-uniform, as torch's ``_reset_parameters``. forward(src, tgt, src_mask=None,
    tgt_mask=None, memory_mask=None, src_key_padding_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None, memory_is_causal=False).
    ``generate_square_subsequent_mask(sz)``: float32 (sz, sz), -inf above the diagonal."""
    _dl_cannot = _TransformerLayer._dl_cannot

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", custom_encoder: Optional[Any] = None,
                 custom_decoder: Optional[Any] = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments (torch's errors)
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias, None, dtype)
        if custom_encoder is None:
            custom_encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args), num_encoder_layers,
                                                LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        if custom_decoder is None:
            custom_decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args), num_decoder_layers,
                                                LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.encoder, self.decoder = custom_encoder, custom_decoder
        _xavier_uniform(self)
        self.d_model, self.nhead, self.batch_first = int(d_model), int(nhead), bool(batch_first)
        _maybe_to(self, device)

    def _who(self) -> str:
        return f"Transformer(d_model={self.d_model}, nhead={self.nhead}, batch_first={self.batch_first})"

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal: Optional[bool] = None,
                tgt_is_causal: Optional[bool] = None, memory_is_causal: bool = False):
        who = self._who()
        if is_ndarray(src):
            T.check_src(who, src.shape, self.d_model, self.batch_first, name="src")
        masks = _decoder_masks(who, self.d_model, self.nhead, self.batch_first, tgt, src, tgt_mask, memory_mask,
                               tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal)
        T.warn_unmasked_memory(who, src_key_padding_mask, memory_key_padding_mask)
        src_mask, src_pad, _ = self.encoder.layers[0]._checked(who, src, src_mask, src_key_padding_mask,
                                                               bool(src_is_causal), None)
        return self._dl_call((), src, tgt, src_mask, src_pad, *masks)

    def hybrid_forward(self, F, src, tgt, src_mask=None, src_pad=None, tgt_mask=None, memory_mask=None,
                       tgt_pad=None, memory_pad=None):
        memory = self.encoder(src, src_mask, src_pad)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_pad, memory_pad)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """torch's causal mask: (sz, sz), float -inf above the diagonal, 0 elsewhere (an NDArray)."""
        ctx = (mx.current_context() if device is None else
               device if isinstance(device, mx.Context) else native_device(_parse_device(device)))
        return host_array(T.causal_mask(sz), ctx, np.dtype(dtype or "float32").name)


class PositionalEncoding(_MaskedBlock):
    """``x * sqrt(d_model)`` (if ``scale``) ``+ pe[:T]``, then dropout; ``style='vaswani'`` (standard)
    or ``'gluonnlp'`` (gluonnlp 0.10's table: copy its ``const`` parameter into ``pe`` or rebuild it
    here). Buffer ``pe`` (max_len, d_model). T > max_len raises for NDArray input."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0, style: str = "vaswani",
                 scale: bool = False, batch_first: Optional[bool] = None, layout: Optional[str] = None) -> None:
        super().__init__()
        self.d_model, self.max_len, self.style, self.scale = int(d_model), int(max_len), style, bool(scale)
        self.batch_first = T.resolve_batch_first(batch_first, layout, self._who())
        self.register_buffer("pe", T.sinusoid_table(self.max_len, self.d_model, style))
        self.dropout = Dropout(dropout)

    def _who(self) -> str:
        return f"PositionalEncoding(d_model={self.d_model}, max_len={self.max_len}, style={self.style!r})"

    def forward(self, x):
        if is_ndarray(x):
            T.check_src(self._who(), x.shape, self.d_model, self.batch_first)
            T.check_pe_length(self._who(), x.shape[1] if self.batch_first else x.shape[0], self.max_len)
        return self._dl_call((), x)

    def hybrid_forward(self, F, x, pe=None):
        idx = F.contrib.arange_like(x, axis=1 if self.batch_first else 0)
        p = F.expand_dims(F.take(pe, idx), axis=0 if self.batch_first else 1)
        if self.scale:
            x = x * math.sqrt(self.d_model)
        return self.dropout(F.broadcast_add(x, p))

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, max_len={self.max_len}, style={self.style!r}, scale={self.scale}, "
                f"batch_first={self.batch_first}")


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
