"""An exported symbol's scopes lowered into graph.Graph (symbol_lower.py), the graph a traced
block becomes, and written by the one forward writer: a symbol whose heads include a stored
weight (returned as it is) translates and is proven; one whose returned weight is also a layer's
is refused in one line (both were a raw KeyError before the lowering)."""
import os

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
pytest.importorskip("torch")

from dualdl.port.translate import TranslationError  # noqa: E402
from dualdl.port.translate.graph import Graph  # noqa: E402
from dualdl.port.translate.symbol_file import translate_symbol_file  # noqa: E402
from dualdl.port.translate.symbol_graph import load_symbol_graph  # noqa: E402
from dualdl.port.translate.symbol_lower import scope_graph  # noqa: E402
from dualdl.port.translate.symbol_tree import build_tree, item_values  # noqa: E402


def _save(folder, heads, params):
    mx.sym.Group(heads).save(os.path.join(folder, "m-symbol.json"))
    mx.nd.save(os.path.join(folder, "m-0000.params"), {f"arg:{k}": mx.nd.array(v) for k, v in params.items()})
    return os.path.join(folder, "m-symbol.json"), os.path.join(folder, "m-0000.params")


def _shift_model(folder):
    x, b = mx.sym.var("data"), mx.sym.var("shift", shape=(1, 3))
    y = mx.sym.broadcast_add(mx.sym.FullyConnected(x, num_hidden=3, no_bias=True, name="fc"), b, name="add0")
    rng = np.random.default_rng(0)
    return _save(folder, [y, b], {"fc_weight": rng.standard_normal((3, 4)), "shift": rng.standard_normal((1, 3))})


def test_a_returned_weight_is_returned_and_proven(tmp_path):
    sym, params = _shift_model(str(tmp_path))
    rep = translate_symbol_file(sym, params, [(2, 4)], str(tmp_path / "out"))
    assert rep.ok and rep.max_rel_diff < 1e-12, rep.summary()
    src = open(rep.source_path).read()
    assert "x = self.fc(data) + self.shift\n        return x, self.shift\n" in src


def test_a_returned_layer_weight_is_refused_in_one_line(tmp_path):
    x, w = mx.sym.var("data"), mx.sym.var("fc_weight", shape=(3, 4))
    y = mx.sym.FullyConnected(x, weight=w, num_hidden=3, no_bias=True, name="fc")
    sym, params = _save(str(tmp_path), [y, w], {"fc_weight": np.ones((3, 4))})
    with pytest.raises(TranslationError, match="fc_weight.*two different parts"):
        translate_symbol_file(sym, params, [(2, 4)], str(tmp_path / "out"), verify=False)


def test_the_lowered_scope_is_the_traced_graph_kind(tmp_path):
    """The top scope as graph.Graph: its input and weight variables, one op node, a call site for
    the layer (its output a __call variable), heads = outputs then call inputs, the statement order."""
    sym, params = _shift_model(str(tmp_path))
    g, _, _ = load_symbol_graph(sym, params, [(2, 4)])
    root = build_tree(g)
    weights = []
    graph = scope_graph(g, root, [(0, 0)], list(g.heads), ["data"], {}, {it: "fc" for it in root.items},
                        lambda nid: 1, lambda var: weights.append(var.name) or var.name)
    assert isinstance(graph, Graph) and weights == ["shift"]
    assert [n["op"] for n in graph.nodes] == ["null", "null", "null", "broadcast_add"]
    assert [n["name"] for n in graph.nodes[:2]] == ["__in0", "__call0_0"]
    assert [c.child for c in graph.calls] == ["fc"] and graph.order == [("call", 0), ("op", 3)]
    assert graph.heads == [(3, 0), (2, 0), (0, 0)] and graph.n_outputs == 2
    assert graph.shapes[(3, 0)] == (2, 3) and item_values(g, root.items[-1])[1] == [(root.items[-1], 0)]
