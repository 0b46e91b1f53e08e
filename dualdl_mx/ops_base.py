"""Helpers of dualdl_mx's ops modules: ``mx.nd`` or ``mx.sym`` from the argument's type, MXNet's
numpy view, axis checks and the error raised where a Symbol lacks what an op needs."""
from __future__ import annotations

from typing import Any

from mxnet import nd, sym

_NS = {nd.NDArray: nd, sym.Symbol: sym}


def _F(x: Any):
    """``mx.nd`` for NDArrays, ``mx.sym`` for Symbols (cached per type: this is the hot path)."""
    try:
        return _NS[type(x)]
    except KeyError:
        F = sym if isinstance(x, sym.Symbol) else nd
        _NS[type(x)] = F
        return F


def _is_tensor(x: Any) -> bool:
    return isinstance(x, (nd.NDArray, sym.Symbol))


def _is_nd(x: Any) -> bool:
    return isinstance(x, nd.NDArray)


def _np(x: Any) -> Any:
    return x.as_np_ndarray() if _is_tensor(x) else x


def _axis(dim: int, ndim: int, what: str = "dim") -> int:
    if not -ndim <= dim < ndim:
        raise IndexError(f"{what} {dim} is out of range for a tensor with {ndim} dimensions")
    return dim % ndim


def symbol_error(op: str, why: str, instead: str = "") -> ValueError:
    """The error for an argument a Symbol (hybridized MXNet, no shapes) cannot honour."""
    tail = f"; {instead}" if instead else ""
    return ValueError(f"{op}: {why}, which a Symbol (hybridized MXNet) does not have{tail}")


def nonneg_dim(op: str, x: Any, dim: int) -> int:
    """``dim`` resolved against an NDArray's rank; on Symbols it must already be non-negative."""
    dim = int(dim)
    if _is_nd(x):
        return _axis(dim, max(x.ndim, 1))
    if dim < 0:
        raise symbol_error(op, f"a negative dim ({dim}) needs the rank", "write it as non-negative")
    return dim
