"""An exported symbol's scopes lowered into graph.Graph (symbol_lower.py), the graph a traced
block becomes, and written by the one forward writer: a symbol whose heads include a stored
weight (returned as it is) translates and is proven; one whose returned weight is also a layer's
is refused in one line (both were a raw KeyError before the lowering); two SymbolBlocks of one
class inside a Gluon tree take distinct class names from the file's one name table."""
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


def test_two_symbolblocks_of_one_class_in_a_gluon_tree(tmp_path):
    """Each SymbolBlock child is written by the symbol emitter into the Gluon tree's file: the second
    one's classes avoid the names the file has (no renaming of written source), both proven."""
    from mxnet import gluon
    from dualdl.port.translate import translate

    def feature(prefix):
        x = mx.sym.var("data")
        y = mx.sym.Activation(mx.sym.Convolution(x, num_filter=4, kernel=(3, 3), pad=(1, 1), name=prefix + "conv0"),
                              act_type="relu", name=prefix + "relu0")
        return gluon.SymbolBlock(mx.sym.Convolution(y, num_filter=4, kernel=(1, 1), name=prefix + "conv1"), [x])

    class Two(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.a, self.b, self.head = feature("fa_"), feature("fb_"), gluon.nn.Dense(3)

        def hybrid_forward(self, F, x):
            return self.head(F.concat(self.a(x), self.b(x), dim=1))

    net = Two()
    net.initialize(mx.init.Normal(0.3))
    x = np.random.default_rng(0).standard_normal((2, 2, 6, 6)).astype(np.float32)
    net(mx.nd.array(x))
    rep = translate(net, x, str(tmp_path), "two")
    assert rep.ok and rep.max_rel_diff < 1e-12, rep.summary()
    src = open(rep.source_path).read()
    assert "class SymbolBlock(nn.Module):" in src and "class SymbolBlock_2(nn.Module):" in src
    assert "self.a = SymbolBlock()" in src and "self.b = SymbolBlock_2()" in src
