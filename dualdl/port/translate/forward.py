"""The body of a generated ``forward``, for both readers: walk a ``Graph`` (MXNet symbol nodes and
the child calls, from a trace or from an exported symbol's scope) and write one torch statement per
op or child call, naming intermediate values, unpacking multi-output ops and packing the outputs as
the block returned them. A traced graph is written from its calls (ops where their value is
needed, each value its own name); a graph that carries its statement order (``Graph.order``) is
written in that order, a value used once by the op right after it inlined there and a name reused
once its values are dead.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from .safe import comment as safe_comment
from .errors import TranslationError
from .gate import Attrs
from .ops import Expr, NeedsName, OpNode, bind_device, n_outputs, translate_op
from .render import FILE_NAMES, defined_names, ident
from .graph import Graph, flatten_struct, nested_var_name, shape_count, walk

__all__ = ["ForwardWriter"]


class ForwardWriter:
    """Turn a ``Graph`` of either reader into the statements of ``forward``. ``gen`` is the module
    tree's builder (``codegen.Generator`` or ``symbol_emit.SymbolEmitter``): the source of a
    parameter, buffer or child of ``block`` (``param_access``, ``const_access``, ``child_access``),
    each child's layer spec (``leaves``), and where the ops and helpers used go (``ops``, ``helpers``)."""

    def __init__(self, gen: Any, block: Any, path: str, graph: Graph, *, keep_inputs: bool = True,
                 node_block: Optional[str] = None):
        self.gen, self.block, self.path, self.g = gen, block, path, graph
        self.cls = type(block).__name__
        self.keep_inputs = keep_inputs     # ordered graphs: argument names are never reused
        self.node_block = node_block       # what an op's error names as its block (else the class)
        self.lines: List[str] = []
        self.values: Dict[Tuple[int, int], Expr] = {}
        self.used_names = set(graph.in_names) | FILE_NAMES
        self.comments_seen: set = set()
        self.emitting: set = set()

    def write(self) -> Tuple[List[str], List[str]]:
        """(the forward's argument names, its statements)."""
        g = self.g
        nodes = g.nodes
        self.gen.ops.update(n["op"] for n in nodes if n["op"] != "null")
        if g.order is not None:
            return OrderedBody(self).write()
        # where each var node comes from
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
        node = self.op_node(ref)
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
        self.add_helpers(e)
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

    def op_node(self, ref: Tuple[int, int]) -> OpNode:
        """The registry's view of op node ``ref[0]``: attributes, input and output shapes, where it is."""
        n = self.node_of(ref)
        attrs = n.get("attrs", {})
        attrs = attrs if isinstance(attrs, Attrs) else Attrs(attrs, n["op"], n["name"])
        where = (self.node_block, n["name"]) if self.node_block else (self.cls, self.path)
        return OpNode(n["op"], n["name"], attrs, [self.g.shapes.get((i[0], i[1])) for i in n.get("inputs", [])],
                      [self.g.shapes.get((ref[0], k)) for k in range(4)], *where)

    def add_helpers(self, e: Expr) -> None:
        for h in e.helpers:
            self.gen.helpers.setdefault(h, h)

    def new_name(self, base: str) -> str:
        base = ident(base)
        name, k = base, 1
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
            text, comment = self.call_text(leaf, attr, args, zero_states)
            if getattr(leaf, "states_out", None) in ("gru", "rnn_relu", "rnn_tanh") and len(flat_out) == 2:
                names = [self.new_name(ident(c.child)), self.new_name(ident(c.child) + "_state")]
                self.lines.append(f"{names[0]}, {names[1]} = {text}" + _cmt(comment, self.comments_seen))
                self.call_done[ci] = names
                return
        else:
            text = f"{attr}({', '.join(args)})"
        names = [self.new_name(ident(c.child) if k == 0 else f"{ident(c.child)}_{k}") for k in range(len(flat_out))]
        target = _pack(c.out_struct, names)
        self.lines.append(f"{target} = {text}" + _cmt(comment, self.comments_seen))
        self.call_done[ci] = names

    def call_text(self, leaf: Any, attr: str, args: List[str], zero_states: bool = False) -> Tuple[str, str]:
        """(the call of a layer leaf on ``args``, its comment): the steps Gluon runs inside the layer
        around the torch layer's call (``leaf.pre``/``post``, ``leaf.call``'s ``{m}``/``{x}``/``{args}``)."""
        comment = ""
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
        return text, comment


class OrderedBody:
    """The statements of a graph that carries its order (``Graph.order``, an exported symbol's
    scope): one statement per layer or child call, an op used once by the op right after it inlined
    into that op, variables (``x``, ``out``, ``y``, ``z``, ``h1``...) reused once their value is dead."""

    def __init__(self, w: ForwardWriter):
        self.w, self.g = w, w.g
        self.lines: List[str] = []
        self.var: Dict[Tuple[int, int], str] = {}
        self.pending: Dict[Tuple[int, int], Expr] = {}
        self.holders: Dict[str, Set[Tuple[int, int]]] = {}
        self.fixed: Set[str] = set()
        self.weight: Dict[int, Expr] = {}
        self.call_args: List[List[Tuple[int, int]]] = []

    def write(self) -> Tuple[List[str], List[str]]:
        g, w = self.g, self.w
        sig = list(g.in_names)
        if w.keep_inputs:
            self.fixed = set(sig)
        made_by_call: Dict[int, List[Tuple[int, int]]] = {}
        for nid, n in enumerate(g.nodes):
            if n["op"] != "null":
                continue
            name = n["name"]
            if name.startswith("__in"):
                self._bind((nid, 0), sig[int(name[4:])])
            elif name in g.params:
                self.weight[nid] = Expr(w.gen.param_access(w.block, g.params[name]))
            elif name.startswith("__call"):
                ci = int(name[6:].split("_")[0])
                made_by_call.setdefault(ci, []).append((nid, 0))
        pos = g.n_outputs
        for c in g.calls:
            k = len(flatten_struct(c.args))
            self.call_args.append(list(g.heads[pos:pos + k]))
            pos += k
        outputs = list(g.heads[:g.n_outputs])
        items = list(g.order)
        info = [(self._used(it), self._made(it, made_by_call)) for it in items]
        self.uses: Dict[Tuple[int, int], int] = {}
        for used, _ in info:
            for v in used:
                self.uses[v] = self.uses.get(v, 0) + 1
        for v in outputs:
            self.uses[v] = self.uses.get(v, 0) + 1
        for i, it in enumerate(items):
            used, made = info[i]
            expr, freed = self._item(it, used)
            made = [v for v in made if self.uses.get(v, 0) > 0]
            nxt = items[i + 1] if i + 1 < len(items) else None
            single = len(made) == 1 and self._n_out(it) == 1
            if single and self.uses[made[0]] == 1 and nxt is not None and nxt[0] == "op" and \
                    made[0] in info[i + 1][0] and self._positions(nxt, made[0]) == 1 and made[0] not in outputs \
                    and expr.text.count("(") < 50:     # a long chain of ops: a variable, not 200 nested parentheses
                self.pending[made[0]] = expr
                continue
            if not made:
                continue
            name = next((n for n in freed if n not in self.fixed), None) or self._fresh()
            if it[0] == "call" and self._leaf(it[1]) is None and self._n_out(it) > 1:    # a child with outputs
                names = []
                for v in made_by_call[it[1]]:
                    if v in made:
                        nm = name if not names else self._fresh()
                        names.append(nm)
                        self._bind(v, nm)
                    else:
                        names.append("_")
                self.lines.append(f"{', '.join(names)} = {expr.text}")
            elif self._n_out(it) > 1:
                self.lines.append(f"{name} = {expr.text}")
                for v in made:
                    self._bind(v, f"{name}[{self._index(it, v, made_by_call)}]", holder=name)
            else:
                self.lines.append(f"{name} = {expr.text}")
                self._bind(made[0], name)
        outs = [self._take(v).text for v in outputs]
        last = self.lines[-1] if self.lines else ""
        if len(outs) == 1 and outs[0].isidentifier() and last.startswith(f"{outs[0]} = ") and \
                outs[0] not in self.fixed:
            self.lines[-1] = f"return {last[len(outs[0]) + 3:]}"     # x = f(x); return x -> return f(x)
        else:
            self.lines.append(f"return {', '.join(outs)}")
        return sig, bind_device(self.lines, sig, lambda base: base)

    # what an item uses and makes (data values only: weights are attributes)
    def _used(self, it) -> List[Tuple[int, int]]:
        refs = self.call_args[it[1]] if it[0] == "call" else \
            [(i[0], i[1]) for i in self.g.nodes[it[1]].get("inputs", []) if i[0] not in self.weight]
        return list(dict.fromkeys(refs))

    def _made(self, it, made_by_call) -> List[Tuple[int, int]]:
        if it[0] == "call":
            return list(made_by_call.get(it[1], []))
        return [(it[1], k) for k in range(self._n_out(it))]

    def _n_out(self, it) -> int:
        if it[0] == "call":
            return len(flatten_struct(self.g.calls[it[1]].out_struct))
        return shape_count(self.g.shapes, it[1])

    def _index(self, it, v, made_by_call) -> int:
        return made_by_call[it[1]].index(v) if it[0] == "call" else v[1]

    def _leaf(self, ci: int):
        child, _ = self.w.gen.child_access(self.w.block, self.g.calls[ci].child)
        return self.w.gen.leaves.get(id(child))

    def _positions(self, it, v) -> int:
        return sum(1 for i in self.g.nodes[it[1]].get("inputs", []) if (i[0], i[1]) == v)

    # names
    def _bind(self, v, text: str, holder: Optional[str] = None) -> None:
        self.var[v] = text
        self.holders.setdefault(holder or text, set()).add(v)

    def _fresh(self) -> str:
        busy = {h for h, vs in self.holders.items() if vs} | self.fixed | FILE_NAMES
        for c in ("x", "out", "y", "z"):
            if c not in busy:
                return c
        k = 1
        while f"h{k}" in busy:
            k += 1
        return f"h{k}"

    def _take(self, v) -> Expr:
        if v in self.pending:
            return self.pending.pop(v)
        if v[0] in self.weight:      # a weight returned as it is
            return self.weight[v[0]]
        return Expr(self.var[v])

    def _release(self, used) -> List[str]:
        """Count one use of each value; names whose every value is now dead, in argument order."""
        freed = []
        for v in used:
            self.uses[v] -= 1
            if self.uses[v] == 0 and v in self.var:
                holder = self.var[v].split("[")[0]
                vs = self.holders.get(holder, set())
                vs.discard(v)
                if not vs and holder not in freed:
                    freed.append(holder)
        return freed

    def _materialise(self, v) -> None:
        e = self.pending.pop(v)
        name = self._fresh()
        self.lines.append(f"{name} = {e.text}")
        self._bind(v, name)

    # one statement's expression
    def _item(self, it, used) -> Tuple[Expr, List[str]]:
        w, g = self.w, self.g
        if it[0] == "call":
            c = g.calls[it[1]]
            child, attr = w.gen.child_access(w.block, c.child)
            leaf = w.gen.leaves.get(id(child))
            args = [self._take(v).text for v in self.call_args[it[1]]]
            text = w.call_text(leaf, attr, args)[0] if leaf is not None else f"{attr}({', '.join(args)})"
            return Expr(text), self._release(used)
        n = g.nodes[it[1]]
        inputs = [(i[0], i[1]) for i in n.get("inputs", [])]
        for _ in range(3):
            args = [self.weight[v[0]] if v[0] in self.weight else self.pending.get(v) or Expr(self.var[v])
                    for v in inputs]
            try:
                expr = translate_op(w.op_node((it[1], 0)), args)
                break
            except NeedsName:
                pend = [v for v in inputs if v in self.pending]
                if pend:
                    for v in pend:
                        self._materialise(v)
                    continue
                for v in inputs:
                    if v in self.var and not self.var[v].isidentifier():
                        name = self._fresh()
                        self.lines.append(f"{name} = {self.var[v]}")
                        self._bind(v, name)
        else:
            raise TranslationError(f"MXNet op {n['op']!r} needs its inputs named", op=n["op"],
                                   block=w.node_block or w.cls, path=n["name"])
        for v in inputs:
            self.pending.pop(v, None)
        w.add_helpers(expr)
        return expr, self._release(used)


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


def _pack(struct, names: List[str]) -> str:
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
    return int(n_outputs(op, attrs))     # the op registry knows every multi-output op it translates


def _short(op: str) -> str:
    return {"elemwise_add": "add", "broadcast_add": "add", "_plus": "add", "Concat": "cat", "concat": "cat",
            "Activation": "act", "Reshape": "reshaped", "reshape": "reshaped", "SliceChannel": "parts",
            "split": "parts", "transpose": "permuted", "Flatten": "flat", "flatten": "flat"}.get(op, op.strip("_").lower())


def _path_suffix(s, j) -> str:
    return nested_var_name("", s, j)


def _index_suffix(s, j) -> str:
    return "".join(f"[{p}]" for p in _path_suffix(s, j).split("__") if p)
