"""Emit the PyTorch module source: one ``nn.Module`` class per Gluon block class (a variant per
distinct structure), child attribute names kept, numbers that differ between instances of a class
turned into constructor arguments, leaf layers as torch layers, ``forward`` from the traced graph.
"""
from __future__ import annotations

import keyword
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .errors import TranslationError
from .leaves import builtin_leaf
from .ops import Expr, NeedsName, OpNode, translate_op
from .registry import Call, Leaf, block_translation
from .trace import Graph, T, flatten_struct, nested_var_name, trace_block

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


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    if not s or s[0].isdigit():
        s = "m_" + s
    return s + "_" if keyword.iskeyword(s) else s


def _camel(name: str) -> str:
    parts = re.split(r"[^0-9A-Za-z]+", name)
    s = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return _ident(s or "Translated")


class Generator:
    """Build the source for one Gluon block tree (see the module docstring)."""

    def __init__(self, root: Any, records: Dict[int, list], name: str):
        self.root, self.records, self.name = root, records, name
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
        cname = type(block).__name__
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
        lines = [f"class {cname}(nn.Module):", f'    """Translated from Gluon {gl}."""', "",
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
                             f"  # shared with {first.gluon_key} in Gluon")
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


def _join(a: str, b: str) -> str:
    return f"{a}.{b}" if a else b


def _attr_path(key: str) -> str:
    out = "self"
    for part in key.split("."):
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


class Ref(Call):
    """A constructor call of a translated class, filled in once its class variant is known."""
    block: Any = None


def _refs(v):
    if isinstance(v, Ref):
        yield v
    if isinstance(v, Call):
        for a in list(v.args) + [a for _, a in v.kwargs]:
            yield from _refs(a)


def _with_comment(call: Call, comment: str) -> Call:
    return Call(call.fn, list(call.args), list(call.kwargs), list(call.names), comment or call.comment)


def _is_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return isinstance(v, tuple) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v)


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


def _render(call: Call, indent: int, names: Dict[int, str], counter, skeleton=False, seen=None) -> str:
    """Source of a constructor call; numeric literal number i becomes names[i] where given."""
    state = {"i": 0} if counter is None else None

    def lit(v):
        if skeleton:
            return "#"
        idx = counter[0] if counter is not None else state["i"]
        if counter is not None:
            counter[0] += 1
        else:
            state["i"] += 1
        return names.get(idx, repr(v))

    def val(v, ind):
        if isinstance(v, Call):
            return one(v, ind)
        if _is_number(v):
            return lit(v)
        return repr(v)

    def one(c: Call, ind: int) -> str:
        nested = any(isinstance(a, Call) for a in c.args)
        if not nested:
            parts = [val(a, ind) for a in c.args] + [f"{k}={val(a, ind)}" for k, a in c.kwargs]
            return f"{c.fn}({', '.join(parts)})"
        pad = " " * (ind + 4)
        rows = []
        for a in c.args:
            text = val(a, ind + 4)
            comment = a.comment if isinstance(a, Call) else ""
            if comment and seen is not None and comment not in seen:
                seen.add(comment)
                rows.append(f"{pad}{text},  # {comment}")
            else:
                rows.append(f"{pad}{text},")
        rows += [f"{pad}{k}={val(a, ind + 4)}," for k, a in c.kwargs]
        return f"{c.fn}(\n" + "\n".join(rows) + f"\n{' ' * ind})"

    text = one(call, indent)
    if call.comment and seen is not None and call.comment not in seen and "\n" not in text:
        seen.add(call.comment)
        text += f"  # {call.comment}"
    return text


def _render_args(call: Call, indent: int) -> str:
    text = _render(call, indent, {}, None, seen=set())
    return text[len(call.fn) + 1:-1]


class ForwardWriter:
    """Turn a traced ``Graph`` into the statements of ``forward``."""

    def __init__(self, gen: Generator, block: Any, path: str, graph: Graph):
        self.gen, self.block, self.path, self.g = gen, block, path, graph
        self.cls = type(block).__name__
        self.lines: List[str] = []
        self.values: Dict[Tuple[int, int], Expr] = {}
        self.used_names = set(graph.in_names) | {"self", "torch", "nn", "F"}
        self.comments_seen: set = set()

    def write(self) -> Tuple[List[str], List[str]]:
        g = self.g
        nodes = g.nodes
        self.gen.ops.update(n["op"] for n in nodes if n["op"] != "null")
        # where each var node comes from
        self.var_of: Dict[int, Tuple[str, Any]] = {}
        in_index = {}
        for i, s in enumerate(g.in_struct):
            if isinstance(s, (list, tuple)):
                for j, _ in enumerate(flatten_struct(s)):
                    in_index[f"__in{i}" + _path_suffix(s, j)] = f"{g.in_names[i]}{_index_suffix(s, j)}"
            else:
                in_index[f"__in{i}"] = g.in_names[i]
        self.call_of_var: Dict[str, Tuple[int, int]] = {}
        for ci, c in enumerate(g.calls):
            for j, _ in enumerate(flatten_struct(c.out_struct)):
                self.call_of_var[f"__call{ci}_{j}"] = (ci, j)
        for nid, n in enumerate(nodes):
            if n["op"] != "null":
                continue
            name = n["name"]
            if name in in_index:
                self.values[(nid, 0)] = Expr(in_index[name])
            elif name in g.params:
                self.values[(nid, 0)] = Expr(f"self.{_ident(g.params[name])}")
        # use counts
        self.uses: Dict[Tuple[int, int], int] = {}
        for n in nodes:
            for inp in n.get("inputs", []):
                self.uses[(inp[0], inp[1])] = self.uses.get((inp[0], inp[1]), 0) + 1
        for h in g.heads:
            self.uses[h] = self.uses.get(h, 0) + 1
        self.call_done: Dict[int, List[str]] = {}
        self.emitted: Dict[int, bool] = {}
        call_heads = g.heads[g.n_outputs:]
        pos = 0
        self.call_args: List[List[Tuple[int, int]]] = []
        for c in g.calls:
            k = len([s for s in flatten_struct(c.args) if s is not None])
            self.call_args.append(call_heads[pos:pos + k])
            pos += k
        for ci in range(len(g.calls)):
            self.emit_call(ci)
        outs = [self.expr(h) for h in g.heads[:g.n_outputs]]
        self.lines.append(f"return {_pack(g.out_struct, [o.text for o in outs])}")
        # an argument Gluon received as None (an optional begin state) stays optional and unused
        last = max([i for i, v in enumerate(g.in_struct) if v is not None], default=-1)
        return [n if i <= last else f"{n}=None" for i, n in enumerate(g.in_names)], self.lines

    def node_of(self, ref):
        return self.g.nodes[ref[0]]

    def expr(self, ref: Tuple[int, int]) -> Expr:
        if ref in self.values:
            return self.values[ref]
        n = self.node_of(ref)
        if n["op"] == "null":
            name = n["name"]
            if name in self.call_of_var:
                ci, j = self.call_of_var[name]
                self.emit_call(ci)
                return Expr(self.call_done[ci][j])
            raise TranslationError(f"input {name!r} is neither an argument, a parameter of the block nor a "
                                   f"child's output (a constant created inside hybrid_forward?)",
                                   block=self.cls, path=self.path)
        args = [self.expr((i[0], i[1])) for i in n.get("inputs", [])]
        node = OpNode(n["op"], n["name"], n.get("attrs", {}),
                      [self.g.shapes.get((i[0], i[1])) for i in n.get("inputs", [])],
                      [self.g.shapes.get((ref[0], k)) for k in range(4)], self.cls, self.path)
        try:
            e = translate_op(node, args)
        except NeedsName:
            for k, (a, i) in enumerate(zip(args, n.get("inputs", []))):
                if not a.text.isidentifier():
                    op = self.node_of((i[0], i[1]))["op"]
                    var = self.new_name(a.text.split(".")[-1] if op == "null" else _short(op))
                    self.lines.append(f"{var} = {a.text}")
                    args[k] = self.values[(i[0], i[1])] = Expr(var)
            e = translate_op(node, args)
        for h in e.helpers:
            self.gen.helpers.setdefault(h, h)
        n_out = _n_outputs(n)
        if n_out > 1:
            var = self.new_name(_short(n["op"]))
            self.lines.append(f"{var} = {e.text}")
            for k in range(n_out):
                self.values[(ref[0], k)] = Expr(f"{var}[{k}]")
            return self.values[ref]
        if self.uses.get(ref, 0) > 1 or len(e.text) > 70:
            var = self.new_name(_short(n["op"]))
            self.lines.append(f"{var} = {e.text}")
            e = Expr(var)
        self.values[ref] = e
        return e

    def new_name(self, base: str) -> str:
        base = _ident(base)
        name, k = base, 1
        while name in self.used_names:
            name, k = f"{base}_{k}", k + 1
        self.used_names.add(name)
        return name

    def emit_call(self, ci: int) -> None:
        if ci in self.call_done:
            return
        c = self.g.calls[ci]
        child = self.block
        for part in c.child.split("."):
            child = child._children[part]
        leaf = self.gen.leaves.get(id(child))
        n_in = getattr(leaf, "n_inputs", None)
        if n_in is not None:   # Gluon's RNN __call__ adds zero begin states the torch layer does not need
            c.args = c.args[:n_in]
        n_flat = len([s for s in flatten_struct(c.args) if s is not None])
        zero_states = False
        if getattr(leaf, "states_out", None) and n_flat > 1 and all(
                self.node_of(h)["op"] in ("_zeros", "zeros") for h in self.call_args[ci][1:n_flat]):
            zero_states, n_flat = True, 1    # Gluon's zero begin states are torch's default
        arg_exprs = [self.expr(h) for h in self.call_args[ci][:n_flat]]
        if zero_states:
            c.args = c.args[:1]
        it = iter(arg_exprs)

        def fill(s):
            if s is None:
                return "None"
            if isinstance(s, (list, tuple)):
                inner = [fill(v) for v in s]
                return "[" + ", ".join(inner) + "]" if isinstance(s, list) else "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
            return next(it).text
        args = [fill(a) for a in c.args]
        attr = _attr_path(".".join(p if p.isdigit() else _ident(p) for p in c.child.split(".")))
        comment = ""
        flat_out = flatten_struct(c.out_struct)
        if leaf is not None:
            x = args[0]
            for s in leaf.pre:
                x = s.expr.format(x=x)
                comment = comment or s.comment
            rest = ", ".join(args[1:])
            rest_tuple = f"({rest[1:-1]})" if rest.startswith("[") and rest.endswith("]") else f"tuple({rest})"
            call = "{m}({x})" if zero_states else leaf.call
            text = call.format(m=attr, args=", ".join([x] + args[1:]), x=x, rest=rest, rest_tuple=rest_tuple)
            comment = comment or ("Gluon passes zero begin states: torch's default" if zero_states
                                  else leaf.call_comment)
            for s in leaf.post:
                text = s.expr.format(x=text)
                comment = comment or s.comment
            if getattr(leaf, "states_out", None) in ("gru", "rnn_relu", "rnn_tanh") and len(flat_out) == 2:
                names = [self.new_name(_ident(c.child)), self.new_name(_ident(c.child) + "_state")]
                self.lines.append(f"{names[0]}, {names[1]} = {text}" + _cmt(comment, self.comments_seen))
                self.call_done[ci] = names
                return
        else:
            text = f"{attr}({', '.join(args)})"
        names = [self.new_name(_ident(c.child) if k == 0 else f"{_ident(c.child)}_{k}") for k in range(len(flat_out))]
        target = _pack(c.out_struct, names, top=True)
        self.lines.append(f"{target} = {text}" + _cmt(comment, self.comments_seen))
        self.call_done[ci] = names


def _cmt(comment: str, seen: set) -> str:
    if not comment or comment in seen:
        return ""
    seen.add(comment)
    return f"  # {comment}"


def _pack(struct, names: List[str], top: bool = False) -> str:
    it = iter(names)

    def go(s, depth):
        if isinstance(s, (list, tuple)):
            inner = [go(v, depth + 1) for v in s]
            body = ", ".join(inner) + ("," if len(inner) == 1 else "")
            return body if depth == 0 else f"({body})"
        return next(it)
    return go(struct, 0)


def _n_outputs(n) -> int:
    op = n["op"]
    attrs = n.get("attrs", {})
    if op in ("SliceChannel", "split"):
        return int(attrs["num_outputs"])
    return 1


def _short(op: str) -> str:
    return {"elemwise_add": "add", "broadcast_add": "add", "_plus": "add", "Concat": "cat", "concat": "cat",
            "Activation": "act", "Reshape": "reshaped", "reshape": "reshaped", "SliceChannel": "parts",
            "split": "parts", "transpose": "permuted", "Flatten": "flat", "flatten": "flat"}.get(op, op.strip("_").lower())


def _path_suffix(s, j) -> str:
    return nested_var_name("", s, j)


def _index_suffix(s, j) -> str:
    return "".join(f"[{p}]" for p in _path_suffix(s, j).split("__") if p)
