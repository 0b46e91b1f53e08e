"""safetensors files, read and written in pure numpy (no ``safetensors`` package, no framework).

Reading validates the header strictly against the file (a corrupt, truncated or foreign file is a
:class:`FormatError`, never a crash) and reads one tensor at a time with ``readinto``; bfloat16,
which numpy lacks, is read as float32 (exact). Writing is atomic and streams one tensor at a time.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from ..atomic import atomic_write_file
from .arrays import Plan, bytes_of, fill, host, plan
from .errors import FormatError, PathLike, Tensors

__all__ = ["read_safetensors", "read_safetensors_metadata", "write_safetensors", "truncated_header"]

# safetensors dtype codes <-> numpy. BF16 has no numpy dtype: it is read as float32 (exact).
_CODES = {"F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "I16": "int16",
          "I32": "int32", "I64": "int64", "U8": "uint8", "U16": "uint16", "U32": "uint32",
          "U64": "uint64", "BOOL": "bool", "BF16": "uint16"}
_NAMES = {np.dtype(v): k for k, v in _CODES.items() if k != "BF16"}
_MAX_HEADER = 100_000_000  # what the safetensors library accepts
_COMPLETE = "a complete safetensors file"


class _Entry(NamedTuple):
    name: str
    code: str
    shape: Tuple[int, ...]
    start: int
    end: int


def truncated_header(path: PathLike, n: int, size: int) -> FormatError:
    """The error for a file whose length field announces a header longer than the file."""
    return FormatError(path, f"truncated safetensors file: header says {n} bytes, file has "
                       f"{size - 8} after the length field", _COMPLETE)


def _parse(path: str) -> Tuple[List[_Entry], Dict[str, str], int]:
    """Validate a safetensors header strictly against the file; return its entries (in file
    order), its metadata and the byte offset where the data starts.

    Offsets must lie in the file, match dtype x shape, and tile the data without overlaps, gaps
    or trailing bytes (the format's rule); dtypes must be known. Anything else is a FormatError.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        first = f.read(8)
        if len(first) < 8:
            raise FormatError(path, f"truncated safetensors file ({size} bytes)", _COMPLETE)
        n = struct.unpack("<Q", first)[0]
        if n > size - 8:
            raise truncated_header(path, n, size)
        if n > _MAX_HEADER:
            raise FormatError(path, f"corrupt safetensors header (length {n} bytes)",
                              f"a header under {_MAX_HEADER} bytes")
        raw = f.read(n)

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            dup = sorted({k for k in keys if keys.count(k) > 1})
            raise FormatError(path, f"corrupt safetensors header (duplicate names {dup[:5]})")
        return dict(pairs)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise FormatError(path, f"corrupt safetensors header ({e})", "a JSON header") from None
    if not isinstance(header, dict):
        raise FormatError(path, "corrupt safetensors header (not a JSON object)")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FormatError(path, "corrupt safetensors header (__metadata__ is not a dict of strings)")
    entries: List[_Entry] = []
    for k, v in header.items():
        def bad(why: str) -> FormatError:
            return FormatError(path, f"corrupt safetensors header entry {k!r}: {why}",
                               "{'dtype': code, 'shape': [ints], 'data_offsets': [start, end]}")
        if not isinstance(v, dict):
            raise bad("not an object")
        code, shape, offs = v.get("dtype"), v.get("shape"), v.get("data_offsets")
        if code not in _CODES:
            raise bad(f"unknown dtype {code!r} (known: {', '.join(_CODES)})")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise bad(f"shape {shape!r} is not a list of non-negative integers")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs)
                or not 0 <= offs[0] <= offs[1]):
            raise bad(f"data_offsets {offs!r} is not [start, end] with 0 <= start <= end")
        nbytes = int(np.prod(shape, dtype=object)) * np.dtype(_CODES[code]).itemsize
        if offs[1] - offs[0] != nbytes:
            raise bad(f"data_offsets {offs} hold {offs[1] - offs[0]} bytes; dtype {code} x shape "
                      f"{shape} needs {nbytes}")
        entries.append(_Entry(k, code, tuple(shape), offs[0], offs[1]))
    data = size - 8 - n
    pos, prev = 0, None
    for e in sorted(entries, key=lambda e: (e.start, e.end)):
        if e.start < pos:
            raise FormatError(path, f"corrupt safetensors header: tensor {e.name!r} (bytes "
                              f"{e.start}-{e.end}) overlaps {prev!r}", "non-overlapping tensors")
        if e.start > pos:
            raise FormatError(path, f"corrupt safetensors header: {e.start - pos} unindexed bytes "
                              f"before tensor {e.name!r}", "tensors that tile the data")
        pos, prev = e.end, e.name
    if pos > data:
        raise FormatError(path, f"truncated safetensors file: tensors need {8 + n + pos} bytes, "
                          f"the file has {size}", _COMPLETE)
    if pos < data:
        raise FormatError(path, f"corrupt safetensors file: {data - pos} trailing bytes after the "
                          f"last tensor", "tensors that tile the data")
    return sorted(entries, key=lambda e: e.start), dict(meta), 8 + n


def read_safetensors(path: str) -> Tensors:
    """Every tensor of a safetensors file. Each is read with ``readinto`` straight into a fresh
    array: peak memory is the tensors themselves (``safetensors.numpy.load_file`` holds the
    file's bytes as well)."""
    entries, _, base = _parse(path)
    out: Tensors = {}
    with open(path, "rb", buffering=0) as f:
        for e in entries:
            a = np.empty(e.shape, _CODES[e.code])
            f.seek(base + e.start)
            got = fill(f, a)
            if got != a.nbytes:
                raise FormatError(path, f"truncated safetensors file while reading tensor "
                                  f"{e.name!r} ({got} of {a.nbytes} bytes)", _COMPLETE)
            if e.code == "BF16":  # bfloat16 is the top half of a float32
                a = (a.astype("<u4") << 16).view("<f4")
            out[e.name] = a
    return out


def read_safetensors_metadata(path: str) -> Dict[str, str]:
    """The string metadata of a safetensors file (after the same strict check as reading)."""
    return _parse(path)[1]


def _head(tensors: Mapping[str, object], metadata: Optional[Dict[str, str]],
          what: str) -> Tuple[bytes, List[Plan]]:
    """The length field plus JSON header of a safetensors file holding ``tensors`` (padded so
    the data starts 8-byte aligned), and the plan to write their data in that order."""
    if metadata is not None and not (isinstance(metadata, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError(f"{what}: safetensors metadata must be a dict of str -> str")
    plans = plan(tensors, what, _NAMES)
    header: Dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    off = 0
    for p in plans:
        if p.name == "__metadata__":
            raise ValueError(f"{what}: '__metadata__' is reserved by safetensors; rename the tensor")
        n = int(np.prod(p.shape, dtype=object)) * p.dtype.itemsize
        header[p.name] = {"dtype": _NAMES[p.dtype], "shape": list(p.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h, plans


def write_safetensors(path: PathLike, tensors: Mapping[str, object],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Write ``tensors`` (numpy arrays, torch or MXNet tensors) as safetensors, atomically and
    dtype-exact, streaming: the header, then each tensor's bytes from a zero-copy view (torch
    CPU) or a one-tensor ``asnumpy()`` (MXNet). Peak memory: the largest MXNet tensor; none on torch."""
    what = os.fspath(path)
    head, plans = _head(tensors, metadata, what)

    def write(f):
        f.write(head)
        for p in plans:
            a = host(p, what)
            if a.size:
                f.write(bytes_of(a))
            del a
    atomic_write_file(path, write)
