"""Checks and messages, written once for both backends (framework-free), of PReLU, the channel
dropouts and the resampling/padding/reshaping layers (Upsample, PixelShuffle, the
``{Constant,Zero,Reflection,Replication,Circular}Pad{1,2,3}d`` pads, Unflatten). Same conventions
as ``checks.py``: plain Python values in, ``None`` or the error both backends raise out."""
from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Sequence, Tuple

from .checks import check_not_empty, shape_error

__all__ = ["check_prelu_input", "check_channel_dropout_input", "channel_dropout_axes",
           "UPSAMPLE_MODES", "INTERPOLATING_MODES", "check_upsample_args", "check_align_corners",
           "check_pixel_shuffle_input", "PAD_LAYERS", "pad_sides", "check_pad_value", "check_pad_input",
           "unflatten_sizes", "check_unflatten_input"]

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
# MXNet adapter runs all but 'bicubic' and declares that one in its _dl_cannot
UPSAMPLE_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
INTERPOLATING_MODES = ("linear", "bilinear", "bicubic", "trilinear")


def check_upsample_args(size, scale_factor, mode: str, align_corners: Optional[bool]) -> None:
    """What torch's Upsample fails on in forward only, refused at construction on both backends
    (the align_corners message is torch's)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("Upsample: exactly one of size and scale_factor must be given")
    if mode not in UPSAMPLE_MODES:
        raise ValueError(f"Upsample: unknown mode {mode!r}; expected one of {UPSAMPLE_MODES}")
    check_align_corners(mode, align_corners)


def check_align_corners(mode: str, align_corners: Optional[bool]) -> None:
    """torch's refusal of ``align_corners`` with a mode that does not interpolate (its message)."""
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


# the padding layers: name -> (number of padded trailing dims, torch's F.pad mode)
_PAD_FAMILIES = {"Constant": "constant", "Zero": "constant", "Reflection": "reflect",
                 "Replication": "replicate", "Circular": "circular"}
PAD_LAYERS = {f"{family}Pad{n}d": (n, mode) for family, mode in _PAD_FAMILIES.items() for n in (1, 2, 3)}
_SIDES = ("left", "right", "top", "bottom", "front", "back")
_DIMS = {1: "width", 2: "height and width", 3: "depth, height and width"}
_LAYOUTS = {1: "(N, C, W) or (C, W)", 2: "(N, C, H, W) or (C, H, W)", 3: "(N, C, D, H, W) or (C, D, H, W)"}
_ANY_RANK = {1: "(*, W)", 2: "(*, H, W)", 3: "(*, D, H, W)"}


def pad_sides(name: str, padding: Any) -> Tuple[int, ...]:
    """torch's ``_pair``/``_quadruple``/``_ntuple(6)`` of a ``*Pad{n}d`` layer: an int, or 2n ints
    (left, right, top, bottom, front, back: the last dim first); negative sides crop. torch takes
    any iterable at construction and fails only in forward: refused here (dualdl's check)."""
    n = PAD_LAYERS[name][0]
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        return (int(padding),) * (2 * n)
    what = ", ".join(_SIDES[:2 * n])
    try:
        sides = tuple(padding)
    except TypeError:
        raise TypeError(f"{name}: padding must be an int or ({what}), got {padding!r}") from None
    if len(sides) != 2 * n:
        raise ValueError(f"{name}: padding must be an int or ({what}), got {padding!r}")
    if not all(isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in sides):
        raise TypeError(f"{name}: padding must be an int or ({what}) of ints, got {padding!r}")
    return tuple(int(p) for p in sides)


def check_pad_value(name: str, value: Any) -> None:
    """ConstantPad*d's ``value``: torch takes anything at construction and fails only in forward."""
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: value must be a real number, got {value!r}")


def check_pad_input(name: str, padding: Tuple[int, ...], shape: Shape) -> None:
    """What torch's forward fails on, as one dualdl ValueError on both backends: the rank
    (constant pads take any rank with the padded dims, the others torch's batched/unbatched pair),
    then per padded dim with size s and sides (l, r): constant crops first (s + min(l, 0) + min(r, 0)
    >= 0), reflect needs l, r < s, reflect and replicate an output of at least one element,
    circular crops first to c >= 1 elements and wraps at most once (l, r <= c; torch checks
    l, r <= s only, then fails inside its kernel or returns uninitialised memory). An input or
    output with no elements is refused on both backends (MXNet's operators cannot run on one)."""
    shape = tuple(shape)
    n, mode = PAD_LAYERS[name]
    if len(shape) not in (n + 1, n + 2) and (mode != "constant" or len(shape) < n):
        raise shape_error(name, _ANY_RANK[n] if mode == "constant" else _LAYOUTS[n], shape)
    check_not_empty(name, shape)
    who = f"{name}(padding={padding})"
    out = list(shape)
    for i in range(n):
        dim = len(shape) - 1 - i
        s, (left, right) = shape[dim], padding[2 * i: 2 * i + 2]
        kept = s + min(left, 0) + min(right, 0)
        out[dim] = s + left + right
        if mode == "reflect" and max(left, right) >= s:
            raise ValueError(f"{who}: reflect padding must be smaller than the input's {_DIMS[n]}, "
                             f"got input of shape {shape}")
        if mode in ("constant", "circular") and kept < (mode == "circular"):
            raise ValueError(f"{who}: the negative padding crops more than the size {s} of dim {dim} of "
                             f"the input of shape {shape}")
        if mode == "circular" and max(left, right) > kept:
            raise ValueError(f"{who}: circular padding wraps around more than once: each pad must be at "
                             f"most the size {kept} of dim {dim} (after cropping) of the input of shape "
                             f"{shape}")
    if 0 in out or any(o < 0 for o in out):
        raise ValueError(f"{who}: the output of shape {tuple(out)} would have no elements (input of shape "
                         f"{shape}); MXNet's operators cannot produce one, so dualdl refuses it on both "
                         f"backends")


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
