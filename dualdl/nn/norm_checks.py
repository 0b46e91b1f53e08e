"""Input checks of the normalisation layers (framework-free, both backends; see dualdl/nn/checks.py)."""
from __future__ import annotations

from typing import Sequence

from .checks import Shape, check_not_empty, shape_error

__all__ = ["BATCHNORM_LAYOUTS", "check_batchnorm_input", "check_layernorm_input", "check_groupnorm_args", "check_groupnorm_input", "INSTANCENORM_LAYOUTS", "check_instancenorm_input"]


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
