"""Emit the PyTorch module source: one ``nn.Module`` class per Gluon block class (a variant per
distinct nested structure), child names kept as ``state_dict`` keys (Gluon's structural names),
numbers that differ between instances of a class turned into constructor arguments, leaf layers as
torch layers, ``forward`` from the traced graph.

Differences hidden here: a Gluon block registered under two names (or in two containers) is one
torch module referenced twice (its running statistics stay one); a Gluon layer that runs extra
steps inside itself (``Dense(activation='relu')``) is one torch module (a small subclass), so
``nn.Sequential`` indices stay Gluon's; a child name Python cannot write as an attribute is
registered with ``add_module`` under its Gluon name. The source is built and loaded once before it
is returned: code that cannot load its own weights is never written.
"""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Tuple

from .class_writer import ClassWriter
from .errors import TranslationError
from .forward import ForwardWriter
from .leaves import builtin_leaf, fused_helper, is_gluon_builtin, weight_drop_note
from .module_tree import CONCURRENT_HELPER, Alias, Instance, LeafInfo, MapEntry, access, part_key, torch_names
from .registry import Call, Leaf, block_translation
from .render import Ref, join_path
from .safe import literal
from .symbol_nested import is_symbol_block, map_nested, nested_leaf   # a SymbolBlock child
from .graph import T, flatten_struct
from .trace import is_hybrid, trace_block

__all__ = ["Generator", "MapEntry"]

_SEQUENTIAL = ("HybridSequential", "Sequential")
_CONCURRENT = ("HybridConcurrent", "Concurrent")


class Generator(ClassWriter):
    """Build the source for one Gluon block tree (see the module docstring)."""

    def __init__(self, root: Any, records: Dict[int, list], name: str, batchnorm: str = "torch",
                 train: bool = True):
        if batchnorm not in ("torch", "gluon"):
            raise ValueError(f"translate: batchnorm must be 'torch' or 'gluon', got {batchnorm!r}")
        self.root, self.records, self.name = root, records, name
        self.train = train           # False: blocks that branch on the mode get their inference forward only
        self.batchnorm = batchnorm   # "torch" or "gluon" (biased running variance)
        self.entries: List[MapEntry] = []
        self.same_output: Dict[str, str] = {}
        self.untraced: List[Dict[str, str]] = []
        self.notes: List[str] = []
        self.helpers: "OrderedDict[str, str]" = OrderedDict()
        self.instances: Dict[int, Instance] = {}
        self.by_class: "OrderedDict[type, List[Instance]]" = OrderedDict()
        self.variants: Dict[int, Tuple[str, List[Any], List[str]]] = {}
        self.class_src: "OrderedDict[str, str]" = OrderedDict()
        self.leaves: Dict[int, Leaf] = {}
        self.refs: Dict[int, List["Ref"]] = {}
        self.ops: set = set()        # every MXNet op the traced graphs use
        self.parts: Dict[str, tuple] = {"": ()}    # torch module path -> access parts from the root
        self.first: Dict[int, Tuple[str, str]] = {}   # id(block) -> (torch path, Gluon path) first met
        self.root_aliases: List[Tuple[tuple, tuple, str]] = []
        self.aliased: List[str] = []   # torch paths that are another module (not tied parameter by parameter)
        self.stack: List[Instance] = []

    # ---- classification ----
    def kind(self, block: Any) -> str:
        if block_translation(block) is not None or is_gluon_builtin(block):
            return "leaf"
        if is_symbol_block(block):   # nested SymbolBlock: the symbol path, as one leaf (symbol_nested.py)
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
            if not is_gluon_builtin(block):
                return None
            return builtin_leaf(block, LeafInfo("", [], [], 1, batchnorm=self.batchnorm))
        info = LeafInfo(path or "", [t.shape for t in flatten_struct(recs[0].args) if isinstance(t, T)] if recs else [],
                        [t.shape for t in flatten_struct(recs[0].out) if isinstance(t, T)] if recs else [],
                        (1 if recs[0].skip_states else len(recs[0].args)) if recs else 1,
                        recs[0].after_trainable if recs else True, self.batchnorm)
        if fn is not None:
            leaf = fn(block, info)
        elif is_symbol_block(block):   # nested SymbolBlock (symbol_nested.py)
            leaf = nested_leaf(self, block, info)
        elif is_gluon_builtin(block):
            leaf = builtin_leaf(block, info)
        else:
            return None
        if path is not None:
            note = weight_drop_note(block, path)
            if note:
                leaf.ctor.comment = (leaf.ctor.comment + "; " if leaf.ctor.comment else "") + note
                self.notes.append(f"{path}: {note}")
            self.leaves[id(block)] = leaf
            for h in leaf.helpers:      # source of a user's torch layer class, written once
                self.helpers.setdefault(h, h)
        return leaf

    # ---- paths ----
    def _enter(self, block, path: str, tpath: str, parts: tuple) -> Optional[Tuple[str, str]]:
        """Record where ``block`` sits; the place it was first met if it was met before."""
        self.parts[tpath] = parts
        first = self.first.get(id(block))
        if first is None:
            self.first[id(block)] = (tpath, path)
        return first

    def _alias_entries(self, first: Tuple[str, str], path: str, tpath: str) -> None:
        """The second name of one Gluon block: the same Gluon tensors under both torch keys."""
        ft, fg = first
        for e in [e for e in self.entries if e.torch_key.startswith(ft + ".")]:
            rest = e.torch_key[len(ft) + 1:]
            g = e.gluon_key
            if g is not None and (fg == "" or g.startswith(fg + ".")):
                g = join_path(path, g[len(fg) + 1:] if fg else g)
            self.entries.append(MapEntry(join_path(tpath, rest), g, e.param, e.value, path, tied_to=e.torch_key))
        self.aliased.append(tpath)

    def _alias(self, block, first, path: str, tpath: str) -> bool:
        """Make the torch module at ``tpath`` the one at ``first`` (same Gluon block): True if done."""
        if first is None:
            return False
        self._alias_entries(first, path, tpath)
        inst = self.stack[-1] if self.stack else None
        ft = first[0]
        target, source = self.parts[tpath], self.parts[ft]
        if inst is not None and (inst.tpath == "" or ft.startswith(inst.tpath + ".")) and ft != inst.tpath:
            n = len(self.parts[inst.tpath])
            inst.aliases.append((target[n:], source[n:], _rel(first[1], inst.path)))
        else:
            self.root_aliases.append((target, source, first[1]))
        return True

    # ---- constructors ----
    def ctor(self, block: Any, path: str, tpath: str, parts: tuple = None) -> Call:
        parts = self.parts.get(tpath, ()) if parts is None else parts
        first = self._enter(block, path, tpath, parts)
        kind = self.kind(block)
        if kind == "leaf":
            leaf = self.leaf(block, path)
            if not self._alias(block, first, path, tpath):
                self._map_leaf(block, leaf, path, tpath)
            self.same_output.setdefault(path, tpath)
            if leaf.pre or leaf.post:
                return self._fused(block, leaf, path)
            return leaf.ctor
        aliased = self._alias(block, first, path, tpath)
        if kind == "sequential" and id(block) not in self.records and any(
                id(c) in self.records for c in block._children.values()):
            # its layers are called one by one from the parent's forward: an nn.ModuleList
            elements = []
            for i, (cpath, ctp, cparts, child) in enumerate(self._positional(block, path, tpath, parts)):
                if self.kind(child) == "leaf":
                    cfirst = self._enter(child, cpath, ctp, cparts)
                    leaf = self.leaf(child, cpath)
                    if not aliased and not self._alias(child, cfirst, cpath, ctp):
                        self._map_leaf(child, leaf, cpath, ctp)
                    if leaf.same_output:
                        self.same_output.setdefault(cpath, ctp)
                    elements.append(leaf.ctor)
                else:
                    elements.append(self._sub(child, cpath, ctp, cparts, aliased))
            return Call("nn.ModuleList", [Call("", elements)])
        if kind == "sequential":
            elements = [self._sub(child, cpath, ctp, cparts, aliased)
                        for cpath, ctp, cparts, child in self._positional(block, path, tpath, parts)]
            self.same_output.setdefault(path, tpath)
            return Call("nn.Sequential", elements)
        if kind == "concurrent":
            self.helpers["Concurrent"] = CONCURRENT_HELPER
            elements = [self._sub(child, cpath, ctp, cparts, aliased)
                        for cpath, ctp, cparts, child in self._positional(block, path, tpath, parts)]
            self.same_output.setdefault(path, tpath)
            return Call("Concurrent", elements, [("dim", int(block.axis))])
        return self.traced_ctor(block, path, tpath)

    def _sub(self, child, cpath, ctp, cparts, aliased: bool) -> Call:
        """A child inside a container; under an aliased container its entries exist already."""
        if not aliased:
            return self.ctor(child, cpath, ctp, cparts)
        n = len(self.entries)
        call = self.ctor(child, cpath, ctp, cparts)
        del self.entries[n:]
        return call

    def _positional(self, block, path, tpath, parts):
        """(Gluon path, torch path, parts, child) of a container's children, in order. Torch keys
        are the positions; Gluon's are the same ("0", "1", ...) unless a child was registered under
        its own name (then the torch key differs and the mapping says so)."""
        for i, (name, child) in enumerate(block._children.items()):
            yield join_path(path, name), join_path(tpath, str(i)), parts + (("i", i),), child

    def _fused(self, block, leaf: Leaf, path: str) -> Call:
        """A layer with steps Gluon runs inside it (flatten, fused activation, id cast) as one torch
        module: a small subclass of the torch layer, so container indices stay Gluon's."""
        if leaf.call != "{m}({args})":
            raise TranslationError("this layer cannot sit in a container as is (its call is "
                                   f"{leaf.call!r}); wrap it in a block of your own", block=type(block).__name__,
                                   path=path)
        name, src = fused_helper(leaf, type(block).__name__)
        taken = self.helpers.get(name)
        while taken is not None and taken != src:
            name += "_"
            src = re.sub(r"^class \w+\(", f"class {name}(", src)
            taken = self.helpers.get(name)
        self.helpers[name] = src
        return Call(name, list(leaf.ctor.args), list(leaf.ctor.kwargs), list(leaf.ctor.names), leaf.ctor.comment)

    def _map_leaf(self, block, leaf: Leaf, path: str, tpath: str) -> None:
        if getattr(leaf, "nested", None) is not None:   # nested SymbolBlock (symbol_nested.py)
            return map_nested(self, block, leaf, path, tpath)
        for gname, tname in leaf.params.items():
            p = block._reg_params.get(gname)
            if p is None:
                continue
            self.entries.append(MapEntry(join_path(tpath, tname), join_path(path, gname), param=p, gluon_path=path))
        for bname, value in leaf.buffers.items():
            self.entries.append(MapEntry(join_path(tpath, bname), None, value=value, gluon_path=path))

    def traced_ctor(self, block: Any, path: str, tpath: str) -> Call:
        if id(block) not in self.instances:   # met again: its module is aliased (see _alias)
            self._build_instance(block, path, tpath)
        ref = Ref(type(block).__name__)
        ref.block = block
        self.refs.setdefault(id(block), []).append(ref)
        return ref

    def _build_instance(self, block, path, tpath) -> Instance:
        inst = Instance(block, path, tpath)
        self.instances[id(block)] = inst
        self.by_class.setdefault(type(block), []).append(inst)
        self.stack.append(inst)
        try:
            self._build_members(inst, block, path, tpath)
        finally:
            self.stack.pop()
        return inst

    def _build_members(self, inst: Instance, block, path, tpath) -> None:
        base = self.parts.get(tpath, ())
        inst.names = torch_names(list(block._children) + list(block._reg_params))
        for name, child in block._children.items():
            part = inst.names[name]
            cpath, ctp, cparts = join_path(path, name), join_path(tpath, part_key(part)), base + (part,)
            first = self.first.get(id(child))
            if first is not None and first[0].startswith(tpath + "." if tpath else ""):
                # the same Gluon block under a second name of this block: one torch module
                self.parts[ctp] = cparts
                self._alias_entries(first, cpath, ctp)
                inst.init.append((part, Alias(self.parts[first[0]][len(base):], _rel(first[1], path))))
                continue
            if self.kind(child) == "leaf":   # extra steps go into forward, not into the module
                first = self._enter(child, cpath, ctp, cparts)
                leaf = self.leaf(child, cpath)
                if not self._alias(child, first, cpath, ctp):
                    self._map_leaf(child, leaf, cpath, ctp)
                if leaf.same_output:
                    self.same_output.setdefault(cpath, ctp)
                inst.init.append((part, leaf.ctor))
            else:
                inst.init.append((part, self.ctor(child, cpath, ctp, cparts)))
        for local, p in block._reg_params.items():
            part = inst.names[local]
            inst.own.append((part, tuple(int(s) for s in p.shape), p.grad_req != "null"))
            self.entries.append(MapEntry(join_path(tpath, part_key(part)), join_path(path, local), param=p, gluon_path=path))
        if id(block) not in self.records:
            # never called on the sample input (gluonnlp's attention cells call its methods instead):
            # nothing of the model's computation is missing, its forward says so if ever called
            inst.signature = ["*args"]
            inst.forward = [f"raise NotImplementedError({literal(_never_ran_msg(block, path))})"]
            self.notes.append(f"{path or '(top)'}: {type(block).__name__} never ran on the sample input; its "
                              f"forward is not translated (its parameters are)")
        else:
            try:
                graph = _trace(block, path, self.records, inference_only=not self.train)
                self.notes += [f"{path or '(top)'}: {n}" for n in getattr(graph, "notes", [])]
                self._consts(inst, block, path, tpath, graph)
                inst.signature, inst.forward = ForwardWriter(self, block, path, graph).write()
                if getattr(graph, "train", None) is not None:
                    inst.forward = self._two_modes(block, path, graph, inst.signature, inst.forward)
                elif getattr(graph, "inference_only", False):
                    inst.forward = _inference_guard(block, path) + inst.forward
                    self.notes.append(f"{path or '(top)'}: {type(block).__name__} branches on autograd.is_training(); "
                                      f"translated for inference only (train=False): its training mode raises")
                self.same_output.setdefault(path, tpath)
            except TranslationError as e:
                if is_hybrid(block):
                    raise
                inst.untraced = str(e)
        if inst.untraced:
            recs = self.records.get(id(block))
            inst.signature = [f"x{i}" for i in range(len(recs[0].args))] if recs else ["*args"]
            inst.forward = [f"raise NotImplementedError({literal(_untraced_msg(block, path, inst.untraced))})"]
            self.untraced.append({"path": path, "block": type(block).__name__, "reason": inst.untraced})

    def _two_modes(self, block, path, graph, signature, eval_lines) -> List[str]:
        """A forward that branches on ``autograd.is_training()``: ``if self.training:`` the
        training graph's statements, then the inference ones."""
        train = graph.train
        if len(flatten_struct(train.out_struct)) != train.n_outputs:
            raise TranslationError(f"forward returns {train.n_outputs} tensors in training and "
                                   f"{len(flatten_struct(train.out_struct))} in inference (it branches on "
                                   f"autograd.is_training()); register a translation for this block",
                                   block=type(block).__name__, path=path)
        sig_t, train_lines = ForwardWriter(self, block, path, train).write()
        if sig_t != signature:
            raise TranslationError("forward takes other arguments in training than in inference",
                                   block=type(block).__name__, path=path)
        return (["if self.training:  # Gluon's forward branches on autograd.is_training()"] +
                [f"    {ln}" for ln in train_lines] + eval_lines)

    def _consts(self, inst: Instance, block, path, tpath, graph) -> None:
        """Arrays the block holds as plain attributes and uses in forward (d2l PositionalEncoding.P):
        torch buffers, their values saved with the weights."""
        import numpy as np
        for _, (attr, value) in sorted(getattr(graph, "consts", {}).items(), key=lambda kv: kv[1][0]):
            if any(c[0][1] == attr or c[0] == inst.names.get(attr) for c in inst.consts):
                continue
            taken = {p[1] for p in inst.names.values()}
            part = inst.names.get(attr)
            if part is None:
                part = torch_names([attr]).get(attr)
                while part[1] in taken:
                    part = (part[0], part[1] + "_")
                inst.names[attr] = part
            value = np.asarray(value)
            dtype = {"f": "float32" if value.dtype.itemsize <= 4 else "float64",
                     "i": "int64", "u": "int64", "b": "bool"}.get(value.dtype.kind, "float32")
            inst.consts.append((part, tuple(int(d) for d in value.shape), dtype))
            self.entries.append(MapEntry(join_path(tpath, part_key(part)), None, value=value, gluon_path=path, gluon_attr=attr))

    def const_access(self, block: Any, attr: str) -> str:
        return access([self.instances[id(block)].names[attr]])

    # ---- what forward.py asks ----
    def child_access(self, block: Any, child: str) -> Tuple[Any, str]:
        """(child block, its source) for a traced call site of ``block``: a direct child under any
        name (dots included), or ``"seq.i"`` / ``"seq.i.j"``, a layer of containers the block
        indexes instead of calling (gluonnlp AWDRNN ``self.encoder[i]``, gluoncv HRNet
        ``self.fuse_layers[i][j]``): ``self.seq[k]...``, ``k`` the position in the container."""
        inst = self.instances[id(block)]
        children = block._children
        if child in children:
            return children[child], access([inst.names[child]])
        for i, ch in enumerate(child):
            if ch != "." or child[:i] not in children:
                continue
            node, parts = children[child[:i]], [inst.names[child[:i]]]
            for key in child[i + 1:].split("."):
                if key not in node._children:
                    break
                parts.append(("i", list(node._children).index(key)))
                node = node._children[key]
            else:
                return node, access(parts)
        raise KeyError(child)

    def param_access(self, block: Any, local: str) -> str:
        return access([self.instances[id(block)].names[local]])

    def _build_instance_root(self):
        if id(self.root) not in self.instances:
            self.first[id(self.root)] = ("", "")
            self._build_instance(self.root, "", "")


def _rel(gluon_path: str, base: str) -> str:
    """A Gluon path relative to the block at ``base`` (class sources are shared by instances)."""
    return gluon_path[len(base) + 1:] if base and gluon_path.startswith(base + ".") else gluon_path


def _trace(block, path, records, inference_only=False):
    """trace_block, with the training-mode graph where the forward branches on the mode (only the
    inference graph with ``inference_only``)."""
    import inspect
    if "both_modes" in inspect.signature(trace_block).parameters:
        return trace_block(block, path, records, both_modes=True, inference_only=inference_only)
    return trace_block(block, path, records)


def _inference_guard(block, path) -> List[str]:
    msg = (f"{type(block).__name__} ({path or 'the top block'}) was translated for inference "
           f"(translate(..., train=False)): its Gluon forward computes something else in training "
           f"(autograd.is_training()), which was not translated; call .eval() before calling it")
    return ["if self.training:", f"    raise NotImplementedError({literal(msg)})"]


def _never_ran_msg(block, path):
    return (f"Gluon {type(block).__name__} at {path or 'the top'!r} was never called on the sample input; its "
            f"forward was not translated")


def _untraced_msg(block, path, reason):
    return (f"Gluon {type(block).__name__} at {path or 'the top'!r} was not translated: {reason}. "
            f"Write its forward by hand; its children are translated.")
