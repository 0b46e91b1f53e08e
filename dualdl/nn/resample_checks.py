"""Checks and messages, written once for both backends (framework-free), of PReLU, the channel
dropouts and the resampling/padding/reshaping layers (Upsample, PixelShuffle, ZeroPad2d,
ReflectionPad2d, Unflatten). Same conventions as ``checks.py``: plain Python values in, ``None``
or the error both backends raise out."""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Tuple

from .checks import shape_error

__all__ = ["check_prelu_input", "check_channel_dropout_input", "channel_dropout_axes",
           "UPSAMPLE_MODES", "INTERPOLATING_MODES", "check_upsample_args", "check_pixel_shuffle_input",
           "pad2d_sides", "check_pad2d_input", "unflatten_sizes", "check_unflatten_input"]

Shape = Sequence[int]

# Dropout1d/2d: input rank -> the axes that share one mask (torch: the dims after the channel dim)
_DROPOUT_RANKS = {"Dropout1d": {2: (1,), 3: (2,)}, "Dropout2d": {3: (2,), 4: (2, 3)}}
_DROPOUT_LAYOUTS = {"Dropout1d": "(N, C, L) or (C, L)", "Dropout2d": "(N, C, H, W) or (N, C, L)"}


def check_prelu_input(num_parameters: int, shape: Shape) -> None:
    """torch: one weight, or one per channel (dim 1; a 1-D input is one channel)."""
    shape = tuple(shape)
    channels = shape[1] if len(shape) >= 2 else 1
    if num_parameters != 1 and channels != num_parameters:
        raise shape_error(f"PReLU(num_parameters={num_parameters})", f"(N, {num_parameters}, *)", shape)


def check_channel_dropout_input(name: str, shape: Shape) -> None:
    if len(tuple(shape)) not in _DROPOUT_RANKS[name]:
        raise shape_error(name, _DROPOUT_LAYOUTS[name], shape)


def channel_dropout_axes(name: str, ndim: Optional[int]) -> Tuple[int, ...]:
    """The axes one mask value covers (ndim None: a Symbol, taken as batched)."""
    ranks = _DROPOUT_RANKS[name]
    return ranks[max(ranks) if ndim is None else ndim]


# torch.nn.Upsample's modes (F.interpolate's, less 'lanczos', which needs antialias=True); the
# MXNet adapter runs 'nearest' and 'bilinear' and declares the others in its _dl_cannot
UPSAMPLE_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
INTERPOLATING_MODES = ("linear", "bilinear", "bicubic", "trilinear")


def check_upsample_args(size, scale_factor, mode: str, align_corners: Optional[bool]) -> None:
    """What torch's Upsample fails on in forward only, refused at construction on both backends
    (the align_corners message is torch's)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("Upsample: exactly one of size and scale_factor must be given")
    if mode not in UPSAMPLE_MODES:
        raise ValueError(f"Upsample: unknown mode {mode!r}; expected one of {UPSAMPLE_MODES}")
    if align_corners is not None and mode not in INTERPOLATING_MODES:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")


def check_pixel_shuffle_input(upscale_factor: int, shape: Shape) -> None:
    shape, r2 = tuple(shape), upscale_factor * upscale_factor
    who = f"PixelShuffle(upscale_factor={upscale_factor})"
    if len(shape) not in (3, 4):
        raise shape_error(who, f"(N, C * {r2}, H, W) or (C * {r2}, H, W)", shape)
    if shape[-3] % r2:
        raise ValueError(f"{who}: the channel dim ({shape[-3]}) must be divisible by "
                         f"upscale_factor ** 2 = {r2}, got input of shape {shape}")


def pad2d_sides(name: str, padding) -> Tuple[int, int, int, int]:
    """torch's ``_quadruple``: an int or (left, right, top, bottom); negative sides crop (torch; the
    MXNet adapter declares it cannot)."""
    if isinstance(padding, numbers.Integral):
        return (int(padding),) * 4
    sides = tuple(int(p) for p in padding)
    if len(sides) != 4:
        raise ValueError(f"{name}: padding must be an int or (left, right, top, bottom), got {padding!r}")
    return sides


def check_pad2d_input(name: str, padding: Tuple[int, int, int, int], shape: Shape, reflect: bool) -> None:
    shape = tuple(shape)
    if len(shape) not in (3, 4):
        raise shape_error(name, "(N, C, H, W) or (C, H, W)", shape)
    if reflect:
        (left, right, top, bottom), (h, w) = padding, shape[-2:]
        if max(left, right) >= w or max(top, bottom) >= h:
            raise ValueError(f"{name}(padding={padding}): reflect padding must be smaller than the input's "
                             f"height and width, got input of shape {shape}")


def unflatten_sizes(unflattened_size: Sequence[int]) -> Tuple[int, ...]:
    sizes = tuple(int(s) for s in unflattened_size)
    if not sizes or sum(s == -1 for s in sizes) > 1 or any(s < -1 for s in sizes):
        raise ValueError(f"Unflatten: unflattened_size must be a non-empty sequence of sizes with at "
                         f"most one -1, got {unflattened_size!r}")
    return sizes


def check_unflatten_input(dim: int, sizes: Tuple[int, ...], shape: Shape) -> None:
    shape = tuple(shape)
    who = f"Unflatten(dim={dim}, unflattened_size={sizes})"
    if not -len(shape) <= dim < max(len(shape), 1) or not shape:
        raise ValueError(f"{who}: dim out of range for input of shape {shape}")
    n, known = shape[dim], math.prod(s for s in sizes if s != -1)
    if (n != known) if -1 not in sizes else (known == 0 or n % known):
        raise ValueError(f"{who}: the sizes do not multiply up to the size {n} of dim {dim} "
                         f"of the input of shape {shape}")
