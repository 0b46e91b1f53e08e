"""dualdl.ops on MXNet, indexing and sorting: gather, index_select, take_along_dim, topk, sort,
argsort (PyTorch's semantics on NDArrays and Symbols).

MXNet differences hidden: there is no ``gather`` along a dim (legacy ``pick`` drops the dim), so
it is built from ``index_array`` + ``gather_nd`` (shape-free: works on Symbols); index dtypes are
int64 as torch's (MXNet's ``argsort``/``topk`` default to float32); MXNet's ``argsort`` is not
stable, so ``stable=True`` sorts NDArrays with numpy's stable sort (and is refused on Symbols).
"""
from __future__ import annotations

from collections import namedtuple
from typing import Optional

import numpy as np
from mxnet import nd

from .fast.host import host_array
from .ops_base import _F, _is_nd, nonneg_dim, symbol_error

SortResult = namedtuple("SortResult", ["values", "indices"])
TopK = namedtuple("TopK", ["values", "indices"])


def gather(input, dim: int, index, *, sparse_grad: bool = False):
    if sparse_grad:
        raise ValueError("gather: sparse_grad=True is not supported on MXNet (dense gradients only)")
    F = _F(input)
    dim = nonneg_dim("gather", input, dim)
    if _is_nd(input) and _is_nd(index):
        if index.ndim != input.ndim:
            raise ValueError(f"gather: index has {index.ndim} dimensions, input {input.ndim}; "
                             f"they must be equal (input {input.shape}, index {index.shape})")
        bad = [d for d in range(input.ndim) if d != dim and index.shape[d] > input.shape[d]]
        if bad:
            raise ValueError(f"gather: index shape {index.shape} exceeds input shape {input.shape} "
                             f"in dims {bad} other than dim {dim}")
    index = index.astype("int64")
    coords = F.contrib.index_array(index)                          # index.shape + (ndim,)
    at_dim = F.slice_axis(coords, axis=-1, begin=dim, end=dim + 1)
    mask = F.contrib.arange_like(coords, axis=-1).astype("int64") == dim
    coords = coords + F.broadcast_mul(mask.astype("int64"), F.expand_dims(index, -1) - at_dim)
    flat = F.transpose(F.reshape(coords, shape=(-1, 0), reverse=True))   # (ndim, numel)
    return F.reshape_like(F.gather_nd(input, flat), index)


def index_select(input, dim: int, index):
    if _is_nd(index) and index.ndim > 1:
        raise ValueError(f"index_select: index must be 0-D or 1-D, got shape {index.shape}")
    if _is_nd(index) and _is_nd(input):
        n = input.shape[nonneg_dim("index_select", input, dim)]
        idx = index.asnumpy()
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"index_select: index out of range for dim {dim} of size {n}")
    return _F(input).take(input, index.astype("int64"), axis=int(dim), mode="wrap")


def take_along_dim(input, indices, dim: Optional[int] = None):
    F = _F(input)
    if dim is None:
        return F.take(F.reshape(input, shape=(-1,)), F.reshape(indices, shape=(-1,)).astype("int64"))
    if _is_nd(input) and _is_nd(indices):               # torch broadcasts all dims but ``dim``
        d = nonneg_dim("take_along_dim", input, dim)
        if indices.ndim != input.ndim:
            raise ValueError(f"take_along_dim: input and indices should have the same number of "
                             f"dimensions, got {input.ndim} and {indices.ndim}")
        rest = lambda s: s[:d] + (1,) + s[d + 1:]      # noqa: E731
        shape = tuple(np.broadcast_shapes(rest(input.shape), rest(indices.shape)))
        inp = nd.broadcast_to(input, shape=shape[:d] + (input.shape[d],) + shape[d + 1:])
        idx = nd.broadcast_to(indices, shape=shape[:d] + (indices.shape[d],) + shape[d + 1:])
        return gather(inp, d, idx)
    return gather(input, dim, indices)                  # Symbols: no broadcasting (shapes unknown)


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """Always sorted (``sorted=False`` leaves the order unspecified in torch)."""
    values, indices = _F(input).topk(input, k=int(k), axis=int(dim), ret_typ="both",
                                     is_ascend=not largest, dtype="int64")
    return TopK(values, indices)


def _stable_argsort(input, dim: int, descending: bool):
    if not _is_nd(input):
        raise symbol_error("sort/argsort", "stable=True needs numpy's stable sort on the data",
                           "MXNet's own argsort is not stable: pass stable=False")
    a = input.asnumpy()
    order = np.argsort(-a if descending else a, axis=dim, kind="stable")
    return host_array(order, input.context, "int64")


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    if stable:
        return _stable_argsort(input, int(dim), descending)
    return _F(input).argsort(input, axis=int(dim), is_ascend=not descending, dtype="int64")


def sort(input, dim: int = -1, descending: bool = False, stable: bool = False):
    """Values are gathered at the sorted indices, so their gradient reaches ``input``."""
    indices = argsort(input, dim, descending, stable)
    if _is_nd(input):
        values = gather(input, dim, indices)
    else:
        if int(dim) < 0:
            values = _F(input).sort(input, axis=int(dim), is_ascend=not descending)
        else:
            values = gather(input, dim, indices)
    return SortResult(values, indices)
