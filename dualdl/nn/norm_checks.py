"""Input checks of the normalisation layers and of Bilinear (framework-free, both backends; see
dualdl/nn/checks.py)."""
from __future__ import annotations

import warnings
from typing import Sequence

from .check_base import Shape, check_not_empty, shape_error

__all__ = ["BATCHNORM_LAYOUTS", "check_batchnorm_input", "check_layernorm_input", "check_rmsnorm_input",
           "check_groupnorm_args", "check_groupnorm_input", "INSTANCENORM_LAYOUTS", "check_instancenorm_input",
           "check_local_response_norm_input", "check_bilinear_input"]


# ---- normalisation ----------------------------------------------------------------------------
# class name -> (layouts named in the message, accepted ranks)
BATCHNORM_LAYOUTS = {"BatchNorm1d": (("(N, C)", "(N, C, L)"), (2, 3)),
                     "BatchNorm2d": (("(N, C, H, W)",), (4,)),
                     "BatchNorm3d": (("(N, C, D, H, W)",), (5,))}


def check_batchnorm_input(name: str, num_features: int, shape: Shape, training: bool) -> None:
    """Rank and channels for ``name`` (a key of :data:`BATCHNORM_LAYOUTS`), no empty batch (in
    train and eval mode alike); in train mode more than one value per channel (a batch variance
    needs two). Hides: torch returns an empty output for an empty batch (MXNet's operators cannot
    run on one), refused on both backends with dualdl's empty-batch error."""
    layouts, ndims = BATCHNORM_LAYOUTS[name]
    shape = tuple(shape)
    who = f"{name}({num_features})"
    if len(shape) not in ndims or shape[1] != num_features:
        expected = " or ".join(l.replace("C", str(num_features), 1) for l in layouts)
        raise shape_error(who, expected, shape)
    check_not_empty(who, shape)
    if training:
        n = 1
        for d in shape:
            n *= d
        if n // max(num_features, 1) <= 1:
            raise ValueError(f"{name}: expected more than 1 value per channel when training, got input "
                             f"of shape {shape}")


def _check_trailing(who: str, normalized_shape: Sequence[int], shape: Shape) -> None:
    k, shape, norm = len(normalized_shape), tuple(shape), tuple(normalized_shape)
    check_not_empty(who, shape)
    if len(shape) < k or shape[len(shape) - k:] != norm:
        raise shape_error(who, "(*, " + ", ".join(map(str, norm)) + ")", shape)


def check_layernorm_input(normalized_shape: Sequence[int], shape: Shape) -> None:
    """The trailing axes equal ``normalized_shape`` (any leading axes, none included); not empty."""
    _check_trailing(f"LayerNorm({tuple(normalized_shape)})", normalized_shape, shape)


def check_rmsnorm_input(normalized_shape: Sequence[int], shape: Shape) -> None:
    """As :func:`check_layernorm_input`, for RMSNorm."""
    _check_trailing(f"RMSNorm({tuple(normalized_shape)})", normalized_shape, shape)


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


# class name -> the batched layout named in the message (its rank: the number of axes in it); torch
# also takes it without the N axis (unbatched)
INSTANCENORM_LAYOUTS = {"InstanceNorm1d": "(N, C, L)", "InstanceNorm2d": "(N, C, H, W)",
                        "InstanceNorm3d": "(N, C, D, H, W)"}


def check_instancenorm_input(name: str, num_features: int, shape: Shape, use_input_stats: bool,
                             affine: bool = True, track_running_stats: bool = True, warn: bool = False) -> None:
    """torch's rule: the batched layout or the same without N (unbatched); the channel axis must be
    num_features with a weight or running statistics, else (torch: a warning, ``warn``: given here
    with torch's words) any channel count is normalised; no empty input; normalising by its own
    statistics (train mode, or no running statistics) needs more than 1 spatial element. Hides:
    torch's RuntimeError of the running statistics' size, and its empty output for an empty batch
    (MXNet's operators cannot run on one), refused on both backends."""
    layout, shape = INSTANCENORM_LAYOUTS[name], tuple(shape)
    who = f"{name}({num_features})"
    rank = layout.count(",") + 1
    if len(shape) not in (rank - 1, rank):
        raise shape_error(who, _instancenorm_layouts(layout, num_features), shape)
    feature_dim = len(shape) - rank + 1
    if shape[feature_dim] != num_features:
        if affine or track_running_stats:
            raise shape_error(who, _instancenorm_layouts(layout, num_features), shape)
        if warn:
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence "
                          f"this warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=4)
    check_not_empty(who, shape)
    spatial = 1
    for d in shape[feature_dim + 1:]:
        spatial *= d
    if use_input_stats and spatial <= 1:
        raise ValueError(f"{name}: expected more than 1 spatial element when training, got input of "
                         f"shape {shape}")


def _instancenorm_layouts(layout: str, num_features: int) -> str:
    """``(3, L) or (N, 3, L)``: the unbatched and the batched layout."""
    batched = layout.replace("C", str(num_features), 1)
    return "(" + batched[len("(N, "):] + " or " + batched


def check_local_response_norm_input(size: int, shape: Shape) -> None:
    """(N, C, *) with at least one axis after C, not empty. Hides: torch returns an empty input
    unchanged (MXNet's operators cannot run on it), refused on both backends."""
    shape, who = tuple(shape), f"LocalResponseNorm({size})"
    if len(shape) < 3:
        raise shape_error(who, "(N, C, *) with at least 3 axes", shape)
    check_not_empty(who, shape)


# ---- Bilinear -----------------------------------------------------------------------------------
def check_bilinear_input(in1_features: int, in2_features: int, out_features: int, shape1: Shape,
                         shape2: Shape) -> None:
    """(*, in1_features) and (*, in2_features) with the same leading axes (none: unbatched), not
    empty. Hides: torch's RuntimeErrors without the layout; its empty output for an empty batch
    (MXNet's operators cannot run on one), refused on both backends."""
    s1, s2 = tuple(shape1), tuple(shape2)
    who = f"Bilinear(in1_features={in1_features}, in2_features={in2_features}, out_features={out_features})"
    if not s1 or s1[-1] != in1_features:
        raise shape_error(who + " input1", f"(*, {in1_features})", s1)
    if not s2 or s2[-1] != in2_features or s2[:-1] != s1[:-1]:
        raise shape_error(who + " input2", f"(*, {in2_features}) with the leading axes of input1 {s1}", s2)
    check_not_empty(who, s1)
    check_not_empty(who, s2)
