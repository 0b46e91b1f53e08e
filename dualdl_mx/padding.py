"""The padding layers on MXNet with PyTorch's signatures and numbers: ``ConstantPad1d/2d/3d``,
``ZeroPad1d/2d/3d``, ``ReflectionPad1d/2d/3d``, ``ReplicationPad1d/2d/3d``, ``CircularPad1d/2d/3d``,
all of them :func:`pad_last` (one implementation, NDArrays and Symbols alike).

MXNet differences hidden: Gluon has no padding blocks; the legacy ``pad`` operator takes 4-D/5-D
input only, pads only the dims after the first two, has no circular mode and no negative
(cropping) padding. The input is viewed as 4-D/5-D by shape-free reshapes (its leading dims merged
into one), cropping is ``slice_axis`` and circular padding ``slice_axis`` + ``concat``; so every
rank torch takes (constant pads: any rank with the padded dims) runs eager and hybridized alike.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from dualdl.nn.registry import defined_in
from dualdl.nn.resample_checks import PAD_LAYERS, check_pad_input, pad_sides
from .base import Layer, is_ndarray

_MX_MODES = {"constant": "constant", "replicate": "edge", "reflect": "reflect"}


def pad_last(F: Any, x: Any, padding: Sequence[int], mode: str = "constant", value: float = 0.0,
             ndim: Optional[int] = None) -> Any:
    """torch's ``F.pad(x, padding, mode, value)`` of the last ``len(padding) // 2`` (1 to 3) dims
    of ``x`` (an NDArray or a Symbol of any rank with those dims; ``ndim``: a Symbol's rank where the
    caller knows it, which saves reshapes); ``padding`` pairs from the last dim backwards, negative
    sides crop. Checked beforehand (``check_pad_input``): a reflect pad is
    smaller than its dim, a circular one at most its dim after cropping, nothing becomes empty.
    Constant and circular pads crop first, reflect and replicate pad first (torch's semantics; for
    constant pads the two orders agree)."""
    pairs = [(int(padding[2 * i]), int(padding[2 * i + 1])) for i in range(len(padding) // 2)]
    if mode == "circular":
        x = _crop(F, x, pairs)
        for i, (left, right) in enumerate(pairs):
            axis = -1 - i
            parts = [F.slice_axis(x, axis=axis, begin=-left, end=None)] if left > 0 else []
            parts += [x] + ([F.slice_axis(x, axis=axis, begin=0, end=right)] if right > 0 else [])
            x = F.concat(*parts, dim=axis) if len(parts) > 1 else x
        return x
    grow = [(max(left, 0), max(right, 0)) for left, right in pairs]
    if any(left or right for left, right in grow):
        x = _pad_grow(F, x, grow, _MX_MODES[mode], float(value), ndim)
    return _crop(F, x, pairs)


def _crop(F: Any, x: Any, pairs: Sequence[Tuple[int, int]]) -> Any:
    """The negative sides of ``pairs`` cut off (``slice_axis``, shape-free)."""
    for i, (left, right) in enumerate(pairs):
        if left < 0 or right < 0:
            x = F.slice_axis(x, axis=-1 - i, begin=-min(left, 0), end=right if right < 0 else None)
    return x


def _pad_grow(F: Any, x: Any, grow: Sequence[Tuple[int, int]], mode: str, value: float,
              ndim: Optional[int]) -> Any:
    """MXNet's ``pad`` of the last ``k = len(grow)`` dims at any rank >= k, viewed as (M, 1.., *last
    k) with 4 dims (k <= 2) or 5 (k = 3). A Symbol has no shape: of a known rank 4/5 it is padded as
    it is, (N, C, W) through (N, C, 1, W); of an unknown rank a leading axis of 1 is added (so at
    least one dim is left to merge), reshaped with codes, padded, and the leading dims restored from
    the input by ``reshape_like`` (about one copy more)."""
    k = len(grow)
    rank = 4 if k <= 2 else 5
    width = (0, 0) * (rank - k) + tuple(s for pair in reversed(grow) for s in pair)
    if is_ndarray(x):                   # the shape is known: views, no reshape operators
        lead, last = tuple(x.shape[:-k]), tuple(x.shape[-k:])
        view = x if x.ndim == rank else x.reshape((-1,) + (1,) * (rank - 1 - k) + last)
        out = F.pad(view, mode=mode, pad_width=width, constant_value=value)
        return out if x.ndim == rank else out.reshape(lead + tuple(out.shape[-k:]))
    if ndim == rank:
        return F.pad(x, mode=mode, pad_width=width, constant_value=value)
    if ndim == 3 and k == 1:
        out = F.pad(F.reshape(x, shape=(0, 0, 1, -1)), mode=mode, pad_width=width, constant_value=value)
        return F.reshape(out, shape=(0, 0, -3))
    xe = F.expand_dims(x, axis=0)
    view = F.reshape(xe, shape=(-1,) + (1,) * (rank - 1 - k) + (0,) * k, reverse=True)
    out = F.pad(view, mode=mode, pad_width=width, constant_value=value)
    out = F.reshape_like(out, xe, lhs_begin=0, lhs_end=rank - k, rhs_begin=0, rhs_end=-k)
    return F.reshape(out, shape=(-3, -2))       # the added axis of 1 merged into the next one


class _PadNd(Layer):
    """torch's ``_ConstantPadNd``/``_ReflectionPadNd``/``_ReplicationPadNd``/``_CircularPadNd``:
    ``padding`` as torch stores it (a tuple of 2n ints), checked on every NDArray input, eager or
    hybridized (a Symbol has no shape), with the errors of ``dualdl.nn.resample_checks``. The
    reflect, replicate and circular pads take torch's batched or unbatched rank: an unbatched input
    runs as a batch of one (``_dl_unbatched_ndim``). The rank of an NDArray call is handed to the
    graph (a cached graph is rebuilt when it changes: constant pads take any rank), which then pads
    4-D/5-D data with MXNet's pad as it is; a Symbol call (inside a parent's graph) is rank-free."""
    _dl_refuses_empty = True
    _dl_call_ndim: Optional[int] = None     # the rank the graph sees in this call (None: unknown)
    _dl_graph_ndim: Optional[int] = None    # the rank the cached graph was built for

    def __init__(self, padding: Union[int, Sequence[int]]) -> None:
        super().__init__()              # arguments checked by dualdl.nn.arguments
        self.padding = pad_sides(type(self).__name__, padding)
        n, self._mode = PAD_LAYERS[type(self).__name__]
        if self._mode != "constant":    # constant pads take any rank, the others (C, *) or (N, C, *)
            self._dl_unbatched_ndim = n + 1

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        x = args[0] if args else kwargs.get("input", kwargs.get("x"))
        ndim = None
        if is_ndarray(x):                # eager or hybridized, the shape the user gave
            check_pad_input(type(self).__name__, self.padding, x.shape)
            ndim = x.ndim + (x.ndim == self._dl_unbatched_ndim)        # run as a batch of one
        self._dl_call_ndim = ndim
        if ndim is not None and self._active and ndim != self._dl_graph_ndim:
            self._clear_cached_op()
            self._dl_graph_ndim = ndim
        return super().__call__(*args, **kwargs)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return pad_last(F, x, self.padding, self._mode, getattr(self, "value", 0.0), self._dl_call_ndim)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: Union[int, Sequence[int]], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    """torch's ZeroPad*d: a ConstantPad*d with value 0.0, printed as the other pads."""

    def __init__(self, padding: Union[int, Sequence[int]]) -> None:
        super().__init__(padding, 0.0)

    extra_repr = _PadNd.extra_repr


class ConstantPad1d(_ConstantPadNd):
    """``torch.nn.ConstantPad1d(padding, value)``: the last dim, any rank."""


class ConstantPad2d(_ConstantPadNd):
    """``torch.nn.ConstantPad2d(padding, value)``: the last 2 dims, any rank >= 2."""


class ConstantPad3d(_ConstantPadNd):
    """``torch.nn.ConstantPad3d(padding, value)``: the last 3 dims, any rank >= 3."""


class ZeroPad1d(_ZeroPadNd):
    """``torch.nn.ZeroPad1d(padding)``: zeros on the last dim, any rank."""


class ZeroPad2d(_ZeroPadNd):
    """``torch.nn.ZeroPad2d(padding)``: zeros on the last 2 dims, any rank >= 2."""


class ZeroPad3d(_ZeroPadNd):
    """``torch.nn.ZeroPad3d(padding)``: zeros on the last 3 dims, any rank >= 3."""


class ReflectionPad1d(_PadNd):
    """``torch.nn.ReflectionPad1d(padding)``: (N, C, W) or (C, W), each pad smaller than W."""


class ReflectionPad2d(_PadNd):
    """``torch.nn.ReflectionPad2d(padding)``: (N, C, H, W) or (C, H, W), each pad smaller than its dim."""


class ReflectionPad3d(_PadNd):
    """``torch.nn.ReflectionPad3d(padding)``: (N, C, D, H, W) or (C, D, H, W), each pad smaller than its dim."""


class ReplicationPad1d(_PadNd):
    """``torch.nn.ReplicationPad1d(padding)``: (N, C, W) or (C, W), MXNet's ``edge`` mode."""


class ReplicationPad2d(_PadNd):
    """``torch.nn.ReplicationPad2d(padding)``: (N, C, H, W) or (C, H, W), MXNet's ``edge`` mode."""


class ReplicationPad3d(_PadNd):
    """``torch.nn.ReplicationPad3d(padding)``: (N, C, D, H, W) or (C, D, H, W), MXNet's ``edge`` mode."""


class CircularPad1d(_PadNd):
    """``torch.nn.CircularPad1d(padding)``: (N, C, W) or (C, W), wrapping at most once."""


class CircularPad2d(_PadNd):
    """``torch.nn.CircularPad2d(padding)``: (N, C, H, W) or (C, H, W), wrapping at most once."""


class CircularPad3d(_PadNd):
    """``torch.nn.CircularPad3d(padding)``: (N, C, D, H, W) or (C, D, H, W), wrapping at most once."""


__all__ = ["pad_last"] + defined_in(__name__)  # the layers defined above (registered by class name)
