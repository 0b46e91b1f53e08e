"""Transformer layers on torch: subclasses of ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer``, ``TransformerDecoder`` and ``Transformer`` with torch's numbers and the
same numbers as dualdl's MXNet build.

What these subclasses change relative to plain torch (and why):
- they always run torch's reference ("slow") path; the fused fast path (eval + no grad) and the
  nested-tensor path are off, because they compute padded positions differently;
- masks (through dualdl_torch/attention.py's ``MultiheadAttention``): ``src_key_padding_mask`` is
  boolean (True/nonzero = padding, any dtype) and gives torch's numbers (padded positions keep the
  reference path's values); ``valid_length`` (Gluon's per-sample lengths) may be given instead, and
  then padded output positions are 0 (as gluonnlp's encoder). Masked scores get -1e18 instead of
  -inf, so a fully masked row is finite, not NaN;
- input shapes are checked (batched, or torch's unbatched (T, E)); errors name the layer, the
  expected layout and the shape received;
- ``TransformerEncoder``/``TransformerDecoder`` also take torch's own layers (as torch.nn does) and
  then run torch's forward.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch

from dualdl.nn import _transformer as T
from dualdl.nn.registry import defined_in
from .attention import MultiheadAttention, attn_mask_additive, pad_additive, pad_bool
from .base import Layer


def _pad_from_valid_length(valid_length: torch.Tensor, t: int) -> torch.Tensor:
    """(N, T) bool, True at steps >= valid_length (int or float lengths, as Gluon's SequenceMask)."""
    steps = torch.arange(t, device=valid_length.device)
    return steps[None, :] >= valid_length.reshape(-1, 1)


def _zero_padded(x: torch.Tensor, pad: Optional[torch.Tensor], batch_first: bool) -> torch.Tensor:
    """0 at padded positions (``pad`` (N, T), or (T,) for an unbatched x)."""
    if pad is None:
        return x
    p = pad if batch_first or pad.dim() == 1 else pad.t()
    return x.masked_fill(p[..., None], 0.0)


def _init_layer(self, base: type, attn: Tuple[str, ...], d_model, nhead, dim_feedforward, dropout, activation,
                layer_norm_eps, batch_first, norm_first, bias, device, dtype, layout) -> None:
    """The encoder and decoder layers' construction: ``layout`` resolved, torch's own __init__ (the
    same init draws as torch), then dualdl's masking in the attention blocks ``attn``."""
    who = f"{self._dl_layer}(d_model={d_model}, nhead={nhead})"
    bf = T.resolve_batch_first(batch_first, layout, who)
    base.__init__(self, d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=bf, norm_first=norm_first, bias=bias, device=device,
                  dtype=dtype)
    for name in attn:
        getattr(self, name).__class__ = MultiheadAttention
    self.d_model, self.nhead, self.batch_first = int(d_model), int(nhead), bf


class TransformerEncoderLayer(Layer, torch.nn.TransformerEncoderLayer):
    """``torch.nn.TransformerEncoderLayer`` (post-LN by default, relu/gelu FFN) with the same numbers
    as dualdl's MXNet build.

    ``dropout`` defaults to 0.1 on both backends (torch's default; gluonnlp's was 0.0: pass
    ``dropout=0.0`` to reproduce a gluonnlp model). ``layout='NTC'|'TNC'`` may be given instead of
    ``batch_first``. forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False,
    valid_length=None): padding is given either as ``src_key_padding_mask`` (N, T), True/nonzero =
    padding (torch's convention and numbers), or as ``valid_length`` (N,) per-sample lengths (Gluon's;
    padded output positions are then 0). Unbatched src (T, E) as torch. Always runs torch's reference
    path (no fused fast path). ``activation``: any callable on torch, as torch.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", layer_norm_eps: float = 1e-5, batch_first: Optional[bool] = None,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None,
                 layout: Optional[str] = None) -> None:
        _init_layer(self, torch.nn.TransformerEncoderLayer, ("self_attn",), d_model, nhead, dim_feedforward, dropout,
                    activation, layer_norm_eps, batch_first, norm_first, bias, device, dtype, layout)

    def _who(self) -> str:
        return (f"TransformerEncoderLayer(d_model={self.d_model}, nhead={self.nhead}, "
                f"batch_first={self.batch_first})")

    def _checked_pad(self, who: str, src: torch.Tensor, src_mask, src_key_padding_mask, valid_length,
                     is_causal: bool = False):
        """Validate everything; return (bool padding mask (N, T) ((T,) unbatched) or None, additive src
        mask, whether padded outputs are zeroed: with ``valid_length``, Gluon's convention)."""
        T.check_src(who, tuple(src.shape), self.d_model, self.batch_first, unbatched=True)
        T.check_pair(who, src_key_padding_mask, valid_length)
        if is_causal and src_mask is None:
            raise ValueError(f"{who}: is_causal=True needs a mask (the hint does not build one)")
        n, t = T.batch_and_time(tuple(src.shape), self.batch_first)
        if src_mask is not None:
            T.check_attn_mask(who, tuple(src_mask.shape), t, t, n or 1, self.nhead)
        pad = None
        if src_key_padding_mask is not None:
            T.check_key_padding_mask(who, tuple(src_key_padding_mask.shape), tuple(src.shape), self.batch_first)
            pad = pad_bool(src_key_padding_mask)
        elif valid_length is not None:
            T.check_valid_length(who, tuple(valid_length.shape), tuple(src.shape), self.batch_first)
            pad = _pad_from_valid_length(valid_length, t)
            pad = pad.reshape(-1) if n is None else pad
        return pad, attn_mask_additive(src_mask, src.dtype), valid_length is not None

    def forward(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
                src_key_padding_mask: Optional[torch.Tensor] = None, is_causal: bool = False, *,
                valid_length: Optional[torch.Tensor] = None) -> torch.Tensor:
        pad, am, zero = self._checked_pad(self._who(), src, src_mask, src_key_padding_mask, valid_length,
                                          is_causal)
        return self._dl_forward(src, am, pad, is_causal, zero)

    def _dl_forward(self, x: torch.Tensor, am: Optional[torch.Tensor], pad: Optional[torch.Tensor],
                    is_causal: bool = False, zero: bool = False) -> torch.Tensor:
        kpm = pad_additive(pad, x.dtype)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), am, kpm, is_causal=is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, am, kpm, is_causal=is_causal))
            x = self.norm2(x + self._ff_block(x))
        return _zero_padded(x, pad, self.batch_first) if zero else x


class TransformerEncoder(Layer, torch.nn.TransformerEncoder):
    """``torch.nn.TransformerEncoder``: ``num_layers`` deep copies of ``encoder_layer`` (a
    ``dl.nn.TransformerEncoderLayer``, or torch's own layer as torch.nn takes it; all start with its
    weights, as in torch) then ``norm``.

    forward(src, mask=None, src_key_padding_mask=None, is_causal=None, valid_length=None); padding as
    in :class:`TransformerEncoderLayer` (True = pad with torch's numbers, or ``valid_length``: padded
    output positions 0, also after ``norm``). The nested-tensor fast path is never used:
    ``enable_nested_tensor`` is accepted for torch's signature, and True is ignored with a warning.
    With torch's own layers the forward is torch's (``valid_length`` needs dualdl's layers).
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Optional[torch.nn.Module] = None, enable_nested_tensor: bool = False,
                 mask_check: bool = True) -> None:
        ok = isinstance(encoder_layer, torch.nn.Module)            # torch.nn takes any module
        num_layers = T.check_encoder_args("torch", ok, encoder_layer, num_layers, enable_nested_tensor)
        super().__init__(encoder_layer, num_layers, norm=norm, enable_nested_tensor=False,
                         mask_check=mask_check)

    def forward(self, src: torch.Tensor, mask: Optional[torch.Tensor] = None,
                src_key_padding_mask: Optional[torch.Tensor] = None, is_causal: Optional[bool] = None, *,
                valid_length: Optional[torch.Tensor] = None) -> torch.Tensor:
        first = self.layers[0]
        if not all(_is_dl(layer, "TransformerEncoderLayer") for layer in self.layers):
            if valid_length is not None:
                raise ValueError(f"TransformerEncoder({type(first).__name__} layers): valid_length needs "
                                 f"dl.nn.TransformerEncoderLayer layers; pass src_key_padding_mask")
            return super().forward(src, mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal)
        who = (f"TransformerEncoder(num_layers={self.num_layers}, d_model={first.d_model}, "
               f"nhead={first.nhead}, batch_first={first.batch_first})")
        pad, am, zero = first._checked_pad(who, src, mask, src_key_padding_mask, valid_length, bool(is_causal))
        x = src
        for layer in self.layers:
            x = layer._dl_forward(x, am, pad, bool(is_causal), zero)
        if self.norm is not None:
            x = self.norm(x)
            x = _zero_padded(x, pad, first.batch_first) if zero else x
        return x


def _shape(t: Optional[torch.Tensor]):
    return None if t is None else tuple(t.shape)


def _is_dl(obj: Any, name: str) -> bool:
    return isinstance(obj, torch.nn.Module) and getattr(type(obj), "_dl_layer", None) == name


def _check_decoder_call(who: str, d_model: int, nhead: int, batch_first: bool, tgt, memory, tgt_mask,
                        memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
                        memory_is_causal) -> None:
    T.check_decoder_inputs(who, _shape(tgt), _shape(memory), d_model, nhead, batch_first, _shape(tgt_mask),
                           _shape(memory_mask), _shape(tgt_key_padding_mask), _shape(memory_key_padding_mask),
                           bool(tgt_is_causal), bool(memory_is_causal))


class TransformerDecoderLayer(Layer, torch.nn.TransformerDecoderLayer):
    """``torch.nn.TransformerDecoderLayer`` (self-attention, cross-attention on ``memory``, FFN;
    post-LN unless ``norm_first``) with dualdl's masking (bool True = blocked, float added, masked
    scores -1e18; key padding masks nonzero = pad) and checked shapes. forward(tgt, memory,
    tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=False, memory_is_causal=False). ``layout='NTC'|'TNC'`` may replace ``batch_first``.
    Unbatched tgt (T, E) and memory (S, E) as torch."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", layer_norm_eps: float = 1e-5, batch_first: Optional[bool] = None,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None,
                 layout: Optional[str] = None) -> None:
        _init_layer(self, torch.nn.TransformerDecoderLayer, ("self_attn", "multihead_attn"), d_model, nhead,
                    dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias, device,
                    dtype, layout)

    def _who(self) -> str:
        return (f"TransformerDecoderLayer(d_model={self.d_model}, nhead={self.nhead}, "
                f"batch_first={self.batch_first})")

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, tgt_mask: Optional[torch.Tensor] = None,
                memory_mask: Optional[torch.Tensor] = None, tgt_key_padding_mask: Optional[torch.Tensor] = None,
                memory_key_padding_mask: Optional[torch.Tensor] = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> torch.Tensor:
        _check_decoder_call(self._who(), self.d_model, self.nhead, self.batch_first, tgt, memory, tgt_mask,
                            memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
                            memory_is_causal)
        return super().forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                               memory_key_padding_mask, tgt_is_causal, memory_is_causal)


class TransformerDecoder(Layer, torch.nn.TransformerDecoder):
    """``torch.nn.TransformerDecoder``: ``num_layers`` deep copies of ``decoder_layer`` (a
    ``dl.nn.TransformerDecoderLayer``, or torch's own layer as torch.nn takes it; all start with its
    weights) then ``norm``. forward(tgt, memory, tgt_mask=None, memory_mask=None,
    tgt_key_padding_mask=None, memory_key_padding_mask=None, tgt_is_causal=None,
    memory_is_causal=False); ``tgt_is_causal=None`` detects a causal mask, as torch."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Optional[torch.nn.Module] = None) -> None:
        num_layers = T.check_stack_args("TransformerDecoder", "decoder_layer", "TransformerDecoderLayer", "torch",
                                        isinstance(decoder_layer, torch.nn.Module), decoder_layer, num_layers)
        super().__init__(decoder_layer, num_layers, norm=norm)

    def _who(self) -> str:
        f = self.layers[0]
        return (f"TransformerDecoder(num_layers={self.num_layers}, d_model={f.d_model}, nhead={f.nhead}, "
                f"batch_first={f.batch_first})")

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, tgt_mask: Optional[torch.Tensor] = None,
                memory_mask: Optional[torch.Tensor] = None, tgt_key_padding_mask: Optional[torch.Tensor] = None,
                memory_key_padding_mask: Optional[torch.Tensor] = None, tgt_is_causal: Optional[bool] = None,
                memory_is_causal: bool = False) -> torch.Tensor:
        f = self.layers[0]
        if all(_is_dl(layer, "TransformerDecoderLayer") for layer in self.layers):    # else torch's own layers
            _check_decoder_call(self._who(), f.d_model, f.nhead, f.batch_first, tgt, memory, tgt_mask,
                                memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
                                memory_is_causal)
        return super().forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                               memory_key_padding_mask, tgt_is_causal, memory_is_causal)


class Transformer(Layer, torch.nn.Transformer):
    """``torch.nn.Transformer`` built from dualdl's ``TransformerEncoder`` (+ final LayerNorm) and
    ``TransformerDecoder`` (+ final LayerNorm), then torch's xavier-uniform re-init of every
    parameter with more than one axis (the same draws as torch under the same seed). forward(src, tgt,
    src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None, memory_is_causal=False),
    batched or unbatched ((S, E) and (T, E)) as torch. Padded memory positions hold torch's values
    (the decoder attends to them unless ``memory_key_padding_mask`` is given, as in torch)."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", custom_encoder: Optional[Any] = None,
                 custom_decoder: Optional[Any] = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        kw = dict(device=device, dtype=dtype)
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias)
        if custom_encoder is None:
            custom_encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, **kw), num_encoder_layers,
                                                torch.nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is None:
            custom_decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, **kw), num_decoder_layers,
                                                torch.nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        super().__init__(d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
                         activation, custom_encoder, custom_decoder, layer_norm_eps, batch_first, norm_first,
                         bias, device, dtype)

    def _who(self) -> str:
        return f"Transformer(d_model={self.d_model}, nhead={self.nhead}, batch_first={self.batch_first})"

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
                tgt_mask: Optional[torch.Tensor] = None, memory_mask: Optional[torch.Tensor] = None,
                src_key_padding_mask: Optional[torch.Tensor] = None,
                tgt_key_padding_mask: Optional[torch.Tensor] = None,
                memory_key_padding_mask: Optional[torch.Tensor] = None, src_is_causal: Optional[bool] = None,
                tgt_is_causal: Optional[bool] = None, memory_is_causal: bool = False) -> torch.Tensor:
        who = self._who()
        T.check_src(who, tuple(src.shape), self.d_model, self.batch_first, name="src", unbatched=True)
        _check_decoder_call(who, self.d_model, self.nhead, self.batch_first, tgt, src, tgt_mask, memory_mask,
                            tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal)
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> torch.Tensor:
        """torch's causal mask: (sz, sz), float -inf above the diagonal, 0 elsewhere."""
        return torch.from_numpy(T.causal_mask(sz)).to(device=device, dtype=dtype or torch.get_default_dtype())


class PositionalEncoding(Layer, torch.nn.Module):
    """``x * sqrt(d_model)`` (if ``scale``) ``+ pe[:T]``, then dropout. ``style='vaswani'`` is the
    standard table (PyTorch tutorials), ``'gluonnlp'`` reproduces gluonnlp 0.10's encoder table
    (see :func:`dualdl.nn._transformer.sinusoid_table`). Buffer ``pe`` is (max_len, d_model).
    T > max_len raises (gluonnlp silently reused the last row)."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0, style: str = "vaswani",
                 scale: bool = False, batch_first: Optional[bool] = None, layout: Optional[str] = None) -> None:
        super().__init__()
        self.d_model, self.max_len, self.style, self.scale = int(d_model), int(max_len), style, bool(scale)
        self.batch_first = T.resolve_batch_first(batch_first, layout, self._who())
        self.register_buffer("pe", torch.from_numpy(T.sinusoid_table(self.max_len, self.d_model, style)))
        self.dropout = torch.nn.Dropout(dropout)

    def _who(self) -> str:
        return f"PositionalEncoding(d_model={self.d_model}, max_len={self.max_len}, style={self.style!r})"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        who = self._who()
        T.check_src(who, tuple(x.shape), self.d_model, self.batch_first)
        t = x.shape[1] if self.batch_first else x.shape[0]
        T.check_pe_length(who, t, self.max_len)
        pe = self.pe[:t].to(x.dtype)
        if self.scale:
            x = x * math.sqrt(self.d_model)
        x = x + (pe[None] if self.batch_first else pe[:, None])
        return self.dropout(x)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, max_len={self.max_len}, style={self.style!r}, scale={self.scale}, "
                f"batch_first={self.batch_first}")


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
