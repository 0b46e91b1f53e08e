"""Input and argument checks of the convolutions, transposed convolutions and pools (framework-free,
both backends; see dualdl/nn/checks.py)."""
from __future__ import annotations

import numbers
from typing import Any, Optional, Sequence, Tuple, Union

from .check_base import Shape, check_not_empty, shape_error

__all__ = ["conv_sides", "check_conv_input", "check_lazy_conv_input", "conv_transpose_output_size",
           "check_conv_transpose_input", "conv_transpose_output_padding", "check_pool_args", "pool_output_size",
           "check_pool_input", "check_adaptive_pool_input", "adaptive_output_size", "adaptive_bins",
           "batched_shape", "fractional_output_size", "check_fractional_pool_input"]


def batched_shape(shape: Shape, n: int) -> Optional[Tuple[int, ...]]:
    """``shape`` as a batched (N, C, *n spatial) shape: an unbatched (C, *spatial) one, which torch
    takes for every convolution and pool, as a batch of one; None for any other rank."""
    shape = tuple(shape)
    if len(shape) == n + 2:
        return shape
    return (1,) + shape if len(shape) == n + 1 else None


def _conv_batched(name: str, in_channels: int, shape: Shape, n: int) -> Tuple[int, ...]:
    """A convolution's input as (N, C_in, *spatial): the right rank (batched or not), ``in_channels``
    channels and no empty axis, or the error both backends raise."""
    shape = tuple(shape)
    who = f"{name}(in_channels={in_channels})"
    full = batched_shape(shape, n)
    if full is None or full[1] != in_channels:
        raise shape_error(who, _CONV_LAYOUTS[n].replace("C_in", str(in_channels)), shape)
    check_not_empty(who, shape)
    return full


def _layouts(batched: str) -> str:
    """``"(N, C, H, W)"`` -> ``"(N, C, H, W) or (C, H, W)"``: both ranks torch takes."""
    return f"{batched} or ({batched[len('(N, '):]}"


# ---- convolutions -----------------------------------------------------------------------------
_CONV_LAYOUTS = {n: _layouts(s) for n, s in {1: "(N, C_in, L)", 2: "(N, C_in, H, W)",
                                             3: "(N, C_in, D, H, W)"}.items()}


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
    n = len(kernel_size)
    full = _conv_batched(name, in_channels, shape, n)
    sides = conv_sides(padding, kernel_size, dilation) if sides is None else sides
    spatial = full[2:]
    for i in range(n):
        eff = dilation[i] * (kernel_size[i] - 1) + 1
        if spatial[i] + sum(sides[i]) < eff:
            raise ValueError(f"{name}: input spatial size {spatial} (padded by {padding}) is smaller than "
                             f"the kernel {tuple(kernel_size)} (dilation {tuple(dilation)})")
        if padding_mode == "reflect" and max(sides[i]) >= spatial[i]:
            raise ValueError(f"{name}: padding_mode='reflect' needs padding < input size, got padding "
                             f"{padding} for input {spatial}")


def check_lazy_conv_input(name: str, n: int, groups: int, shape: Shape) -> int:
    """The first input of a lazy convolution (``LazyConv2d``...): rank (N, C_in, *spatial) or
    (C_in, *spatial), no empty input, ``C_in`` divisible by ``groups`` (torch's error). Returns
    ``C_in``, the inferred ``in_channels``."""
    shape = tuple(shape)
    full = batched_shape(shape, n)
    who = f"{name}(in_channels=inferred)"
    if full is None:
        raise shape_error(who, _CONV_LAYOUTS[n], shape)
    check_not_empty(who, shape)
    if full[1] % groups != 0:
        raise ValueError("in_channels must be divisible by groups")
    return full[1]


# ---- transposed convolutions -------------------------------------------------------------------
def conv_transpose_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                               output_padding: int) -> int:
    """torch's transposed-convolution length: (L - 1) s - 2 p + d (k - 1) + output_padding + 1."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def check_conv_transpose_input(name: str, in_channels: int, shape: Shape, kernel_size: Sequence[int],
                               stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                               output_padding: Sequence[int]) -> None:
    """Rank and channels, no empty input, a positive output size on every spatial axis."""
    n = len(kernel_size)
    full = _conv_batched(name, in_channels, shape, n)
    sizes = tuple(conv_transpose_output_size(full[2 + i], kernel_size[i], stride[i], padding[i], dilation[i],
                                             output_padding[i]) for i in range(n))
    if any(o <= 0 for o in sizes):
        raise ValueError(f"{name}(in_channels={in_channels}): input spatial size {full[2:]} gives no output (output would be {sizes})")


def conv_transpose_output_padding(name: str, shape: Shape, output_size: Sequence[int],
                                  kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                                  dilation: Sequence[int]) -> Tuple[int, ...]:
    """The output padding that gives ``output_size`` (forward's ``output_size=``, the n spatial
    sizes or the full n + 2 shape), as torch computes it, with torch's range error. Hides: MXNet's
    ``target_shape`` recomputes the padding itself and ignores ``pad``/``adj``."""
    n, shape = len(kernel_size), tuple(shape)
    full = len(shape) if len(shape) in (n + 1, n + 2) else n + 2     # a full shape: (N,) C, *spatial
    shape = batched_shape(shape, n) or shape
    want = tuple(int(o) for o in output_size)
    if len(want) == full:
        want = want[full - n:]
    if len(want) != n:
        raise ValueError(f"{name}: output_size must have {n} or {full} elements, got {len(want)}")
    lo = tuple(conv_transpose_output_size(shape[2 + i], kernel_size[i], stride[i], padding[i], dilation[i], 0)
               for i in range(n))
    hi = tuple(m + s - 1 for m, s in zip(lo, stride))
    if any(not a <= w <= b for w, a, b in zip(want, lo, hi)):
        raise ValueError(f"{name}: requested an output size of {want}, but valid sizes range from {lo} to "
                         f"{hi} (for an input of {shape[2:]})")
    return tuple(w - a for w, a in zip(want, lo))


# ---- pooling ----------------------------------------------------------------------------------
_POOL_LAYOUTS = {n: _layouts(s) for n, s in {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}.items()}


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
    full = batched_shape(shape, n)
    if full is None:
        raise shape_error(who, _POOL_LAYOUTS[n], shape)
    eff = _dilated(kernel_size, dilation)
    sizes = tuple(pool_output_size(full[2 + i], eff[i], stride[i], padding[i], ceil_mode) for i in range(n))
    if any(o <= 0 for o in sizes):
        raise ValueError(f"{who}: input spatial size {full[2:]} is too small (output would be {sizes})")


def check_adaptive_pool_input(output_size: Any, shape: Shape, name: str = "AdaptiveAvgPool2d",
                              n: int = 2) -> None:
    """Rank (N, C, *spatial) for an adaptive pool over ``n`` axes, no empty input."""
    shape = tuple(shape)
    size = (output_size,) * n if isinstance(output_size, numbers.Integral) or output_size is None \
        else tuple(output_size)
    who = f"{name}(output_size={size[0] if n == 1 else size})"
    if batched_shape(shape, n) is None:
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


# ---- fractional max pooling -------------------------------------------------------------------
_AXES = {1: ("length",), 2: ("height", "width"), 3: ("time", "height", "width")}


def fractional_output_size(name: str, shape: Shape, kernel_size: Sequence[int],
                           output_size: Optional[Sequence[int]],
                           output_ratio: Optional[Sequence[float]]) -> Tuple[int, ...]:
    """The output size of a fractional max pool over the last ``len(kernel_size)`` axes (torch:
    ``int(L * ratio)`` when a ratio is given), checked as torch checks it: rank (N, C, *spatial) or
    (C, *spatial), and output + kernel - 1 <= the input (2-d), < the input (3-d)."""
    n, shape = len(kernel_size), tuple(shape)
    who = f"{name}(kernel_size={tuple(kernel_size)})"
    full = batched_shape(shape, n)
    if full is None:
        raise shape_error(who, _POOL_LAYOUTS[n], shape)
    check_not_empty(who, shape)
    spatial = full[2:]
    sizes = tuple(int(o) for o in output_size) if output_size is not None else \
        tuple(int(size * r) for size, r in zip(spatial, output_ratio))
    strict = n == 3                 # torch: 2-d output + kernel - 1 <= input, 3-d < input
    for axis, o, k, size in zip(_AXES[n], sizes, kernel_size, spatial):
        if o + k - 1 > size - strict:
            raise ValueError(f"{who}: pool {axis} {k} too large relative to input {axis} {size} (output "
                             f"size {sizes}: output + kernel - 1 must be {'<' if strict else '<='} the input)")
    return sizes


def check_fractional_pool_input(name: str, shape: Shape, n: int, samples_shape: Optional[Shape],
                                dtype: str, samples_dtype: Optional[str]) -> None:
    """``_random_samples`` (given to the constructor) against the input, as torch checks them:
    (at least N, C, n) and the input's dtype."""
    if samples_shape is None:
        return
    full, samples = batched_shape(shape, n), tuple(samples_shape)
    if len(samples) != 3 or samples[0] < full[0] or samples[1] != full[1] or samples[2] != n:
        raise ValueError(f"{name}: _random_samples must have shape (at least N, C, {n}) = "
                         f"({full[0]}, {full[1]}, {n}) for input {tuple(shape)}, got {samples}")
    if samples_dtype != dtype:
        raise ValueError(f"{name}: _random_samples has dtype {samples_dtype}, the input {dtype}: "
                         f"expected the same dtype (as torch)")
