"""Layer input/argument checks and their messages, written once for both backends (framework-free).

Every function takes plain Python values (shapes as tuples of ints, dtype names as strings), so an
adapter can call it up front (MXNet: a Symbol has no shape, so only NDArray inputs are checked) or
only when the framework's own call failed (torch: explain the failure, no cost on success). A check
returns ``None`` or raises the error both backends raise for the same input.
``tests/test_nn_checks.py::torch_explain`` shows each call made with a torch layer's attributes.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Optional, Sequence, Tuple, Union

__all__ = [
    "explain", "empty_batch_error", "check_not_empty", "shape_error", "to_tuple",
    "check_linear_input",
    "conv_sides", "check_conv_input",
    "conv_transpose_output_size", "check_conv_transpose_input",
    "conv_transpose_output_padding",
    "check_pool_args", "pool_output_size", "check_pool_input", "check_adaptive_pool_input",
    "adaptive_output_size", "adaptive_bins",
    "BATCHNORM_LAYOUTS", "check_batchnorm_input",
    "check_layernorm_input", "check_groupnorm_args", "check_groupnorm_input", "INSTANCENORM_LAYOUTS",
    "check_instancenorm_input",
    "check_embedding_dtype", "check_embedding_range",
    "EMBEDDING_BAG_MODES", "embedding_bag_name", "check_embedding_bag_input",
    "check_embedding_bag_values", "check_embedding_bag_weights_dtype",
]

IntOrTuple = Union[int, Sequence[int]]
Shape = Sequence[int]


def explain(check: Callable[..., None], *args: Any, **kwargs: Any) -> Optional[Exception]:
    """The error ``check(*args, **kwargs)`` raises, or None: for an adapter that checks only after
    the framework's own call failed (``err = explain(...)``; ``raise err from None`` if it is set,
    else re-raise the framework's error)."""
    try:
        check(*args, **kwargs)
    except (ValueError, TypeError, IndexError, NotImplementedError) as e:
        return e
    return None


def empty_batch_error(who: str, shape: Shape) -> ValueError:
    """Hides: torch returns empty outputs for an input with no elements (a batch of 0 samples);
    MXNet 1.x's operators raise (its shape inference reads 0 as "unknown"), and a graph through an
    empty batch has no gradient to give. dualdl refuses empty inputs on both, with this message."""
    return ValueError(f"{who}: got an input with no elements (shape {tuple(shape)}, e.g. a batch of 0 "
                      f"samples); MXNet's operators cannot run on it, so dualdl refuses it on both "
                      f"backends: skip empty batches before calling the layer or loss")


def check_not_empty(who: str, shape: Shape) -> None:
    if 0 in tuple(shape):
        raise empty_batch_error(who, shape)


def shape_error(who: str, expected: str, shape: Shape) -> ValueError:
    """The wrong-rank/wrong-size error of every layer: who, the layout expected, the shape got."""
    return ValueError(f"{who}: expected input of shape {expected}, got {tuple(shape)}")


def to_tuple(v: IntOrTuple, n: int, what: str) -> Tuple[int, ...]:
    """An int or an n-sequence of ints as an n-tuple (torch's ``_pair``/``_single``)."""
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    if isinstance(v, str) or not hasattr(v, "__len__") or len(v) != n \
            or not all(isinstance(i, numbers.Integral) for i in v):
        raise ValueError(f"{what} must be an int or a tuple of {n} ints, got {v!r}")
    return tuple(int(i) for i in v)


# ---- Linear -----------------------------------------------------------------------------------
def check_linear_input(in_features: int, out_features: int, shape: Shape) -> None:
    who = f"Linear(in_features={in_features}, out_features={out_features})"
    shape = tuple(shape)
    if 0 in shape:
        raise empty_batch_error(who, shape)
    if not shape or shape[-1] != in_features:
        raise shape_error(who, f"(*, {in_features})", shape)


# ---- convolutions -----------------------------------------------------------------------------
_CONV_LAYOUTS = {1: "(N, C_in, L)", 2: "(N, C_in, H, W)", 3: "(N, C_in, D, H, W)"}


def conv_sides(padding: Union[str, Sequence[int]], kernel_size: Sequence[int],
               dilation: Sequence[int]) -> Tuple[Tuple[int, int], ...]:
    """Zero padding (before, after) per spatial axis, as torch applies it: ``'same'`` puts
    ``total // 2`` before and the rest after (MXNet pads symmetrically only), ``'valid'`` none."""
    if isinstance(padding, str):
        totals = [d * (k - 1) if padding == "same" else 0 for d, k in zip(dilation, kernel_size)]
        return tuple((t // 2, t - t // 2) for t in totals)
    return tuple((int(q), int(q)) for q in padding)


def check_conv_input(name: str, in_channels: int, shape: Shape, kernel_size: Sequence[int],
                     dilation: Sequence[int], padding: Union[str, Sequence[int]],
                     padding_mode: str = "zeros", sides: Optional[Sequence[Tuple[int, int]]] = None) -> None:
    """Rank and channels, no empty input, padded size >= the dilated kernel, reflect padding <
    the input size. ``padding`` is the layer's own (tuple or 'same'/'valid', named in the message);
    ``sides`` its :func:`conv_sides` (computed here when not given)."""
    n, shape = len(kernel_size), tuple(shape)
    who = f"{name}(in_channels={in_channels})"
    if len(shape) != n + 2 or shape[1] != in_channels:
        raise shape_error(who, _CONV_LAYOUTS[n].replace("C_in", str(in_channels)), shape)
    check_not_empty(who, shape)
    sides = conv_sides(padding, kernel_size, dilation) if sides is None else sides
    for i in range(n):
        eff = dilation[i] * (kernel_size[i] - 1) + 1
        if shape[2 + i] + sum(sides[i]) < eff:
            raise ValueError(f"{name}: input spatial size {shape[2:]} (padded by {padding}) is smaller than "
                             f"the kernel {tuple(kernel_size)} (dilation {tuple(dilation)})")
        if padding_mode == "reflect" and max(sides[i]) >= shape[2 + i]:
            raise ValueError(f"{name}: padding_mode='reflect' needs padding < input size, got padding "
                             f"{padding} for input {shape[2:]}")


# ---- transposed convolutions -------------------------------------------------------------------
def conv_transpose_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                               output_padding: int) -> int:
    """torch's transposed-convolution length: (L - 1) s - 2 p + d (k - 1) + output_padding + 1."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def check_conv_transpose_input(name: str, in_channels: int, shape: Shape, kernel_size: Sequence[int],
                               stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                               output_padding: Sequence[int]) -> None:
    """Rank and channels, no empty input, a positive output size on every spatial axis."""
    n, shape = len(kernel_size), tuple(shape)
    who = f"{name}(in_channels={in_channels})"
    if len(shape) != n + 2 or shape[1] != in_channels:
        raise shape_error(who, _CONV_LAYOUTS[n].replace("C_in", str(in_channels)), shape)
    check_not_empty(who, shape)
    sizes = tuple(conv_transpose_output_size(shape[2 + i], kernel_size[i], stride[i], padding[i], dilation[i],
                                             output_padding[i]) for i in range(n))
    if any(o <= 0 for o in sizes):
        raise ValueError(f"{who}: input spatial size {shape[2:]} gives no output (output would be {sizes})")


def conv_transpose_output_padding(name: str, shape: Shape, output_size: Sequence[int],
                                  kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                                  dilation: Sequence[int]) -> Tuple[int, ...]:
    """The output padding that gives ``output_size`` (forward's ``output_size=``, the n spatial
    sizes or the full n + 2 shape), as torch computes it, with torch's range error. Hides: MXNet's
    ``target_shape`` recomputes the padding itself and ignores ``pad``/``adj``."""
    n, shape = len(kernel_size), tuple(shape)
    want = tuple(int(o) for o in output_size)
    if len(want) == n + 2:
        want = want[2:]
    if len(want) != n:
        raise ValueError(f"{name}: output_size must have {n} or {n + 2} elements, got {len(want)}")
    lo = tuple(conv_transpose_output_size(shape[2 + i], kernel_size[i], stride[i], padding[i], dilation[i], 0)
               for i in range(n))
    hi = tuple(m + s - 1 for m, s in zip(lo, stride))
    if any(not a <= w <= b for w, a, b in zip(want, lo, hi)):
        raise ValueError(f"{name}: requested an output size of {want}, but valid sizes range from {lo} to "
                         f"{hi} (for an input of {shape[2:]})")
    return tuple(w - a for w, a in zip(want, lo))


# ---- pooling ----------------------------------------------------------------------------------
_POOL_LAYOUTS = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}


def check_pool_args(name: str, kernel_size: Sequence[int], stride: Sequence[int],
                    padding: Sequence[int], dilation: Optional[Sequence[int]] = None) -> None:
    """Positive kernel and stride; padding at most half of the (dilated) kernel, as torch requires."""
    if any(k <= 0 for k in kernel_size) or any(s <= 0 for s in stride):
        raise ValueError(f"{name}: kernel_size and stride must be positive, got "
                         f"{tuple(kernel_size)} and {tuple(stride)}")
    eff = _dilated(kernel_size, dilation)
    if any(p < 0 or p > k // 2 for p, k in zip(padding, eff)):
        raise ValueError(f"{name}: padding {tuple(padding)} should be at most half of the kernel "
                         f"size {eff}")


def _dilated(kernel_size: Sequence[int], dilation: Optional[Sequence[int]]) -> Tuple[int, ...]:
    if dilation is None:
        return tuple(kernel_size)
    return tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel_size))


def pool_output_size(size: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    """torch's pooled length (ceil_mode drops a last window that would start in the right padding)."""
    if ceil_mode:
        out = -(-(size + 2 * padding - kernel) // stride) + 1
        if (out - 1) * stride >= size + padding:
            out -= 1
        return out
    return (size + 2 * padding - kernel) // stride + 1


def check_pool_input(name: str, shape: Shape, kernel_size: Sequence[int], stride: Sequence[int],
                     padding: Sequence[int], ceil_mode: bool,
                     dilation: Optional[Sequence[int]] = None) -> None:
    """Rank (N, C, *spatial) and a positive output size on every spatial axis."""
    n, shape = len(kernel_size), tuple(shape)
    who = f"{name}(kernel_size={tuple(kernel_size)})"
    if len(shape) != n + 2:
        raise shape_error(who, _POOL_LAYOUTS[n], shape)
    eff = _dilated(kernel_size, dilation)
    sizes = tuple(pool_output_size(shape[2 + i], eff[i], stride[i], padding[i], ceil_mode) for i in range(n))
    if any(o <= 0 for o in sizes):
        raise ValueError(f"{who}: input spatial size {shape[2:]} is too small (output would be {sizes})")


def check_adaptive_pool_input(output_size: Any, shape: Shape, name: str = "AdaptiveAvgPool2d",
                              n: int = 2) -> None:
    """Rank (N, C, *spatial) for an adaptive pool over ``n`` axes, no empty input."""
    shape = tuple(shape)
    size = (output_size,) * n if isinstance(output_size, numbers.Integral) or output_size is None \
        else tuple(output_size)
    who = f"{name}(output_size={size[0] if n == 1 else size})"
    if len(shape) != n + 2:
        raise shape_error(who, _POOL_LAYOUTS[n], shape)
    check_not_empty(who, shape)


def adaptive_output_size(name: str, output_size: Any, n: int) -> Tuple[Optional[int], ...]:
    """``output_size`` as n entries, each a positive int or None (keep that axis's size, torch's
    meaning); checked at construction on both backends (torch itself fails only in forward)."""
    sizes = (output_size,) * n if output_size is None or isinstance(output_size, numbers.Integral) \
        else tuple(output_size) if isinstance(output_size, (tuple, list)) else ()
    if len(sizes) != n or any(o is not None and (not isinstance(o, numbers.Integral) or o <= 0) for o in sizes):
        raise ValueError(f"{name}: output_size must be a positive int or a tuple of {n} (positive ints or "
                         f"None), got {output_size!r}")
    return tuple(None if o is None else int(o) for o in sizes)


def adaptive_bins(size: int, out: int) -> Tuple[Tuple[int, int], ...]:
    """torch's adaptive-pooling windows: bin i covers [floor(i L / o), ceil((i + 1) L / o)); bins
    overlap when L is not a multiple of o."""
    return tuple((i * size // out, -(-(i + 1) * size // out)) for i in range(out))


# ---- normalisation ----------------------------------------------------------------------------
# class name -> (layouts named in the message, accepted ranks)
BATCHNORM_LAYOUTS = {"BatchNorm1d": (("(N, C)", "(N, C, L)"), (2, 3)),
                     "BatchNorm2d": (("(N, C, H, W)",), (4,)),
                     "BatchNorm3d": (("(N, C, D, H, W)",), (5,))}


def check_batchnorm_input(name: str, num_features: int, shape: Shape, training: bool) -> None:
    """Rank and channels for ``name`` (a key of :data:`BATCHNORM_LAYOUTS`); in train mode more than
    one value per channel (a batch variance needs two)."""
    layouts, ndims = BATCHNORM_LAYOUTS[name]
    shape = tuple(shape)
    if len(shape) not in ndims or shape[1] != num_features:
        expected = " or ".join(l.replace("C", str(num_features), 1) for l in layouts)
        raise shape_error(f"{name}({num_features})", expected, shape)
    if training:
        n = 1
        for d in shape:
            n *= d
        if n // max(num_features, 1) <= 1:
            raise ValueError(f"{name}: expected more than 1 value per channel when training, got input "
                             f"of shape {shape}")


def check_layernorm_input(normalized_shape: Sequence[int], shape: Shape) -> None:
    k, shape, norm = len(normalized_shape), tuple(shape), tuple(normalized_shape)
    check_not_empty(f"LayerNorm({norm})", shape)
    if len(shape) < k or shape[len(shape) - k:] != norm:
        raise shape_error(f"LayerNorm({norm})", "(*, " + ", ".join(map(str, norm)) + ")", shape)


def check_groupnorm_args(num_groups: int, num_channels: int) -> None:
    """GroupNorm's argument check: :func:`dualdl.nn.arguments.check_group_norm` (torch's wording),
    which ``_build_layer`` runs before either adapter's constructor."""
    from .arguments import check_group_norm
    check_group_norm(num_groups, num_channels, affine=False)


def check_groupnorm_input(num_groups: int, num_channels: int, shape: Shape) -> None:
    """(N, C, *) with C = num_channels and no empty input. Hides: torch normalises an empty batch
    (MXNet's operators cannot) and raises a RuntimeError for a wrong channel count."""
    shape = tuple(shape)
    who = f"GroupNorm({num_groups}, {num_channels})"
    if len(shape) < 2 or shape[1] != num_channels:
        raise shape_error(who, f"(N, {num_channels}, *)", shape)
    check_not_empty(who, shape)


# class name -> the layout named in the message (its rank: the number of axes in it)
INSTANCENORM_LAYOUTS = {"InstanceNorm1d": "(N, C, L)", "InstanceNorm2d": "(N, C, H, W)"}


def check_instancenorm_input(name: str, num_features: int, shape: Shape, use_input_stats: bool) -> None:
    """Batched input with C = num_features, not empty; normalising by its own statistics (train
    mode, or no running statistics) needs more than 1 spatial element. Hides: torch also takes
    unbatched input, an empty batch, and (affine=False, no running stats) any channel count with
    a warning; dualdl refuses these on both backends."""
    layout, shape = INSTANCENORM_LAYOUTS[name], tuple(shape)
    who = f"{name}({num_features})"
    if len(shape) != layout.count(",") + 1 or shape[1] != num_features:
        raise shape_error(who, layout.replace("C", str(num_features), 1), shape)
    check_not_empty(who, shape)
    spatial = 1
    for d in shape[2:]:
        spatial *= d
    if use_input_stats and spatial <= 1:
        raise ValueError(f"{name}: expected more than 1 spatial element when training, got input of "
                         f"shape {shape}")


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
