"""dualdl.ops on MXNet, shape and layout: expand, repeat, tile, flip, roll, pad, triu, tril.

MXNet differences hidden: ``broadcast_to`` keeps a dim with 0 (torch's ``expand`` with -1);
torch's ``Tensor.repeat`` is numpy's (and MXNet's) ``tile``; ``reverse``/``np.flip`` reject
negative axes (resolved on NDArrays; on Symbols write them non-negative); legacy ``pad`` takes
4-D/5-D input only and has no circular mode, so ``pad`` is built from slices, ``repeat`` and
``concat`` (any rank, on Symbols too, with gradients); MXNet has ``np.tril`` but no ``triu``
(``x - tril(x, k - 1)``).
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from .ops_base import _F, _is_nd, _np, nonneg_dim


def _sizes(sizes) -> tuple:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    return tuple(int(s) for s in sizes)


def expand(input, *sizes):
    sizes = _sizes(sizes)
    F = _F(input)
    if _is_nd(input):
        lead = len(sizes) - input.ndim
        if lead < 0:
            raise ValueError(f"expand: the number of sizes ({len(sizes)}) must be at least the "
                             f"number of dimensions ({input.ndim}) of input {input.shape}")
        if any(s == -1 for s in sizes[:lead]):
            raise ValueError(f"expand: -1 is not allowed for the new leading dims in {sizes}")
        x = input.reshape((1,) * lead + tuple(input.shape)) if lead else input
        shape = tuple(x.shape[i] if s == -1 else s for i, s in enumerate(sizes))
        return F.broadcast_to(x, shape=shape)
    return F.broadcast_to(input, shape=tuple(0 if s == -1 else s for s in sizes))


def repeat(input, *repeats):
    """torch's ``Tensor.repeat`` (numpy's ``tile``), not ``repeat_interleave``."""
    repeats = _sizes(repeats)
    if _is_nd(input) and len(repeats) < input.ndim:
        raise ValueError(f"repeat: number of repeat dims ({len(repeats)}) can not be smaller than "
                         f"the number of dimensions ({input.ndim}) of the tensor")
    return _F(input).tile(input, reps=repeats)


def tile(input, dims: Sequence[int]):
    return _F(input).tile(input, reps=tuple(int(d) for d in dims))


def flip(input, dims: Union[int, Sequence[int]]):
    dims = (dims,) if isinstance(dims, int) else dims
    dims = tuple(nonneg_dim("flip", input, d) for d in dims)       # MXNet rejects negative axes
    return _F(input).np.flip(_np(input), axis=dims).as_nd_ndarray()


def roll(input, shifts, dims=None):
    if dims is None:
        F = _F(input)
        flat = F.np.roll(_np(F.reshape(input, shape=(-1,))), int(shifts)).as_nd_ndarray()
        return F.reshape_like(flat, input)
    shifts = (int(shifts),) if isinstance(shifts, int) else tuple(int(s) for s in shifts)
    dims = (int(dims),) if isinstance(dims, int) else tuple(int(d) for d in dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    return _F(input).np.roll(_np(input), shifts, axis=dims).as_nd_ndarray()


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_side(x, dim: int, p: int, left: bool, mode: str, value: float):
    """The ``p`` slices added on one side of ``dim``."""
    F = _F(x)
    sl = lambda b, e: F.slice_axis(x, axis=dim, begin=b, end=e)    # noqa: E731
    if mode == "reflect":        # single slices in reverse order (np.flip rejects negative axes)
        ks = range(p, 0, -1) if left else range(-2, -p - 2, -1)
        return F.concat(*[sl(k, k + 1 if k != -1 else None) for k in ks], dim=dim)
    if mode == "circular":
        return sl(-p, None) if left else sl(0, p)
    edge = sl(0, 1) if left else sl(-1, None)
    if mode == "constant":
        edge = F.zeros_like(edge) + value
    return F.repeat(edge, repeats=p, axis=dim)


def _pad_dim(x, dim: int, left: int, right: int, mode: str, value: float):
    parts = ([_pad_side(x, dim, left, True, mode, value)] if left else []) + [x]
    parts += [_pad_side(x, dim, right, False, mode, value)] if right else []
    return _F(x).concat(*parts, dim=dim)


def pad(input, pad: Sequence[int], mode: str = "constant", value: Optional[float] = None):
    """``torch.nn.functional.pad``: ``pad`` pairs from the last dim backwards."""
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {_PAD_MODES}, got {mode!r}")
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise ValueError(f"pad: the padding length must be divisible by 2, got {len(pad)}")
    if any(p < 0 for p in pad):
        raise ValueError(f"pad: negative padding (cropping) is not supported on MXNet, got {pad}")
    if value is not None and mode != "constant":
        raise ValueError(f"pad: value is only used with mode='constant', got mode={mode!r}")
    if _is_nd(input):
        if len(pad) // 2 > input.ndim:
            raise ValueError(f"pad: padding {pad} covers {len(pad) // 2} dims, input {input.shape} "
                             f"has {input.ndim}")
        for i in range(len(pad) // 2):
            n, lr = input.shape[input.ndim - 1 - i], pad[2 * i: 2 * i + 2]
            if mode == "reflect" and max(lr) >= n:
                raise ValueError(f"pad: reflect padding {lr} must be smaller than the size {n} of "
                                 f"dim {input.ndim - 1 - i}")
            if mode == "circular" and max(lr) > n:
                raise ValueError(f"pad: circular padding {lr} must be at most the size {n} of dim "
                                 f"{input.ndim - 1 - i}")
    x = input
    for i in range(len(pad) // 2):
        left, right = pad[2 * i], pad[2 * i + 1]
        if left or right:
            x = _pad_dim(x, -1 - i, left, right, mode, 0.0 if value is None else float(value))
    return x if x is not input else _F(input).identity(input)


def tril(input, diagonal: int = 0):
    return _F(input).np.tril(_np(input), int(diagonal)).as_nd_ndarray()


def triu(input, diagonal: int = 0):
    return _F(input).broadcast_sub(input, tril(input, int(diagonal) - 1))
