"""The layering of dualdl/port/translate/ (issue 41: one graph, two readers, one writer), read from
its source by tests/translate_structure_report.py: imports only go down the layers below, counting
imports inside functions (Python never sees a circle those keep alive); no circle at all; no private
name (``_x``) used outside the file that defines it; no file over 600 lines. A new file fails
until it is given its layer here."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import translate_structure_report as structure  # noqa: E402

#: bottom first. Foundation: what every layer may use (errors, the safety gate, the conventions,
#: staging files, torch-side loading). Graph: the graphs (graph.Graph, what both readers produce;
#: SymGraph, read from an exported symbol by symbol_graph itself). Readers: the tracer that makes
#: graph.Graph of a Gluon block. Ops: the op registry, the lowering of one op, the rendering of a
#: call, the module tree a writer fills and the parts both builders make classes of it with. Layers: Gluon layers / symbol layer nodes -> torch layers
#: (registry.Leaf specs), the symbol's scope tree and its lowering into graph.Graph (symbol_lower).
#: Emitter: the one forward writer, the class writer, the two module-tree builders (codegen from Gluon
#: blocks, symbol_emit from scopes). Proof. Pipeline: stage -> write -> load -> prove -> publish. API.
LAYERS = [
    ("foundation", {"errors", "safe", "allowlist", "gate", "conventions", "publish", "proof_torch", "proof_judge"}),
    ("graph", {"graph", "symbol_graph"}),
    ("readers", {"trace_scope", "trace"}),
    ("ops", {"oplib", "oplib.*", "ops", "registry", "render", "module_tree"}),
    ("layers", {"leaves", "symbol_rnn", "symbol_layers", "symbol_tree", "symbol_lower"}),
    ("emitter", {"forward", "class_writer", "codegen", "symbol_emit", "symbol_nested"}),
    ("proof", {"proof_layers", "proof_train", "verify", "symbol_verify", "symbol_imperative"}),
    ("pipeline", {"pipeline"}),
    ("api", {"symbol_file", "api", ""}),
]

MAX_LINES = 600


def _layer(module: str):
    for i, (_, names) in enumerate(LAYERS):
        if module in names or ("." in module and module.split(".")[0] + ".*" in names):
            return i
    return None


@pytest.fixture(scope="module")
def mods():
    return structure.analyse()


def test_every_file_has_a_layer(mods):
    missing = sorted(m for m in mods if _layer(m) is None)
    assert not missing, f"give these translate files a layer in tests/test_translate_layers.py: {missing}"


def test_imports_only_go_down_and_never_circle(mods):
    up = []
    for m in mods.values():
        for target, in_fn, _, line in m.imports:
            lo, hi = _layer(m.name), _layer(target)
            if target != m.name and lo is not None and hi is not None and hi > lo:
                up.append(f"{m.name}:{line} imports {target} ({LAYERS[hi][0]} above {LAYERS[lo][0]})"
                          f"{' inside a function' if in_fn else ''}")
    assert not up, "\n".join(up)
    cycles = structure.cycles(structure.edges(mods))
    assert not cycles, f"import circles (function-level imports counted): {cycles}"


def test_no_private_name_crosses_a_file(mods):
    crossings = [f"{u}:{line} uses {t}.{n}" for u, t, n, line in structure.private_crossings(mods)]
    assert not crossings, "\n".join(crossings)


def test_no_file_over_600_lines(mods):
    big = {os.path.relpath(m.path, structure.ROOT): m.lines for m in mods.values() if m.lines > MAX_LINES}
    assert not big, f"split these translate files (over {MAX_LINES} lines): {big}"


def test_the_analysis_sees_function_level_circles_and_private_names(tmp_path):
    """The checks above can fail: a circle kept alive by an import inside a function, and a private
    name imported from a sibling, in a package written here."""
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from .b import _hidden\n\n\ndef f():\n    return _hidden\n")
    (tmp_path / "b.py").write_text("def _hidden():\n    from . import a\n    return a\n")
    mods = structure.analyse(str(tmp_path))
    assert structure.cycles(structure.edges(mods)) == [["a", "b"]]
    assert structure.cycles(structure.edges(mods, function_level=False)) == []
    assert [(u, t, n) for u, t, n, _ in structure.private_crossings(mods)] == [("a", "b", "_hidden")]
    assert structure.function_level_imports(mods) == 1


def test_one_forward_writer_and_one_class_writer(mods):
    """Issue 41's one writer: of the readers and emitters, only forward.py lowers ops into a forward
    (the op registry's translate_op / bind_device), only class_writer.py writes a class's text,
    both readers' module graphs are graph.Graph (the tracer's and the symbol scopes' lowering), both
    module-tree builders group, name and parametrise classes with module_tree's parts, and both
    layer mappers write BatchNorm with leaves.batchnorm_call."""
    def importers(module, name):
        return sorted(m.name for m in mods.values() for target, _, names, _ in m.imports
                      if target == module and name in names)
    writers = {"ops", "oplib", "oplib.base"}
    assert [m for m in importers("ops", "translate_op") + importers("oplib", "translate_op")
            if m not in writers] == ["forward"]
    assert [m for m in importers("ops", "bind_device") if m not in writers] == ["forward"]
    assert importers("class_writer", "class_source") == ["symbol_emit"]     # codegen: ClassWriter's own method
    assert {"symbol_lower", "trace"} <= set(importers("graph", "Graph"))
    assert "symbol_emit" in importers("forward", "ForwardWriter") and "codegen" in importers("forward", "ForwardWriter")
    for part in ("structure_ids", "ClassNames", "finish_class"):     # one module-tree builder's parts
        assert importers("module_tree", part) == ["class_writer", "symbol_emit"], part
    assert importers("leaves", "batchnorm_call") == ["symbol_layers"]     # one BatchNorm convention


def test_two_gluon_classes_of_one_name_are_block_and_block_2(tmp_path):
    """The one class-naming rule (module_tree.ClassNames, the symbol path's before): two Gluon
    classes named ``Block`` from two modules are ``Block`` and ``Block_2`` (the traced path wrote
    ``Block_``), and the translation is proven."""
    import re

    import mxnet as mx
    from mxnet.gluon import nn

    from dualdl import port

    def block_class(module, in_units, k):
        class Block(nn.HybridBlock):
            def __init__(self):
                super().__init__()
                self.fc = nn.Dense(3, in_units=in_units)

            def hybrid_forward(self, F, x):
                return self.fc(x) * k
        Block.__module__ = module
        return Block

    class Top(nn.HybridBlock):
        def __init__(self):
            super().__init__()
            self.a, self.b = block_class("one", 3, 1.0)(), block_class("two", 6, 2.0)()

        def hybrid_forward(self, F, x):
            return self.b(F.concat(self.a(x), x, dim=1))
    net = Top()
    net.initialize(mx.init.Normal(0.5))
    rep = port.translate(net, mx.nd.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]), str(tmp_path), name="same")
    assert rep.ok, rep.notes
    assert re.findall(r"^class (\w+)", open(rep.source_path).read(), re.M) == ["Block", "Block_2", "Top"]
    assert rep.max_abs_diff is not None and rep.max_abs_diff < 1e-6
