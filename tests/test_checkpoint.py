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


@pytest.mark.parametrize("ext", [".safetensors", ".pt", ".params"])
def test_save_removes_temp_files_of_crashed_saves(tmp_path, backend, ext):
    """Temp files left by saves whose process is gone (here: a real exited process) go with the
    next complete save of the same file; the checkpoint then loads."""
    import subprocess
    import sys
    from dualdl import atomic
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / (f".net.tmp-{dead.pid}-1-{atomic._host_tag()}-{atomic._boot_tag()}-"
                        f"0123abcd{ext}")
    stale.write_bytes(b"half a checkpoint")
    m = Net()
    _randomise(m, 4)
    dl.save(m, tmp_path / f"net{ext}")
    assert [p.name for p in tmp_path.iterdir()] == [f"net{ext}"]
    fresh = Net()
    dl.load(fresh, tmp_path / f"net{ext}")
    for k, v in _sd(m).items():
        np.testing.assert_array_equal(v, _sd(fresh)[k])


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


_MEMORY_CHILD = r'''
import gc, json, sys, threading, time
import numpy as np
import dualdl as dl
from dualdl import nn

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(12)])   # 50.4 MB fp32
    def forward(self, x):
        return self.layers(x)

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))

def peak_growth(fn):
    """Peak RSS during fn() minus RSS before: the kernel's high-water mark reset right before
    (clear_refs 5) when allowed, else a 0.5 ms sampling thread."""
    gc.collect()
    before = rss()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        fn()
        return hwm() - before
    except OSError:
        pass
    peak, stop = [before], threading.Event()
    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss()); time.sleep(0.0005)
    th = threading.Thread(target=sample); th.start()
    try:
        fn()
    finally:
        stop.set(); th.join()
    return max(peak[0], rss()) - before

be, paths = sys.argv[1], sys.argv[2:]
with dl.use(be):
    dl.seed(0)
    m = Stack()
    m2 = Stack()
size = sum(dl.to_numpy(v).nbytes for v in dl.state_dict(m).values())
ref = {k: dl.to_numpy(v) for k, v in dl.state_dict(m).items()}
for v in dl.state_dict(m2).values():   # MXNet allocates lazily: materialise the model's own storage first
    dl.to_numpy(v)
out = {"size": size}
for path in paths:
    save = peak_growth(lambda: dl.save(m, path))
    for v in dl.state_dict(m2).values():   # in place, so the load below has to bring every value
        v[:] = 0
    assert not any(np.array_equal(ref[k], dl.to_numpy(v)) for k, v in dl.state_dict(m2).items())
    load = peak_growth(lambda: dl.load(m2, path))
    same = all(np.array_equal(ref[k], dl.to_numpy(v)) for k, v in dl.state_dict(m2).items())
    out[path.rsplit(".", 1)[1]] = {"save": save / size, "load": load / size, "same": same}
print(json.dumps(out))
'''


@pytest.mark.slow
@pytest.mark.parametrize("be", ["torch", "mxnet"])
def test_save_and_load_peak_memory_of_a_50mb_model(tmp_path, be):
    """Issue 8: dl.save peaked at 3.0x the model's size, dl.load at 2.0x (target 1.5x). Saving now
    streams (peak: one tensor at most, 1/12 of this model), loading reads each tensor once (1.0x).
    Also for Gluon .params files, and torch .pt on torch (on MXNet, importing torch alone is
    several times this model)."""
    import json
    import subprocess
    import sys
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs Linux /proc to read RSS")
    env = dict(os.environ, OMP_NUM_THREADS="1", MALLOC_MMAP_THRESHOLD_="1048576",
               MALLOC_TRIM_THRESHOLD_="1048576")
    exts = ["safetensors", "params"] + (["pt"] if be == "torch" else [])
    r = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, be] + [str(tmp_path / f"m.{e}") for e in exts],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["size"] > 50e6
    for e in exts:
        got = out[e]
        assert got["same"], e
        assert got["save"] <= 0.5, f".{e}: dl.save peak RSS growth {got['save']:.2f}x the model (streaming: <= 1 tensor)"
        assert got["load"] <= 1.5, f".{e}: dl.load peak RSS growth {got['load']:.2f}x the model (target 1.5x)"


def test_saved_file_is_standard_safetensors_for_torch_and_numpy(tmp_path, backend):
    """What dl.save writes loads with safetensors' own readers (torch and numpy), metadata included."""
    import torch
    from safetensors import safe_open
    from safetensors.numpy import load_file
    from safetensors.torch import load_file as torch_load_file
    m = Net()
    _randomise(m, 4)
    path = tmp_path / "net.safetensors"
    dl.save(m, path, metadata={"epoch": "3"})
    ref = _sd(m)
    for got in (load_file(str(path)), {k: v.numpy() for k, v in torch_load_file(str(path)).items()}):
        assert list(got) == list(ref) or set(got) == set(ref)
        for k, v in ref.items():
            assert got[k].dtype == v.dtype and np.array_equal(got[k], v), k
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    assert meta["epoch"] == "3" and meta["format"] == "dualdl" and meta["backend"] == dl.backend()
    t = torch.nn.Module()
    t.fc, t.head = torch.nn.Linear(4, 3), torch.nn.Linear(3, 2, bias=False)
    t.register_buffer("steps", torch.zeros(1, dtype=torch.int64))
    t.load_state_dict(torch_load_file(str(path)), strict=True)
    assert torch.equal(t.fc.weight, torch.from_numpy(ref["fc.weight"]))
