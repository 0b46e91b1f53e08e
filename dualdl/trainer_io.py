"""A file format for ``dl.Trainer.state_dict()`` that loads without unpickling anything.

Arrays (numpy, torch tensors, MXNet NDArrays) go into an ``.npz`` (read with
``allow_pickle=False``); the structure around them (dicts with int keys, tuples, Python ints of
any size, floats, strings, None) goes into a JSON entry of the same file, tagged so that it comes
back with the same types (torch's optimizer state keeps tensors, RNG states keep tuples).
"""
from __future__ import annotations

import json
import os
import zipfile
from typing import Any, Dict

import numpy as np

from .backend import backend_of, get_backend
from .devices import Device

__all__ = ["encode", "decode", "write", "read"]

_META = "__dualdl_trainer_state__.json"


def encode(obj: Any, arrays: Dict[str, np.ndarray]) -> Any:
    """JSON-able structure for ``obj``; arrays are moved to ``arrays`` and referenced by name."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return obj if isinstance(obj, int) or np.isfinite(obj) else {"__float__": repr(float(obj))}
    if isinstance(obj, np.generic):
        name = f"a{len(arrays)}"
        arrays[name] = np.asarray(obj)
        return {"__scalar__": name}
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError("object arrays cannot be saved in a Trainer state file")
        name = f"a{len(arrays)}"
        arrays[name] = obj
        return {"__array__": name}
    be = backend_of(obj, default=None)
    if be is not None and isinstance(obj, be.tensor_types()):
        name = f"a{len(arrays)}"
        arrays[name] = be.to_numpy(obj)
        if be.native_state_tensors:     # comes back as a tensor of the same backend
            return {"__tensor__": name, "backend": be.name}
        return {"__array__": name}
    if isinstance(obj, dict):
        return {"__dict__": [[encode(k, arrays), encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [encode(v, arrays) for v in obj]
    raise TypeError(f"cannot save a {type(obj).__name__} in a Trainer state file")


def decode(obj: Any, arrays: Any) -> Any:
    if isinstance(obj, list):
        return [decode(v, arrays) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__dict__" in obj:
        return {_hashable(decode(k, arrays)): decode(v, arrays) for k, v in obj["__dict__"]}
    if "__tuple__" in obj:
        return tuple(decode(v, arrays) for v in obj["__tuple__"])
    if "__array__" in obj:
        return np.array(arrays[obj["__array__"]])
    if "__scalar__" in obj:
        return np.array(arrays[obj["__scalar__"]])[()]
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__tensor__" in obj:                 # files written before "backend" was recorded: torch
        a = np.array(arrays[obj["__tensor__"]])
        return get_backend(obj.get("backend", "torch")).from_numpy(a, Device("cpu", 0), a.dtype)
    raise ValueError(f"unknown entry in a Trainer state file: {sorted(obj)[:3]}")


def _hashable(k: Any) -> Any:
    return tuple(_hashable(v) for v in k) if isinstance(k, (list, tuple)) else k


def write(state: Dict[str, Any], path: str) -> None:
    """Write ``state`` to ``path`` (an ``.npz`` file; not atomic by itself)."""
    arrays: Dict[str, np.ndarray] = {}
    meta = encode(state, arrays)
    blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays, **{_META: blob})


def read(path: str) -> Dict[str, Any]:
    """Read a file written by :func:`write` (never unpickles)."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as z:
            if _META not in z.files:
                raise ValueError(f"{os.fspath(path)} is not a dualdl Trainer state file (no {_META})")
            arrays = {k: z[k] for k in z.files if k != _META}
            meta = json.loads(bytes(z[_META]).decode("utf-8"))
        return decode(meta, arrays)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, zipfile.BadZipFile) as e:
        raise ValueError(f"cannot read the Trainer state file {os.fspath(path)}: {e}") from e
