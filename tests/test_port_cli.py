"""``dualdl convert``: real checkpoints from Gluon and torch converted and loaded by the other side."""
import os
import subprocess
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl import formats as F  # noqa: E402
from dualdl.cli import main  # noqa: E402


def _lstm_pair(bidirectional=True):
    from mxnet.gluon import rnn
    mx.random.seed(0)
    g = rnn.LSTM(6, num_layers=2, bidirectional=bidirectional, input_size=4)
    g.initialize(mx.init.Uniform(0.5))
    t = torch.nn.LSTM(4, 6, 2, bidirectional=bidirectional)
    return g, t


def _outputs(g, t, x):
    t.eval()
    with torch.no_grad():
        return g(mx.nd.array(x)).asnumpy(), t(torch.from_numpy(x))[0].numpy()


def test_gluon_params_to_torch_pth_and_back(tmp_path, capsys):
    g, t = _lstm_pair()
    g.save_parameters(str(tmp_path / "lstm.params"))
    assert main(["convert", str(tmp_path / "lstm.params"), str(tmp_path / "lstm.pth"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "(gluon, 16 tensors)" in out and "(torch, 16 tensors" in out and "bit-exact" in out
    sd = torch.load(tmp_path / "lstm.pth", weights_only=True)
    t.load_state_dict(sd, strict=True)
    x = np.random.default_rng(0).standard_normal((5, 2, 4)).astype(np.float32)
    a, b = _outputs(g, t, x)
    assert np.abs(a - b).max() < 1e-6
    # torch -> Gluon: load_parameters accepts the translated keys
    with torch.no_grad():
        t.bias_hh_l1_reverse.add_(0.25)
    torch.save(t.state_dict(), tmp_path / "changed.pt")
    assert main(["convert", str(tmp_path / "changed.pt"), str(tmp_path / "changed.params")]) == 0
    g.load_parameters(str(tmp_path / "changed.params"))
    a, b = _outputs(g, t, x)
    assert np.abs(a - b).max() < 1e-6


def test_dataparallel_prefix_is_stripped_and_can_be_added(tmp_path, capsys):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    torch.save({"state_dict": torch.nn.DataParallel(m).state_dict(), "epoch": 7},
               tmp_path / "dp.pth")
    assert main(["convert", str(tmp_path / "dp.pth"), str(tmp_path / "m.safetensors")]) == 0
    assert "stripped prefix 'module.' from 7 keys" in capsys.readouterr().out
    st = F.read_tensors(tmp_path / "m.safetensors")
    assert set(st) == set(m.state_dict())
    assert st["1.num_batches_tracked"].dtype == np.int64
    assert main(["convert", str(tmp_path / "m.safetensors"), str(tmp_path / "dp2.pt"),
                 "--add-prefix", "module."]) == 0
    dp = torch.nn.DataParallel(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)))
    dp.load_state_dict(torch.load(tmp_path / "dp2.pt", weights_only=True), strict=True)
    assert torch.equal(dp.module[0].weight, m[0].weight)


def test_convert_with_a_port_mapping(tmp_path, capsys):
    """A Gluon model-zoo checkpoint becomes a torch checkpoint for a differently-named torch model."""
    from mxnet.gluon.model_zoo import vision
    import dualdl as dl
    mx.random.seed(0)
    g = vision.get_model("mobilenet0.25", pretrained=False, classes=10)
    g.initialize(mx.init.Xavier())
    sys.path.insert(0, os.path.dirname(__file__))
    try:
        from test_port_vision import MobileNetV1
    finally:
        sys.path.pop(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    report = dl.port.port_gluon_to_torch(g, MobileNetV1(), x)
    assert report.ok
    report.save(tmp_path / "report.json")
    g.save_parameters(str(tmp_path / "zoo.params"))
    assert main(["convert", str(tmp_path / "zoo.params"), str(tmp_path / "zoo.pt"),
                 "--mapping", str(tmp_path / "report.json"), "--verify"]) == 0
    assert "applied mapping" in capsys.readouterr().out
    fresh = MobileNetV1().eval()
    fresh.load_state_dict(torch.load(tmp_path / "zoo.pt", weights_only=True), strict=True)
    with torch.no_grad():
        out = fresh(torch.from_numpy(x)).numpy()
    ref = g(mx.nd.array(x)).asnumpy()
    assert np.abs(out - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())


def test_bad_inputs_give_clear_errors_and_write_nothing(tmp_path, capsys):
    (tmp_path / "notes.pt").write_text("not a checkpoint")
    assert main(["convert", str(tmp_path / "notes.pt"), str(tmp_path / "out.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "notes.pt" in err and "unrecognised" in err
    F.write_safetensors(tmp_path / "ok.safetensors", {"w": np.ones(2, np.float32)})
    assert main(["convert", str(tmp_path / "ok.safetensors"), str(tmp_path / "out.xyz")]) == 2
    assert "extension" in capsys.readouterr().err
    (tmp_path / "map.json").write_text("[1, 2]")
    assert main(["convert", str(tmp_path / "ok.safetensors"), str(tmp_path / "out.pt"),
                 "--mapping", str(tmp_path / "map.json")]) == 2
    assert "port mapping" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.json", "notes.pt", "ok.safetensors"]


@pytest.mark.slow  # a fresh interpreter importing torch
def test_console_entry_point_runs(tmp_path):
    F.write_gluon(tmp_path / "a.params", {"0.gamma": np.ones(3, np.float32),
                                          "0.beta": np.zeros(3, np.float32)})
    proc = subprocess.run([sys.executable, "-m", "dualdl", "convert", str(tmp_path / "a.params"),
                           str(tmp_path / "a.pt"), "--verify"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(F.read_tensors(tmp_path / "a.pt")) == ["0.bias", "0.weight"]


def test_port_and_formats_import_no_framework():
    code = ("import sys, dualdl.port, dualdl.formats, dualdl.port.cli_convert; "
            "bad = [m for m in ('torch', 'mxnet') if m in sys.modules]; "
            "assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
