"""A readable module tree for an exported symbol, which has no Python classes left: only node
names. Gluon names a node ``<model prefix><block prefixes><layer>_fwd`` (``resnetv10_stage1_conv0_fwd``),
so the common model prefix is dropped, the ``_fwd`` suffix too, and the remaining name parts are
nested scopes (``stage1`` holding ``conv0``). A scope becomes a module only if it is a
self-contained part of the graph (nothing leaves it and comes back); otherwise its nodes go to its
parent. Inside a scope, the runs between points where a single value is alive (the residual blocks
of a stage, whose Gluon prefix is empty) become blocks of their own, so that repeated structures
become one class."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple, Union

from .symbol_graph import SymGraph, Value
from .errors import TranslationError
from .symbol_rnn import absorb_rnn_inputs

__all__ = ["Scope", "build_tree", "node_tokens", "common_prefix", "MODULE_OPS"]

#: ops that become a torch layer (an attribute of the module), not an expression in forward
MODULE_OPS = frozenset({"Convolution", "Deconvolution", "FullyConnected", "BatchNorm", "Pooling", "Embedding",
                        "Dropout", "PReLU", "RNN"})

_SUFFIXES = ("fwd", "output", "out")


@dataclass
class Scope:
    token: str                                   # name in the parent ("" for the top)
    kind: str = "named"                          # named | block (found from the graph) | root
    items: List[Union[int, "Scope"]] = field(default_factory=list)
    parent: Optional["Scope"] = None
    attrs: Dict[int, str] = field(default_factory=dict)   # renamed layer tokens inside a found block

    def nodes(self) -> List[int]:
        out = []
        for it in self.items:
            out.extend(it.nodes() if isinstance(it, Scope) else [it])
        return out

    def children(self) -> List["Scope"]:
        return [it for it in self.items if isinstance(it, Scope)]


def common_prefix(names: List[str]) -> str:
    if len(names) < 2:
        return ""
    a, b = min(names), max(names)
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    p = a[:i]
    return p[:p.rfind("_") + 1] if "_" in p else ""


def node_tokens(name: str, prefix: str) -> List[str]:
    """``resnetv10_stage1_conv0_fwd`` -> ``["stage1", "conv0"]`` (prefix ``resnetv10_``)."""
    s = name[len(prefix):] if prefix and name.startswith(prefix) else name
    toks = [t for t in s.split("_") if t]
    while len(toks) > 1 and toks[-1] in _SUFFIXES:
        toks.pop()
    return toks or ["node"]


def is_layer(g: SymGraph, nid: int) -> bool:
    n = g.nodes[nid]
    if n.op == "LeakyReLU":
        return n.attrs.get("act_type") == "prelu"
    return n.op in MODULE_OPS


def build_tree(g: SymGraph) -> Scope:
    """The scope tree, each scope's items in an order that computes every value before its use."""
    absorb_rnn_inputs(g)
    ops = g.order
    prefix = common_prefix([g.nodes[i].name for i in ops])
    root = Scope("", "root")
    paths = _place_orphans(g, ops, {nid: node_tokens(g.nodes[nid].name, prefix) for nid in ops}, prefix)
    for nid in ops:
        toks = paths[nid]
        s = root
        for t in toks[:-1]:
            child = next((c for c in s.items if isinstance(c, Scope) and c.token == t), None)
            if child is None:
                child = Scope(t, parent=s)
                s.items.append(child)
            s = child
        s.items.append(nid)
    _collapse_small(g, root)
    consumers = g.consumers()
    _make_convex(g, root, consumers)
    _order(g, root)
    _find_blocks(g, root, consumers)
    return root


def _dissolve(s: Scope) -> None:
    p = s.parent
    i = p.items.index(s)
    for it in s.items:
        if isinstance(it, Scope):
            it.parent = p
    p.items[i:i + 1] = s.items


def _place_orphans(g: SymGraph, ops: List[int], paths: Dict[int, List[str]], prefix: str) -> Dict[int, List[str]]:
    """An op MXNet named itself (``_plus0``, written as ``a + b`` in symbol code: no scope in its
    name) goes into the deepest scope holding everything it adds up (insightface's residual
    ``_plus`` joins its unit)."""
    for nid in ops:
        n = g.nodes[nid]
        if len(paths[nid]) != 1 or is_layer(g, nid) or (prefix and n.name.startswith(prefix)) or not n.inputs:
            continue
        srcs = [s for s, _ in n.inputs if g.nodes[s].op != "null" or g.nodes[s].kind == "input"]
        if not srcs or any(g.nodes[s].op == "null" or s in g.absorbed for s in srcs):
            continue
        common = paths[srcs[0]][:-1]
        for s in srcs[1:]:
            other = paths[s][:-1]
            k = 0
            while k < min(len(common), len(other)) and common[k] == other[k]:
                k += 1
            common = common[:k]
        if common:
            paths[nid] = common + paths[nid]
    return paths


def _collapse_small(g: SymGraph, s: Scope) -> None:
    """A scope holding a single node (Gluon's ``relu60_relu6``) is not worth a module; its layer
    keeps the scope's name in its own (``pre_fc1``)."""
    for c in s.children():
        _collapse_small(g, c)
    if s.kind != "root" and len(s.items) == 1 and not isinstance(s.items[0], Scope):
        nid = s.items[0]
        prefix = common_prefix([g.nodes[i].name for i in g.order])
        g.layer_names[nid] = f"{s.token}_{g.layer_names.get(nid) or node_tokens(g.nodes[nid].name, prefix)[-1]}"
        _dissolve(s)


def _make_convex(g: SymGraph, s: Scope, consumers) -> None:
    for c in list(s.children()):
        inside = set(c.nodes())
        if not _convex(inside, consumers):
            _dissolve(c)
            _make_convex(g, s, consumers)
            return
        _make_convex(g, c, consumers)


def _convex(inside: Set[int], consumers) -> bool:
    """No path leaves the node set and comes back into it."""
    frontier = [d for n in inside for d in consumers[n] if d not in inside]
    seen: Set[int] = set()
    while frontier:
        n = frontier.pop()
        if n in seen:
            continue
        seen.add(n)
        for d in consumers[n]:
            if d in inside:
                return False
            if d not in seen:
                frontier.append(d)
    return True


def _order(g: SymGraph, s: Scope) -> None:
    """Topological order of the items (a child scope counts as one item), ties by file order."""
    owner: Dict[int, int] = {}
    for i, it in enumerate(s.items):
        for n in (it.nodes() if isinstance(it, Scope) else [it]):
            owner[n] = i
    deps: Dict[int, Set[int]] = {i: set() for i in range(len(s.items))}
    for n, i in owner.items():
        for src, _ in g.nodes[n].inputs:
            j = owner.get(src)
            if j is not None and j != i:
                deps[i].add(j)
    first = {i: min(it.nodes()) if isinstance(it, Scope) else it for i, it in enumerate(s.items)}
    # Kahn's algorithm, the ready item first in the file first: O(n log n) (a scan of every item
    # left per step made a 10^5-node graph hang)
    users: Dict[int, List[int]] = {i: [] for i in deps}
    waiting = {i: len(d) for i, d in deps.items()}
    for i, d in deps.items():
        for j in d:
            users[j].append(i)
    ready = [(first[i], i) for i, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    done: List[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        done.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (first[u], u))
    if len(done) != len(deps):
        raise TranslationError("the symbol graph has a cycle among its parts; it is not a graph MXNet exports",
                               block="symbol")
    s.items = [s.items[i] for i in done]
    for c in s.children():
        _order(g, c)


def item_values(g: SymGraph, it) -> Tuple[List[Value], List[Value]]:
    """(values it consumes from outside, values it produces), data values only (no weights)."""
    nodes = it.nodes() if isinstance(it, Scope) else [it]
    inside = set(nodes)
    used: List[Value] = []
    made: List[Value] = []
    for n in nodes:
        for v in g.nodes[n].inputs:
            src = g.nodes[v[0]]
            if v[0] not in inside and v[0] not in g.absorbed and (src.op != "null" or src.kind == "input") \
                    and v not in used:
                used.append(v)
        k = 0
        while (n, k) in g.shapes:
            made.append((n, k))
            k += 1
        if k == 0:
            made.append((n, 0))
    return used, made


def _find_blocks(g: SymGraph, s: Scope, consumers) -> None:
    """Cut the scope's items where a single value is alive; a run of several items that starts
    from a single value becomes a block (the residual blocks of a ResNet stage)."""
    for c in s.children():
        _find_blocks(g, c, consumers)
    if len(s.items) < 3:
        return
    info = [item_values(g, it) for it in s.items]
    pos_of: Dict[int, int] = {}
    for i, it in enumerate(s.items):
        for n in (it.nodes() if isinstance(it, Scope) else [it]):
            pos_of[n] = i
    inside = set(pos_of)
    heads = set(g.heads)
    last_use: Dict[Value, int] = {}
    escapes: Set[Value] = set()
    for i, (used, _) in enumerate(info):
        for v in used:
            last_use[v] = max(last_use.get(v, -1), i)
    for i, (_, made) in enumerate(info):
        for v in made:
            if v in heads or any(d not in inside for d in consumers[v[0]]):
                escapes.add(v)
    ext_in = [v for used, _ in info for v in used if v[0] not in inside]
    live = set(ext_in)
    cuts = [-1]
    for i, (used, made) in enumerate(info):
        live |= set(made)
        live = {v for v in live if v in escapes or last_use.get(v, -1) > i}
        if len(live) == 1 and i < len(info) - 1:
            cuts.append(i)
    cuts.append(len(info) - 1)
    segments = [(a + 1, b) for a, b in zip(cuts, cuts[1:]) if b >= a + 1]
    if len(segments) < 2:
        return
    new_items: List[Union[int, Scope]] = []
    taken = {c.token for c in s.children()}
    k = 0
    for a, b in segments:
        seg = s.items[a:b + 1]
        prev = new_items[-1] if new_items else None
        if a == b and isinstance(prev, Scope) and prev.kind == "block" and not isinstance(seg[0], Scope) \
                and not is_layer(g, seg[0]):
            prev.items.append(seg[0])      # the activation after a residual add belongs to its block
            continue
        ins = {v for used, _ in info[a:b + 1] for v in used if not a <= pos_of.get(v[0], -1) <= b}
        if b > a and isinstance(seg[0], Scope) and seg[0].kind == "named" and \
                not any(isinstance(it, Scope) or is_layer(g, it) for it in seg[1:]):
            seg[0].items.extend(seg[1:])    # a unit and the add that closes it (insightface's _plus)
            new_items.append(seg[0])
            continue
        if b > a and len(ins) == 1:
            while f"block{k}" in taken:
                k += 1
            blk = Scope(f"block{k}", "block", list(seg), parent=s)
            taken.add(blk.token)
            k += 1
            for it in seg:
                if isinstance(it, Scope):
                    it.parent = blk
            new_items.append(blk)
        else:
            new_items.extend(seg)
    s.items = new_items
