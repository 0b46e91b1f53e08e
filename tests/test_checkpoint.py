"""dl.save / dl.load: neutral safetensors, cross-backend bit-exact, native formats, atomic, all-or-nothing."""
import os

import numpy as np
import pytest

import dualdl as dl
from dualdl import formats, nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.head = nn.Linear(3, 2, bias=False)
        self.register_buffer("steps", np.zeros(1, dtype=np.int64))

    def forward(self, x):
        return self.head(self.fc(x))


def _sd(model):
    return {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}


def _randomise(model, seed=0):
    rng = np.random.default_rng(seed)
    dl.load_state_dict(model, {k: (rng.normal(size=v.shape) * 3).astype(v.dtype) for k, v in _sd(model).items()})


@pytest.mark.parametrize("src,dst", [("mxnet", "torch"), ("torch", "mxnet"), ("torch", "torch"), ("mxnet", "mxnet")])
@pytest.mark.parametrize("ext", [".safetensors", ".pt", ".params"])
def test_save_on_one_backend_load_on_the_other_bit_exact(tmp_path, src, dst, ext):
    a = Net(backend=src)
    _randomise(a)
    path = tmp_path / f"net{ext}"
    dl.save(a, path)
    b = Net(backend=dst)
    dl.load(b, path)
    sa, sb = _sd(a), _sd(b)
    assert list(sa) == list(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype
        np.testing.assert_array_equal(sa[k], sb[k])


def test_safetensors_metadata_names_the_backend(tmp_path):
    m = Net(backend="mxnet")
    dl.save(m, tmp_path / "m.safetensors")
    meta = formats.read_metadata(tmp_path / "m.safetensors")
    assert meta["backend"] == "mxnet" and meta["model"] == "Net"


def test_dataparallel_module_prefix_is_normalised(tmp_path, backend):
    import torch
    src = Net(backend="torch")
    _randomise(src, 1)
    torch.save(torch.nn.DataParallel(src).state_dict(), tmp_path / "dp.pth")   # keys start with module.
    dst = Net()
    dl.load(dst, tmp_path / "dp.pth")
    for k, v in _sd(src).items():
        np.testing.assert_array_equal(v, _sd(dst)[k])


def test_crash_mid_save_keeps_previous_file(tmp_path, backend, monkeypatch):
    m = Net()
    path = tmp_path / "net.safetensors"
    dl.save(m, path)
    before = path.read_bytes()
    _randomise(m, 2)
    real_fsync = os.fsync

    def boom(fd):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="simulated"):
        dl.save(m, path)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["net.safetensors"]   # no temp file left behind


def test_bad_files_give_clear_errors_and_change_nothing(tmp_path, backend):
    m = Net()
    _randomise(m, 3)
    before = _sd(m)
    (tmp_path / "text.pt").write_text("hello, this is not a checkpoint")
    with pytest.raises(formats.FormatError, match="unrecognised file content"):
        dl.load(m, tmp_path / "text.pt")
    other = Net()
    dl.save(other, tmp_path / "ok.safetensors")
    data = (tmp_path / "ok.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(formats.FormatError):
        dl.load(m, tmp_path / "cut.safetensors")
    formats.write_safetensors(tmp_path / "wrong.safetensors", {"fc.weight": np.zeros((5, 5), np.float32)})
    with pytest.raises(dl.state.StateDictError, match=r"(?s)nothing was changed.*fc.weight: shape \(5, 5\)"):
        dl.load(m, tmp_path / "wrong.safetensors")
    after = _sd(m)
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])


def test_pickle_with_arbitrary_object_is_never_executed(tmp_path, backend):
    import torch
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    torch.save({"fc.weight": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(formats.FormatError):
        dl.load(Net(), tmp_path / "evil.pt")
    assert not marker.exists()


def test_native_gluon_checkpoint_loads_into_dualdl_model(tmp_path):
    """A BatchNorm saved by native Gluon (gamma/beta) loads into a dualdl model (weight/bias)."""
    from mxnet import gluon
    import mxnet as mx
    g = gluon.nn.HybridSequential()
    g.add(gluon.nn.Dense(3, in_units=4))
    g.initialize(mx.init.Normal(1.0))
    g.save_parameters(str(tmp_path / "g.params"))

    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(4, 3)

        def forward(self, x):
            return self.layer(x)
    # structural names differ ("0." vs "layer."): a clear error, nothing loaded
    m = Seq(backend="torch")
    with pytest.raises(dl.state.StateDictError, match="unexpected keys: 0.weight, 0.bias"):
        dl.load(m, tmp_path / "g.params")
