"""Model files and objects written by an attacker (issue 41): text read from a symbol JSON reaches
the generated source only as a typed value, the last check of a generated file is an allow-list
of what the emitter writes, and hostile or broken symbol files end in one-line TranslationErrors.
Each case runs the real translate on a real (small) MXNet graph."""
import ast
import json
import os

import numpy as np
import pytest

pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")

from dualdl.port.translate.errors import TranslationError  # noqa: E402
from dualdl.port.translate.symbol_file import translate_symbol_file  # noqa: E402

PAYLOAD = "0] * (__import__('os').system('touch P') == 0) + 0 * x.shape[0"


def _fc_graph(folder, extra_node=None, units=24):
    """``data -> FullyConnected(24)`` (+ ``extra_node`` on its output) as symbol + params files."""
    data = mx.sym.var("data")
    js = json.loads(mx.sym.FullyConnected(data, num_hidden=units, name="fc").tojson())
    if extra_node is not None:
        extra_node = dict(extra_node, inputs=[[len(js["nodes"]) - 1, 0, 0]])
        js["nodes"].append(extra_node)
        js["heads"] = [[len(js["nodes"]) - 1, 0, 0]]
        js["node_row_ptr"] = list(range(len(js["nodes"]) + 1))
    sym, params = os.path.join(folder, "m-symbol.json"), os.path.join(folder, "m-0000.params")
    with open(sym, "w") as f:
        json.dump(js, f)
    rng = np.random.default_rng(0)
    mx.nd.save(params, {"arg:fc_weight": mx.nd.array(rng.standard_normal((units, 4))),
                        "arg:fc_bias": mx.nd.array(rng.standard_normal(units))})
    return sym, params


def _refused(tmp_path, sym, params, match, shapes=((2, 4),)):
    with pytest.raises(TranslationError, match=match) as e:
        translate_symbol_file(sym, params, [tuple(s) for s in shapes], str(tmp_path / "out"))
    assert len(str(e.value).splitlines()) == 1, str(e.value)
    assert not os.path.exists(tmp_path / "out" / "m.report.json") and not os.path.exists(tmp_path / "out" / "m.py")
    return str(e.value)


def test_reshape_dims_attribute_with_code_is_refused_and_never_runs(tmp_path, monkeypatch):
    """The issue's exploit: before, the payload was written into forward() and ran during the proof
    (report ok: true, file P created); now the attribute is parsed and refused, naming the node."""
    monkeypatch.chdir(tmp_path)
    evil = f"[('d', \"{PAYLOAD}\"), None, None]"
    sym, params = _fc_graph(str(tmp_path), {"op": "_np_reshape", "name": "r",
                                            "attrs": {"newshape": "(2, 3, 8)", "__dualdl_dims__": evil}})
    msg = _refused(tmp_path, sym, params, r"_np_reshape node 'r': its attribute '__dualdl_dims__'")
    assert "export it again" in msg
    assert not os.path.exists(tmp_path / "P")
    # the same node with a well-formed attribute translates and is proven
    good = json.load(open(sym))
    good["nodes"][-1]["attrs"]["__dualdl_dims__"] = "[('d', 0), None, None]"
    with open(sym, "w") as f:
        json.dump(good, f)
    r = translate_symbol_file(sym, params, [(2, 4)], str(tmp_path / "out"))
    assert r.ok, r.summary()
    assert "x.shape[0], 3, 8)" in open(r.source_path).read()


@pytest.mark.parametrize("op, attrs", [
    ("Activation", {"act_type": "relu')\nimport os\n('"}),
    ("LeakyReLU", {"act_type": "leaky", "slope": "__import__('os').getcwd()"}),
    ("Cast", {"dtype": "float32.__class__"}),
    ("squeeze", {"axis": "(0, __import__('os'))"}),
    ("expand_dims", {"axis": "1 if True else 2"}),
    ("_np_reshape", {"newshape": "(2, 3, 8)", "__dualdl_dims__": "[('d', 'x.__class__'), None, None]"}),
    ("clip", {"a_min": "0", "a_max": "1e9999999 or exec('1')"}),
    ("_np_reshape", {"newshape": "(2, 3, 8)", "__dualdl_dims__": "(" * 3000 + ")" * 3000}),
    ("_np_reshape", {"newshape": "(2, 3, 8)", "__dualdl_dims__": "[('d', 0)" + ", None" * 5000 + "]"}),
])
def test_attribute_text_that_is_not_a_typed_value_is_refused(tmp_path, monkeypatch, op, attrs):
    """MXNet's own parser refuses a declared parameter of the wrong type; an attribute MXNet only
    keeps (``__dualdl_dims__``) is refused by translate's gate: one line either way, nothing written."""
    monkeypatch.chdir(tmp_path)
    sym, params = _fc_graph(str(tmp_path), {"op": op, "name": "n1", "attrs": attrs})
    msg = _refused(tmp_path, sym, params, "node 'n1': its attribute|MXNet cannot load the symbol file")
    assert not os.path.exists(tmp_path / "P")
    if op == "_np_reshape":
        assert "its attribute '__dualdl_dims__'" in msg


def test_traced_block_attribute_scope_cannot_write_code(tmp_path, monkeypatch):
    """The traced-block path reads the same attributes: a numpy-interface block whose own code sets
    ``__dualdl_dims__`` through ``mx.AttrScope`` ran the payload (in the proof's load) before; now
    the same one-line refusal, nothing written."""
    from mxnet import gluon
    from mxnet.util import use_np
    from dualdl import port

    @use_np
    class Evil(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.dense = gluon.nn.Dense(24, in_units=4)

        def hybrid_forward(self, F, x):
            y = self.dense(x)
            with mx.AttrScope(__dualdl_dims__=f"[('d', \"{PAYLOAD}\"), None, None]"):
                return F.np.reshape(y, (2, 3, 8))

    monkeypatch.chdir(tmp_path)
    mx.npx.set_np()
    try:
        net = Evil()
        net.initialize()
        x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
        with pytest.raises(TranslationError, match="its attribute '__dualdl_dims__'") as e:
            port.translate(net, [x], str(tmp_path / "out"), name="evil")
    finally:
        mx.npx.reset_np()
    assert len(str(e.value).splitlines()) == 1, str(e.value)
    assert not os.path.exists(tmp_path / "P") and not os.path.exists(tmp_path / "out" / "evil.py")


# ---- the last check is an allow-list ------------------------------------------------------------
_CLASS = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\nclass M(nn.Module):\n" \
         "    def forward(self, x):\n        "
ALLOW_REFUSALS = {
    "__import__": ("return x + __import__('os').system('true')", "name __import__"),
    "eval": ("return eval('x')", "name eval"),
    "open": ("return open('/etc/passwd')", "name open"),
    "dunder attribute": ("return x.__class__", "attribute __class__"),
    "dunder via getattr": ("return getattr(x, '__class__')", "getattr of a name the file does not register"),
    "getattr of a variable": ("return getattr(self, x)", "getattr of a name"),
    "torch.load": ("return torch.load('w.pt')", "torch.load is not a function translate writes"),
    "torch.hub": ("return torch.hub.load('a', 'b')", "torch.hub.load is not a function"),
    "torch.utils": ("return torch.utils.cpp_extension", "torch.utils.cpp_extension is not"),
    "F.private": ("return F._pad(x)", "F._pad is not a function"),
    "lambda": ("return (lambda: 1)()", "a Lambda expression"),
    "f-string": ("return f'{x}'", "a JoinedStr expression"),
    "global": ("global y\n        return x", "a Global statement"),
    "import in a body": ("import os\n        return x", "a Import statement"),
    "try": ("try:\n            return x\n        except Exception:\n            return x", "a Try statement"),
    "while": ("while True:\n            pass", "a While statement"),
    "with open": ("with open('f') as f:\n            return x", "a with statement other than torch.no_grad()"),
    "del": ("del x\n        return 1", "a Delete statement"),
    "unknown name": ("return x + y", "name y in forward"),
    "bytes constant": ("return b'x'", "a constant of type bytes"),
}


@pytest.mark.parametrize("key", list(ALLOW_REFUSALS))
def test_the_last_check_accepts_only_what_the_emitter_writes(key):
    from dualdl.port.translate.safe import check_source
    body, says = ALLOW_REFUSALS[key]
    with pytest.raises(TranslationError, match="refuses to save") as e:
        check_source(_CLASS + body + "\n")
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)


def test_the_allow_list_accepts_the_constructs_translate_writes():
    from dualdl.port.translate.safe import check_source
    check_source(_CLASS + "return x\n\n    def __init__(self):\n        super().__init__()\n"
                 "        self.add_module('0', nn.Linear(8, 1))\n        self.register_buffer('b-1', torch.zeros(2))\n"
                 "        self.lin = nn.Linear(8, 1)\n\n    def f(self, x):\n        y = getattr(self, '0')(x)\n"
                 "        with torch.no_grad():\n            z = [F.relu(v) for v in torch.unbind(y, dim=1)]\n"
                 "        return torch.stack(z, 1) * float('inf') + y.reshape(-1)[..., 0] + self.lin(x)\n")
    tree = ast.parse(_CLASS + "return x\n")
    assert isinstance(tree.body[-1], ast.ClassDef)


# ---- names that are no identifier, with a comment ------------------------------------------------
def _gluonts_head():
    """GluonTS registers its distribution heads' projections as children '0', '1' (Dense(flatten=False))."""
    from mxnet import gluon

    class ArgProj(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                for i in range(2):
                    self.register_child(gluon.nn.Dense(1, flatten=False, in_units=8), str(i))

        def hybrid_forward(self, F, x):
            return F.concat(*[c(x) for c in self._children.values()], dim=-1)
    return ArgProj(), (2, 3, 8)


def _frozen_param_named_a_b():
    """An own parameter named 'w-1' (no identifier) with grad_req='null': its comment once ended inside
    register_parameter(...)."""
    from mxnet import gluon

    class Scaled(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.dense = gluon.nn.Dense(3, in_units=4)
            self._reg_params["w-1"] = self.params.get("w1", shape=(3,), grad_req="null")

        def hybrid_forward(self, F, x, **params):
            return F.broadcast_mul(self.dense(x), params["w-1"].reshape((1, 3)))
    return Scaled(), (2, 4)


@pytest.mark.parametrize("make", [_gluonts_head, _frozen_param_named_a_b], ids=["gluonts-heads-0-1", "frozen-w-1"])
def test_a_child_or_parameter_whose_name_is_no_identifier_translates_with_its_comment(tmp_path, make):
    from dualdl import port
    block, shape = make()
    block.initialize(mx.init.Uniform(0.5))
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    r = port.translate(block, [x], str(tmp_path), name="m")
    assert r.ok, r.summary()
    src = open(r.source_path).read()
    if make is _gluonts_head:
        assert "self.add_module('0', nn.Linear(8, 1))  # Gluon Dense(flatten=False)" in src
        assert "getattr(self, '1')(x)" in src
    else:
        assert "self.register_parameter('w-1', nn.Parameter(torch.empty(3,), requires_grad=False))  " \
               "# grad_req='null' in Gluon" in src


class _EvilName(str):
    """A child name whose repr() would be code: the file must be written by str's own repr."""

    def __repr__(self):
        return "'x', None)\nimport sys; sys.modules['pwned'] = 1\n(None"

    __str__ = __repr__


def test_a_str_subclass_child_name_cannot_choose_its_text(tmp_path):
    import sys
    from mxnet import gluon
    from dualdl import port

    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.register_child(gluon.nn.Dense(3, flatten=False, in_units=4), _EvilName("0-a"))

        def hybrid_forward(self, F, x):
            return F.relu(list(self._children.values())[0](x))
    net = Net()
    net.initialize()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    sys.modules.pop("pwned", None)
    try:
        r = port.translate(net, [x], str(tmp_path), name="m")
    except TranslationError as e:
        assert len(str(e).splitlines()) == 1, str(e)
    else:
        assert r.ok, r.summary()
        src = open(r.source_path).read()
        assert "import sys" not in src and "'0-a'" in src, src
    assert "pwned" not in sys.modules


# ---- the recipe writer goes through the same literal gate and last check ------------------------
PWN = "import sys; sys.modules['pwned'] = 1"


class _EvilRepr(str):
    def __repr__(self):
        return f"1)\n{PWN}\n("


def test_recipe_str_subclass_values_are_written_by_the_gate():
    """``mx.metric.Accuracy(axis=...)`` keeps whatever it is given: a str subclass's repr() was
    written into the recipe (code at its import); now str's own repr is."""
    import sys
    from dualdl.port.recipe import translate_recipe
    sys.modules.pop("pwned", None)
    recipe = translate_recipe(metrics=mx.metric.Accuracy(axis=_EvilRepr("1"), name=_EvilRepr("acc")))
    assert PWN not in recipe.source and "Accuracy(axis='1', name='acc')" in recipe.source
    ast.parse(recipe.source)
    assert "pwned" not in sys.modules


@pytest.mark.parametrize("body, says", [
    ("def make_metric():\n    return __import__('os')\n", "name __import__"),
    ("TABLE = [open('x')]\n", "TABLE at line 3 is not a literal"),
    ("def f(m):\n    return m.__class__\n", "attribute __class__"),
    ("import os\n", "would import 'os'"),
])
def test_recipe_last_check_is_the_same_allow_list(body, says):
    from dualdl.port.recipe.emit import RecipeError, check_recipe_source
    with pytest.raises(RecipeError, match="refuses to save|would import") as e:
        check_recipe_source('"""doc"""\nimport torch\n' + body)
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)
    check_recipe_source('"""doc"""\nimport torch\nRULES = [("w", -1.5, float("inf"), None)]\n'
                        'def f(model: torch.nn.Module) -> torch.optim.Optimizer:\n'
                        '    named = dict(model.named_parameters())\n'
                        '    if not named:\n        raise KeyError(f"no parameter {len(named)!r}")\n'
                        '    return torch.optim.SGD(named.values(), lr=RULES[0][1])\n')


# ---- symbol files that are broken or huge: one line each, and linear time ----------------------
def _write(tmp_path, js=None, raw=None):
    (tmp_path / "p").mkdir()
    _, params = _fc_graph(str(tmp_path / "p"))
    sym = tmp_path / "m-symbol.json"
    sym.write_text(raw if raw is not None else json.dumps(js))
    return str(sym), params


def _dropout_graph():
    data = mx.sym.var("data")
    return json.loads(mx.sym.Dropout(mx.sym.FullyConnected(data, num_hidden=24, name="fc"), p=0.5,
                                     name="drop").tojson())


def _edit(js, f):
    f(js)
    return js


BROKEN = {
    "JSON nested 10^5 deep": (dict(raw='{"nodes": ' + "[" * 100000 + "]" * 100000 + ', "heads": [[0, 0, 0]]}'),
                              "nests its JSON too deeply"),
    "attrs a list": (dict(js=_edit(_dropout_graph(), lambda j: j["nodes"][-1].__setitem__("attrs", [1, 2]))),
                     r"malformed \(AttributeError"),
    "output number -1": (dict(js=_edit(_dropout_graph(), lambda j: j["nodes"][-1].__setitem__("inputs", [[3, -1, 0]]))),
                         "output number out of range"),
    "nodes an int": (dict(js={"nodes": 5, "heads": [[0, 0, 0]]}), "malformed"),
    "input from a later node": (dict(js=_edit(_dropout_graph(), lambda j: j["nodes"][-1].__setitem__("inputs", [[10 ** 30, 0, 0]]))),
                                "does not come before it"),
    "Dropout p nan": (dict(js=_edit(_dropout_graph(), lambda j: j["nodes"][-1]["attrs"].__setitem__("p", "nan"))),
                      r"Dropout node 'drop': dropout rate nan is not a probability in \[0, 1\]"),
    "not JSON": (dict(raw="\x00\xff"), "not an MXNet symbol JSON file"),
}


@pytest.mark.parametrize("key", list(BROKEN))
def test_a_broken_symbol_file_is_one_line_saying_what_is_wrong(tmp_path, key):
    kw, says = BROKEN[key]
    sym, params = _write(tmp_path, **kw)
    _refused(tmp_path, sym, params, says)


def test_nan_weights_are_refused_naming_the_weight(tmp_path):
    sym, params = _fc_graph(str(tmp_path))
    w = mx.nd.load(params)
    w["arg:fc_weight"][0, 1] = np.nan
    mx.nd.save(params, w)
    _refused(tmp_path, sym, params, r"weight 'fc_weight' holds 1 NaN value\(s\) of 96")


def test_a_gluon_dropout_with_rate_nan_is_refused():
    from mxnet import gluon
    from dualdl.port.translate.leaves import builtin_leaf
    with pytest.raises(TranslationError, match=r"Gluon Dropout: dropout rate nan is not a probability") as e:
        builtin_leaf(gluon.nn.Dropout(float("nan")), None)
    assert len(str(e.value).splitlines()) == 1


def test_ordering_a_10_to_the_5_node_graph_is_linear():
    """The items' topological order scanned every item left per step (4x per doubling: a 10^5-node
    graph took ~1000 s); measured now 3.1 s for 10^5 nodes on one core."""
    import time
    from dualdl.port.translate.gate import Attrs
    from dualdl.port.translate.symbol_graph import SymGraph, SymNode
    from dualdl.port.translate.symbol_tree import build_tree

    def chain(n):
        nodes = [SymNode(0, "null", "data", Attrs({}, "null", "data"), [], kind="input")]
        nodes += [SymNode(i, "relu", f"op{i}", Attrs({}, "relu", f"op{i}"), [(i - 1, 0)]) for i in range(1, n + 1)]
        g = SymGraph(nodes, [(n, 0)], ["data"])
        g.shapes.update({(i, 0): (2, 4) for i in range(n + 1)})
        t = time.process_time()       # this process's CPU time: the other tests on the machine do not count
        root = build_tree(g)
        return time.process_time() - t, root
    small, _ = chain(10_000)
    big, root = chain(100_000)
    assert [it for it in root.items][:3] == [1, 2, 3] and len(root.items) == 100_000
    assert big < 40 * max(small, 0.05) and big < 120, (small, big)     # linear: 10x; quadratic: 100x (~1000 s)


def test_a_chain_of_1500_ops_translates_without_200_nested_parentheses(tmp_path):
    """A single-use op was inlined into the next without bound: 200 nested parentheses are a
    SyntaxError ('too many nested parentheses'); now a variable every few ops, and proven."""
    data = mx.sym.var("data")
    js = json.loads(mx.sym.FullyConnected(data, num_hidden=4, name="fc").tojson())
    for i in range(1500):
        js["nodes"].append({"op": "_plus_scalar" if i % 2 else "tanh", "name": f"op{i}",
                            "attrs": {"scalar": "0.5"} if i % 2 else {}, "inputs": [[len(js["nodes"]) - 1, 0, 0]]})
    js["heads"] = [[len(js["nodes"]) - 1, 0, 0]]
    js["node_row_ptr"] = list(range(len(js["nodes"]) + 1))
    sym = tmp_path / "m-symbol.json"
    sym.write_text(json.dumps(js))
    params = str(tmp_path / "m-0000.params")
    mx.nd.save(params, {"arg:fc_weight": mx.nd.array(np.eye(4) * 0.1), "arg:fc_bias": mx.nd.zeros(4)})
    r = translate_symbol_file(str(sym), params, [(2, 4)], str(tmp_path / "out"), verify=False)
    src = open(r.source_path).read()
    assert max(len(ln) for ln in src.splitlines()) < 2000 and src.count("torch.tanh(") == 750


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_symbol_or_params_path_that_is_no_regular_file_is_refused_without_waiting(tmp_path, kind):
    """Reading a FIFO waits for a writer forever, /dev/zero never ends: refused before opening."""
    sym, params = _fc_graph(str(tmp_path))
    odd = tmp_path / "odd"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "device":
        os.symlink("/dev/zero", odd)
    else:
        odd.mkdir()
    for s, p, what in ((str(odd), params, "symbol"), (sym, str(odd), "params")):
        with pytest.raises(TranslationError, match=f"the {what} file is not a regular file") as e:
            translate_symbol_file(s, p, [(2, 4)], str(tmp_path / "out"))
        assert len(str(e.value).splitlines()) == 1
