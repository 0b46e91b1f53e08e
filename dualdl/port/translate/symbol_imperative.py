"""MXNet's imperative execution of an exported graph: every node run as its ``mx.nd`` op on the
SymbolBlock's own parameters, as a Gluon block runs un-hybridized. It is the second reference of
the proof for exported models: MXNet 1.9.1's symbolic executor computes some gradients differently
from its own imperative ops (a per-channel PReLU's gamma gradient between two convolutions: 1/4
of the imperative value at 4 channels, with and without MKLDNN), and Gluon models are verified
un-hybridized too. Only used when the SymbolBlock proof fails; the report says so."""
from __future__ import annotations

from typing import Any, Dict, List

from .symbol_graph import BlockDelegate, SymGraph

__all__ = ["ImperativeGraph"]


class ImperativeGraph(BlockDelegate):
    """Callable like the SymbolBlock (same parameters, same ``cast``); BatchNorm running statistics
    are updated in place in train mode, as MXNet's imperative BatchNorm does."""

    def __init__(self, g: SymGraph, block: Any, symbol_nodes: List[Dict[str, Any]]):
        self.g, self.block = g, block
        self.nodes = symbol_nodes       # the reference's JSON nodes (dropout set to 0 there)
        self._children: Dict[str, Any] = {}
        self._reg_params: Dict[str, Any] = {}
        self.params = {p.name: p for p in block.collect_params().values()}


    def __call__(self, *inputs):
        import mxnet as mx
        g = self.g
        vals: Dict[Any, Any] = {}
        dtype = inputs[0].dtype if inputs else "float32"
        for name, x in zip(g.inputs, inputs):
            vid = next(n.id for n in g.nodes if n.op == "null" and n.name == name)
            vals[(vid, 0)] = x
        for n in g.nodes:
            if n.op == "null":
                if n.kind != "input" and n.name in self.params:
                    vals[(n.id, 0)] = self.params[n.name].data()
                continue
            if n.id in g.absorbed and n.id not in g.rnn_parts:
                continue     # after the chosen outputs
            attrs = {k: v for k, v in self.nodes[n.id].get("attrs", {}).items() if not k.startswith("__")}
            if n.op in ("_zeros", "zeros", "_ones", "ones"):
                attrs["shape"] = str(tuple(g.shapes[(n.id, 0)]))
                attrs["dtype"] = str(getattr(dtype, "__name__", dtype))
            fn = getattr(mx.nd, n.op, None) or getattr(mx.nd._internal, n.op)
            out = fn(*[vals[v] for v in n.inputs], **attrs)
            for k, o in enumerate(out if isinstance(out, (list, tuple)) else [out]):
                vals[(n.id, k)] = o
        outs = [vals[h] for h in g.heads]
        return outs[0] if len(outs) == 1 else outs
