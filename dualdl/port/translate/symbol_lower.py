"""An exported symbol's scope as the graph a traced Gluon block becomes (:class:`graph.Graph`): its
own op nodes as MXNet JSON nodes, every child scope and layer node as a call site, its inputs,
weights and child outputs as variables, and the order of its statements (``Graph.order``: the
symbol tree knows it, a trace does not). One forward writer (``forward.ForwardWriter``) writes
both readers' graphs."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

from .errors import TranslationError
from .graph import CallSite, Graph, T
from .symbol_graph import SymGraph, Value
from .symbol_tree import Scope, is_layer

__all__ = ["scope_graph"]


def scope_graph(g: SymGraph, scope: Scope, inputs: Sequence[Value], outputs: Sequence[Value], names: List[str],
                children: Dict[int, Tuple[List[Value], List[Value]]], attrs: Dict[Any, str],
                layer_outputs: Callable[[int], int], weight: Callable[[Any], str]) -> Graph:
    """The graph of one scope. ``names``: the forward's argument names (one per input value);
    ``children``: id(child scope) -> (its input values, its output values); ``attrs``: the
    attribute of each child scope (by id) and layer node (by node id); ``layer_outputs(node id)``:
    the outputs the torch layer returns; ``weight(variable node)``: the attribute of a weight an
    op uses (called in statement order, each op's inputs in order)."""
    nodes: List[dict] = []
    local: Dict[Value, Tuple[int, int]] = {}
    shapes: Dict[Tuple[int, int], Any] = {}
    params: Dict[str, str] = {}
    weights: Dict[int, Tuple[int, int]] = {}

    def var(name: str, v: Value) -> Tuple[int, int]:
        nodes.append({"op": "null", "name": name, "inputs": []})
        ref = (len(nodes) - 1, 0)
        shapes[ref] = g.shapes.get(v)
        return ref

    def weight_ref(v: Value) -> Tuple[int, int]:
        if v[0] not in weights:
            weights[v[0]] = var(f"__w{v[0]}", v)
            params[f"__w{v[0]}"] = weight(g.nodes[v[0]])
        return weights[v[0]]

    for i, v in enumerate(inputs):
        local[v] = var(f"__in{i}", v)
    calls: List[CallSite] = []
    call_heads: List[Tuple[int, int]] = []
    order: List[Tuple[str, int]] = []
    for it in scope.items:
        if isinstance(it, Scope) or is_layer(g, it):
            if isinstance(it, Scope):
                ins, outs = children[id(it)]
                key = id(it)
            else:
                ins, outs, key = [g.nodes[it].inputs[0]], [(it, k) for k in range(layer_outputs(it))], it
            ci = len(calls)
            call_heads += [local[v] for v in ins]
            out_names = []
            for j, v in enumerate(outs):
                local[v] = var(f"__call{ci}_{j}", v)
                out_names.append(f"__call{ci}_{j}")
            structs = tuple(T(tuple(g.shapes.get(v) or ())) for v in outs)
            calls.append(CallSite(attrs[key], tuple(T(tuple(g.shapes.get(v) or ())) for v in ins),
                                  tuple(out_names) if len(outs) > 1 else out_names[0],
                                  structs if len(outs) > 1 else structs[0]))
            order.append(("call", ci))
            continue
        node = g.nodes[it]
        refs = [weight_ref(v) if _is_weight(g, v) else local[v] for v in node.inputs]
        nodes.append({"op": node.op, "name": node.name, "attrs": node.attrs,
                      "inputs": [[r[0], r[1], 0] for r in refs]})
        nid, k = len(nodes) - 1, 0
        while (it, k) in g.shapes:
            local[(it, k)] = (nid, k)
            shapes[(nid, k)] = g.shapes[(it, k)]
            k += 1
        if k == 0:
            local[(it, 0)] = (nid, 0)
        order.append(("op", nid))
    heads = []
    for v in outputs:      # a weight returned as it is (the top scope's outputs are the symbol's heads)
        if v not in local and not _is_weight(g, v):
            raise TranslationError(f"the symbol's output {g.nodes[v[0]].name!r} is not a value the graph computes",
                                   block="symbol", path=g.nodes[v[0]].name)
        heads.append(weight_ref(v) if v not in local else local[v])
    out_t = tuple(T(tuple(g.shapes.get(v) or ())) for v in outputs)
    return Graph(nodes, heads + call_heads, len(outputs),
                 out_t if len(outputs) > 1 else out_t[0], list(names),
                 tuple(T(tuple(g.shapes.get(v) or ())) for v in inputs), calls, params, shapes, order=order)


def _is_weight(g: SymGraph, v: Value) -> bool:
    src = g.nodes[v[0]]
    return src.op == "null" and src.kind != "input"
