"""Framework-free pieces shared by both backends' Transformer layers: layout resolution, input
checks (one wording on both backends) and the sinusoid positional-encoding tables.

Shapes are plain tuples here, so the same checks run on torch tensors and MXNet NDArrays.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .layout import resolve_batch_first  # noqa: E402  (re-exported)

__all__ = ["resolve_batch_first", "layout_name", "check_src", "check_same_rank", "batch_and_time",
           "check_key_padding_mask", "check_valid_length", "check_attn_mask", "check_attn_mask_dtype",
           "check_decoder_inputs", "check_stack_args", "causal_mask", "sinusoid_table", "MASK_FILL", "PE_STYLES"]

# Masked attention scores get this additive value on both backends (not -inf): valid rows are
# bit-identical (exp(-1e18 - max) == 0 in float32) and a row whose keys are all masked gets uniform
# weights instead of torch's NaN, so padded rows and gradients stay finite on both.
MASK_FILL = -1e18
PE_STYLES = ("vaswani", "gluonnlp")
Shape = Tuple[int, ...]


def layout_name(batch_first: bool) -> str:
    return "NTC (batch, time, d_model)" if batch_first else "TNC (time, batch, d_model)"


def _expected_src(d_model: int, batch_first: bool) -> str:
    return f"(N, T, {d_model})" if batch_first else f"(T, N, {d_model})"


def check_src(who: str, shape: Shape, d_model: int, batch_first: bool, name: str = "input",
              unbatched: bool = False) -> None:
    """Rank 3 with ``d_model`` channels in the layer's layout; ``unbatched``: also torch's
    unbatched (T, d_model) (the attention and Transformer layers take it)."""
    ranks = (2, 3) if unbatched else (3,)
    if len(shape) not in ranks or shape[-1] != d_model:
        alt = f" or unbatched (T, {d_model})" if unbatched else ""
        raise ValueError(f"{who}: expected {name} of shape {_expected_src(d_model, batch_first)}{alt} "
                         f"(layout {layout_name(batch_first)}), got {tuple(shape)}")


def check_same_rank(who: str, query: Shape, *others: Shape, names: Tuple[str, ...] = ("query", "key", "value")
                    ) -> None:
    """Batched (3-D) and unbatched (2-D) inputs are not mixed in one call (torch asserts the same)."""
    if any(len(o) != len(query) for o in others):
        shapes = ", ".join(f"{n} {tuple(s)}" for n, s in zip(names, (query,) + others))
        raise ValueError(f"{who}: {names[0]} and {', '.join(names[1:])} must all be batched (3-D) or all "
                         f"unbatched (2-D), got {shapes}")


def batch_and_time(src_shape: Shape, batch_first: bool) -> Tuple[Optional[int], int]:
    """(N, T) of an input in the layer's layout; N is None for an unbatched (T, E) input."""
    if len(src_shape) == 2:
        return None, src_shape[0]
    return (src_shape[0], src_shape[1]) if batch_first else (src_shape[1], src_shape[0])


_nt = batch_and_time


def check_key_padding_mask(who: str, mask_shape: Shape, src_shape: Shape, batch_first: bool,
                           name: str = "src_key_padding_mask") -> None:
    """(N, T) whatever the layout ((T,) for an unbatched input); a (T, N) mask means the input's
    layout is the other one."""
    n, t = _nt(src_shape, batch_first)
    if n is None:
        if tuple(mask_shape) != (t,):
            raise ValueError(f"{who}: expected {name} of shape (T,) = ({t},) (True/nonzero = padding) for "
                             f"unbatched input {tuple(src_shape)}, got {tuple(mask_shape)}")
        return
    if tuple(mask_shape) == (n, t):
        return
    hint = ""
    if tuple(mask_shape) == (t, n) and n != t:
        other = "batch_first=True (layout 'NTC')" if not batch_first else "batch_first=False (layout 'TNC')"
        hint = (f"; the input looks like it is in the other layout (batch and time swapped): "
                f"construct the layer with {other} or transpose the input")
    raise ValueError(f"{who}: expected {name} of shape (N, T) = {(n, t)} (True/nonzero = padding) "
                     f"for input {tuple(src_shape)} in layout {layout_name(batch_first)}, "
                     f"got {tuple(mask_shape)}{hint}")


def check_valid_length(who: str, vl_shape: Shape, src_shape: Shape, batch_first: bool) -> None:
    """(N,) per-sample lengths; () (one length) for an unbatched input."""
    n, t = _nt(src_shape, batch_first)
    if n is None:
        if tuple(vl_shape) not in ((), (1,)):
            raise ValueError(f"{who}: expected valid_length of shape () (one length) for unbatched input "
                             f"{tuple(src_shape)}, got {tuple(vl_shape)}")
        return
    if tuple(vl_shape) == (n,):
        return
    hint = ""
    if tuple(vl_shape) == (t,) and n != t:
        hint = "; its length equals the time axis: batch and time axes look swapped (check batch_first/layout)"
    raise ValueError(f"{who}: expected valid_length of shape (N,) = ({n},) for input {tuple(src_shape)} "
                     f"in layout {layout_name(batch_first)}, got {tuple(vl_shape)}{hint}")


def check_attn_mask(who: str, mask_shape: Shape, L: int, S: int, n: int, nhead: int,
                    name: str = "mask") -> None:
    """torch's attention mask shapes: (L, S) or (N * nhead, L, S) (N = 1 for an unbatched input)."""
    if tuple(mask_shape) in ((L, S), (n * nhead, L, S)):
        return
    raise ValueError(f"{who}: expected {name} of shape (L, S) = {(L, S)} or (N*nhead, L, S) = "
                     f"{(n * nhead, L, S)}, got {tuple(mask_shape)}")


def check_attn_mask_dtype(dtype_name: str) -> None:
    """torch's rule on both: an attention mask is bool (True = blocked) or float (added to the
    scores); torch refuses integer masks, MXNet's ops would take them as bool (nonzero = blocked)."""
    if dtype_name != "bool" and not dtype_name.startswith(("float", "bfloat")):
        raise TypeError(f"attention mask must be bool (True = blocked) or float (added to the scores), "
                        f"got {dtype_name}; for a 0/1 mask pass mask.astype(bool) / mask.bool()")


def check_pair(who: str, src_key_padding_mask, valid_length) -> None:
    if src_key_padding_mask is not None and valid_length is not None:
        raise ValueError(f"{who}: pass either src_key_padding_mask (torch's convention, True = padding) "
                         f"or valid_length (Gluon's convention, per-sample lengths), not both")


def sinusoid_table(max_len: int, d_model: int, style: str = "vaswani") -> np.ndarray:
    """(max_len, d_model) float32 sinusoid table.

    ``"vaswani"`` (Attention Is All You Need, PyTorch tutorials): column 2i is
    ``sin(pos / 10000^(2i/d))`` and column 2i+1 is ``cos`` of the same angle.
    ``"gluonnlp"`` (gluonnlp 0.10 ``TransformerEncoder``'s ``const`` table): the angle of column j is
    ``pos / 10000^(2j/d)`` with j the column index itself, sin on even and cos on odd columns. The
    two differ by up to ~2.0; use ``"gluonnlp"`` to reproduce a model trained with gluonnlp.
    """
    if style not in PE_STYLES:
        raise ValueError(f"PositionalEncoding: style must be one of {PE_STYLES}, got {style!r}")
    if max_len <= 0 or d_model <= 0:
        raise ValueError(f"PositionalEncoding: max_len and d_model must be positive, got {max_len}, {d_model}")
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    j = np.arange(d_model, dtype=np.float64)[None, :]
    if style == "gluonnlp":
        ang = pos / np.power(10000.0, (2.0 / d_model) * j)
    else:
        ang = pos / np.power(10000.0, (2.0 * np.floor(j / 2)) / d_model)
    table = np.empty((max_len, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(ang[:, 0::2])
    table[:, 1::2] = np.cos(ang[:, 1::2])
    return table.astype(np.float32)


def check_pe_length(who: str, t: int, max_len: int) -> None:
    if t > max_len:
        raise ValueError(f"{who}: sequence length {t} exceeds max_len={max_len} (gluonnlp silently "
                         f"reused the last row; dualdl refuses): construct it with a larger max_len")


def check_stack_args(who: str, layer_arg: str, layer_name: str, backend: str, layer_ok: bool, layer,
                     num_layers) -> int:
    """TransformerEncoder/TransformerDecoder's stack arguments, the same on both backends; returns
    ``num_layers``."""
    if not layer_ok:
        raise TypeError(f"{who}: {layer_arg} must be a dl.nn.{layer_name} built on {backend}, "
                        f"got {type(layer).__name__}")
    if int(num_layers) < 1:
        raise ValueError(f"{who}: num_layers must be >= 1, got {num_layers}")
    return int(num_layers)


def check_encoder_args(backend: str, layer_ok: bool, encoder_layer, num_layers, enable_nested_tensor: bool) -> int:
    """TransformerEncoder's argument checks, the same on both backends; returns ``num_layers``.
    ``enable_nested_tensor=True`` is ignored with a warning: torch's nested-tensor fast path changes
    padded outputs, and dualdl gives the same padded outputs (zeros) on both backends."""
    import warnings
    num_layers = check_stack_args("TransformerEncoder", "encoder_layer", "TransformerEncoderLayer", backend,
                                  layer_ok, encoder_layer, num_layers)
    if enable_nested_tensor:
        warnings.warn("dualdl TransformerEncoder never uses torch's nested-tensor fast path (it changes "
                      "padded outputs); enable_nested_tensor=True is ignored", stacklevel=3)
    return num_layers


def check_decoder_inputs(who: str, tgt: Shape, memory: Shape, d_model: int, nhead: int, batch_first: bool,
                         tgt_mask: Optional[Shape] = None, memory_mask: Optional[Shape] = None,
                         tgt_key_padding_mask: Optional[Shape] = None,
                         memory_key_padding_mask: Optional[Shape] = None,
                         tgt_is_causal: bool = False, memory_is_causal: bool = False) -> None:
    """TransformerDecoderLayer/TransformerDecoder/Transformer inputs (shapes, None = not given), one
    wording on both backends: tgt (T, N, E) and memory (S, N, E) in the layer's layout with the same
    N (or both unbatched, (T, E) and (S, E)), tgt_mask (T, T) or (N*nhead, T, T), memory_mask (T, S)
    or (N*nhead, T, S), key padding masks (N, T) and (N, S) ((T,), (S,) unbatched); an ``is_causal``
    hint needs its mask (torch raises deep inside attention)."""
    check_src(who, tgt, d_model, batch_first, name="tgt", unbatched=True)
    check_src(who, memory, d_model, batch_first, name="memory", unbatched=True)
    check_same_rank(who, tgt, memory, names=("tgt", "memory"))
    (n, t), (nm, s) = _nt(tgt, batch_first), _nt(memory, batch_first)
    if n != nm:
        raise ValueError(f"{who}: tgt and memory must have the same batch size N, got tgt {tuple(tgt)} "
                         f"(N={n}) and memory {tuple(memory)} (N={nm}) in layout {layout_name(batch_first)}")
    if tgt_mask is not None:
        check_attn_mask(who, tgt_mask, t, t, n or 1, nhead, name="tgt_mask")
    if memory_mask is not None:
        check_attn_mask(who, memory_mask, t, s, n or 1, nhead, name="memory_mask")
    if tgt_key_padding_mask is not None:
        check_key_padding_mask(who, tgt_key_padding_mask, tgt, batch_first, name="tgt_key_padding_mask")
    if memory_key_padding_mask is not None:
        check_key_padding_mask(who, memory_key_padding_mask, memory, batch_first, name="memory_key_padding_mask")
    for hint, m, name in ((tgt_is_causal, tgt_mask, "tgt"), (memory_is_causal, memory_mask, "memory")):
        if hint and m is None:
            raise ValueError(f"{who}: {name}_is_causal=True needs {name}_mask (the hint does not build one; "
                             f"pass Transformer.generate_square_subsequent_mask(T))")


def causal_mask(sz: int) -> np.ndarray:
    """torch's ``generate_square_subsequent_mask``: (sz, sz) float32, -inf above the diagonal, 0 elsewhere."""
    if int(sz) < 0:
        raise ValueError(f"generate_square_subsequent_mask: sz must be >= 0, got {sz}")
    return np.triu(np.full((int(sz), int(sz)), -np.inf, dtype=np.float32), k=1)

