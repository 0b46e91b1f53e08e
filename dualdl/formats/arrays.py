"""Tensors to bytes and back, for every format: what the writers and readers share.

Writers accept numpy arrays and native torch / MXNet tensors. A native tensor is described
(shape, dtype) from its attributes and turned into host bytes one at a time, when its turn to be
written comes: a zero-copy view of a CPU torch tensor, one ``to_numpy`` (``asnumpy()``) for the
other backends. Readers fill fresh arrays straight from the file (``readinto``, no extra copy).
"""
from __future__ import annotations

from typing import Any, Iterable, List, Mapping, NamedTuple, Tuple

import numpy as np

from ..backend import backend_of

__all__ = ["Plan", "plan", "host", "bytes_of", "fill"]


class Plan(NamedTuple):
    """One tensor to write: its name, value (numpy or native), shape and dtype."""
    name: str
    value: Any
    shape: Tuple[int, ...]
    dtype: np.dtype


def plan(tensors: Mapping[str, object], what: str, allowed: Iterable[np.dtype]) -> List[Plan]:
    """Names, shapes and dtypes of ``tensors`` without copying any data (native tensors are
    described from their attributes), with every problem found before anything is written."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{what}: expected a dict of name -> array, got {type(tensors).__name__}")
    allowed = tuple(allowed)
    out: List[Plan] = []
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise TypeError(f"{what}: key {k!r} is not a string")
        be = None if isinstance(v, np.ndarray) else backend_of(v, None)
        if be is None:
            v = np.asarray(v)
            shape, dtype = tuple(v.shape), v.dtype.newbyteorder("=")
        else:
            shape, dtype = tuple(int(d) for d in be.shape(v)), _native_dtype(be, v, f"{what}: tensor {k!r}")
        if dtype not in allowed:
            raise TypeError(f"{what}: tensor {k!r} has dtype {dtype}; supported: "
                            f"{', '.join(map(str, allowed))}")
        out.append(Plan(k, v, shape, dtype))
    return out


def _native_dtype(be, v, what: str) -> np.dtype:
    """The numpy dtype of a native tensor, also for dtypes the backend does not compute with
    but numpy holds (``torch.int16`` -> int16); bfloat16 and complex types have none."""
    try:
        return np.dtype(be.dtype(v))
    except (KeyError, TypeError):
        pass
    try:
        return np.dtype(str(v.dtype).rpartition(".")[2])
    except TypeError:
        raise TypeError(f"{what} has dtype {v.dtype}, which numpy cannot hold; convert it "
                        f"(e.g. .float()) before saving") from None


def host(p: Plan, what: str) -> np.ndarray:
    """``p``'s tensor as a C-contiguous little-endian numpy array, checked against the plan: a
    view of a CPU torch tensor (no copy; the torch backend's ``to_numpy`` copies), one
    ``to_numpy`` (``asnumpy()``) for other backends."""
    v = p.value
    if isinstance(v, np.ndarray):
        a = v
    else:
        be = backend_of(v)
        if be.name == "torch":
            a = v.detach().cpu().resolve_conj().resolve_neg().numpy()
        else:
            a = be.to_numpy(v)
    if a.dtype.str[0] == ">":  # the files are little-endian
        a = a.astype(a.dtype.newbyteorder("<"))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")  # np.ascontiguousarray would turn 0-d into 1-d
    if tuple(a.shape) != p.shape or a.dtype.newbyteorder("=") != p.dtype:
        raise RuntimeError(f"{what}: tensor {p.name!r} changed while it was being saved "
                           f"({p.shape} {p.dtype} -> {a.shape} {a.dtype})")
    return a


def bytes_of(a: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array, as a uint8 view (no copy; 0-d and empty arrays too)."""
    return a.reshape(-1).view(np.uint8)


def fill(f, a: np.ndarray) -> int:
    """Read ``a.nbytes`` bytes from ``f`` straight into ``a``; returns how many were read (fewer
    at the end of the file: the caller names the truncation)."""
    view = memoryview(a.reshape(-1)).cast("B")
    got = 0
    while got < len(view):
        r = f.readinto(view[got:])
        if not r:
            break
        got += r
    return got
