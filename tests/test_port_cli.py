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


def _one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_destination_that_is_the_source_is_refused_and_the_original_kept(tmp_path, capsys,
                                                                         monkeypatch):
    """Same path, the same path spelled differently, a symbolic link and a hard link to it."""
    src = tmp_path / "m.params"
    F.write_gluon(src, {"0.weight": np.arange(6, dtype=np.float32).reshape(2, 3)})
    before = src.read_bytes()
    os.symlink(src, tmp_path / "link.params")
    os.link(src, tmp_path / "hard.params")
    monkeypatch.chdir(tmp_path)
    for dst in (str(src), "./m.params", "m.params", str(tmp_path / "sub" / ".." / "m.params"),
                "link.params", "hard.params"):
        if "sub" in dst:
            (tmp_path / "sub").mkdir(exist_ok=True)
        assert main(["convert", str(src), dst, "--to", "torch"]) == 2
        err = _one_line_error(capsys)
        assert "is the source file" in err and "--in-place" in err, err
        assert src.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.params", "link.params",
                                                          "m.params", "sub"]
    from dualdl.port.cli_convert import SameFileError, convert
    with pytest.raises(SameFileError, match="in_place=True"):
        convert(str(src), "./m.params", to="torch")
    assert src.read_bytes() == before


def test_in_place_conversion_when_asked(tmp_path, capsys):
    src = tmp_path / "m.params"
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    F.write_gluon(src, {"0.gamma": w[0], "0.beta": w[1]})
    os.symlink(src, tmp_path / "link.params")
    assert main(["convert", str(tmp_path / "link.params"), str(tmp_path / "link.params"),
                 "--to", "torch", "--in-place", "--verify"]) == 0
    assert "verified" in capsys.readouterr().out
    assert os.path.islink(tmp_path / "link.params")     # the link is kept, its target replaced
    assert F.detect_format(src) == "torch"
    back = F.read_tensors(src)
    assert sorted(back) == ["0.bias", "0.weight"]
    np.testing.assert_array_equal(back["0.weight"], w[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.params", "m.params"]


def test_missing_destination_folder_is_named(tmp_path, capsys):
    src = tmp_path / "m.safetensors"
    F.write_safetensors(src, {"w": np.ones(2, np.float32)})
    assert main(["convert", str(src), str(tmp_path / "out" / "m.pt")]) == 2
    err = _one_line_error(capsys)
    assert f"its folder {tmp_path / 'out'} does not exist" in err and ".tmp-" not in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]
