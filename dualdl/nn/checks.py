"""Layer input/argument checks and their messages, written once for both backends (framework-free).

Every function takes plain Python values (shapes as tuples of ints, dtype names as strings), so an
adapter can call it up front (MXNet: a Symbol has no shape, so only NDArray inputs are checked) or
only when the framework's own call failed (torch: explain the failure, no cost on success). A check
returns ``None`` or raises the error both backends raise for the same input.
``tests/test_nn_checks.py::torch_explain`` shows each call made with a torch layer's attributes.
"""
from __future__ import annotations

from typing import Optional, Sequence

__all__ = [
    "explain", "empty_batch_error", "check_not_empty", "shape_error", "to_tuple",
    "check_linear_input",
    "check_embedding_dtype", "check_embedding_range",
    "EMBEDDING_BAG_MODES", "embedding_bag_name", "check_embedding_bag_input",
    "check_embedding_bag_values", "check_embedding_bag_weights_dtype",
]

from .check_base import (IntOrTuple, Shape, check_not_empty, empty_batch_error, explain,  # noqa: F401
                         shape_error, to_tuple)


# ---- Linear -----------------------------------------------------------------------------------
def check_linear_input(in_features: int, out_features: int, shape: Shape) -> None:
    who = f"Linear(in_features={in_features}, out_features={out_features})"
    shape = tuple(shape)
    if 0 in shape:
        raise empty_batch_error(who, shape)
    if not shape or shape[-1] != in_features:
        raise shape_error(who, f"(*, {in_features})", shape)


# ---- embedding --------------------------------------------------------------------------------
def check_embedding_dtype(num_embeddings: int, embedding_dim: int, dtype: str, is_integer: bool) -> None:
    """Integer indices only (``dtype`` a name such as ``"float32"``). Hides: MXNet truncates float
    indices silently, torch refuses them."""
    if not is_integer:
        raise TypeError(f"Embedding({num_embeddings}, {embedding_dim}): indices must be an integer tensor "
                        f"(int32/int64), got {dtype}; MXNet would silently truncate float indices")


def check_embedding_range(num_embeddings: int, embedding_dim: int, lo: int, hi: int) -> None:
    """Indices (smallest ``lo``, largest ``hi``) in [0, V). Hides: MXNet clips them silently."""
    if lo < 0 or hi >= num_embeddings:
        bad = lo if lo < 0 else hi
        raise IndexError(f"Embedding({num_embeddings}, {embedding_dim}): index {bad} is out of range "
                         f"[0, {num_embeddings}) (MXNet would clip it silently)")


# ---- embedding bag ----------------------------------------------------------------------------
EMBEDDING_BAG_MODES = ("sum", "mean", "max")


def embedding_bag_name(num_embeddings: int, embedding_dim: int, mode: str) -> str:
    return f"EmbeddingBag({num_embeddings}, {embedding_dim}, mode={mode!r})"


def check_embedding_bag_input(who: str, mode: str, shape: Shape, is_integer: bool, dtype: str,
                              offsets_shape: Optional[Shape], weights_shape: Optional[Shape],
                              include_last_offset: bool, offsets_dtype: str = "int64",
                              offsets_is_integer: bool = True) -> None:
    """Integer indices (B, N) without offsets or (L,) with integer 1-D offsets (B,), or (B + 1,)
    with ``include_last_offset``); ``per_sample_weights`` the shape of the input, mode 'sum' only;
    no empty input and at least one bag. Hides: MXNet truncates float indices silently (torch
    refuses them) and its operators cannot run on 0 elements (torch returns an empty output; dualdl
    refuses an empty input or no bags on both)."""
    shape = tuple(shape)
    if not is_integer:
        raise TypeError(f"{who}: indices must be an integer tensor (int32/int64), got {dtype}; MXNet would "
                        f"silently truncate float indices")
    if len(shape) == 2:
        if offsets_shape is not None:
            raise ValueError(f"{who}: a 2-D input (B, N) is B bags of N indices and takes no offsets; pass a "
                             f"1-D input with offsets, or offsets=None")
    elif len(shape) == 1:
        want = "(B + 1,) (include_last_offset=True)" if include_last_offset else "(B,)"
        if offsets_shape is None or len(tuple(offsets_shape)) != 1:
            raise ValueError(f"{who}: a 1-D input (L,) needs 1-D offsets of shape {want} (the start of each "
                             f"bag), got {None if offsets_shape is None else tuple(offsets_shape)}")
        if not offsets_is_integer:
            raise TypeError(f"{who}: offsets must be an integer tensor (int32/int64), got {offsets_dtype}")
        if tuple(offsets_shape)[0] - int(include_last_offset) < 1:
            raise ValueError(f"{who}: offsets of shape {tuple(offsets_shape)} give no bags (include_last_offset="
                             f"{include_last_offset}); MXNet's operators cannot return an empty output, so "
                             f"dualdl refuses it on both backends")
    else:
        raise shape_error(who, "(B, N), or (L,) with offsets", shape)
    check_not_empty(who, shape)
    if weights_shape is not None:
        if mode != "sum":
            raise NotImplementedError(f"{who}: per_sample_weights is only supported for mode='sum' (as torch), "
                                      f"got mode={mode!r}")
        if tuple(weights_shape) != shape:
            raise ValueError(f"{who}: per_sample_weights must have the shape of the input {shape}, got "
                             f"{tuple(weights_shape)}")


def check_embedding_bag_values(who: str, num_embeddings: int, lo: int, hi: int,
                               offsets: Optional[Sequence[int]], length: int,
                               include_last_offset: bool) -> None:
    """Indices (smallest ``lo``, largest ``hi``) in [0, V); offsets start at 0, never decrease and stay
    within the input's length L, and with ``include_last_offset`` end at L (torch's CSR format; torch
    itself takes decreasing offsets silently, and a last offset < L gives one bag end in mode 'sum' and
    another in 'max'). Hides: MXNet clips out-of-range indices silently."""
    if lo < 0 or hi >= num_embeddings:
        raise IndexError(f"{who}: index {lo if lo < 0 else hi} is out of range [0, {num_embeddings}) (MXNet "
                         f"would clip it silently)")
    if offsets is None:
        return
    offs = [int(o) for o in offsets]
    if offs and offs[0] != 0:
        raise ValueError(f"{who}: offsets[0] must be 0 (the first bag starts at position 0), got {offs[0]}")
    if any(b < a for a, b in zip(offs, offs[1:])):
        raise ValueError(f"{who}: offsets must be non-decreasing (the start of each bag), got {offs}")
    if offs and offs[-1] > length:
        raise ValueError(f"{who}: offsets[-1] ({offs[-1]}) is past the input's length {length}")
    if include_last_offset and offs[-1] != length:
        raise ValueError(f"{who}: with include_last_offset=True, offsets[-1] must be the input's length "
                         f"{length} (CSR format), got {offs[-1]}")


def check_embedding_bag_weights_dtype(who: str, weights_dtype: str, weight_dtype: str) -> None:
    """``per_sample_weights`` in the weight's dtype (dtype names such as ``"float32"``)."""
    if weights_dtype != weight_dtype:
        raise TypeError(f"{who}: per_sample_weights must have the weight's dtype {weight_dtype}, got {weights_dtype}")


# the family checks, re-exported (one import path for the adapters)
from .conv_checks import *  # noqa: E402,F401,F403
from .conv_checks import __all__ as _conv_all  # noqa: E402
from .norm_checks import *  # noqa: E402,F401,F403
from .norm_checks import __all__ as _norm_all  # noqa: E402

__all__ += _conv_all + _norm_all
