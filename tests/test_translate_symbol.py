"""Exported MXNet models (``model-symbol.json`` + ``model-0000.params``, what ``HybridBlock.export``
writes) translated to readable torch classes, with the float64 proof against MXNet's own
``SymbolBlock`` of the same files (issue 32)."""
import ast
import json
import os
import warnings

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from mxnet import gluon  # noqa: E402
from mxnet.gluon import nn as gnn  # noqa: E402
from mxnet.gluon.model_zoo import vision  # noqa: E402

from dualdl.cli import main  # noqa: E402
from dualdl.port.translate import TranslationError, translate  # noqa: E402
from dualdl.port.translate.symbol_file import translate_symbol_file  # noqa: E402

warnings.filterwarnings("ignore", module="mxnet")


def _export(net, shapes, folder, name, init=True):
    """``net.hybridize(); net(x); net.export(path)`` as a user deploys a model."""
    if init:
        net.initialize(mx.init.Xavier())
    net.hybridize()
    rng = np.random.default_rng(0)
    net(*[mx.nd.array(rng.standard_normal(s)) for s in shapes])
    base = os.path.join(str(folder), name)
    net.export(base)
    return f"{base}-symbol.json", f"{base}-0000.params"


def _imports_only_torch(source: str) -> None:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] == "torch" for a in node.names), ast.dump(node)
        elif isinstance(node, ast.ImportFrom):
            assert node.module.split(".")[0] == "torch", ast.dump(node)


def _classes(source: str):
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}


def _assert_proven(report):
    assert report.ok, report.summary()
    assert report.dtype == "float64"
    names = [c.name for c in report.checks]
    assert any("eval outputs" in n for n in names) and any("gradients" in n for n in names)
    assert any("SGD step" in n for n in names) and any("running statistics" in n for n in names)
    with open(report.report_path) as f:
        data = json.load(f)
    assert data["ok"] is True and data["class"] == report.class_name


@pytest.fixture(scope="module")
def resnet18_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("r18")
    return _export(vision.resnet18_v1(pretrained=False), [(1, 3, 32, 32)], folder, "resnet18_v1")


def test_resnet18_v1_from_files_readable_classes_and_proof(resnet18_files, tmp_path):
    sym, params = resnet18_files
    report = translate_symbol_file(sym, params, [(2, 3, 32, 32)], str(tmp_path))
    _assert_proven(report)
    assert report.name == "resnet18_v1" and report.class_name == "Resnet18V1"
    src = open(report.source_path).read()
    _imports_only_torch(src)
    classes = _classes(src)
    # node names -> modules: resnetv10_stage1_conv0_fwd -> self.stage1 ... conv0; resnetv10_dense0 -> dense0
    assert {"Stage", "Stage_2", "StageBlock", "StageBlock_2", "Resnet18V1"} <= set(classes)
    for line in ("self.stage1 = Stage()", "self.stage2 = Stage_2(in_channels=64, out_channels=128)",
                 "self.stage4 = Stage_2(in_channels=256, out_channels=512)", "self.dense0 = nn.Linear(512, 1000)",
                 "self.block1 = StageBlock(in_channels=out_channels)", "x = self.stage1(x)"):
        assert line in src, line
    # the residual block is one class used five times (stage1 twice, then once per later stage)
    assert src.count("StageBlock(in_channels=") == 2 + 1     # Stage's two calls + Stage_2's
    assert "return torch.relu(x + self.batchnorm1(out))" in src or "torch.relu(" in src
    # the weights are the file's, under readable torch keys; the report maps them to the file's names
    rows = {r["torch"]: r["gluon"] for r in report.mapping}
    assert rows["stage1.block1.conv0.weight"] == "resnetv10_stage1_conv2_weight"
    assert rows["dense0.bias"] == "resnetv10_dense0_bias"
    from safetensors.torch import load_file
    import importlib.util
    spec = importlib.util.spec_from_file_location("gen_r18", report.source_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = getattr(mod, report.class_name)()
    model.load_state_dict(load_file(report.weights_path))
    model.eval()
    x = np.random.default_rng(3).standard_normal((2, 3, 32, 32)).astype(np.float32)
    ref = gluon.SymbolBlock.imports(sym, ["data"], params)(mx.nd.array(x)).asnumpy()
    with torch.no_grad():
        got = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_translate_of_symbolblock_routes_to_the_symbol_path(resnet18_files, tmp_path):
    sym, params = resnet18_files
    block = gluon.SymbolBlock.imports(sym, ["data"], params)
    before = {k: p.data().asnumpy().copy() for k, p in block.collect_params().items()}
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    report = translate(block, x, str(tmp_path), "r18sym")
    _assert_proven(report)
    assert "class StageBlock(" in open(report.source_path).read()
    for k, p in block.collect_params().items():     # the user's block is unchanged
        np.testing.assert_array_equal(p.data().asnumpy(), before[k])


def test_cli_translates_symbol_file(resnet18_files, tmp_path, capsys):
    sym, params = resnet18_files
    rc = main(["translate", sym, "--params", params, "--input-shape", "2,3,32,32", "--out", str(tmp_path),
               "--name", "r18cli"])
    assert rc == 0, capsys.readouterr()
    assert os.path.isfile(tmp_path / "r18cli.py") and os.path.isfile(tmp_path / "r18cli.safetensors")
    assert json.load(open(tmp_path / "r18cli.report.json"))["ok"] is True


def test_densenet_dense_layers_become_one_block_class(tmp_path):
    from mxnet.gluon.model_zoo.vision.densenet import DenseNet
    sym, params = _export(DenseNet(8, 4, [2, 2], bn_size=2, classes=10), [(1, 3, 56, 56)], tmp_path, "densenet")
    report = translate_symbol_file(sym, params, [(2, 3, 56, 56)], str(tmp_path / "out"))
    _assert_proven(report)
    src = open(report.source_path).read()
    _imports_only_torch(src)
    # each dense layer (bn-relu-conv-bn-relu-conv, then concat with its input) is one block
    assert "torch.cat([" in src
    assert "class StageBlock(" in src and src.count("= StageBlock(") >= 2


def test_two_input_model(tmp_path):
    class TwoTower(gluon.HybridBlock):
        def __init__(self, **kw):
            super().__init__(**kw)
            with self.name_scope():
                self.conv = gnn.Conv2D(4, 3, padding=1)
                self.bn = gnn.BatchNorm()
                self.vec = gnn.Dense(6)
                self.head = gnn.Dense(3)

        def hybrid_forward(self, F, img, v):
            a = F.relu(self.bn(self.conv(img))).mean(axis=(2, 3))
            return self.head(F.concat(a, F.tanh(self.vec(v)), dim=1))

    sym, params = _export(TwoTower(), [(1, 2, 8, 8), (1, 5)], tmp_path, "twotower")
    report = translate_symbol_file(sym, params, [(3, 2, 8, 8), (3, 5)], str(tmp_path / "out"))
    _assert_proven(report)
    src = open(report.source_path).read()
    assert "def forward(self, data0, data1):" in src


@pytest.mark.slow
def test_mobilenetv2_from_files(tmp_path):
    sym, params = _export(vision.mobilenet_v2_1_0(pretrained=False), [(1, 3, 64, 64)], tmp_path, "mobilenetv2_1.0")
    report = translate_symbol_file(sym, params, [(4, 3, 64, 64)], str(tmp_path / "out"))
    _assert_proven(report)
    assert report.name == "mobilenetv2_1_0"
    src = open(report.source_path).read()
    assert "self.features = Features()" in src and "class Linearbottleneck(" in src
    assert src.count("Linearbottleneck_2(in_channels=") >= 10


@pytest.mark.slow
def test_resnet50_v1_from_files(tmp_path):
    sym, params = _export(vision.resnet50_v1(pretrained=False), [(1, 3, 64, 64)], tmp_path, "resnet50_v1")
    report = translate_symbol_file(sym, params, [(2, 3, 64, 64)], str(tmp_path / "out"))
    _assert_proven(report)
    src = open(report.source_path).read()
    assert "class StageBlock(" in src and src.count("StageBlock(") >= 3


# ---- malformed files: one clear error, never MXNet's traceback ----

@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    net = gnn.HybridSequential(prefix="small_")
    with net.name_scope():
        net.add(gnn.Conv2D(4, 3), gnn.BatchNorm(), gnn.Activation("relu"), gnn.Dense(3))
    return _export(net, [(1, 2, 6, 6)], tmp_path_factory.mktemp("small"), "small")


def test_truncated_json(small_files, tmp_path):
    sym, params = small_files
    bad = tmp_path / "bad-symbol.json"
    bad.write_bytes(open(sym, "rb").read()[:200])
    with pytest.raises(TranslationError, match="not an MXNet symbol JSON file"):
        translate_symbol_file(str(bad), params, [(2, 2, 6, 6)], str(tmp_path / "out"))


def test_params_missing_a_weight(small_files, tmp_path):
    sym, params = small_files
    loaded = mx.nd.load(params)
    dropped = sorted(k for k in loaded if k.endswith("conv0_weight"))[0]
    del loaded[dropped]
    bad = str(tmp_path / "bad-0000.params")
    mx.nd.save(bad, loaded)
    with pytest.raises(TranslationError, match=r"has no value for 1 weight\(s\).*conv0_weight"):
        translate_symbol_file(sym, bad, [(2, 2, 6, 6)], str(tmp_path / "out"))


def test_truncated_params_file(small_files, tmp_path):
    sym, params = small_files
    bad = tmp_path / "bad-0000.params"
    bad.write_bytes(open(params, "rb").read()[:100])
    with pytest.raises(TranslationError, match="cannot read the params file"):
        translate_symbol_file(sym, str(bad), [(2, 2, 6, 6)], str(tmp_path / "out"))


def test_wrong_input_shape(small_files, tmp_path):
    sym, params = small_files
    with pytest.raises(TranslationError, match="do not fit the model"):
        translate_symbol_file(sym, params, [(2, 3, 6, 6)], str(tmp_path / "out"))   # 3 channels, not 2
    with pytest.raises(TranslationError, match="takes 1 input"):
        translate_symbol_file(sym, params, [(2, 2, 6, 6), (2, 2)], str(tmp_path / "out"))
    with pytest.raises(TranslationError, match="does not exist"):
        translate_symbol_file(str(tmp_path / "nope-symbol.json"), params, [(2, 2, 6, 6)], str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out" / "small.report.json")


def test_unsupported_op_names_node(small_files, tmp_path):
    sym, params = small_files
    data = json.load(open(sym))
    for n in data["nodes"]:
        if n["op"] == "Activation":
            n["attrs"]["act_type"] = "log_sigmoid"
    bad = tmp_path / "act-symbol.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(TranslationError, match="log_sigmoid"):
        translate_symbol_file(str(bad), params, [(2, 2, 6, 6)], str(tmp_path / "out"))


# ---- names from the file are escaped identifiers ----

NAME_SETS = [
    # (scope of the first two layers, scope of the last two, layer names): the scopes hold two layers,
    # so they become modules (classes and attributes) named from these strings
    ("x\nimport os", '\"\"\"; import os; \"\"\"', ["a-b", "a.b", "\u00b2", "\ufb01"]),
    ("forward", "__init__", ["to", "class", "F", "self"]),
    ("torch", "__import__('os').system('touch PWNED')", ["training", "__debug__", "1x", "a b"]),
]


@pytest.mark.parametrize("names", NAME_SETS, ids=["newline-quotes", "module-attrs", "shadowing"])
def test_adversarial_node_names(small_files, tmp_path, monkeypatch, names):
    """Node and weight names are rewritten into hostile strings: the file must still be valid,
    import without running anything, use unique identifiers and pass the proof."""
    sym, params = small_files
    data = json.load(open(sym))
    loaded = mx.nd.load(params)
    scope_a, scope_b, layers = names
    layer_names = [n["name"].rsplit("_", 1)[0] for n in data["nodes"] if n["op"] != "null"]
    assert len(layer_names) == 4
    rename = {old: f"{scope_a if i < 2 else scope_b}_{layers[i]}" for i, old in enumerate(layer_names)}

    def new(name):
        for old, nw in rename.items():
            if name.startswith(old + "_") or name == old:
                return nw + name[len(old):]
        return name
    for n in data["nodes"]:
        n["name"] = new(n["name"])
    evil_sym = tmp_path / "evil-symbol.json"
    evil_sym.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")   # MXNet reads no \\u escapes
    evil_params = str(tmp_path / "evil-0000.params")
    mx.nd.save(evil_params, {k.split(":")[0] + ":" + new(k.split(":", 1)[1]): v for k, v in loaded.items()})
    monkeypatch.chdir(tmp_path)
    report = translate_symbol_file(str(evil_sym), evil_params, [(2, 2, 6, 6)], str(tmp_path / "out"))
    _assert_proven(report)
    src = open(report.source_path).read()
    assert not os.path.exists(tmp_path / "PWNED")
    tree = ast.parse(src)
    _imports_only_torch(src)
    assert [type(n).__name__ for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.ClassDef))] \
        == ["Expr"]     # the module docstring only: nothing else runs on import
    for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
        init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
        attrs = [t.attr for st in init.body if isinstance(st, ast.Assign) for t in st.targets
                 if isinstance(t, ast.Attribute)]
        assert len(attrs) == len(set(attrs)), attrs
        for a in attrs:
            assert a.isascii() and a.isidentifier() and not hasattr(torch.nn.Module, a), a
    assert len({r["torch"] for r in report.mapping}) == len(report.mapping)
