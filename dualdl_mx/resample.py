"""Resampling and reshaping layers on MXNet with PyTorch's signatures: ``Upsample``,
``PixelShuffle``, ``Unflatten`` (the padding layers are in ``padding.py``). Upsample is
``dualdl.nn.functional.interpolate`` (one implementation: ``ops_functional_conv``, ``ops_resize``).

MXNet differences hidden: ``BilinearResize2D`` defaults to ``align_corners=True`` (torch: False),
``UpSampling`` takes integer scales of 4-D input only (see ``ops_resize``); Gluon has no pixel-shuffle
or unflatten blocks (``nn.PixelShuffle2D`` exists only in MXNet 2).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple, Union

from dualdl.nn.resample_checks import check_pixel_shuffle_input, check_unflatten_input
from dualdl.nn.registry import defined_in
from .base import Layer, is_ndarray


class Upsample(Layer):
    """``torch.nn.Upsample``: eager, every mode but 'bicubic' on (N, C, L), (N, C, H, W) and
    (N, C, D, H, W) with torch's numbers (``dualdl.nn.functional.interpolate``); hybridized, 4-D
    'nearest' by one integer ``scale_factor`` (MXNet's ``UpSampling``) and 'bilinear', 3-D 'linear'."""
    _dl_cannot = {"mode": (lambda v, bound: v == "bicubic", "dualdl's MXNet resizing has no cubic mode")}

    def __init__(self, size: Union[None, int, Tuple[int, int]] = None,
                 scale_factor: Union[None, float, Tuple[float, float]] = None, mode: str = "nearest",
                 align_corners: Optional[bool] = None, recompute_scale_factor: Optional[bool] = None) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def hybrid_forward(self, F, x):
        from .ops_functional_conv import interpolate
        if is_ndarray(x) and x.ndim not in (3, 4, 5):
            raise ValueError(f"Upsample(mode={self.mode!r}): expected input of 3 to 5 dims (N, C, *spatial), "
                             f"got {tuple(x.shape)}")
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)

    def extra_repr(self) -> str:
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class PixelShuffle(Layer):
    """``torch.nn.PixelShuffle``: (N, C r^2, H, W) -> (N, C, H r, W r), written as reshape +
    transpose (shape-free, so Symbols too)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = int(upscale_factor)

    def hybrid_forward(self, F, x):
        r = self.upscale_factor
        if is_ndarray(x):
            check_pixel_shuffle_input(r, x.shape)
            if x.ndim == 3:
                return self.hybrid_forward(F, x.expand_dims(0))[0]
        x = F.reshape(x, shape=(0, -4, -1, r * r, -2))             # (N, C, r*r, H, W)
        x = F.reshape(x, shape=(0, 0, -4, r, r, -2))               # (N, C, r, r, H, W)
        x = F.transpose(x, axes=(0, 1, 4, 2, 5, 3))                # (N, C, H, r, W, r)
        return F.reshape(x, shape=(0, 0, -3, -3))

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class Unflatten(Layer):
    """``torch.nn.Unflatten(dim, unflattened_size)`` (one -1 allowed). Hybridized, ``dim`` must be
    non-negative (a Symbol's rank is unknown)."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        # checked before construction by dualdl.nn.arguments (torch's TypeErrors, at most one -1)
        self.dim, self.unflattened_size = int(dim), tuple(int(s) for s in unflattened_size)

    def hybrid_forward(self, F, x):
        d, sizes = self.dim, self.unflattened_size
        if is_ndarray(x):
            check_unflatten_input(d, sizes, x.shape)
            d = d % x.ndim
            return x.reshape(tuple(x.shape[:d]) + sizes + tuple(x.shape[d + 1:]))
        if d < 0:
            raise NotImplementedError(f"Unflatten(dim={d}): a negative dim needs the input rank, unknown "
                                      f"under hybridize()")
        for i, s in enumerate(sizes[:-1]):           # split one size off the front at a time
            rest = -1 if s != -1 else math.prod(sizes[i + 1:])
            x = F.reshape(x, shape=(0,) * (d + i) + (-4, s, rest, -2))
        return x

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
