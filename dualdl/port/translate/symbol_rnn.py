"""MXNet's fused ``RNN`` op of an exported Gluon ``rnn.LSTM/GRU/RNN`` -> ``nn.LSTM/GRU/RNN``.

In the symbol the layer's weights arrive as one flat vector (``_rnn_param_concat`` of every weight
reshaped to 1-d, in Gluon's order: all weights, then all biases, by layer, direction, i2h/h2h)
and its begin states as ``_zeros`` nodes. Those nodes are folded into the torch layer, which
keeps the weights separately (``weight_ih_l0``...; gate order is the same in both frameworks)
and starts from zero states itself. The op is time-major (``TNC``): Gluon's ``NTC`` layout is
the two ``SwapAxis`` nodes around it, which stay in ``forward``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

from .conventions import RNN_MODES, rnn_weight_names
from .errors import TranslationError
from .gate import probability
from .safe import comment
from .ops import parse_attr
from .leaves import rnn_layer
from .symbol_graph import SymGraph, SymNode

__all__ = ["absorb_rnn_inputs", "rnn_spec"]



@dataclass
class RnnInfo:
    weights: List[int]      # variable node ids, in the order of the flat parameter vector
    torch_names: List[str]  # their torch names
    gluon_names: List[str]  # their Gluon parameter names (l0_i2h_weight...)


def _err(node: SymNode, what: str) -> TranslationError:
    return TranslationError(f"MXNet RNN node {node.name!r}: {what}", op="RNN", block="RNN", path=node.name)


def absorb_rnn_inputs(g: SymGraph) -> None:
    """Fold each RNN node's weight concat and zero begin states into the node (``g.absorbed``)."""
    consumers = g.consumers()
    for n in g.nodes:
        if n.op != "RNN" or n.id in g.rnn:
            continue
        mode = n.attrs.get("mode", "lstm")
        if mode not in RNN_MODES:
            raise _err(n, f"mode {mode!r} has no torch translation")
        for key, what in (("projection_size", "an LSTM projection (projection_size)"),
                          ("lstm_state_clip_min", "lstm_state_clip_min"), ("lstm_state_clip_max", "lstm_state_clip_max")):
            if parse_attr(n.attrs.get(key)) is not None:
                raise _err(n, f"{what} has no torch translation")
        if parse_attr(n.attrs.get("use_sequence_length"), False):
            raise _err(n, "use_sequence_length=True has no torch translation (pack the sequences instead)")
        layers = int(parse_attr(n.attrs.get("num_layers"), 1))
        dirs = 2 if parse_attr(n.attrs.get("bidirectional"), False) else 1
        names = rnn_weight_names(layers, dirs, concat_order=True)
        src = g.nodes[n.inputs[1][0]]
        parts = [g.nodes[s] for s, _ in src.inputs] if src.op in ("_rnn_param_concat", "Concat", "concat") else []
        weights, folded = [], {src.id}
        for p in parts:
            if p.op in ("Reshape", "reshape") and parse_attr(p.attrs.get("shape")) in (-1, (-1,)):
                folded.add(p.id)
                p = g.nodes[p.inputs[0][0]]
            if p.op != "null" or p.kind == "input":
                weights = []
                break
            weights.append(p.id)
        if len(weights) != len(names):
            raise _err(n, "its weights are not the concatenation of separate weight variables that Gluon's "
                          "rnn layers export (a single flat parameter vector cannot be split into torch's "
                          "weights here); export the model from a Gluon rnn.LSTM/GRU/RNN layer")
        for s, _ in n.inputs[2:]:
            st = g.nodes[s]
            if st.op not in ("_zeros", "zeros") or any(c != n.id for c in consumers[s]):
                raise _err(n, "begin states other than zeros have no translation yet (call the Gluon layer "
                              "without states before exporting)")
            folded.add(s)
        for extra in folded:
            if any(c not in folded and c != n.id for c in consumers[extra]):
                raise _err(n, f"node {g.nodes[extra].name!r} is used outside the RNN layer")
        g.absorbed |= folded
        g.rnn_parts |= folded
        g.rnn[n.id] = RnnInfo(weights, [t for _, t in names], [gname for gname, _ in names])


def rnn_spec(g: SymGraph, node: SymNode, spec_cls):
    info: RnnInfo = g.rnn[node.id]
    mode = node.attrs.get("mode", "lstm")
    p = probability(parse_attr(node.attrs.get("p"), 0.0) or 0.0, f"MXNet RNN node {comment(node.name)!r}")
    users = {v for m in g.nodes for v in m.inputs if v[0] == node.id} | {h for h in g.heads if h[0] == node.id}
    if any(k > 0 for _, k in users):
        raise _err(node, "its returned states are used; only the output sequence has a translation here")
    ctor = rnn_layer(mode, g.shapes[(info.weights[0], 0)][1], parse_attr(node.attrs.get("state_size"), 0),
                     layers=parse_attr(node.attrs.get("num_layers"), 1),
                     bidirectional=parse_attr(node.attrs.get("bidirectional"), False), dropout=p, batch_first=False,
                     comment="MXNet's RNN op is time-major (TNC); it starts from zero states")
    spec = spec_cls(ctor, call="{m}({x})[0]")
    spec.weights = list(zip(info.weights, info.torch_names, info.gluon_names))
    spec.n_out = 1
    return spec
