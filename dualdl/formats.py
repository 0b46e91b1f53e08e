"""Reading and writing tensor files: safetensors, torch ``.pt/.pth`` and Gluon ``.params``.

Hides three framework differences:

* the file format is detected from the file's first bytes, never from its extension;
* torch files are pickles: they are loaded with ``torch.load(weights_only=True)`` only, so an
  arbitrary object in the file is refused, never executed;
* Gluon ``save_parameters`` files (MXNet NDArray list, magic ``0x112``) are parsed and written in
  pure numpy, so neither reading nor writing them imports mxnet.

Every writer is atomic (temporary file in the same folder, fsync, ``os.replace``): a crash in
the middle of a save leaves the previous file intact. Writers take numpy arrays or native torch /
MXNet tensors and stream them one at a time (a zero-copy view of a CPU torch tensor, one
``asnumpy()`` for MXNet), so saving never holds a second copy of the model. Safetensors files are
read one tensor at a time with ``readinto`` after a strict check of the header against the file
(a corrupt, truncated or foreign file is a :class:`FormatError`, never a crash). Key helpers normalise DataParallel's
``module.`` prefix and translate Gluon structural names to torch names and back.
"""
from __future__ import annotations

import json
import os
import re
import struct
import warnings
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from .atomic import atomic_write_file

__all__ = [
    "FormatError", "detect_format", "read_tensors", "read_metadata", "write_safetensors",
    "write_torch", "write_gluon", "write_tensors", "format_for_path",
    "strip_prefix", "add_prefix", "align_module_prefix", "gluon_to_torch_names",
    "torch_to_gluon_names", "FORMATS",
]

PathLike = Union[str, "os.PathLike[str]"]
Tensors = Dict[str, np.ndarray]

FORMATS = ("safetensors", "torch", "gluon")
#: dtypes every format in this module stores exactly.
SUPPORTED_DTYPES = tuple(np.dtype(d) for d in (
    "float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"))

# MXNet NDArray file layout (src/ndarray/ndarray.cc, mxnet 1.x), measured against mx.nd.save.
_MX_LIST_MAGIC = 0x112
_MX_V1_MAGIC = 0xF993FAC8   # no storage type field
_MX_V2_MAGIC = 0xF993FAC9   # what mxnet 1.9.1 writes
_MX_V3_MAGIC = 0xF993FACA   # numpy-shape semantics (ndim 0 is a scalar, -1 unknown)
_MX_DTYPES = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8",
              6: "int64", 7: "bool", 8: "int16", 9: "uint16", 10: "uint32", 11: "uint64"}
_MX_FLAGS = {np.dtype(v): k for k, v in _MX_DTYPES.items()}


class FormatError(ValueError):
    """A tensor file is missing, corrupt, truncated, foreign or holds something other than tensors."""

    def __init__(self, path: PathLike, problem: str, expected: str = ""):
        self.path = os.fspath(path)
        msg = f"{self.path}: {problem}"
        if expected:
            msg += f" (expected {expected})"
        super().__init__(msg)


_EXPECTED = ("a safetensors file, a torch state dict saved with torch.save, or a Gluon "
             "save_parameters/mx.nd.save file")


# ----------------------------------------------------------------------------------------------
# detection
# ----------------------------------------------------------------------------------------------
def detect_format(path: PathLike) -> str:
    """Return ``"safetensors"``, ``"torch"`` or ``"gluon"`` from the file's first bytes.

    Raises :class:`FormatError` for a missing, empty or unrecognised file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FormatError(path, "no such file", _EXPECTED)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(16)
    if not head:
        raise FormatError(path, "the file is empty", _EXPECTED)
    if len(head) >= 8 and struct.unpack("<Q", head[:8])[0] == _MX_LIST_MAGIC:
        return "gluon"
    if head[:4] == b"PK\x03\x04":  # torch.save's zip container
        return "torch"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:  # a pickle (legacy torch.save)
        return "torch"
    if len(head) >= 9:
        n = struct.unpack("<Q", head[:8])[0]
        if 2 <= n <= size - 8 and head[8:9] == b"{":
            return "safetensors"
        if n > size - 8 and head[8:9] == b"{":
            raise FormatError(path, f"truncated safetensors file: header says {n} bytes, file has "
                              f"{size - 8} after the length field", "a complete safetensors file")
    raise FormatError(path, f"unrecognised file content (first bytes {head[:8]!r})", _EXPECTED)


def format_for_path(path: PathLike) -> str:
    """Format implied by a file name's extension (for writing): .params, .pt/.pth/.bin, .safetensors."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    table = {".params": "gluon", ".pt": "torch", ".pth": "torch", ".bin": "torch",
             ".ckpt": "torch", ".safetensors": "safetensors", ".st": "safetensors"}
    if ext not in table:
        raise ValueError(f"{os.fspath(path)}: cannot tell the format from the extension {ext!r}; "
                         f"use .params (Gluon), .pt/.pth (torch) or .safetensors")
    return table[ext]


# ----------------------------------------------------------------------------------------------
# reading
# ----------------------------------------------------------------------------------------------
def read_tensors(path: PathLike, format: Optional[str] = None) -> Tensors:
    """Read every tensor of a file as numpy arrays, whatever the format (detected by content).

    torch files: a plain state dict, or a checkpoint dict whose ``state_dict`` / ``model`` /
    ``model_state_dict`` / ``net`` entry is the state dict. Gluon files: ``export()``'s
    ``arg:``/``aux:`` prefixes are removed; a nameless list gets keys ``"0"``, ``"1"``...
    """
    fmt = format or detect_format(path)
    reader = {"safetensors": _read_safetensors, "torch": _read_torch, "gluon": _read_gluon}.get(fmt)
    if reader is None:
        raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")
    return reader(os.fspath(path))


def read_metadata(path: PathLike) -> Dict[str, str]:
    """The string metadata of a safetensors file ({} for other formats or none stored)."""
    if detect_format(path) != "safetensors":
        return {}
    return _parse_safetensors(os.fspath(path))[1]


# safetensors dtype codes <-> numpy. BF16 has no numpy dtype: it is read as float32 (exact).
_ST_CODES = {"F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "I16": "int16",
             "I32": "int32", "I64": "int64", "U8": "uint8", "U16": "uint16", "U32": "uint32",
             "U64": "uint64", "BOOL": "bool", "BF16": "uint16"}
_ST_NAMES = {np.dtype(v): k for k, v in _ST_CODES.items() if k != "BF16"}
_ST_MAX_HEADER = 100_000_000  # what the safetensors library accepts


class _STEntry(NamedTuple):
    name: str
    code: str
    shape: Tuple[int, ...]
    start: int
    end: int


def _parse_safetensors(path: str) -> Tuple[List[_STEntry], Dict[str, str], int]:
    """Validate a safetensors header strictly against the file; return its entries (in file
    order), its metadata and the byte offset where the data starts.

    Offsets must lie in the file, match dtype x shape, and tile the data without overlaps, gaps
    or trailing bytes (the format's rule); dtypes must be known. Anything else is a FormatError.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        first = f.read(8)
        if len(first) < 8:
            raise FormatError(path, f"truncated safetensors file ({size} bytes)", "a complete safetensors file")
        n = struct.unpack("<Q", first)[0]
        if n > size - 8:
            raise FormatError(path, f"truncated safetensors file: header says {n} bytes, file has "
                              f"{size - 8} after the length field", "a complete safetensors file")
        if n > _ST_MAX_HEADER:
            raise FormatError(path, f"corrupt safetensors header (length {n} bytes)",
                              f"a header under {_ST_MAX_HEADER} bytes")
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
    entries: List[_STEntry] = []
    for k, v in header.items():
        def bad(why: str) -> FormatError:
            return FormatError(path, f"corrupt safetensors header entry {k!r}: {why}",
                               "{'dtype': code, 'shape': [ints], 'data_offsets': [start, end]}")
        if not isinstance(v, dict):
            raise bad("not an object")
        code, shape, offs = v.get("dtype"), v.get("shape"), v.get("data_offsets")
        if code not in _ST_CODES:
            raise bad(f"unknown dtype {code!r} (known: {', '.join(_ST_CODES)})")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise bad(f"shape {shape!r} is not a list of non-negative integers")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs)
                or not 0 <= offs[0] <= offs[1]):
            raise bad(f"data_offsets {offs!r} is not [start, end] with 0 <= start <= end")
        nbytes = int(np.prod(shape, dtype=object)) * np.dtype(_ST_CODES[code]).itemsize
        if offs[1] - offs[0] != nbytes:
            raise bad(f"data_offsets {offs} hold {offs[1] - offs[0]} bytes; dtype {code} x shape "
                      f"{shape} needs {nbytes}")
        entries.append(_STEntry(k, code, tuple(shape), offs[0], offs[1]))
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
                          f"the file has {size}", "a complete safetensors file")
    if pos < data:
        raise FormatError(path, f"corrupt safetensors file: {data - pos} trailing bytes after the "
                          f"last tensor", "tensors that tile the data")
    return sorted(entries, key=lambda e: e.start), dict(meta), 8 + n


def _read_safetensors(path: str) -> Tensors:
    """Each tensor is read with ``readinto`` straight into a fresh array: peak memory is the
    tensors themselves (``safetensors.numpy.load_file`` holds the file's bytes as well)."""
    entries, _, base = _parse_safetensors(path)
    out: Tensors = {}
    with open(path, "rb", buffering=0) as f:
        for e in entries:
            a = np.empty(e.shape, _ST_CODES[e.code])
            f.seek(base + e.start)
            _readinto(f, a, path, e.name)
            if e.code == "BF16":  # bfloat16 is the top half of a float32
                a = (a.astype("<u4") << 16).view("<f4")
            out[e.name] = a
    return out


def _readinto(f, a: np.ndarray, path: str, name: str) -> None:
    view = memoryview(a.reshape(-1)).cast("B")
    got = 0
    while got < len(view):
        r = f.readinto(view[got:])
        if not r:
            raise FormatError(path, f"truncated safetensors file while reading tensor {name!r} "
                              f"({got} of {len(view)} bytes)", "a complete safetensors file")
        got += r


_NESTED_KEYS = ("state_dict", "model_state_dict", "model", "net", "module", "params")


def _read_torch(path: str) -> Tensors:
    import pickle
    import torch
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:
        why = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
        why = why.split("WeightsUnpickler error:", 1)[-1].split("Check the documentation")[0]
        why = why.split(" Please use")[0]
        why = " ".join(why.split())[:200]
        raise FormatError(path, f"refused to unpickle: the file holds something other than tensors "
                          f"and plain containers ({why})", "a torch state dict") from None
    except Exception as e:  # zip damage, truncation, not a torch pickle at all
        raise FormatError(path, f"cannot read as a torch file ({type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0] if str(e).strip() else ''})",
                          "a torch state dict saved with torch.save") from None
    if isinstance(obj, torch.Tensor):
        obj = {"0": obj}
    if isinstance(obj, (list, tuple)):
        obj = {str(i): v for i, v in enumerate(obj)}
    if not isinstance(obj, dict):
        raise FormatError(path, f"holds a {type(obj).__name__}", "a dict of tensors")
    nested = next((k for k in _NESTED_KEYS if isinstance(obj.get(k), dict)
                   and any(isinstance(v, torch.Tensor) for v in obj[k].values())), None)
    if nested is not None:  # a checkpoint dict: {"state_dict": {...}, "optimizer": ..., "step": t}
        obj = obj[nested]
    elif not any(isinstance(v, torch.Tensor) for v in obj.values()):
        raise FormatError(path, f"no tensors found; top-level keys: {sorted(map(str, obj))[:20]}",
                          "a state dict, or a checkpoint dict with a 'state_dict' or 'model' entry")
    out: Tensors = {}
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu()
            if t.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds it exactly
                t = t.float()
            out[str(k)] = t.numpy()  # a view: torch.load made these tensors for us alone
    return out


class _Reader:
    """Sequential reads from an open file with bounds checks (truncation -> FormatError)."""

    def __init__(self, path: str, f, size: int):
        self.path, self.f, self.size, self.pos = path, f, size, 0

    def _truncated(self, what: str) -> FormatError:
        return FormatError(self.path, f"truncated Gluon/MXNet file while reading {what} at byte "
                           f"{self.pos} (file has {self.size} bytes)", "a complete .params file")

    def _check(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self._truncated(what)

    def take(self, n: int, what: str) -> bytes:
        self._check(n, what)
        b = self.f.read(n)
        if len(b) != n:  # the file shrank while we read it
            raise self._truncated(what)
        self.pos += n
        return b

    def take_into(self, a: np.ndarray, what: str) -> None:
        """Fill ``a`` with the next ``a.nbytes`` bytes, read straight into it (no extra copy)."""
        self._check(a.nbytes, what)
        view = memoryview(a.reshape(-1)).cast("B")
        got = 0
        while got < len(view):
            r = self.f.readinto(view[got:])
            if not r:
                raise self._truncated(what)
            got += r
        self.pos += a.nbytes

    def unpack(self, fmt: str, what: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def _read_gluon(path: str) -> Tensors:
    with open(path, "rb") as f:
        return _read_gluon_from(_Reader(path, f, os.fstat(f.fileno()).st_size))


def _read_gluon_from(r: _Reader) -> Tensors:
    path = r.path
    magic, _reserved = r.unpack("QQ", "the header")
    if magic != _MX_LIST_MAGIC:
        raise FormatError(path, f"bad magic {magic:#x}", f"MXNet NDArray list magic {_MX_LIST_MAGIC:#x}")
    (count,) = r.unpack("Q", "the array count")
    if count > r.size:
        raise FormatError(path, f"corrupt array count {count}")
    arrays = [_read_mx_array(r, i) for i in range(count)]
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
    out: Tensors = {}
    for name, arr in zip(names, arrays):
        out[re.sub(r"^(arg|aux):", "", name)] = arr
    return out


def _read_mx_array(r: _Reader, i: int) -> np.ndarray:
    (magic,) = r.unpack("I", f"array {i}'s magic")
    if magic not in (_MX_V1_MAGIC, _MX_V2_MAGIC, _MX_V3_MAGIC):
        raise FormatError(r.path, f"array {i} has unknown magic {magic:#x}",
                          "an NDArray saved by MXNet >= 1.0")
    if magic != _MX_V1_MAGIC:
        (stype,) = r.unpack("i", f"array {i}'s storage type")
        if stype != 0:
            raise FormatError(r.path, f"array {i} is sparse (storage type {stype})", "dense arrays")
    (ndim,) = r.unpack("i", f"array {i}'s ndim")
    if ndim < 0 or ndim > 32:
        raise FormatError(r.path, f"array {i} has an invalid ndim {ndim}")
    shape = r.unpack("q" * ndim, f"array {i}'s shape") if ndim else ()
    if ndim == 0 and magic != _MX_V3_MAGIC:
        return np.zeros((0,), np.float32)  # MXNet's "none" array
    r.unpack("ii", f"array {i}'s context")
    (flag,) = r.unpack("i", f"array {i}'s dtype")
    if flag not in _MX_DTYPES:
        raise FormatError(r.path, f"array {i} has unknown dtype flag {flag}")
    dtype = np.dtype(_MX_DTYPES[flag])
    if any(d < 0 for d in shape):
        raise FormatError(r.path, f"array {i} has a negative dimension {shape}")
    r._check(int(np.prod(shape, dtype=object)) * dtype.itemsize, f"array {i}'s data")
    a = np.empty(shape, dtype)
    r.take_into(a, f"array {i}'s data")
    return a


# ----------------------------------------------------------------------------------------------
# writing (atomic)
# ----------------------------------------------------------------------------------------------
# the one atomic writer lives in dualdl.atomic (atomic_write_file: file-object form)


class _Plan(NamedTuple):
    name: str
    value: Any
    shape: Tuple[int, ...]
    dtype: np.dtype


def _plan(tensors: Mapping[str, object], what: str, allowed: Iterable[np.dtype]) -> List[_Plan]:
    """Names, shapes and dtypes of ``tensors`` without copying any data (native tensors are
    described from their attributes), with every problem found before anything is written."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{what}: expected a dict of name -> array, got {type(tensors).__name__}")
    allowed = tuple(allowed)
    out: List[_Plan] = []
    for k, v in tensors.items():
        if not isinstance(k, str):
            raise TypeError(f"{what}: key {k!r} is not a string")
        if not _is_native(v) and not isinstance(v, np.ndarray):
            v = np.asarray(v)
        shape, dtype = _describe(v, f"{what}: tensor {k!r}")
        if dtype not in allowed:
            raise TypeError(f"{what}: tensor {k!r} has dtype {dtype}; supported: "
                            f"{', '.join(map(str, allowed))}")
        out.append(_Plan(k, v, shape, dtype))
    return out


def _is_native(v) -> bool:
    return type(v).__module__.startswith(("torch", "mxnet"))


def _describe(v, what: str) -> Tuple[Tuple[int, ...], np.dtype]:
    if isinstance(v, np.ndarray):
        return tuple(v.shape), v.dtype.newbyteorder("=")
    if type(v).__module__.startswith("torch"):
        name = str(v.dtype).replace("torch.", "")
        try:
            return tuple(int(d) for d in v.shape), np.dtype(name)
        except TypeError:
            raise TypeError(f"{what} has dtype {v.dtype}, which numpy cannot hold; convert it "
                            f"(e.g. .float()) before saving") from None
    return tuple(int(d) for d in v.shape), np.dtype(v.dtype)


def _host(v, plan: _Plan, what: str) -> np.ndarray:
    """One tensor as a C-contiguous little-endian numpy array: a view of a CPU torch tensor
    (no copy), one ``asnumpy()`` for MXNet."""
    if isinstance(v, np.ndarray):
        a = v
    elif type(v).__module__.startswith("torch"):
        a = v.detach().cpu().resolve_conj().resolve_neg().numpy()
    elif type(v).__module__.startswith("mxnet"):
        a = v.asnumpy()
    else:
        a = np.asarray(v)
    if a.dtype.str[0] == ">":  # the files are little-endian
        a = a.astype(a.dtype.newbyteorder("<"))
    if not a.flags.c_contiguous:
        a = a.copy(order="C")  # np.ascontiguousarray would turn 0-d into 1-d
    if tuple(a.shape) != plan.shape or a.dtype.newbyteorder("=") != plan.dtype:
        raise RuntimeError(f"{what}: tensor {plan.name!r} changed while it was being saved "
                           f"({plan.shape} {plan.dtype} -> {a.shape} {a.dtype})")
    return a


def _bytes_of(a: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array, as a uint8 view (no copy; 0-d and empty arrays too)."""
    return a.reshape(-1).view(np.uint8)


def _safetensors_head(tensors: Mapping[str, object], metadata: Optional[Dict[str, str]] = None,
                       what: str = "safetensors") -> Tuple[bytes, List[_Plan]]:
    """The length field plus JSON header of a safetensors file holding ``tensors`` (padded so
    the data starts 8-byte aligned), and the plan to write their data in that order."""
    if metadata is not None and not (isinstance(metadata, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError(f"{what}: safetensors metadata must be a dict of str -> str")
    plans = _plan(tensors, what, _ST_NAMES)
    header: Dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    off = 0
    for p in plans:
        if p.name == "__metadata__":
            raise ValueError(f"{what}: '__metadata__' is reserved by safetensors; rename the tensor")
        n = int(np.prod(p.shape, dtype=object)) * p.dtype.itemsize
        header[p.name] = {"dtype": _ST_NAMES[p.dtype], "shape": list(p.shape), "data_offsets": [off, off + n]}
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
    head, plans = _safetensors_head(tensors, metadata, what)

    def write(f):
        f.write(head)
        for p in plans:
            a = _host(p.value, p, what)
            if a.size:
                f.write(_bytes_of(a))
            del a
    atomic_write_file(path, write)


def write_torch(path: PathLike, tensors: Mapping[str, object]) -> None:
    """Write a torch state dict (``torch.save`` of an ordered dict of tensors), atomically.
    torch tensors are saved as they are (no copy); others are converted."""
    import collections
    import torch
    plans = _plan(tensors, os.fspath(path), SUPPORTED_DTYPES)
    sd = collections.OrderedDict()
    for p in plans:
        if type(p.value).__module__.startswith("torch"):
            sd[p.name] = p.value.detach().cpu()
        else:
            a = _host(p.value, p, os.fspath(path))
            sd[p.name] = torch.from_numpy(a if a.flags.writeable else a.copy())
    atomic_write_file(path, lambda f: torch.save(sd, f))


def write_gluon(path: PathLike, tensors: Mapping[str, object]) -> None:
    """Write an MXNet NDArray dict file (what ``save_parameters``/``mx.nd.save`` write), atomically,
    one tensor at a time, without importing mxnet. 0-d arrays are refused: MXNet's format cannot
    hold them."""
    what = os.fspath(path)
    plans = _plan(tensors, what, SUPPORTED_DTYPES)
    for p in plans:
        if len(p.shape) == 0:
            raise ValueError(f"{what}: tensor {p.name!r} is 0-d; MXNet's NDArray file format "
                             f"cannot store 0-d arrays (reshape it to (1,))")

    def write(f):
        f.write(struct.pack("<QQQ", _MX_LIST_MAGIC, 0, len(plans)))
        for p in plans:
            a = _host(p.value, p, what)
            f.write(struct.pack("<Iii", _MX_V2_MAGIC, 0, a.ndim))
            f.write(struct.pack("<" + "q" * a.ndim, *a.shape))
            f.write(struct.pack("<iii", 1, 0, _MX_FLAGS[p.dtype]))  # cpu(0), dtype
            if a.size:
                f.write(_bytes_of(a))
            del a
        f.write(struct.pack("<Q", len(plans)))
        for p in plans:
            b = p.name.encode("utf-8")
            f.write(struct.pack("<Q", len(b)))
            f.write(b)
    atomic_write_file(path, write)


def write_tensors(path: PathLike, tensors: Mapping[str, np.ndarray], format: Optional[str] = None,
                  metadata: Optional[Dict[str, str]] = None) -> str:
    """Write in ``format`` (default: from the extension); returns the format used."""
    fmt = format or format_for_path(path)
    if fmt == "safetensors":
        write_safetensors(path, tensors, metadata)
    elif fmt == "torch":
        write_torch(path, tensors)
    elif fmt == "gluon":
        write_gluon(path, tensors)
    else:
        raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")
    return fmt


# ----------------------------------------------------------------------------------------------
# key normalisation
# ----------------------------------------------------------------------------------------------
def _rekey(tensors_or_keys, fn):
    if isinstance(tensors_or_keys, Mapping):
        out = {}
        for k, v in tensors_or_keys.items():
            nk = fn(k)
            if nk in out:
                raise ValueError(f"renaming {k!r} to {nk!r} collides with another key")
            out[nk] = v
        return out
    return [fn(k) for k in tensors_or_keys]


def strip_prefix(tensors_or_keys, prefix: str = "module."):
    """Remove ``prefix`` from every key that starts with it (dict -> new dict, keys -> list)."""
    return _rekey(tensors_or_keys, lambda k: k[len(prefix):] if k.startswith(prefix) else k)


def add_prefix(tensors_or_keys, prefix: str = "module."):
    """Prepend ``prefix`` to every key that does not already start with it."""
    return _rekey(tensors_or_keys, lambda k: k if k.startswith(prefix) else prefix + k)


def align_module_prefix(tensors: Mapping[str, np.ndarray], target_keys: Iterable[str]) -> Tensors:
    """Add or strip DataParallel/DDP ``module.`` prefixes so ``tensors``' keys match ``target_keys``.

    A state dict saved from ``nn.DataParallel(m)`` has ``module.conv.weight``; ``m`` expects
    ``conv.weight`` (and the other way round). Works with nested wrappers (``module.module.``).
    """
    target = list(target_keys)

    def depth(keys):
        keys = list(keys)
        d = 0
        while keys and all(k.startswith("module.") for k in keys):
            keys = [k[7:] for k in keys]
            d += 1
        return d
    src_d, dst_d = depth(tensors), depth(target)
    out = dict(tensors)
    for _ in range(max(0, src_d - dst_d)):
        out = strip_prefix(out, "module.")
    for _ in range(max(0, dst_d - src_d)):
        out = {"module." + k: v for k, v in out.items()}
    return out


_GLUON_RNN = re.compile(r"^(?P<pre>.*?)_unfused\.(?P<k>\d+)\.(?:(?P<d>[lr])_cell\.)?"
                        r"(?P<w>i2h|h2h)_(?P<t>weight|bias)$")
_GLUON_CELL = re.compile(r"^(?P<pre>.*?)(?P<w>i2h|h2h)_(?P<t>weight|bias)$")
_TORCH_RNN = re.compile(r"^(?P<pre>.*?)(?P<t>weight|bias)_(?P<w>ih|hh)(?:_l(?P<k>\d+)(?P<r>_reverse)?)?$")


def _split(key: str) -> Tuple[str, str]:
    i = key.rfind(".")
    return (key[:i + 1], key[i + 1:]) if i >= 0 else ("", key)


def gluon_to_torch_names(tensors: Mapping[str, np.ndarray]) -> Tensors:
    """Rename Gluon ``save_parameters`` keys to the names torch uses for the same layers.

    Norm layers: ``gamma``/``beta`` -> ``weight``/``bias``; RNN layers:
    ``_unfused.{k}.l_cell.i2h_weight`` -> ``weight_ih_l{k}`` (``r_cell`` -> ``_reverse``); RNN
    cells: ``i2h_weight`` -> ``weight_ih``. Gate order is the same in both (no permutation).
    Exported-model ``arg:``/``aux:`` prefixes are removed.
    """
    def rename(key: str) -> str:
        key = re.sub(r"^(arg|aux):", "", key)
        m = _GLUON_RNN.match(key)
        if m:
            rev = "_reverse" if m["d"] == "r" else ""
            return f"{m['pre']}{m['t']}_{m['w'][0]}h_l{m['k']}{rev}"
        m = _GLUON_CELL.match(_split(key)[1])
        if m and not m["pre"]:
            return f"{_split(key)[0]}{m['t']}_{m['w'][0]}h"
        pre, leaf = _split(key)
        return pre + {"gamma": "weight", "beta": "bias"}.get(leaf, leaf)
    return _rekey(tensors, rename)


def torch_to_gluon_names(tensors: Mapping[str, np.ndarray]) -> Tensors:
    """Rename torch state-dict keys to Gluon ``save_parameters`` keys (inverse of
    :func:`gluon_to_torch_names`). A layer is a norm layer when it has running stats or a 1-D
    ``weight``; its weight/bias become gamma/beta. ``num_batches_tracked`` (torch-only) is dropped."""
    layers: Dict[str, Dict[str, np.ndarray]] = {}
    for k, v in tensors.items():
        pre, leaf = _split(k)
        layers.setdefault(pre, {})[leaf] = np.asarray(v)
    out: Tensors = {}
    for k, v in tensors.items():
        pre, leaf = _split(k)
        if leaf == "num_batches_tracked":
            continue
        sib = layers[pre]
        m = _TORCH_RNN.match(leaf)
        if m:
            if m["k"] is not None:  # Gluon names cells l_cell/r_cell only when bidirectional
                bidir = any(n.endswith("_reverse") for n in sib)
                cell = ("r_cell." if m["r"] else "l_cell.") if bidir else ""
                w = "i2h" if m["w"] == "ih" else "h2h"
                out[f"{pre}_unfused.{m['k']}.{cell}{w}_{m['t']}"] = v
            else:
                out[f"{pre}{'i2h' if m['w'] == 'ih' else 'h2h'}_{m['t']}"] = v
            continue
        is_norm = "running_mean" in sib or ("weight" in sib and sib["weight"].ndim == 1)
        if is_norm and leaf in ("weight", "bias"):
            leaf = "gamma" if leaf == "weight" else "beta"
        out[pre + leaf] = v
    return out
