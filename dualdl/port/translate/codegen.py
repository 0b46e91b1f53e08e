"""Emit the PyTorch module source: one ``nn.Module`` class per Gluon block class (a variant per
distinct structure), child attribute names kept, numbers that differ between instances of a class
turned into constructor arguments, leaf layers as torch layers, ``forward`` from the traced graph.

This module walks the block tree and writes the classes and the file; ``render`` turns names and
constructor calls into source text, ``forward`` writes the body of each ``forward``.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .errors import TranslationError
from .forward import ForwardWriter
from .leaves import builtin_leaf
from .registry import Call, Leaf, block_translation
from .safe import comment, docstring_text
from .render import Ref, _attr_path, _camel, _ident, _is_number, _join, _refs, _render, _render_args, _with_comment
from .trace import T, flatten_struct, trace_block

__all__ = ["Generator", "MapEntry"]

_SEQUENTIAL = ("HybridSequential", "Sequential")
_CONCURRENT = ("HybridConcurrent", "Concurrent")

CONCURRENT_HELPER = '''class Concurrent(nn.ModuleList):
    """Gluon HybridConcurrent: every child runs on the same input; outputs concatenated on `dim`."""

    def __init__(self, *modules, dim=1):
        super().__init__(modules)
        self.dim = dim

    def forward(self, x):
        return torch.cat([m(x) for m in self], dim=self.dim)
'''


@dataclass
class MapEntry:
    """One torch state_dict entry: the Gluon tensor it comes from (``param``) or a fixed value."""
    torch_key: str
    gluon_key: Optional[str]
    param: Any = None
    value: Any = None
    gluon_path: str = ""
    tied_to: Optional[str] = None


@dataclass
class LeafInfo:
    path: str
    in_shapes: List[Tuple[int, ...]]
    out_shapes: List[Tuple[int, ...]]
    n_args: int
    after_trainable: bool = True


@dataclass
class Instance:
    block: Any
    path: str
    tpath: str
    init: List[Tuple[str, Any]] = field(default_factory=list)   # (attr, Call)
    own: List[Tuple[str, Tuple[int, ...]]] = field(default_factory=list)
    forward: List[str] = field(default_factory=list)
    signature: List[str] = field(default_factory=list)
    untraced: str = ""


class Generator:
    """Build the source for one Gluon block tree (see the module docstring)."""

    def __init__(self, root: Any, records: Dict[int, list], name: str, batchnorm: str = "torch"):
        self.root, self.records, self.name = root, records, name
        self.batchnorm = batchnorm   # "torch" or "gluon" (biased running variance)
        self.entries: List[MapEntry] = []
        self.same_output: Dict[str, str] = {}
        self.untraced: List[Dict[str, str]] = []
        self.helpers: "OrderedDict[str, str]" = OrderedDict()
        self.instances: Dict[int, Instance] = {}
        self.by_class: "OrderedDict[type, List[Instance]]" = OrderedDict()
        self.variants: Dict[int, Tuple[str, List[Tuple[str, List[Tuple]]]]] = {}
        self.class_src: "OrderedDict[str, str]" = OrderedDict()
        self.leaves: Dict[int, Leaf] = {}
        self.refs: Dict[int, List["Ref"]] = {}
        self.resolved: set = set()
        self.ops: set = set()        # every MXNet op the traced graphs use

    # ---- classification ----
    def kind(self, block: Any) -> str:
        if block_translation(block) is not None or _is_builtin(block):
            return "leaf"
        cname = type(block).__name__
        if type(block).__module__.startswith("mxnet.gluon"):
            if cname in _SEQUENTIAL:
                return "sequential"
            if cname in _CONCURRENT:
                return "concurrent"
        return "traced"

    def leaf(self, block: Any, path: Optional[str]) -> Optional[Leaf]:
        if id(block) in self.leaves:
            return self.leaves[id(block)]
        fn = block_translation(block)
        recs = self.records.get(id(block))
        if fn is None and not recs and path is None:
            return builtin_leaf(block, LeafInfo("", [], [], 1)) if _is_builtin(block) else None
        info = LeafInfo(path or "", [t.shape for t in flatten_struct(recs[0].args) if isinstance(t, T)] if recs else [],
                        [t.shape for t in flatten_struct(recs[0].out) if isinstance(t, T)] if recs else [],
                        (1 if recs[0].skip_states else len(recs[0].args)) if recs else 1,
                        recs[0].after_trainable if recs else True)
        if fn is not None:
            leaf = fn(block, info)
        elif _is_builtin(block):
            leaf = builtin_leaf(block, info)
        else:
            return None
        if path is not None:
            self.leaves[id(block)] = leaf
            for h in leaf.helpers:      # source of a user's torch layer class, written once
                self.helpers.setdefault(h, h)
        return leaf

    # ---- constructors ----
    def ctor(self, block: Any, path: str, tpath: str) -> Call:
        kind = self.kind(block)
        if kind == "leaf":
            leaf = self.leaf(block, path)
            if leaf.pre or leaf.post:
                elements, owner = self._leaf_elements(block, leaf, path)
                self._map_leaf(block, leaf, path, f"{tpath}.{owner}" if tpath else str(owner))
                return Call("nn.Sequential", elements)
            self._map_leaf(block, leaf, path, tpath)
            if leaf.same_output:
                self.same_output[path] = tpath
            return leaf.ctor
        if kind == "sequential" and id(block) not in self.records and any(
                id(c) in self.records for c in block._children.values()):
            # its layers are called one by one from the parent's forward: an nn.ModuleList
            elements = []
            for i, (name, child) in enumerate(block._children.items()):
                cpath, ctp = _join(path, name), _join(tpath, str(i))
                if self.kind(child) == "leaf":
                    leaf = self.leaf(child, cpath)
                    self._map_leaf(child, leaf, cpath, ctp)
                    if leaf.same_output:
                        self.same_output[cpath] = ctp
                    elements.append(leaf.ctor)
                else:
                    elements.append(self.ctor(child, cpath, ctp))
            return Call("nn.ModuleList", [Call("", elements)])
        if kind == "sequential":
            elements, index = [], 0
            for name, child in block._children.items():
                cpath = f"{path}.{name}" if path else name
                if self.kind(child) == "leaf" and (self.leaf(child, cpath).pre or self.leaf(child, cpath).post):
                    leaf = self.leaf(child, cpath)
                    els, owner = self._leaf_elements(child, leaf, cpath)
                    self._map_leaf(child, leaf, cpath, _join(tpath, str(index + owner)))
                    self.same_output[cpath] = _join(tpath, str(index + len(els) - 1))
                    elements += els
                    index += len(els)
                else:
                    elements.append(self.ctor(child, cpath, _join(tpath, str(index))))
                    index += 1
            self.same_output[path] = tpath
            return Call("nn.Sequential", elements)
        if kind == "concurrent":
            self.helpers["Concurrent"] = CONCURRENT_HELPER
            elements = [self.ctor(child, _join(path, name), _join(tpath, str(i)))
                        for i, (name, child) in enumerate(block._children.items())]
            self.same_output[path] = tpath
            return Call("Concurrent", elements, [("dim", int(block.axis))])
        return self.traced_ctor(block, path, tpath)

    def _leaf_elements(self, block, leaf: Leaf, path: str):
        if leaf.call != "{m}({args})":
            raise TranslationError("this layer cannot sit in an nn.Sequential as is (its call is "
                                   f"{leaf.call!r}); wrap it in a block of your own", block=type(block).__name__,
                                   path=path)
        elements = []
        for s in leaf.pre:
            if s.module is None:
                raise TranslationError(f"step {s.expr!r} has no nn.Module form for an nn.Sequential",
                                       block=type(block).__name__, path=path)
            elements.append(_with_comment(s.module, s.comment))
        owner = len(elements)
        elements.append(leaf.ctor)
        elements += [_with_comment(s.module, s.comment) for s in leaf.post]
        return elements, owner

    def _map_leaf(self, block, leaf: Leaf, path: str, tpath: str) -> None:
        for gname, tname in leaf.params.items():
            p = block._reg_params.get(gname)
            if p is None:
                continue
            self.entries.append(MapEntry(_join(tpath, tname), _join(path, gname), param=p, gluon_path=path))
        for bname, value in leaf.buffers.items():
            self.entries.append(MapEntry(_join(tpath, bname), None, value=value, gluon_path=path))

    def traced_ctor(self, block: Any, path: str, tpath: str) -> Call:
        if id(block) not in self.instances:
            self._build_instance(block, path, tpath)
        ref = Ref(type(block).__name__)
        ref.block = block
        self.refs.setdefault(id(block), []).append(ref)
        return ref

    def resolve(self, cls) -> None:
        """Group the instances of one Gluon class into variants (after the classes they contain)."""
        if cls in self.resolved:
            return
        self.resolved.add(cls)
        for inst in self.by_class[cls]:
            for _, call in inst.init:
                for ref in _refs(call):
                    self.resolve(type(ref.block))
        self._variant(cls)
        for inst in self.by_class[cls]:
            cname, values, args = self.variants[id(inst.block)]
            for ref in self.refs.get(id(inst.block), []):
                ref.fn, ref.kwargs = cname, [(a, v) for a, v in zip(args, values)]

    def _build_instance(self, block, path, tpath) -> Instance:
        inst = Instance(block, path, tpath)
        self.instances[id(block)] = inst
        self.by_class.setdefault(type(block), []).append(inst)
        for name, child in block._children.items():
            attr, cpath = _ident(name), _join(path, name)
            if self.kind(child) == "leaf":   # extra steps go into forward, not into the module
                leaf = self.leaf(child, cpath)
                self._map_leaf(child, leaf, cpath, _join(tpath, attr))
                if leaf.same_output:
                    self.same_output[cpath] = _join(tpath, attr)
                inst.init.append((attr, leaf.ctor))
            else:
                inst.init.append((attr, self.ctor(child, cpath, _join(tpath, attr))))
        for local, p in block._reg_params.items():
            inst.own.append((_ident(local), tuple(int(s) for s in p.shape)))
            self.entries.append(MapEntry(_join(tpath, _ident(local)), _join(path, local), param=p, gluon_path=path))
        if id(block) not in self.records:
            inst.untraced = "it never ran on the sample input"
        else:
            try:
                graph = trace_block(block, path, self.records)
                inst.signature, inst.forward = ForwardWriter(self, block, path, graph).write()
                self.same_output[path] = tpath
            except TranslationError as e:
                if _is_hybrid(block):
                    raise
                inst.untraced = str(e)
        if inst.untraced:
            recs = self.records.get(id(block))
            inst.signature = [f"x{i}" for i in range(len(recs[0].args))] if recs else ["*args"]
            inst.forward = [f"raise NotImplementedError({_untraced_msg(block, path, inst.untraced)!r})"]
            self.untraced.append({"path": path, "block": type(block).__name__, "reason": inst.untraced})
        return inst

    # ---- class variants and constructor arguments ----
    def _variant(self, cls) -> None:
        insts = self.by_class[cls]
        groups: "OrderedDict[str, List[Instance]]" = OrderedDict()
        for inst in insts:
            groups.setdefault(self._skeleton(inst), []).append(inst)
        base = _camel(cls.__name__)
        for k, (skel, members) in enumerate(groups.items()):
            cname = base if k == 0 else f"{base}_{k + 1}"
            while cname in self.class_src or cname == "Concurrent":
                cname += "_"
            slots = [_literals(m) for m in members]
            n = len(slots[0])
            differing = [i for i in range(n) if len({repr(s[i][1]) for s in slots}) > 1]
            groups_of: "OrderedDict[str, List[int]]" = OrderedDict()
            for i in differing:
                groups_of.setdefault(repr([s[i][1] for s in slots]), []).append(i)
            names, used = {}, set()
            arg_list = []
            for key, idxs in groups_of.items():
                label = slots[0][idxs[0]][2]
                nm, j = label, 2
                while nm in used:
                    nm, j = f"{label}_{j}", j + 1
                used.add(nm)
                arg_list.append(nm)
                for i in idxs:
                    names[i] = nm
            self.class_src[cname] = self._class_source(cname, members[0], names, arg_list)
            for m in members:
                vals = [slots[members.index(m)][groups_of[key][0]][1] for key in groups_of]
                self.variants[id(m.block)] = (cname, vals, arg_list)

    def _skeleton(self, inst: Instance) -> str:
        return repr([(a, _render(c, 0, {}, None, skeleton=True)) for a, c in inst.init]) + repr(inst.own) + \
            "\n".join(inst.forward) + repr(inst.signature)

    def _class_source(self, cname, inst: Instance, names: Dict[int, str], args: List[str]) -> str:
        block = inst.block
        gl = f"{type(block).__module__}.{type(block).__qualname__}"
        lines = [f"class {cname}(nn.Module):", f'    """Translated from Gluon {docstring_text(gl)}."""', "",
                 f"    def __init__(self{''.join(', ' + a for a in args)}):", "        super().__init__()"]
        counter = [0]
        seen_comments: set = set()
        for attr, call in inst.init:
            text = _render(call, 8, names, counter, seen=seen_comments)
            lines.append(f"        self.{attr} = {text}")
        for attr, shape in inst.own:
            lines.append(f"        self.{attr} = nn.Parameter(torch.empty{shape})")
        if inst is self.instances.get(id(self.root)):
            lines += self._tie_lines()
        lines += ["", f"    def forward(self{''.join(', ' + a for a in inst.signature)}):"]
        lines += [f"        {ln}" for ln in inst.forward]
        return "\n".join(lines) + "\n"

    def _tie_lines(self) -> List[str]:
        owner: Dict[int, MapEntry] = {}
        lines = []
        for e in self.entries:
            if e.param is None:
                continue
            first = owner.setdefault(id(e.param), e)
            if first is not e:
                e.tied_to = first.torch_key
                lines.append(f"        {_attr_path(e.torch_key)} = {_attr_path(first.torch_key)}"
                             f"  # shared with {comment(first.gluon_key)} in Gluon")
        return lines

    # ---- the whole file ----
    def source(self) -> str:
        kind = self.kind(self.root)
        top = _camel(self.name)
        if kind == "traced":
            self._build_instance_root()
            for cls in list(self.by_class):
                self.resolve(cls)
            cname = self.variants[id(self.root)][0]
            body = list(self.class_src.items())
            src = [s for n, s in body if n != cname] + [self.class_src[cname]]
            self.top_class = cname
        else:
            call = self.ctor(self.root, "", "")
            for cls in list(self.by_class):
                self.resolve(cls)
            if not call.fn.startswith("nn."):
                raise TranslationError("a top-level block of this kind", block=type(self.root).__name__)
            src = list(self.class_src.values())
            base = call.fn
            ties = self._tie_lines()
            src.append(f"class {top}({base}):\n    \"\"\"Translated from Gluon {type(self.root).__qualname__}.\"\"\"\n\n"
                       f"    def __init__(self):\n        super().__init__({_render_args(call, 8)})\n" +
                       ("\n".join(ties) + "\n" if ties else ""))
            self.top_class = top
        header = ['"""PyTorch translation of a Gluon model, generated by `dualdl translate`.', "",
                  "Only torch is needed to run it. Every MXNet convention that changes numbers is an",
                  "explicit argument or line with a comment. Load the weights with",
                  f"`model.load_state_dict(safetensors.torch.load_file(\"{self.name}.safetensors\"))`.",
                  '"""', "import torch", "import torch.nn.functional as F", "from torch import nn", "", ""]
        return "\n".join(header) + "\n\n".join(list(self.helpers.values()) + src)

    def _build_instance_root(self):
        if id(self.root) not in self.instances:
            self._build_instance(self.root, "", "")


def _is_builtin(block) -> bool:
    from .leaves import is_gluon_builtin
    return is_gluon_builtin(block)


def _is_hybrid(block) -> bool:
    import mxnet as mx
    return isinstance(block, mx.gluon.HybridBlock)


def _untraced_msg(block, path, reason):
    return (f"Gluon {type(block).__name__} at {path or 'the top'!r} was not translated: {reason}. "
            f"Write its forward by hand; its children are translated.")


def _literals(inst: Instance) -> List[Tuple[Tuple, Any, str]]:
    """(slot path, value, label) for every numeric literal in an instance's constructor calls."""
    out = []

    def go(v, path, label):
        if isinstance(v, Call):
            for i, a in enumerate(v.args):
                go(a, path + (i,), v.names[i] if i < len(v.names) else label)
            for k, a in v.kwargs:
                go(a, path + (k,), k)
        elif isinstance(v, list):
            for i, a in enumerate(v):
                go(a, path + (i,), label)
        elif _is_number(v):
            out.append((path, v, _ident(label)))
    for attr, call in inst.init:
        go(call, (attr,), attr)
    return out
