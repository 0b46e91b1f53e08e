"""A port mapping: how each target tensor is computed from source tensors. Saved as JSON, reused
on checkpoint files (``dualdl convert --mapping``) or on models (``Mapping.load(p).apply(...)``).

One artifact for the whole journey: :func:`as_mapping` (``Mapping.from_any``) turns whatever the
user holds - a ``Mapping``, a ``dl.port`` ``PortReport``, a ``dl.port.translate``
``TranslateReport``, their JSON files (``*.port.json``, ``*.report.json``) or their dicts - into
one ``Mapping``; ``convert --mapping``, ``translate_trainer`` and ``check_native_training`` accept
all of them through it."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

import numpy as np

__all__ = ["Mapping", "Entry", "register_transform", "TRANSFORMS", "as_mapping", "MappingError",
           "gluon_checkpoint_params", "checkpoint_namer", "gluon_key_resolver", "mapping_from_pairs",
           "resolve_gluon_keys"]

Tensors = Dict[str, np.ndarray]


def _copy(srcs, **_):
    return srcs[0]


def _concat(srcs, axis=0, **_):
    return np.concatenate(srcs, axis=axis)


def _fold_bias(srcs, **_):
    """running_mean - conv_bias: BN((x + b) - m) == BN(x - (m - b)). Computed in float64: the
    float64 verification of a port (and a float64 training twin) loads the exact difference; a
    float32 target rounds it once when it is stored (the same value float32 subtraction gives).
    Folded in float32, ResNet-50 v1 with realistic BatchNorm statistics was 8.4e-6 off in a
    float64 check whose tolerance is 7.7e-7."""
    return np.asarray(srcs[0], np.float64) - np.asarray(srcs[1], np.float64)


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
        if not keep_dtype and self.dtype:
            out = out.astype(self.dtype, copy=False)
        return out if out.flags.c_contiguous else out.copy(order="C")


class MappingError(ValueError):
    """What was given as a mapping is none of the forms a mapping can come in."""


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
        entries = [Entry(**e) for e in d["entries"]]
        for i, e in enumerate(entries):
            for src in e.sources:
                part = src.get("part")
                if part is None:
                    continue
                ok = (isinstance(part, (list, tuple)) and len(part) == 3 and
                      all(isinstance(v, int) and not isinstance(v, bool) for v in part) and
                      part[1] >= 1 and 0 <= part[0] < part[1])
                if not ok:
                    raise MappingError(f"mapping entry {i} ({e.target}): source {src.get('key')!r} "
                                       f"has part {part!r}; a part is [index, count, axis] with "
                                       f"0 <= index < count")
        return cls(entries, d.get("source_framework", ""), d.get("target_framework", ""),
                   list(d.get("notes", [])))

    def save(self, path) -> None:
        from ..atomic import atomic_write_file
        data = json.dumps(self.to_dict(), indent=1).encode()
        atomic_write_file(path, lambda f: f.write(data))

    @classmethod
    def load(cls, path) -> "Mapping":
        """A saved ``Mapping``, ``PortReport`` (``*.port.json``) or translate report
        (``<name>.report.json``)."""
        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise MappingError(f"{os.fspath(path)}: cannot read a port mapping ({e})") from None
        try:
            return cls._from_json(d)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise MappingError(f"{os.fspath(path)}: not a valid port mapping ({e}); expected the "
                               f"JSON of Mapping.save, PortReport.save (dl.port.port) or "
                               f"dl.port.translate's <name>.report.json") from None

    @classmethod
    def _from_json(cls, d: Any) -> "Mapping":
        if isinstance(d, dict) and isinstance(d.get("mapping"), list):
            return cls.from_translate_report(d)          # a translate report
        if isinstance(d, dict) and "mapping" in d and "entries" not in d:
            d = d["mapping"]  # a saved PortReport
        return cls.from_dict(d)

    @classmethod
    def from_translate_report(cls, report: Any) -> "Mapping":
        """The mapping of a ``dl.port.translate`` result: a ``TranslateReport``, its dict or its
        ``mapping`` list (``{"torch", "gluon", "shape", "tied_to"}`` rows). Each torch key is a
        copy of the Gluon tensor under its structural name (``save_parameters`` key); a key with
        no Gluon tensor (``num_batches_tracked``) is filled with 0; a tied torch key copies the
        same Gluon tensor as the key it is tied to."""
        rows = report if isinstance(report, list) else (
            report.get("mapping") if isinstance(report, dict) else getattr(report, "mapping", None))
        if not isinstance(rows, list):
            raise MappingError(f"not a translate report: no 'mapping' list in "
                               f"{type(report).__name__}")
        entries = []
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or not isinstance(r.get("torch"), str) or \
                    not isinstance(r.get("shape", []), list):
                raise MappingError(f"translate report mapping row {i} is not "
                                   f"{{'torch': key, 'gluon': key|None, 'shape': [...]}}: {r!r}"[:300])
            shape = [int(d) for d in r.get("shape", [])]
            if r.get("gluon"):
                entries.append(Entry(r["torch"], shape, r.get("dtype", ""),    # "": the source's
                                     [{"key": r["gluon"], "part": None, "transpose": False}],
                                     reason="translate: same tensor, Gluon checkpoint name" +
                                     (f" (tied to {r['tied_to']})" if r.get("tied_to") else "")))
            else:
                entries.append(Entry(r["torch"], shape, r.get("dtype", "int64"), [], "fill",
                                     {"value": 0}, reason="translate: fixed value"))
        notes = list(report.get("notes", []) if isinstance(report, dict)
                     else getattr(report, "notes", []) or [])
        return cls(entries, "gluon", "torch", [str(n) for n in notes])

    @classmethod
    def from_any(cls, mapping: Any) -> "Mapping":
        """See :func:`as_mapping`."""
        return as_mapping(mapping)

    # ------------------------------------------------------------------ use
    @property
    def source_keys(self) -> List[str]:
        return sorted({s["key"] for e in self.entries for s in e.sources})

    @property
    def target_keys(self) -> List[str]:
        return [e.target for e in self.entries]

    def apply(self, source: Any, target: Any = None, keep_dtype: bool = False) -> Tensors:
        """Compute the target tensors from ``source`` (a dict of arrays, a checkpoint path or a
        model). With ``target`` (a torch module or Gluon block) they are also loaded into it,
        all or nothing (cast to the target's dtypes). Returns the target tensors; with
        ``keep_dtype`` computed ones keep their precision (a folded bias stays float64)."""
        tensors = _source_tensors(source)
        from ..formats import align_module_prefix
        tensors = align_module_prefix(tensors, self.source_keys)
        missing = [k for k in self.source_keys if k not in tensors]
        if missing:
            raise KeyError(f"the source lacks {len(missing)} tensor(s) the mapping needs: "
                           f"{missing[:10]}{' ...' if len(missing) > 10 else ''}")
        out = {e.target: e.compute(tensors, keep_dtype) for e in self.entries}
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


def as_mapping(mapping: Any) -> Mapping:
    """One ``Mapping`` from any form the journey produces: a ``Mapping``; a ``dl.port``
    ``PortReport`` (its ``.mapping``); a ``dl.port.translate`` ``TranslateReport``; the path of a
    saved mapping, port report or translate report; or one of their dicts. Anything else raises
    :class:`MappingError` naming what was given and what is accepted."""
    if isinstance(mapping, Mapping):
        return mapping
    inner = getattr(mapping, "mapping", None)
    if isinstance(inner, Mapping):                       # a PortReport
        return inner
    if isinstance(inner, list) and hasattr(mapping, "class_name"):   # a TranslateReport
        return Mapping.from_translate_report(mapping)
    if isinstance(mapping, (str, os.PathLike)):
        return Mapping.load(mapping)
    if isinstance(mapping, (dict, list)):
        try:
            return Mapping.from_translate_report(mapping) if isinstance(mapping, list) \
                else Mapping._from_json(mapping)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise MappingError(f"not a valid port mapping ({e})") from None
    raise MappingError(f"expected a port mapping: a dualdl.port Mapping, a PortReport "
                       f"(dl.port.port_gluon_to_torch), a TranslateReport (dl.port.translate), "
                       f"or the path of one saved as JSON - got {type(mapping).__name__}")


# ---------------------------------------------------------------- Gluon's checkpoint names
def gluon_checkpoint_params(block: Any) -> Dict[str, Any]:
    """``save_parameters`` key -> Parameter: what ``block._collect_params_with_prefix()`` gives,
    whatever a block overrides it with (gluonnlp's ``DotProductSelfAttentionCell`` saves its
    ``query_bias`` as ``proj_query.bias``)."""
    return dict(block._collect_params_with_prefix())


def _structural_params(block: Any, prefix: str = "") -> Dict[str, Any]:
    """``path.local`` -> Parameter over ``_children`` / ``_reg_params``: the names a block's own
    attributes give, which differ from its checkpoint keys where ``_collect_params_with_prefix``
    is overridden."""
    out = {(prefix + "." if prefix else "") + k: v
           for k, v in getattr(block, "_reg_params", {}).items()}
    for name, child in getattr(block, "_children", {}).items():
        out.update(_structural_params(child, (prefix + "." if prefix else "") + name))
    return out


def checkpoint_namer(block: Any) -> Callable[[Any, Any], Any]:
    """``name(key, param)`` -> the ``save_parameters`` key of ``param`` (``key`` itself when it
    already is one for that parameter, or when ``param`` has none)."""
    ck = gluon_checkpoint_params(block)
    first: Dict[int, str] = {}
    for k, p in ck.items():
        first.setdefault(id(p), k)

    def name(key: Any, param: Any) -> Any:
        if param is None or (key in ck and ck[key] is param):
            return key
        return first.get(id(param), key)
    return name


def gluon_key_resolver(block: Any) -> Callable[[Any], Any]:
    """``resolve(name)`` -> the ``save_parameters`` key for any name a Gluon parameter goes by:
    that key, ``Parameter.name``, the Parameter itself, or its structural ``path.local`` name (a
    translate report written before reports carried checkpoint keys); None if it is none of
    the block's parameters."""
    ck = gluon_checkpoint_params(block)
    by_id: Dict[int, str] = {}
    for k, p in ck.items():
        by_id.setdefault(id(p), k)
    alias = {p.name: by_id[id(p)] for p in ck.values()}
    alias.update({k: by_id[id(p)] for k, p in _structural_params(block).items() if id(p) in by_id})

    def resolve(name: Any) -> Any:
        if isinstance(name, str):
            return name if name in ck else alias.get(name)
        return by_id.get(id(name))
    return resolve


def mapping_from_pairs(pairs: Dict[Any, Any], gluon_block: Any, torch_module: Any) -> Mapping:
    """A ``Mapping`` from a plain dict ``{Gluon name or Parameter: torch name or Parameter}``
    (the form ``translate_trainer`` takes): each torch tensor a copy of its Gluon tensor, Gluon
    names resolved to checkpoint keys (:func:`gluon_key_resolver`)."""
    resolve = gluon_key_resolver(gluon_block)
    t_by_id = {id(p): n for n, p in torch_module.named_parameters()}
    t_state = torch_module.state_dict()
    ck = gluon_checkpoint_params(gluon_block)
    entries = []
    for g, t in pairs.items():
        key = resolve(g)
        if key is None:
            raise MappingError(f"mapping key {getattr(g, 'name', g)!r} is not a parameter of the "
                               f"Gluon block (give save_parameters keys, Parameter names or "
                               f"Parameters)")
        tname = t if isinstance(t, str) else t_by_id.get(id(t))
        if tname not in t_state:
            raise MappingError(f"mapping value {t!r} for Gluon {key!r} is not a tensor of the "
                               f"torch module's state_dict"[:300])
        shape = list(t_state[tname].shape)
        if tuple(shape) != tuple(ck[key].shape):
            raise MappingError(f"Gluon {key!r} has shape {tuple(ck[key].shape)}, torch {tname!r} "
                               f"{tuple(shape)}: a dict mapping copies tensors, give a Mapping or "
                               f"a port report for transposed or fused ones")
        entries.append(Entry(tname, shape, str(t_state[tname].dtype).replace("torch.", ""),
                             [{"key": key, "part": None, "transpose": False}],
                             reason="dict: Gluon -> torch name"))
    return Mapping(entries, "gluon", "torch", [])


def resolve_gluon_keys(mapping: Mapping, gluon_block: Any) -> Mapping:
    """``mapping`` with every Gluon source key that is another name of one of ``gluon_block``'s
    parameters (its ``Parameter.name``, its structural name) replaced by its ``save_parameters``
    key; keys that name nothing of the block stay as they are (the caller names them)."""
    resolve = gluon_key_resolver(gluon_block)
    entries = []
    for e in mapping.entries:
        srcs = [dict(s, key=resolve(s["key"]) or s["key"]) for s in e.sources]
        entries.append(Entry(e.target, e.shape, e.dtype, srcs, e.transform, dict(e.args),
                             e.transpose, e.reason))
    return Mapping(entries, mapping.source_framework, mapping.target_framework, list(mapping.notes))


def from_dualdl_report(mapping: Mapping) -> bool:
    """Whether ``mapping`` is a ``dl.port.translate`` report's: a Gluon key it names that the
    block lacks is then dualdl's fault, not the user's."""
    return bool(mapping.entries) and all(e.reason.startswith("translate:") for e in mapping.entries)
