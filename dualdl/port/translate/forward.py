"""The body of a generated ``forward``: walk a traced ``Graph`` (MXNet symbol nodes and the
recorded child calls) and write one torch statement per op or child call, naming intermediate
values, unpacking multi-output ops and packing the outputs as the Gluon block returned them.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .safe import comment as safe_comment
from .errors import TranslationError
from .gate import Attrs
from .ops import Expr, NeedsName, OpNode, bind_device, translate_op
from .render import ident
from .graph import Graph, flatten_struct, nested_var_name, walk

__all__ = ["ForwardWriter"]


class ForwardWriter:
    """Turn a traced ``Graph`` into the statements of ``forward``."""

    def __init__(self, gen: Any, block: Any, path: str, graph: Graph):
        self.gen, self.block, self.path, self.g = gen, block, path, graph
        self.cls = type(block).__name__
        self.lines: List[str] = []
        self.values: Dict[Tuple[int, int], Expr] = {}
        self.used_names = set(graph.in_names) | {"self", "torch", "nn", "F"}
        self.comments_seen: set = set()
        self.emitting: set = set()

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
                self.values[(nid, 0)] = Expr(self.gen.param_access(self.block, g.params[name]))
            elif name in getattr(g, "consts", {}):    # an array the block holds as a plain attribute
                self.values[(nid, 0)] = Expr(self.gen.const_access(self.block, g.consts[name][0]))
        # use counts
        self.uses: Dict[Tuple[int, int], int] = {}
        for n in nodes:
            for inp in n.get("inputs", []):
                self.uses[(inp[0], inp[1])] = self.uses.get((inp[0], inp[1]), 0) + 1
        for h in g.heads:
            self.uses[h] = self.uses.get(h, 0) + 1
        self.call_done: Dict[int, List[str]] = {}
        self.emitted: Dict[int, bool] = {}
        n_calls = sum(len([s for s in flatten_struct(c.args) if s is not None]) for c in g.calls)
        updates = getattr(g, "updates", [])
        n_heads = len(g.heads) - len(updates)
        # a multi-output symbol returned as is (``return F.split(x, 2)``) is one symbol, several heads
        self.n_out = n_heads - n_calls if n_heads - n_calls > g.n_outputs else g.n_outputs
        call_heads = g.heads[self.n_out:]
        pos = 0
        self.call_args: List[List[Tuple[int, int]]] = []
        for c in g.calls:
            k = len([s for s in flatten_struct(c.args) if s is not None])
            self.call_args.append(call_heads[pos:pos + k])
            pos += k
        for ci in range(len(g.calls)):
            self.emit_call(ci)
        outs = [self.expr(h) for h in g.heads[:self.n_out]]
        if updates:     # state the forward replaces: outputs first (they may read the old value), then the buffers
            news = [self.expr(ref) for _, ref in updates]
            outs = [o if o.text.isidentifier() else self._bind_new("out", o) for o in outs]
            news = [n if n.text.isidentifier() else self._bind_new("new", n) for n in news]
            for (attr, _), n in zip(updates, news):
                target = self.gen.const_access(self.block, attr)
                self.lines.append(f"{target} = {n.text}.detach()  # Gluon's forward replaces self.{attr}: "
                                  f"a buffer update, no gradient (none reaches it in MXNet)")
        self.lines.append(f"return {_pack(g.out_struct, [o.text for o in outs])}")
        self.lines = bind_device(self.lines, list(in_index.values()), self.new_name)
        # an argument Gluon received as None (an optional begin state) stays optional and unused
        last = max([i for i, v in enumerate(g.in_struct) if v is not None], default=-1)
        return [n if i <= last else f"{n}=None" for i, n in enumerate(g.in_names)], self.lines

    def _bind_new(self, base: str, e: Expr) -> Expr:
        var = self.new_name(base)
        self.lines.append(f"{var} = {e.text}")
        return Expr(var)

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
            owner = _descendant_param(self.block, name)
            if owner:
                raise TranslationError(f"its forward uses parameter {name!r} of {owner[1]} at {owner[0]!r} directly: "
                                       f"the descendant runs inside a method its forward calls (an RNN cell's "
                                       f"unroll(), a container's loop), not as a call of a direct child, so its "
                                       f"computation cannot be kept apart; register a translation for this block",
                                       block=self.cls, path=self.path)
            raise TranslationError(f"input {name!r} is neither an argument, a parameter of the block nor a "
                                   f"child's output (a constant created inside hybrid_forward?)",
                                   block=self.cls, path=self.path)
        args = [self.expr((i[0], i[1])) for i in n.get("inputs", [])]
        node = OpNode(n["op"], n["name"], Attrs(n.get("attrs", {}), n["op"], n["name"]),
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
        base = ident(base)
        name, k = base, 1
        from .render import defined_names
        taken = self.used_names | defined_names(self.gen.helpers.values()) | _HELPER_NAMES
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        self.used_names.add(name)
        return name

    def emit_call(self, ci: int) -> None:
        if ci in self.call_done:
            return
        if ci in self.emitting:
            raise TranslationError(f"the call of {self.g.calls[ci].child!r} depends on its own output (a traced "
                                   f"graph this writer cannot order)", block=self.cls, path=self.path)
        self.emitting.add(ci)
        c = self.g.calls[ci]
        child, attr = self.gen.child_access(self.block, c.child)
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
                names = [self.new_name(ident(c.child)), self.new_name(ident(c.child) + "_state")]
                self.lines.append(f"{names[0]}, {names[1]} = {text}" + _cmt(comment, self.comments_seen))
                self.call_done[ci] = names
                return
        else:
            text = f"{attr}({', '.join(args)})"
        names = [self.new_name(ident(c.child) if k == 0 else f"{ident(c.child)}_{k}") for k in range(len(flat_out))]
        target = _pack(c.out_struct, names, top=True)
        self.lines.append(f"{target} = {text}" + _cmt(comment, self.comments_seen))
        self.call_done[ci] = names


#: module-level functions ops.py helpers define (a local of the same name would shadow them)
_HELPER_NAMES = frozenset({"shared_dropout", "Concurrent", "SharedDropout"})


def _descendant_param(block: Any, name: str) -> Optional[Tuple[str, str]]:
    """(relative path, class) of the descendant block that owns the Gluon parameter ``name``."""
    for path, b in walk(block):
        if path and any(p.name == name for p in b._reg_params.values()):
            return path, type(b).__name__
    return None


def _cmt(comment: str, seen: set) -> str:
    if not comment or comment in seen:
        return ""
    seen.add(comment)
    return f"  # {safe_comment(comment)}"


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
    attrs = Attrs(n.get("attrs", {}), op, n.get("name", ""))
    from . import ops
    if hasattr(ops, "n_outputs"):    # ops.py knows every multi-output op it translates
        return int(ops.n_outputs(op, attrs))
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
