"""Transformer layers on MXNet with PyTorch's names, shapes, init and numbers.

``TransformerEncoderLayer``, ``TransformerEncoder``, ``TransformerDecoderLayer``,
``TransformerDecoder``, ``Transformer`` and ``PositionalEncoding`` are hybridizable Gluon blocks
(``F`` = ``mx.nd`` or ``mx.sym``) whose parameters are torch's: ``self_attn.in_proj_weight`` (3E, E),
``self_attn.in_proj_bias`` (3E,), ``self_attn.out_proj.*``, ``linear1.*``, ``linear2.*``, ``norm1.*``,
``norm2.*``; the encoder's ``layers.{i}.…`` (+ ``norm.*``). The attention blocks are
dualdl_mx/attention.py's ``MultiheadAttention``; dropout sits exactly where torch puts it (attention
weights, after the attention block, after the activation, after ``linear2``). The math is the same
as gluonnlp's (scores = q k^T / sqrt(head_dim), masked with -1e18, softmax, heads as contiguous
slices), which ``tests/test_parity_transformer.py`` checks against a real gluonnlp cell.

Masks (same meaning as dualdl's torch build): key padding masks are boolean, any dtype, nonzero =
padding, and give torch's numbers everywhere (padded positions keep the values torch's reference
path computes); ``valid_length`` (Gluon's convention) may be given instead, and then padded output
positions are 0, as gluonnlp's encoder. Attention masks follow torch: bool nonzero = blocked, float
= added to the scores. Unbatched inputs ((T, E), key padding masks (T,)) run as a batch of one, as
torch's. ``activation``: 'relu'/'gelu', torch's ``F.relu``/``F.gelu`` or ``dl.ops.relu``/``gelu``.
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
from .attention import MultiheadAttention, _MaskedBlock, batch_of_one, maybe_to, nd_attn_mask, nd_pad
from .base import Module, is_ndarray
from .containers import ModuleList
from .core import native_device
from .fast.host import host_array
from .dropout import Dropout
from .linear import Linear
from .norm import LayerNorm


def _zero_padded(F, x, pad, batch_first: bool):
    if pad is None:
        return x
    keep = 1 - pad                                    # (N, T)
    if not batch_first:
        keep = F.transpose(keep)                      # (T, N)
    keep = F.broadcast_like(F.expand_dims(keep, axis=-1), x)
    return F.where(keep, x, F.zeros_like(x))          # exact +0 (x * 0 would give -0 and NaN * 0)


def activation_kind(activation: Any) -> Optional[str]:
    """'relu' or 'gelu' for what an MXNet layer can run: those names, torch's ``F.relu``/``torch.relu``/
    ``F.gelu`` (torch's TransformerEncoderLayer stores ``F.relu`` for 'relu'; torch's module tests pass
    ``F.gelu``) and dualdl's ``dl.ops.relu``/``dl.ops.gelu``, recognised by module and name (torch is
    not imported here); None for any other callable (declared refused)."""
    if isinstance(activation, str):
        return activation
    name = getattr(activation, "__name__", None)
    module = getattr(activation, "__module__", None)
    if name in ("relu", "gelu") and module in ("torch.nn.functional", "torch._C._nn", "torch", "dualdl.ops"):
        return name
    return None


def _activation(F, x, kind: str, float64: bool):
    """torch's relu or erf gelu (exact formula in float64, eager and hybridized)."""
    return F.relu(x) if kind == "relu" else gelu(F, x, float64=float64)


class _TransformerLayer(_MaskedBlock):
    """What the encoder and decoder layers share (torch's constructor signature, the same for both),
    in torch's registration order: the attention
    blocks named in ``_dl_attn`` (``self_attn``, then ``multihead_attn`` for the decoder),
    ``linear1``, ``dropout``, ``linear2``, ``norm1..k``, ``dropout1..k`` (k = attention blocks + 1)."""
    _dl_attn: Tuple[str, ...] = ("self_attn",)
    _dl_cannot = {"activation": (lambda v, bound: activation_kind(v) is None,
                                 "dualdl's MXNet layers run 'relu' and 'gelu' (the names, torch's F.relu/"
                                 "torch.relu/F.gelu or dl.ops.relu/dl.ops.gelu), not another function")}

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", layer_norm_eps: float = 1e-5, batch_first: Optional[bool] = None,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None,
                 layout: Optional[str] = None) -> None:
        super().__init__()
        who = f"{self._dl_layer}(d_model={d_model}, nhead={nhead})"
        self.activation = activation_kind(activation)       # 'relu' or 'gelu' (else refused: _dl_cannot)
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
        maybe_to(self, device)

    def _who(self) -> str:
        return f"{self._dl_layer}(d_model={self.d_model}, nhead={self.nhead}, batch_first={self.batch_first})"

    def _sa_block(self, x, attn_mask, pad):
        return self.dropout1(self.self_attn(x, x, x, pad, False, attn_mask)[0])

    def _ff_block(self, F, x):
        float64 = np.dtype(self.linear1.weight.dtype) == np.float64
        out = self.linear2(self.dropout(_activation(F, self.linear1(x), self.activation, float64)))
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
    padding (torch's convention and numbers), or ``valid_length`` (N,) (Gluon's: padded output
    positions are 0). Unbatched src (T, E) as torch.
    """

    def _checked(self, who: str, src, src_mask, src_key_padding_mask, is_causal, valid_length):
        """Validate NDArray inputs and canonicalise masks (Symbols pass through unchecked); an
        unbatched src becomes a batch of one. -> (src, mask, pad, valid_length, unbatched)."""
        T.check_pair(who, src_key_padding_mask, valid_length)
        if is_causal and src_mask is None:
            raise ValueError(f"{who}: is_causal=True needs a mask (the hint does not build one)")
        if not is_ndarray(src):
            return src, src_mask, src_key_padding_mask, valid_length, False
        T.check_src(who, src.shape, self.d_model, self.batch_first, unbatched=True)
        n, t = T.batch_and_time(src.shape, self.batch_first)
        if src_mask is not None:
            T.check_attn_mask(who, src_mask.shape, t, t, n or 1, self.nhead)
        if src_key_padding_mask is not None:
            T.check_key_padding_mask(who, src_key_padding_mask.shape, src.shape, self.batch_first)
        if valid_length is not None:
            T.check_valid_length(who, valid_length.shape, src.shape, self.batch_first)
            valid_length = valid_length.astype(src.dtype)
        unbatched = n is None
        if unbatched:
            src = src.expand_dims(0 if self.batch_first else 1)
            src_key_padding_mask = None if src_key_padding_mask is None else src_key_padding_mask.reshape((1, -1))
            valid_length = None if valid_length is None else valid_length.reshape((1,))
        return (src, nd_attn_mask(src_mask, src.dtype), nd_pad(src_key_padding_mask, src.dtype), valid_length,
                unbatched)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False, *,
                valid_length=None):
        src, am, pad, vl, unbatched = self._checked(self._who(), src, src_mask, src_key_padding_mask, is_causal,
                                                    valid_length)
        return _unbatch(self._dl_call((), src, am, pad, vl), unbatched, self.batch_first)

    def _pad(self, F, x, pad, valid_length):
        """Float (N, T) padding mask, 1 = pad, from a mask (nonzero = pad) or valid_length."""
        if valid_length is None:
            return None if pad is None else (pad != 0)
        steps = F.contrib.arange_like(x, axis=1 if self.batch_first else 0)          # (T,)
        return F.broadcast_greater_equal(F.reshape(steps, shape=(1, -1)), F.reshape(valid_length, shape=(-1, 1)))

    def hybrid_forward(self, F, x, attn_mask=None, pad=None, valid_length=None):
        return self._layer(F, x, attn_mask, self._pad(F, x, pad, valid_length), valid_length is not None)

    def _layer(self, F, x, attn_mask, pad, zero: bool):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), attn_mask, pad)
            x = x + self._ff_block(F, self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, attn_mask, pad))
            x = self.norm2(x + self._ff_block(F, x))
        return _zero_padded(F, x, pad, self.batch_first) if zero else x


def _unbatch(out, unbatched: bool, batch_first: bool):
    return out.squeeze(axis=0 if batch_first else 1) if unbatched else out


class TransformerEncoder(_MaskedBlock):
    """torch.nn.TransformerEncoder on MXNet: ``num_layers`` copies of ``encoder_layer`` (each starting
    with its weights, as torch's deepcopy does; the template itself is not a child), then ``norm``.
    forward(src, mask=None, src_key_padding_mask=None, is_causal=None, valid_length=None); with
    ``valid_length``, padded output positions are 0 (also after ``norm``)."""

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

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: Optional[bool] = None, *,
                valid_length=None):
        first = self.layers[0]
        src, am, pad, vl, unbatched = first._checked(self._who(), src, mask, src_key_padding_mask, bool(is_causal),
                                                     valid_length)
        return _unbatch(self._dl_call((), src, am, pad, vl), unbatched, first.batch_first)

    def hybrid_forward(self, F, x, attn_mask=None, pad=None, valid_length=None):
        first = self.layers[0]
        for layer in self.layers:
            x = layer(x, attn_mask, pad, False, valid_length=valid_length)
        if self.norm is not None:
            x = self.norm(x)
            if valid_length is not None:
                x = _zero_padded(F, x, first._pad(F, x, None, valid_length), first.batch_first)
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


def _decoder_call(who: str, d_model: int, nhead: int, batch_first: bool, tgt, memory, tgt_mask, memory_mask,
                  tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal) -> Tuple:
    """Check a decoder call (NDArrays; Symbols pass unchecked) and canonicalise it: additive float
    attention masks, float 0/1 padding masks, unbatched tgt/memory as a batch of one.
    -> ((tgt, memory, tgt_mask, memory_mask, tgt_pad, memory_pad), unbatched)."""
    if not is_ndarray(tgt):
        return (tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask), False
    T.check_decoder_inputs(who, tgt.shape, _nd_shape(memory), d_model, nhead, batch_first, _nd_shape(tgt_mask),
                           _nd_shape(memory_mask), _nd_shape(tgt_key_padding_mask),
                           _nd_shape(memory_key_padding_mask), bool(tgt_is_causal), bool(memory_is_causal))
    unbatched = tgt.ndim == 2
    if unbatched:
        tgt, memory = batch_of_one((tgt, memory), 0 if batch_first else 1)
        tgt_key_padding_mask, memory_key_padding_mask = (
            None if m is None else m.reshape((1, -1)) for m in (tgt_key_padding_mask, memory_key_padding_mask))
    return (tgt, memory, nd_attn_mask(tgt_mask, tgt.dtype), nd_attn_mask(memory_mask, tgt.dtype),
            nd_pad(tgt_key_padding_mask, tgt.dtype), nd_pad(memory_key_padding_mask, tgt.dtype)), unbatched


class TransformerDecoderLayer(_TransformerLayer):
    """torch.nn.TransformerDecoderLayer on MXNet: ``self_attn`` (on tgt), ``multihead_attn`` (tgt
    queries, memory keys/values), FFN; post-LN unless ``norm_first``; relu or gelu; dropout 0.1 by
    default (torch's). forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False); masks as torch's
    (bool True = blocked, float added; key padding nonzero = pad). Padded tgt positions are not zeroed
    (torch's decoder does not zero them). Unbatched tgt (T, E) and memory (S, E) as torch."""
    _dl_attn = ("self_attn", "multihead_attn")

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False):
        args, unbatched = _decoder_call(self._who(), self.d_model, self.nhead, self.batch_first, tgt, memory,
                                        tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                                        tgt_is_causal, memory_is_causal)
        return _unbatch(self._dl_call((), *args), unbatched, self.batch_first)

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
        args, unbatched = _decoder_call(self._who(), f.d_model, f.nhead, f.batch_first, tgt, memory, tgt_mask,
                                        memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
                                        memory_is_causal)
        return _unbatch(self._dl_call((), *args), unbatched, f.batch_first)

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
        maybe_to(self, device)

    def _who(self) -> str:
        return f"Transformer(d_model={self.d_model}, nhead={self.nhead}, batch_first={self.batch_first})"

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal: Optional[bool] = None,
                tgt_is_causal: Optional[bool] = None, memory_is_causal: bool = False):
        who = self._who()
        if is_ndarray(src):
            T.check_src(who, src.shape, self.d_model, self.batch_first, name="src", unbatched=True)
        given = src
        (tgt, src, *masks), unbatched = _decoder_call(
            who, self.d_model, self.nhead, self.batch_first, tgt, src, tgt_mask, memory_mask, tgt_key_padding_mask,
            memory_key_padding_mask, tgt_is_causal, memory_is_causal)
        if unbatched and src_key_padding_mask is not None:       # (S,) -> (1, S), as src became a batch of one
            T.check_key_padding_mask(who, src_key_padding_mask.shape, given.shape, self.batch_first)
            src_key_padding_mask = src_key_padding_mask.reshape((1, -1))
        src, src_mask, src_pad, _, _ = self.encoder.layers[0]._checked(who, src, src_mask, src_key_padding_mask,
                                                                       bool(src_is_causal), None)
        return _unbatch(self._dl_call((), src, tgt, src_mask, src_pad, *masks), unbatched, self.batch_first)

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
