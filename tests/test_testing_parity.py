"""dualdl.testing: the one-call parity harness, its report, the pytest fixture and ``dualdl parity``.

Good models (MLP, CNN with BatchNorm/MaxPool, LSTM) must pass 3 optimizer steps with SGD+momentum
and Adam; models whose MXNet build differs in one layer must fail, with that layer named as the
first divergent one and the float64 reference blaming the MXNet side. Measured maxima are printed
(``pytest -s``).
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dualdl as dl
from dualdl import nn
from dualdl.testing import ParityError, ParityReport, assert_parity, check_parity, compare_arrays

pytest.importorskip("torch")
pytest.importorskip("mxnet")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = {}


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    print("\n\ndualdl.testing parity: max abs diff torch vs MXNet over 3 steps")
    print(f"{'case':22s}{'output':>10s}{'loss':>10s}{'grad':>10s}{'param':>10s}{'buffer':>10s}")
    for case, r in RESULTS.items():
        print(f"{case:22s}" + "".join(f"{r.max_abs(k):10.1e}" for k in ("output", "loss", "grad", "param", "buffer")))


# ---- models --------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class BrokenActivationMLP(MLP):
    """The MXNet build uses Tanh where torch uses ReLU."""

    def __init__(self):
        nn.Module.__init__(self)
        self.fc1, self.fc2 = nn.Linear(10, 32), nn.Linear(32, 4)
        self.act = nn.ReLU() if dl.backend() == "torch" else nn.Tanh()


class CNN(nn.Module):
    def __init__(self, eps2: float = 1e-5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 12, 3, padding=1, bias=False), nn.BatchNorm2d(12, eps=eps2), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(12 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(dl.ops.flatten(self.features(x), 1))


def broken_eps_cnn():
    """The MXNet build's second BatchNorm has eps 0.1 instead of 1e-5."""
    return CNN(eps2=1e-5 if dl.backend() == "torch" else 0.1)


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, ids):
        out, (h, c) = self.lstm(self.emb(ids))
        return self.head(out), h


RNG = np.random.default_rng(0)
X_MLP = RNG.standard_normal((8, 10)).astype(np.float32)
X_CNN = RNG.standard_normal((4, 3, 16, 16)).astype(np.float32)
X_IDS = RNG.integers(0, 20, (4, 7))
SGD_MOMENTUM = ("sgd", {"lr": 0.1, "momentum": 0.9})


def adam(params):
    return dl.optim.Adam(params, lr=1e-2)


# ---- good models pass --------------------------------------------------------------------------------
@pytest.mark.parametrize("opt_name,optimizer", [("sgd-momentum", SGD_MOMENTUM), ("adam", adam)])
@pytest.mark.parametrize("case,factory,x,loss", [
    ("mlp", MLP, X_MLP, None),
    ("cnn", CNN, X_CNN, "cross_entropy"),
    ("lstm", LSTMNet, X_IDS, None),
])
def test_good_models_pass(case, factory, x, loss, opt_name, optimizer):
    report = assert_parity(factory, x, loss=loss, optimizer=optimizer, steps=3)
    RESULTS[f"{case} {opt_name}"] = report
    names = {d.name for d in report.diffs}
    # every parameter's gradient and value after each step was compared, 3 steps
    model = CNN(backend="torch") if factory is CNN else factory(backend="torch")
    for k, _ in model.named_parameters():
        assert f"grad {k}" in names and f"param {k}" in names
    assert {d.step for d in report.diffs} == {1, 2, 3}
    if case == "cnn":
        assert any(n.startswith("buffer features.1.running_var") for n in names)
    assert report.passed and report.max_abs("output") < 1e-4, str(report)
    text = str(report)
    assert "dualdl parity PASS" in text and "max abs grad:" in text
    assert all(f"grad {k}" in text for k, _ in model.named_parameters())


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.act = nn.Linear(6, 8), nn.Linear(5, 8), nn.Tanh()

    def forward(self, x, y):
        return self.act(dl.ops.add(self.a(x), self.b(y)))


def test_several_inputs_hybridized_mxnet():
    x, y = RNG.standard_normal((4, 6)).astype(np.float32), RNG.standard_normal((4, 5)).astype(np.float32)
    report = assert_parity(TwoInputs, (x, y), loss="mse", optimizer="adam", steps=2, hybridize=True)
    names = {d.name for d in report.diffs}
    assert {"grad input[0]", "grad input[1]", "grad a.weight", "param b.bias"} <= names
    assert "mxnet model hybridized" in report.notes


def test_eval_mode_forward_only_and_float64_reference():
    report = assert_parity(CNN, X_CNN, train=False, backward=False, steps=0, float64_reference=True)
    outs = [d for d in report.diffs if d.name.startswith("output")]
    assert outs and all(d.ref_torch is not None and d.ref_torch < 1e-4 and d.ref_mxnet < 1e-4 for d in outs)
    assert not any(d.name.startswith(("grad", "loss")) for d in report.diffs)


def test_eval_mode_gradients_through_maxpool():
    """MKLDNN's max-pooling backward under record(train_mode=False) is wrong (2.5 off measured);
    dualdl's MXNet MaxPool2d avoids it on NDArrays. This harness located it as "features.7 in backward"."""
    report = assert_parity(CNN, X_CNN, train=False, steps=1)
    assert report.max_abs("grad") < 1e-4


# ---- broken models fail and the report names the layer --------------------------------------------
def test_broken_activation_is_named_and_blamed_on_mxnet():
    with pytest.raises(ParityError) as info:
        assert_parity(BrokenActivationMLP, X_MLP, steps=2, float64_reference=True)
    report = info.value.report
    assert isinstance(info.value, AssertionError) and not report.passed
    layer = report.first_divergent_layer
    assert layer is not None and layer.name == "act", report.layer_table()
    assert (layer.torch_type, layer.mxnet_type) == ("ReLU", "Tanh")
    assert layer.input_max_abs < 1e-5 < layer.output_max_abs          # inputs agree, output does not
    assert layer.ref_torch < 1e-5 < 0.1 < layer.ref_mxnet
    assert "mxnet side" in report.diagnosis()
    text = str(info.value)
    assert "first divergent layer: act" in text and "<- first divergent" in text and "FAIL" in text


def test_broken_batchnorm_eps_is_named():
    report = check_parity(broken_eps_cnn, X_CNN, steps=1, float64_reference=True)
    assert isinstance(report, ParityReport) and not report.passed
    layer = report.first_divergent_layer
    assert layer is not None and layer.name == "features.5", report.layer_table()
    assert all(l.passed for l in report.layers[:report.layers.index(layer)])
    assert "mxnet side" in report.diagnosis()
    assert report.first_failure.name == "output[0]" and report.first_failure.step == 1


class Scale(nn.Module):
    """``x * w``; the MXNet build blocks the gradient of ``w`` (same forward, wrong backward)."""

    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(np.full((n,), 1.5, np.float32))
        self.block_grad = dl.backend() == "mxnet"

    def forward(self, x):
        w = self.w
        if self.block_grad:
            import mxnet as mx
            w = mx.nd.BlockGrad(w)
        return dl.ops.mul(x, w)


class BrokenBackwardMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.scale, self.act, self.fc2 = nn.Linear(10, 32), Scale(32), nn.ReLU(), nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.act(self.scale(self.fc1(x))))


def test_broken_backward_is_located_by_replaying_layers():
    """Forward outputs agree, so the layer is found by replaying each layer alone with torch's inputs
    and output gradients, in backward order."""
    report = check_parity(BrokenBackwardMLP, X_MLP, steps=1, float64_reference=True)
    assert not report.passed and report.max_abs("output") < 1e-5
    assert "grad scale.w" in {d.name for d in report.failures}
    assert all(l.passed for l in report.layers)                      # forward: every layer agrees
    layer = report.first_divergent_layer
    assert layer is not None and layer.phase == "backward" and layer.name == "scale", report.layer_table()
    assert "w grad" in layer.note and "in backward" in report.summary()
    assert [l.name for l in report.backward_layers][:2] == ["fc2", "act"]   # backward order
    assert "mxnet side" in report.diagnosis()


def test_fp32_rounding_is_told_apart_from_a_mistake():
    """A tolerance tighter than fp32 rounding fails, and the float64 reference says both sides are
    as far from it as from each other."""
    report = check_parity(MLP, X_MLP, steps=1, rtol=0.0, atol=1e-9, float64_reference=True)
    assert not report.passed
    assert "fp32 rounding" in report.diagnosis(), str(report)


# ---- report and argument checks --------------------------------------------------------------------------
def test_compare_arrays_tolerance_rule():
    b = np.array([1.0, -2.0, 0.0])
    ok = compare_arrays(b + np.array([1e-5 + 1e-4 * 1.0, 0, 0]) * 0.999, b, rtol=1e-4, atol=1e-5)
    assert ok["passed"] and ok["usage"] <= 1.0
    bad = compare_arrays(b + np.array([0, 0, 2e-5]), b, rtol=1e-4, atol=1e-5)
    assert not bad["passed"] and abs(bad["usage"] - 2.0) < 1e-9 and abs(bad["max_abs"] - 2e-5) < 1e-12
    assert not compare_arrays(np.zeros(3), np.zeros(4), 1e-4, 1e-5)["passed"]
    nan = np.array([np.nan, 1.0])
    assert compare_arrays(nan, nan.copy(), 1e-4, 1e-5)["passed"]
    assert not compare_arrays(nan, np.array([0.0, 1.0]), 1e-4, 1e-5)["passed"]


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="unknown loss"):
        check_parity(MLP, X_MLP, loss="hinge")
    with pytest.raises(ValueError, match="unknown optimizer"):
        check_parity(MLP, X_MLP, optimizer="lamb")
    with pytest.raises(ValueError, match="steps must be 0"):
        check_parity(MLP, X_MLP, backward=False, steps=2)
    with pytest.raises(TypeError, match="expected a mxnet model"):
        check_parity(lambda: MLP(backend="torch"), X_MLP)


# ---- pytest plugin + example, CLI -------------------------------------------------------------------
def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    for k in [k for k in env if k.startswith("DMLC_")]:
        del env[k]
    return env


def _plugin_installed():
    """Whether the pytest11 entry point ``dualdl`` is installed (then ``-p`` would register it twice)."""
    from importlib.metadata import entry_points
    return any(ep.name == "dualdl" for ep in entry_points(group="pytest11"))


@pytest.mark.slow
def test_example_file_runs_with_the_pytest_plugin():
    plugin = [] if _plugin_installed() else ["-p", "dualdl.testing.pytest_plugin"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", *plugin,
                           "--parity-report", os.path.join(ROOT, "examples", "test_parity_example.py")],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2 passed" in proc.stdout and "dualdl parity reports" in proc.stdout
    assert "dualdl parity PASS: SmallCNN" in proc.stdout


MODELS_PY = textwrap.dedent('''
    import dualdl as dl
    from dualdl import nn

    class Net(nn.Module):
        def __init__(self, act="relu"):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.act = nn.ReLU() if act == "relu" else nn.Sigmoid()
            self.fc = nn.Linear(4 * 6 * 6, 3)

        def forward(self, x):
            return self.fc(dl.ops.flatten(self.act(self.bn(self.conv(x))), 1))

    def good():
        return Net()

    def broken():
        return Net("relu" if dl.backend() == "torch" else "sigmoid")
''')


def _cli_args(factory, out_json):
    return ["parity", f"parity_models:{factory}", "--input-shape", "2,3,6,6", "--steps", "2",
            "--loss", "cross_entropy", "--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9", "--float64",
            "--json", str(out_json)]


@pytest.mark.slow
def test_cli_fails_a_broken_model_in_a_subprocess(tmp_path):
    (tmp_path / "parity_models.py").write_text(MODELS_PY)
    out_json = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "dualdl"] + _cli_args("broken", out_json),
                          cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "FAIL" in proc.stdout and "first divergent layer: act" in proc.stdout
    assert "mxnet side" in proc.stdout
    data = json.loads(out_json.read_text())
    assert data["passed"] is False and data["first_divergent_layer"]["name"] == "act"


def test_cli_passes_a_good_model(tmp_path, monkeypatch, capsys):
    """The same command in-process (the subprocess above covers the process exit status)."""
    from dualdl.cli import main
    (tmp_path / "parity_models.py").write_text(MODELS_PY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out_json = tmp_path / "report.json"
    assert main(_cli_args("good", out_json)) == 0
    out = capsys.readouterr().out
    assert "dualdl parity PASS" in out and "grad conv.weight" in out
    data = json.loads(out_json.read_text())
    assert data["passed"] is True and data["steps"] == 2


def test_cli_rejects_a_bad_factory(capsys):
    from dualdl.cli import main
    assert main(["parity", "no_such_module_xyz:make", "--input-shape", "2,3"]) == 2
    assert "cannot import module 'no_such_module_xyz'" in capsys.readouterr().err
    assert main(["parity", "dualdl.nn:Linear", "--input-shape", "2,x"]) == 2
