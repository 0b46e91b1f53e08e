"""A port mapping: how each target tensor is computed from source tensors. Saved as JSON, reused
on checkpoint files (``dualdl convert --mapping``) or on models (``Mapping.load(p).apply(...)``)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

import numpy as np

__all__ = ["Mapping", "Entry", "register_transform", "TRANSFORMS"]

Tensors = Dict[str, np.ndarray]


def _copy(srcs, **_):
    return srcs[0]


def _concat(srcs, axis=0, **_):
    return np.concatenate(srcs, axis=axis)


def _fold_bias(srcs, **_):
    """running_mean - conv_bias: BN((x + b) - m) == BN(x - (m - b))."""
    return srcs[0] - srcs[1]


def _transpose(srcs, **_):
    return np.transpose(srcs[0]).copy(order="C")


def _fill(srcs, value=0.0, shape=(), **_):
    return np.full(tuple(shape), value)


TRANSFORMS: Dict[str, Callable[..., np.ndarray]] = {
    "copy": _copy, "concat": _concat, "fold_bias": _fold_bias, "transpose": _transpose,
    "fill": _fill,
}


def register_transform(name: str, fn: Callable[..., np.ndarray]) -> None:
    """Make ``fn(sources: list[np.ndarray], **args) -> np.ndarray`` usable by name in rules and
    saved mappings (register it again before applying a loaded mapping that uses it)."""
    TRANSFORMS[name] = fn


@dataclass
class Entry:
    target: str
    shape: List[int]
    dtype: str
    sources: List[Dict[str, Any]]       # {"key", "part": [i, n, axis] | None, "transpose": bool}
    transform: str = "copy"
    args: Dict[str, Any] = field(default_factory=dict)
    transpose: bool = False             # the target is stored transposed
    reason: str = ""

    def compute(self, tensors: Tensors, keep_dtype: bool = False) -> np.ndarray:
        """The target's value from ``tensors`` (source key -> array), in the target's dtype;
        ``keep_dtype``: in the sources' (a float64 copy's values stay float64)."""
        srcs = []
        for s in self.sources:
            a = np.asarray(tensors[s["key"]])
            if s.get("part"):
                i, n, axis = s["part"]
                a = np.split(a, n, axis=axis)[i]
            if s.get("transpose"):
                a = np.transpose(a)
            srcs.append(a)
        if self.transform not in TRANSFORMS:
            raise KeyError(f"{self.target}: transform {self.transform!r} is not registered; call "
                           f"dualdl.port.register_transform({self.transform!r}, fn) first")
        args = dict(self.args)
        if self.transform == "fill":
            args["shape"] = self.shape
        out = np.asarray(TRANSFORMS[self.transform](srcs, **args))
        if self.transpose:
            out = np.transpose(out)
        if list(out.shape) != list(self.shape):
            raise ValueError(f"{self.target}: mapping produced shape {tuple(out.shape)}, the target "
                             f"needs {tuple(self.shape)}")
        if not keep_dtype:
            out = out.astype(self.dtype, copy=False)
        return out if out.flags.c_contiguous else out.copy(order="C")


@dataclass
class Mapping:
    """Target key -> how to compute it from source keys."""
    entries: List[Entry]
    source_framework: str = ""
    target_framework: str = ""
    notes: List[str] = field(default_factory=list)

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> Dict[str, Any]:
        return {"format": "dualdl-port-mapping", "version": 1,
                "source_framework": self.source_framework,
                "target_framework": self.target_framework, "notes": list(self.notes),
                "entries": [vars(e) for e in self.entries]}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Mapping":
        if not isinstance(d, dict) or d.get("format") != "dualdl-port-mapping":
            raise ValueError("not a dualdl port mapping (missing format: dualdl-port-mapping)")
        return cls([Entry(**e) for e in d["entries"]], d.get("source_framework", ""),
                   d.get("target_framework", ""), list(d.get("notes", [])))

    def save(self, path) -> None:
        from ..atomic import atomic_write_file
        data = json.dumps(self.to_dict(), indent=1).encode()
        atomic_write_file(path, lambda f: f.write(data))

    @classmethod
    def load(cls, path) -> "Mapping":
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{os.fspath(path)}: cannot read a port mapping ({e})") from None
        if isinstance(d, dict) and "mapping" in d and "entries" not in d:
            d = d["mapping"]  # a saved PortReport
        try:
            return cls.from_dict(d)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"{os.fspath(path)}: not a valid port mapping ({e})") from None

    # ------------------------------------------------------------------ use
    @property
    def source_keys(self) -> List[str]:
        return sorted({s["key"] for e in self.entries for s in e.sources})

    @property
    def target_keys(self) -> List[str]:
        return [e.target for e in self.entries]

    def apply(self, source: Any, target: Any = None) -> Tensors:
        """Compute the target tensors from ``source`` (a dict of arrays, a checkpoint path or a
        model). With ``target`` (a torch module or Gluon block) they are also loaded into it,
        all or nothing. Returns the target tensors."""
        tensors = _source_tensors(source)
        from ..formats import align_module_prefix
        tensors = align_module_prefix(tensors, self.source_keys)
        missing = [k for k in self.source_keys if k not in tensors]
        if missing:
            raise KeyError(f"the source lacks {len(missing)} tensor(s) the mapping needs: "
                           f"{missing[:10]}{' ...' if len(missing) > 10 else ''}")
        out = {e.target: e.compute(tensors) for e in self.entries}
        if target is not None:
            from .sides import make_side
            make_side(target).load(out)
        return out


def _source_tensors(source: Any) -> Tensors:
    if isinstance(source, dict):
        return {k: np.asarray(v) for k, v in source.items()}
    if isinstance(source, (str, os.PathLike)):
        from ..formats import read_tensors
        return read_tensors(source)
    from .sides import make_side
    return make_side(source).state()
