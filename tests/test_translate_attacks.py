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
