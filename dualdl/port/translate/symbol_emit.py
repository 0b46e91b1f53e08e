"""The module tree of an exported symbol, from its scope tree: one ``nn.Module`` class per distinct
scope structure (instances that differ only in numbers share a class, those numbers becoming
constructor arguments), layer nodes as torch layers (``symbol_layers``' specs, registry.Leaf as a
Gluon layer's), each scope lowered into graph.Graph (``symbol_lower``) and written by the forward
writer the Gluon path uses (``forward.ForwardWriter``), classes by ``class_writer.class_source``."""
from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .class_writer import class_source, file_text
from .forward import ForwardWriter
from .graph import shape_count
from .module_tree import ClassNames, Instance, MapEntry, finish_class, free_attr, structure_ids
from .errors import TranslationError
from .registry import Call
from .render import FILE_NAMES, Ref, attr_path, camel, defined_names, free_name, ident, join_path
from .safe import comment as safe_comment
from .symbol_graph import SymGraph, Value
from .symbol_layers import LayerSpec, layer_spec
from .symbol_lower import scope_graph
from .symbol_tree import Scope, common_prefix, is_layer, item_values, node_tokens

__all__ = ["SymbolEmitter"]

@dataclass
class Inst(Instance):
    """The module of one symbol scope (``block``: the :class:`Scope`), with what building it needs."""
    base: str = ""
    inputs: List[Value] = field(default_factory=list)
    outputs: List[Value] = field(default_factory=list)
    children: List["Inst"] = field(default_factory=list)
    height: int = 0
    ref: Optional[Call] = None      # the parent's constructor call, filled once the class is known
    members: Dict[str, Any] = field(default_factory=dict)   # attribute -> child Inst or LayerSpec


class SymbolEmitter:
    """Build the source (``source()``), the state_dict mapping (``entries``) and, per BatchNorm
    node, its momentum and the element count per channel (``bn``) for the proof."""

    def __init__(self, g: SymGraph, root: Scope, params: Dict[str, Any], name: str, reserved: Iterable[str] = ()):
        self.g, self.root, self.params, self.name = g, root, params, name
        self.reserved = set(reserved)            # names the file defines already: no class takes one
        self.entries: List[MapEntry] = []
        self.real: Dict[str, str] = {}           # torch key -> the symbol's weight name
        self.bn: Dict[str, Tuple[float, int]] = {}
        self.ops: Set[str] = set()
        self.helpers: "OrderedDict[str, str]" = OrderedDict()
        self.owner: Dict[str, str] = {}          # weight name -> first torch key
        self.ties: List[Tuple[str, str, str]] = []
        self.ones: List[str] = []                # weights MXNet ignores and fixes at 1 (fix_gamma=True)
        self.layer_paths: Dict[int, str] = {}    # layer node id -> its torch module path
        self.value_users: Dict[Value, List[int]] = {}
        for n in g.nodes:
            if n.id in g.absorbed:
                continue
            for v in n.inputs:
                self.value_users.setdefault(v, []).append(n.id)
        self.heads = list(g.heads)
        self.top_class = ""
        self.leaves: Dict[int, LayerSpec] = {}   # id(spec) -> the layer spec: what the forward writer calls
        self.layer_outputs: Dict[int, int] = {}  # layer node id -> the outputs its torch layer returns

    # ---- instances ----
    def _inst(self, s: Scope, tpath: str, base: str) -> Inst:
        g = self.g
        inst = Inst(s, tpath, tpath, base=base)
        nodes = set(s.nodes())
        if s.kind == "root":
            inst.inputs = [(next(n.id for n in g.nodes if n.op == "null" and n.name == nm), 0) for nm in g.inputs]
            inst.outputs = list(self.heads)
        else:
            inst.inputs, made = item_values(g, s)
            inst.outputs = [v for v in made if v in self.heads or
                            any(u not in nodes for u in self.value_users.get(v, []))]
        attrs = self._attr_names(s)
        for it in s.items:
            if isinstance(it, Scope):
                attr = attrs[id(it)]
                child_base = (f"{base}Block" if s.kind != "root" else "Block") if it.kind == "block" else \
                    camel(re.sub(r"\d+$", "", it.token) or it.token)
                child = self._inst(it, join_path(tpath, attr), child_base)
                child.ref = Ref(child_base)
                child.ref.block = child
                inst.children.append(child)
                inst.init.append((("a", attr), child.ref))
                inst.members[attr] = child
            elif is_layer(g, it):
                node = g.nodes[it]
                spec = layer_spec(g, node)
                attr = attrs[it]
                for h in spec.helpers:
                    self.helpers.setdefault(h, h)
                inst.init.append((("a", attr), spec.ctor))
                self._map_layer(node, spec, join_path(tpath, attr))
                self.layer_paths[it] = join_path(tpath, attr)
                for tname, why in spec.frozen.items():
                    inst.extra.append(f"self.{attr}.{tname}.requires_grad_(False)  # {safe_comment(why)}")
                inst.members[attr] = self.leaves[id(spec)] = spec
                self.layer_outputs[it] = spec.n_out if spec.n_out is not None else shape_count(g.shapes, it)
                self.ops.add(node.op if node.op != "RNN" else f"RNN:{node.attrs.get('mode', 'lstm')}")
        inst.height = 1 + max((c.height for c in inst.children), default=0)
        graph = scope_graph(g, s, inst.inputs, inst.outputs, self._signature(inst),
                            {id(c.block): (c.inputs, c.outputs) for c in inst.children}, attrs,
                            self.layer_outputs.__getitem__, lambda var: self.own_param(inst, var))
        inst.signature, inst.forward = ForwardWriter(self, inst, tpath, graph, keep_inputs=s.kind == "root",
                                                     node_block="symbol node").write()
        return inst

    def _signature(self, inst: Inst) -> List[str]:
        """The forward's arguments: the model's input names at the top, ``x`` / ``x0, x1...`` below."""
        if inst.block.kind != "root":
            return ["x"] if len(inst.inputs) == 1 else [f"x{i}" for i in range(len(inst.inputs))]
        sig: List[str] = []
        for v in inst.inputs:
            a = ident(self.g.nodes[v[0]].name)
            while a in sig or a in FILE_NAMES:
                a += "_"
            sig.append(a)
        return sig

    # ---- what the forward writer asks ----
    def param_access(self, inst: Inst, attr: str) -> str:
        return f"self.{attr}"

    def child_access(self, inst: Inst, attr: str) -> Tuple[Any, str]:
        return inst.members[attr], f"self.{attr}"

    def _attr_names(self, s: Scope) -> Dict[Any, str]:
        """Attribute names from the node names; inside a block found from the graph, renumbered per
        kind (``conv3`` -> ``conv1``) so that its repeats are the same class."""
        out: Dict[Any, str] = {}
        taken: Set[str] = set()
        counts: Dict[str, int] = {}
        prefix = _model_prefix(self.g)
        for it in s.items:
            if isinstance(it, Scope):
                tok, key = it.token, id(it)
            elif is_layer(self.g, it):
                tok, key = self.g.layer_names.get(it) or node_tokens(self.g.nodes[it].name, prefix)[-1], it
            else:
                continue
            if s.kind == "block":
                kind = re.sub(r"\d+$", "", tok) or "layer"
                tok = f"{kind}{counts.get(kind, 0)}"
                counts[kind] = counts.get(kind, 0) + 1
            out[key] = free_attr(tok, taken)
        return out

    def _map_layer(self, node, spec: LayerSpec, tkey: str) -> None:
        weights = [(node.inputs[idx][0], spec.params[role], role) for idx, role in spec.inputs.items()
                   if idx < len(node.inputs)] + list(spec.weights)
        for vid, tname, role in weights:
            var = self.g.nodes[vid]
            if role == "fixed_gamma":
                self.ones.append(var.name)
            if var.op != "null" or var.kind == "input":
                raise TranslationError(f"MXNet {node.op} node {node.name!r} takes a computed value as its "
                                       f"{role}, not a stored weight", op=node.op, block=node.op, path=node.name)
            key = join_path(tkey, tname)
            e = MapEntry(key, f"{node.name}.{role}", param=self.params[var.name], gluon_path=node.name)
            if var.name in self.owner:
                e.tied_to = self.owner[var.name]
                self.ties.append((key, self.owner[var.name], var.name))
            else:
                self.owner[var.name] = key
            self.entries.append(e)
            self.real[key] = var.name
        for bname, value in spec.buffers.items():
            self.entries.append(MapEntry(join_path(tkey, bname), None, value=value, gluon_path=node.name))
        if spec.momentum is not None:
            shape = self.g.shapes[node.inputs[0]]
            count = 1
            for i, d in enumerate(shape):
                if i != 1:
                    count *= int(d)
            self.bn[node.name] = (spec.momentum, count)

    def own_param(self, inst: Inst, var) -> str:
        """A weight used by an op in forward (not by a layer): an ``nn.Parameter`` of this module."""
        if var.kind == "aux":
            raise TranslationError(f"running statistic {var.name!r} is used outside a BatchNorm",
                                   block="symbol", path=var.name)
        for (_, attr), _, _ in inst.own:
            if self.real.get(join_path(inst.tpath, attr)) == var.name:
                return attr
        if var.name in self.owner:
            raise TranslationError(f"weight {var.name!r} is used by ops in two different parts of the model "
                                   f"(at {self.owner[var.name]!r} and in {inst.tpath or 'the top'!r})",
                                   block="symbol", path=var.name)
        tok = node_tokens(var.name, _model_prefix(self.g))[-1]
        taken = {p[1] for p, _ in inst.init} | {p[1] for p, _, _ in inst.own}
        attr = free_attr(tok, taken)
        shape = tuple(int(d) for d in self.params[var.name].shape)
        inst.own.append((("a", attr), shape, True))
        key = join_path(inst.tpath, attr)
        self.entries.append(MapEntry(key, var.name, param=self.params[var.name], gluon_path=var.name))
        self.owner[var.name] = key
        self.real[key] = var.name
        return attr

    # ---- classes ----
    def _resolve(self, top: Inst) -> "OrderedDict[str, str]":
        every: List[Inst] = []

        def collect(i: Inst):
            for c in i.children:
                collect(c)
            every.append(i)
        collect(top)
        sid = structure_ids(every, lambda ref: ref.block, lambda i: i.base)
        groups: "OrderedDict[Tuple[str, int], OrderedDict[int, List[Inst]]]" = OrderedDict()
        for i in sorted(every, key=lambda i: i.height):     # children's classes first
            if i is not top:
                groups.setdefault((i.base, i.height), OrderedDict()).setdefault(sid[id(i)], []).append(i)
        classes: "OrderedDict[str, str]" = OrderedDict()
        taken = ClassNames(set(FILE_NAMES) | defined_names(self.helpers.values()) | self.reserved)
        top_name, k = camel(self.name), 2
        while top_name in self.reserved:        # a second SymbolBlock of one class in a Gluon tree
            top_name, k = f"{camel(self.name)}_{k}", k + 1
        top_name = free_name(top_name, taken.taken)
        taken.taken.add(top_name)
        for (base, _), by_structure in groups.items():
            for same in by_structure.values():
                cname = taken.new(base)
                classes[cname], _, _ = finish_class(cname, same, self._class_source, lambda m: [m.ref])
        classes[top_name] = self._class_source(top_name, [top], {}, [])
        self.top_class = top_name
        return classes

    def _class_source(self, cname: str, members: List[Inst], names: Dict[int, str], args: List[str]) -> str:
        inst = members[0]
        where = ", ".join(m.tpath or "(top)" for m in members[:4]) + (" ..." if len(members) > 4 else "")
        nodes = inst.block.nodes()
        first, last = self.g.nodes[nodes[0]].name, self.g.nodes[nodes[-1]].name
        doc = (f"Translated from the exported MXNet symbol {self.name}: nodes {first} .. {last}"
               f"{'' if inst.block.kind == 'root' else '; used at ' + where}.")
        ties = [f"        {attr_path(key)} = {attr_path(first_key)}  # one weight in MXNet: {safe_comment(wname)}"
                for key, first_key, wname in self.ties] if inst.block.kind == "root" else []
        return class_source(cname, "nn.Module", doc, args, inst, names, ties)

    def classes(self) -> "OrderedDict[str, str]":
        """Class name -> source of every class of the module tree, the top class last."""
        return self._resolve(self._inst(self.root, "", "Model"))

    def source(self) -> str:
        classes = self.classes()
        return file_text(["PyTorch translation of an exported MXNet model (symbol + params),",
                          "generated by `dualdl translate`."], self.name,
                         list(self.helpers.values()) + list(classes.values()))


def _model_prefix(g: SymGraph) -> str:
    if not hasattr(g, "_prefix"):
        g._prefix = common_prefix([g.nodes[i].name for i in g.order])
    return g._prefix
