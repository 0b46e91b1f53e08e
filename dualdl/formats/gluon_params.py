"""Gluon ``.params`` files (``save_parameters`` / ``mx.nd.save``: an MXNet NDArray list), parsed
and written in pure numpy, so neither reading nor writing them imports mxnet.

The layout (src/ndarray/ndarray.cc, mxnet 1.x) was measured against ``mx.nd.save``: the writer's
output is byte-identical to it. MXNet's format cannot hold 0-d arrays; the writer says so.
"""
from __future__ import annotations

import os
import struct
from typing import Mapping

import numpy as np

from ..atomic import atomic_write_file
from ..tensor import SUPPORTED_DTYPES
from .arrays import bytes_of, fill, host, plan
from .errors import FormatError, PathLike, Tensors
from .names import strip_export_prefix

__all__ = ["LIST_MAGIC", "read_gluon", "write_gluon"]

LIST_MAGIC = 0x112            # the file's first 8 bytes
_V1_MAGIC = 0xF993FAC8        # no storage type field
_V2_MAGIC = 0xF993FAC9        # what mxnet 1.9.1 writes
_V3_MAGIC = 0xF993FACA        # numpy-shape semantics (ndim 0 is a scalar, -1 unknown)
_DTYPES = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8",
           6: "int64", 7: "bool", 8: "int16", 9: "uint16", 10: "uint32", 11: "uint64"}
_FLAGS = {np.dtype(v): k for k, v in _DTYPES.items()}


class _Reader:
    """Sequential reads from an open file with bounds checks (truncation -> FormatError)."""

    def __init__(self, path: str, f, size: int):
        self.path, self.f, self.size, self.pos = path, f, size, 0

    def _truncated(self, what: str) -> FormatError:
        return FormatError(self.path, f"truncated Gluon/MXNet file while reading {what} at byte "
                           f"{self.pos} (file has {self.size} bytes)", "a complete .params file")

    def check(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self._truncated(what)

    def take(self, n: int, what: str) -> bytes:
        self.check(n, what)
        b = self.f.read(n)
        if len(b) != n:  # the file shrank while we read it
            raise self._truncated(what)
        self.pos += n
        return b

    def take_into(self, a: np.ndarray, what: str) -> None:
        """Fill ``a`` with the next ``a.nbytes`` bytes, read straight into it (no extra copy)."""
        self.check(a.nbytes, what)
        if fill(self.f, a) != a.nbytes:
            raise self._truncated(what)
        self.pos += a.nbytes

    def unpack(self, fmt: str, what: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def read_gluon(path: str) -> Tensors:
    """The arrays of an NDArray list file by name (``export()``'s ``arg:``/``aux:`` prefixes
    removed; a nameless list gets keys "0", "1"...)."""
    with open(path, "rb") as f:
        r = _Reader(path, f, os.fstat(f.fileno()).st_size)
        magic, _reserved = r.unpack("QQ", "the header")
        if magic != LIST_MAGIC:
            raise FormatError(path, f"bad magic {magic:#x}", f"MXNet NDArray list magic {LIST_MAGIC:#x}")
        (count,) = r.unpack("Q", "the array count")
        if count > r.size:
            raise FormatError(path, f"corrupt array count {count}")
        arrays = [_read_array(r, i) for i in range(count)]
        (n_names,) = r.unpack("Q", "the name count")
        if n_names not in (0, count):
            raise FormatError(path, f"{n_names} names for {count} arrays", "one name per array")
        names = []
        for i in range(n_names):
            (ln,) = r.unpack("Q", f"the length of name {i}")
            try:
                names.append(r.take(ln, f"name {i}").decode("utf-8"))
            except UnicodeDecodeError:
                raise FormatError(path, f"name {i} is not UTF-8") from None
        if r.pos != r.size:
            raise FormatError(path, f"{r.size - r.pos} unexpected trailing bytes")
    if not names:
        names = [str(i) for i in range(count)]
    return {strip_export_prefix(name): arr for name, arr in zip(names, arrays)}


def _read_array(r: _Reader, i: int) -> np.ndarray:
    (magic,) = r.unpack("I", f"array {i}'s magic")
    if magic not in (_V1_MAGIC, _V2_MAGIC, _V3_MAGIC):
        raise FormatError(r.path, f"array {i} has unknown magic {magic:#x}",
                          "an NDArray saved by MXNet >= 1.0")
    if magic != _V1_MAGIC:
        (stype,) = r.unpack("i", f"array {i}'s storage type")
        if stype != 0:
            raise FormatError(r.path, f"array {i} is sparse (storage type {stype})", "dense arrays")
    (ndim,) = r.unpack("i", f"array {i}'s ndim")
    if ndim < 0 or ndim > 32:
        raise FormatError(r.path, f"array {i} has an invalid ndim {ndim}")
    shape = r.unpack("q" * ndim, f"array {i}'s shape") if ndim else ()
    if ndim == 0 and magic != _V3_MAGIC:
        return np.zeros((0,), np.float32)  # MXNet's "none" array
    r.unpack("ii", f"array {i}'s context")
    (flag,) = r.unpack("i", f"array {i}'s dtype")
    if flag not in _DTYPES:
        raise FormatError(r.path, f"array {i} has unknown dtype flag {flag}")
    dtype = np.dtype(_DTYPES[flag])
    if any(d < 0 for d in shape):
        raise FormatError(r.path, f"array {i} has a negative dimension {shape}")
    r.check(int(np.prod(shape, dtype=object)) * dtype.itemsize, f"array {i}'s data")
    a = np.empty(shape, dtype)
    r.take_into(a, f"array {i}'s data")
    return a


def write_gluon(path: PathLike, tensors: Mapping[str, object]) -> None:
    """Write an MXNet NDArray dict file (what ``save_parameters``/``mx.nd.save`` write), atomically,
    one tensor at a time, without importing mxnet. 0-d arrays are refused: MXNet's format cannot
    hold them."""
    what = os.fspath(path)
    plans = plan(tensors, what, SUPPORTED_DTYPES)
    for p in plans:
        if len(p.shape) == 0:
            raise ValueError(f"{what}: tensor {p.name!r} is 0-d; MXNet's NDArray file format "
                             f"cannot store 0-d arrays (reshape it to (1,))")

    def write(f):
        f.write(struct.pack("<QQQ", LIST_MAGIC, 0, len(plans)))
        for p in plans:
            a = host(p, what)
            f.write(struct.pack("<Iii", _V2_MAGIC, 0, a.ndim))
            f.write(struct.pack("<" + "q" * a.ndim, *a.shape))
            f.write(struct.pack("<iii", 1, 0, _FLAGS[p.dtype]))  # cpu(0), dtype
            if a.size:
                f.write(bytes_of(a))
            del a
        f.write(struct.pack("<Q", len(plans)))
        for p in plans:
            b = p.name.encode("utf-8")
            f.write(struct.pack("<Q", len(b)))
            f.write(b)
    atomic_write_file(path, write)
