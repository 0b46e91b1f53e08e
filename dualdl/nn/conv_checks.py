"""Input and argument checks of the convolutions, transposed convolutions and pools (framework-free,
both backends; see dualdl/nn/checks.py)."""
from __future__ import annotations

import numbers
from typing import Any, Optional, Sequence, Tuple, Union

from .checks import Shape, check_not_empty, shape_error

__all__ = ["conv_sides", "check_conv_input", "conv_transpose_output_size", "check_conv_transpose_input", "conv_transpose_output_padding", "check_pool_args", "pool_output_size", "check_pool_input", "check_adaptive_pool_input", "adaptive_output_size", "adaptive_bins"]


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
