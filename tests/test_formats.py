"""dualdl.formats: content-detected reading, dtype-exact atomic writing, key normalisation,
and clear errors for corrupt, truncated or foreign files - never an executed pickle."""
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from dualdl import formats as F
from dualdl.atomic import atomic_write_file
from dualdl.formats import FormatError

DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"]


def _tensors(seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for i, dt in enumerate(DTYPES):
        a = rng.standard_normal((2, 3, 4)) * 50
        out[f"layer{i}.{dt}"] = (a > 0) if dt == "bool" else a.astype(dt)
    out["big.weight"] = rng.standard_normal((64, 33)).astype(np.float32)
    out["empty"] = np.zeros((0, 3), np.float32)
    return out


def _assert_same(a, b):
    assert list(a) == list(b) or set(a) == set(b)
    for k in a:
        assert b[k].dtype == a[k].dtype, k
        assert b[k].shape == a[k].shape, k
        assert np.array_equal(a[k], b[k]), k


WRITERS = {"safetensors": F.write_safetensors, "torch": F.write_torch, "gluon": F.write_gluon}


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_roundtrip_every_dtype_exactly(tmp_path, fmt):
    t = _tensors()
    path = tmp_path / "x.bin"
    WRITERS[fmt](path, t)
    assert F.detect_format(path) == fmt
    _assert_same(t, F.read_tensors(path))


def test_gluon_writer_and_reader_agree_with_mxnet(tmp_path):
    mx = pytest.importorskip("mxnet")
    t = _tensors()
    F.write_gluon(tmp_path / "ours.params", t)
    loaded = mx.nd.load(str(tmp_path / "ours.params"))
    _assert_same(t, {k: v.asnumpy() for k, v in loaded.items()})
    mx.nd.save(str(tmp_path / "mx.params"), {k: mx.nd.array(v, dtype=v.dtype) for k, v in t.items()})
    _assert_same(t, F.read_tensors(tmp_path / "mx.params"))
    # byte for byte what MXNet writes
    assert (tmp_path / "ours.params").read_bytes() == (tmp_path / "mx.params").read_bytes()
    mx.nd.save(str(tmp_path / "list.params"), [mx.nd.ones((2,)), mx.nd.zeros((1, 2), dtype="int64")])
    lst = F.read_tensors(tmp_path / "list.params")
    assert list(lst) == ["0", "1"] and lst["1"].dtype == np.int64


def test_torch_and_safetensors_files_from_their_own_libraries(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.numpy import load_file, save_file
    t = _tensors()
    F.write_torch(tmp_path / "a.pt", t)
    sd = torch.load(tmp_path / "a.pt", weights_only=True)
    _assert_same(t, {k: v.numpy() for k, v in sd.items()})
    F.write_safetensors(tmp_path / "a.safetensors", t, metadata={"source": "test"})
    _assert_same(t, load_file(str(tmp_path / "a.safetensors")))
    assert F.read_metadata(tmp_path / "a.safetensors") == {"source": "test"}
    save_file({"w": np.arange(6, dtype=np.int32)}, str(tmp_path / "lib.safetensors"))
    assert F.read_tensors(tmp_path / "lib.safetensors")["w"].tolist() == list(range(6))
    bf = {"w": torch.arange(5, dtype=torch.bfloat16) / 4}
    torch.save(bf, tmp_path / "bf16.pt")
    r = F.read_tensors(tmp_path / "bf16.pt")["w"]
    assert r.dtype == np.float32 and r.tolist() == [0, 0.25, 0.5, 0.75, 1.0]


def test_detection_is_by_content_not_extension(tmp_path):
    t = {"w": np.arange(4, dtype=np.float32)}
    F.write_torch(tmp_path / "really_torch.params", t)
    F.write_gluon(tmp_path / "really_gluon.safetensors", t)
    F.write_safetensors(tmp_path / "really_st.pt", t)
    assert F.detect_format(tmp_path / "really_torch.params") == "torch"
    assert F.detect_format(tmp_path / "really_gluon.safetensors") == "gluon"
    assert F.detect_format(tmp_path / "really_st.pt") == "safetensors"
    for p in tmp_path.iterdir():
        _assert_same(t, F.read_tensors(p))


def test_torch_checkpoint_dict_with_nested_state_dict(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    for key in ("state_dict", "model"):
        torch.save({key: model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                    "step": torch.tensor(12)}, tmp_path / f"{key}.pth")
        got = F.read_tensors(tmp_path / f"{key}.pth")
        assert set(got) == set(model.state_dict())
        assert np.array_equal(got["0.weight"], model[0].weight.detach().numpy())
        assert got["1.num_batches_tracked"].dtype == np.int64
    torch.save({"epoch": 3, "note": "x"}, tmp_path / "none.pt")
    with pytest.raises(FormatError, match="no tensors found"):
        F.read_tensors(tmp_path / "none.pt")


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickle_with_arbitrary_object_is_refused_not_executed(tmp_path):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "pwned"
    # a torch.save file (zip) holding an arbitrary object, and a bare pickle
    torch.save({"w": torch.ones(2), "evil": _Evil(str(marker))}, tmp_path / "evil.pt")
    with open(tmp_path / "evil.pkl", "wb") as f:
        pickle.dump({"evil": _Evil(str(marker))}, f, protocol=2)
    marker.unlink(missing_ok=True)  # torch.save itself may not have created it; be sure
    for name in ("evil.pt", "evil.pkl"):
        with pytest.raises(FormatError) as e:
            F.read_tensors(tmp_path / name)
        assert name in str(e.value)
        assert not marker.exists(), "the pickle was executed"


def test_corrupt_truncated_and_foreign_files(tmp_path):
    t = _tensors()
    (tmp_path / "text.pt").write_text("hello, this is not a checkpoint\n")
    (tmp_path / "random.bin").write_bytes(np.random.default_rng(0).bytes(4096))
    (tmp_path / "empty.params").write_bytes(b"")
    for fmt, w in WRITERS.items():
        full = tmp_path / f"full.{fmt}"
        w(full, t)
        data = full.read_bytes()
        (tmp_path / f"trunc.{fmt}").write_bytes(data[: len(data) // 2])
    bad_header = bytearray((tmp_path / "full.safetensors").read_bytes())
    bad_header[10:14] = b"\xff\xfe\x00{"
    (tmp_path / "badheader.safetensors").write_bytes(bytes(bad_header))
    cases = {"text.pt": "unrecognised", "random.bin": "unrecognised", "empty.params": "empty",
             "trunc.safetensors": "truncated", "trunc.gluon": "truncated",
             "trunc.torch": "cannot read as a torch file", "missing.pt": "no such file",
             "badheader.safetensors": "corrupt safetensors header"}
    for name, why in cases.items():
        with pytest.raises(FormatError, match=why) as e:
            F.read_tensors(tmp_path / name)
        assert isinstance(e.value, ValueError)
        assert str(tmp_path / name) in str(e.value)


def test_unsupported_input_is_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match="complex64"):
        F.write_safetensors(tmp_path / "c.safetensors", {"c": np.ones(2, np.complex64)})
    with pytest.raises(ValueError, match="0-d"):
        F.write_gluon(tmp_path / "s.params", {"s": np.float32(1.0)})
    with pytest.raises(TypeError, match="metadata"):
        F.write_safetensors(tmp_path / "m.safetensors", {"w": np.ones(1)}, metadata={"n": 1})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_failed_write_leaves_previous_file_intact(tmp_path, monkeypatch, fmt):
    path = tmp_path / "ckpt"
    old = {"w": np.arange(10, dtype=np.float32)}
    WRITERS[fmt](path, old)
    before = path.read_bytes()

    def broken_fsync(fd):  # fails after the new content was written to the temporary file
        assert os.fstat(fd).st_size > 0
        raise OSError("disk on fire")
    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk on fire"):
        WRITERS[fmt](path, _tensors())
    monkeypatch.undo()
    assert path.read_bytes() == before
    _assert_same(old, F.read_tensors(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # temp file cleaned up


def test_write_failing_midway_through_the_data(tmp_path):
    path = tmp_path / "w.safetensors"
    F.write_safetensors(path, {"w": np.ones(3, np.float32)})
    before = path.read_bytes()

    def half_then_crash(f):
        f.write(b"\x00" * 1000)
        raise RuntimeError("crash in the middle")
    with pytest.raises(RuntimeError):
        atomic_write_file(path, half_then_crash)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.safetensors"]


def test_process_killed_mid_save_leaves_previous_file_intact(tmp_path):
    """A real crash: the writer process is SIGKILLed after writing the new data, before the
    rename. The previous checkpoint must still read back unchanged."""
    path = tmp_path / "model.safetensors"
    F.write_safetensors(path, {"w": np.arange(5, dtype=np.float64)})
    marker = tmp_path / "written"
    child = textwrap.dedent(f"""
        import os, time, numpy as np
        from dualdl import formats
        def slow_fsync(fd):
            open({str(marker)!r}, "w").close()
            time.sleep(60)
        os.fsync = slow_fsync
        formats.write_safetensors({str(path)!r}, {{"w": np.zeros(2_000_000, np.float32)}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", child])
    try:
        deadline = time.time() + 30
        while not marker.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the child never reached the write"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    got = F.read_tensors(path)
    assert got["w"].dtype == np.float64 and got["w"].tolist() == [0, 1, 2, 3, 4]
    leftovers = [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]
    assert leftovers and all(n.startswith(".model.tmp-") for n in leftovers)   # hidden, beside the target


# ---------------------------------------------------------------- key normalisation
def test_prefix_helpers():
    t = {"module.a.weight": 1, "b.bias": 2}
    assert F.strip_prefix(t) == {"a.weight": 1, "b.bias": 2}
    assert F.add_prefix(["a", "module.b"]) == ["module.a", "module.b"]
    with pytest.raises(ValueError, match="collides"):
        F.strip_prefix({"module.a": 1, "a": 2})


def test_dataparallel_prefix_normalised_both_ways():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    dp = torch.nn.DataParallel(m)
    dp_sd = {k: v.numpy() for k, v in dp.state_dict().items()}
    assert all(k.startswith("module.") for k in dp_sd)
    fresh = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    aligned = F.align_module_prefix(dp_sd, fresh.state_dict())
    fresh.load_state_dict({k: torch.from_numpy(v) for k, v in aligned.items()}, strict=True)
    assert torch.equal(fresh[0].weight, m[0].weight)
    plain = {k: v.numpy() for k, v in m.state_dict().items()}
    dp2 = torch.nn.DataParallel(torch.nn.DataParallel(fresh))
    back = F.align_module_prefix(plain, dp2.state_dict())
    assert set(back) == set(dp2.state_dict())
    dp2.load_state_dict({k: torch.from_numpy(v) for k, v in back.items()}, strict=True)


def test_gluon_names_to_torch_names_load_into_equivalent_torch_models(tmp_path):
    mx = pytest.importorskip("mxnet")
    torch = pytest.importorskip("torch")
    from mxnet.gluon import nn as gnn, rnn as grnn
    mx.random.seed(0)
    g = gnn.HybridSequential()
    g.add(gnn.Conv2D(4, 3, in_channels=3), gnn.BatchNorm(in_channels=4), gnn.Activation("relu"),
          gnn.Dense(5, in_units=4 * 6 * 6))
    g.initialize(mx.init.Xavier())
    g[1].running_mean.set_data(mx.nd.random.uniform(shape=(4,)))
    g[1].beta.set_data(mx.nd.random.uniform(shape=(4,)))
    g.save_parameters(str(tmp_path / "g.params"))
    t = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))
    named = F.gluon_to_torch_names(F.read_tensors(tmp_path / "g.params"))
    assert "1.weight" in named and "1.bias" in named and "3.weight" in named
    named["4.weight"], named["4.bias"] = named.pop("3.weight"), named.pop("3.bias")
    t.load_state_dict({k: torch.from_numpy(v) for k, v in named.items()}, strict=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    t.eval()
    with torch.no_grad():
        diff = np.abs(t(torch.from_numpy(x)).numpy() - g(mx.nd.array(x)).asnumpy()).max()
    assert diff < 1e-5
    # and back: torch names -> Gluon keys that load_parameters accepts
    back = F.torch_to_gluon_names({k: v.numpy() for k, v in t.state_dict().items()})
    assert "1.gamma" in back and not any("num_batches" in k for k in back)
    back["3.weight"], back["3.bias"] = back.pop("4.weight"), back.pop("4.bias")
    F.write_gluon(tmp_path / "back.params", back)
    g.load_parameters(str(tmp_path / "back.params"))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_rnn_key_translation_round_trips(tmp_path, bidirectional):
    mx = pytest.importorskip("mxnet")
    torch = pytest.importorskip("torch")
    from mxnet.gluon import rnn as grnn
    g = grnn.LSTM(6, num_layers=2, bidirectional=bidirectional, input_size=4)
    g.initialize()
    g.save_parameters(str(tmp_path / "l.params"))
    raw = F.read_tensors(tmp_path / "l.params")
    named = F.gluon_to_torch_names(raw)
    t = torch.nn.LSTM(4, 6, 2, bidirectional=bidirectional)
    assert set(named) == set(t.state_dict())
    t.load_state_dict({k: torch.from_numpy(v) for k, v in named.items()}, strict=True)
    assert F.torch_to_gluon_names(named) == raw or list(F.torch_to_gluon_names(named)) == list(raw)
    F.write_gluon(tmp_path / "back.params", F.torch_to_gluon_names(named))
    g.load_parameters(str(tmp_path / "back.params"))


@pytest.mark.parametrize("fmt", ["safetensors", "torch"])
def test_zero_dim_tensors_stay_zero_dim(tmp_path, fmt):
    F.write_tensors(tmp_path / "s", {"s": np.float64(2.5), "n": np.array(3, np.int64)}, format=fmt)
    got = F.read_tensors(tmp_path / "s")
    assert got["s"].shape == () and got["s"].dtype == np.float64 and got["s"] == 2.5
    assert got["n"].shape == () and got["n"].dtype == np.int64


def test_legacy_torch_pickle_format(tmp_path):
    torch = pytest.importorskip("torch")
    sd = {"w": torch.arange(6, dtype=torch.int32).reshape(2, 3), "b": torch.ones(2, dtype=torch.float16)}
    torch.save(sd, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert (tmp_path / "legacy.pt").read_bytes()[:1] == b"\x80"
    assert F.detect_format(tmp_path / "legacy.pt") == "torch"
    got = F.read_tensors(tmp_path / "legacy.pt")
    assert got["w"].dtype == np.int32 and got["w"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert got["b"].dtype == np.float16


# ---------------------------------------------------------------- streaming safetensors
ST_DTYPES = DTYPES + ["int16", "uint16", "uint32", "uint64"]


def _st_tensors():
    rng = np.random.default_rng(1)
    out = {}
    for dt in ST_DTYPES:
        a = rng.standard_normal((3, 5)) * 100
        out[f"m.{dt}"] = (a > 0) if dt == "bool" else np.abs(a).astype(dt) if dt[0] == "u" else a.astype(dt)
        out[f"s.{dt}"] = np.array(out[f"m.{dt}"][0, 0], dtype=dt)              # 0-d
        out[f"e.{dt}"] = np.zeros((2, 0, 3), dt)                           # empty
    out["t.transposed"] = rng.standard_normal((4, 6)).astype(np.float32).T  # not C-contiguous
    out["b.bigendian"] = np.arange(7, dtype=">i4")                          # byte-swapped input
    return out


def test_streaming_writer_round_trips_every_dtype_0d_and_empty(tmp_path):
    from safetensors.numpy import load_file
    t = _st_tensors()
    meta = {"note": "ünïcode ok", "step": "12"}
    path = tmp_path / "all.safetensors"
    F.write_safetensors(path, t, metadata=meta)
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    assert (8 + n) % 8 == 0                               # data starts 8-byte aligned
    ours, theirs = F.read_tensors(path), load_file(str(path))
    assert list(ours) == list(t)                           # file order = the order given
    for got in (ours, theirs):
        assert set(got) == set(t)
        for k, a in t.items():
            assert got[k].dtype == a.dtype.newbyteorder("="), k
            assert got[k].shape == a.shape, k
            assert np.array_equal(got[k], a), k
    assert ours["s.float64"].shape == () and ours["e.int8"].shape == (2, 0, 3)
    assert F.read_metadata(path) == meta
    from safetensors import safe_open
    with safe_open(str(path), framework="numpy") as f:
        assert f.metadata() == meta


def test_streaming_writer_takes_native_tensors_and_torch_reads_the_file(tmp_path):
    torch = pytest.importorskip("torch")
    mx = pytest.importorskip("mxnet")
    from safetensors.torch import load_file
    tt = {"f": torch.randn(3, 4), "i": torch.arange(6, dtype=torch.int64).reshape(2, 3),
          "h": torch.randn(5).half(), "b": torch.tensor([True, False]), "z": torch.tensor(2.5),
          "v": torch.randn(4, 6).t(), "e": torch.zeros(0, 2),
          "p": torch.nn.Parameter(torch.randn(2, 2)),                # requires grad
          "s": torch.tensor([-3, 7], dtype=torch.int16)}             # no dualdl compute dtype
    mt = {"mf": mx.nd.random.uniform(shape=(2, 3)), "mi": mx.nd.array([1, 2, 3], dtype="int32"),
          "md": mx.nd.array([0.1, 2.0], dtype="float64")}
    F.write_safetensors(tmp_path / "n.safetensors", {**tt, **mt}, metadata={"a": "b"})
    got = load_file(str(tmp_path / "n.safetensors"))
    for k, v in tt.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
    for k, v in mt.items():
        assert np.array_equal(got[k].numpy(), v.asnumpy()) and got[k].numpy().dtype == v.dtype
    ours = F.read_tensors(tmp_path / "n.safetensors")
    assert np.array_equal(ours["v"], tt["v"].numpy()) and ours["z"].shape == ()
    with pytest.raises(TypeError, match="bfloat16"):
        F.write_safetensors(tmp_path / "bf.safetensors", {"w": torch.ones(2, dtype=torch.bfloat16)})
    with pytest.raises(ValueError, match="reserved"):
        F.write_safetensors(tmp_path / "r.safetensors", {"__metadata__": np.ones(1)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.safetensors"]


def test_reader_takes_files_from_safetensors_own_writers(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.numpy import save_file
    from safetensors.torch import save_file as torch_save_file
    t = {k: v for k, v in _st_tensors().items() if not k.startswith("b.")}
    t["t.transposed"] = np.ascontiguousarray(t["t.transposed"])
    save_file(t, str(tmp_path / "np.safetensors"), metadata={"x": "y"})
    got = F.read_tensors(tmp_path / "np.safetensors")
    assert set(got) == set(t) and F.read_metadata(tmp_path / "np.safetensors") == {"x": "y"}
    for k in t:
        assert got[k].dtype == t[k].dtype and got[k].shape == t[k].shape and np.array_equal(got[k], t[k]), k
    bf = torch.tensor([1.0, -2.5, 3.140625, 0.0, 65280.0], dtype=torch.bfloat16)
    torch_save_file({"bf": bf, "w": torch.ones(2)}, str(tmp_path / "bf.safetensors"))
    got = F.read_tensors(tmp_path / "bf.safetensors")
    assert got["bf"].dtype == np.float32                            # numpy has no bfloat16
    assert np.array_equal(got["bf"], bf.float().numpy())            # widened exactly


def _raw_st(header: dict, data: bytes, pad: bool = True) -> bytes:
    import json
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return len(h).to_bytes(8, "little") + h + data


BAD_HEADERS = {
    "overlap": ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 12, "overlaps"),
    "gap": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8, "unindexed"),
    "trailing": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 8, "trailing"),
    "out_of_range": ({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, 8, "truncated"),
    "size_mismatch": ({"a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 8]}}, 8, "needs 16"),
    "dtype": ({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, 8, "unknown dtype"),
    "neg_shape": ({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}, 0, "non-negative"),
    "float_shape": ({"a": {"dtype": "U8", "shape": [1.0], "data_offsets": [0, 1]}}, 1, "non-negative"),
    "reversed": ({"a": {"dtype": "U8", "shape": [0], "data_offsets": [4, 0]}}, 4, "start <= end"),
    "no_offsets": ({"a": {"dtype": "U8", "shape": [1]}}, 1, "data_offsets"),
    "entry_not_dict": ({"a": [1, 2]}, 0, "not an object"),
    "meta": ({"__metadata__": {"n": 1}}, 0, "dict of strings"),
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_reader_validates_the_header_strictly(tmp_path, case):
    header, nbytes, why = BAD_HEADERS[case]
    path = tmp_path / f"{case}.safetensors"
    path.write_bytes(_raw_st(header, bytes(range(nbytes))))
    with pytest.raises(FormatError, match=why) as e:
        F.read_tensors(path)
    assert str(path) in str(e.value)


def test_reader_refuses_duplicate_names_and_non_object_headers(tmp_path):
    ent = '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'
    raw = ('{"a":' + ent + ',"a":' + ent + '}').encode()
    (tmp_path / "dup.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + b"\x01")
    with pytest.raises(FormatError, match="duplicate"):
        F.read_tensors(tmp_path / "dup.safetensors")
    raw = b"{" + b"[" * 100000
    (tmp_path / "deep.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw)
    with pytest.raises(FormatError, match="corrupt safetensors header"):
        F.read_tensors(tmp_path / "deep.safetensors")


def test_every_truncation_and_header_corruption_is_a_format_error(tmp_path):
    """Cut a small valid file at every length and flip bytes in its header: each read either
    succeeds with the right shapes or raises FormatError - nothing else, never a crash."""
    t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array(7, np.int64),
         "c": np.zeros((0,), np.uint8), "d": np.array([True, False])}
    F.write_safetensors(tmp_path / "ok.safetensors", t, metadata={"k": "v"})
    data = (tmp_path / "ok.safetensors").read_bytes()
    bad = tmp_path / "bad.safetensors"
    for cut in range(len(data)):
        bad.write_bytes(data[:cut])
        with pytest.raises(FormatError):
            F.read_tensors(bad)
    hlen = 8 + int.from_bytes(data[:8], "little")
    rng = np.random.default_rng(0)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(400):
        b = bytearray(data)
        for i in rng.integers(0, hlen, size=rng.integers(1, 4)):
            b[i] = int(rng.integers(0, 256))
        bad.write_bytes(bytes(b))
        try:
            got = F.read_tensors(bad)
        except FormatError:
            outcomes["error"] += 1
            continue
        outcomes["ok"] += 1
        assert all(isinstance(v, np.ndarray) for v in got.values())
    assert outcomes["error"] > 300


def test_stream_failing_midway_keeps_the_previous_file(tmp_path, monkeypatch):
    """The writer dies after some tensors reached the temporary file: the old file stays."""
    path = tmp_path / "m.safetensors"
    old = {"w": np.arange(4, dtype=np.float32)}
    F.write_safetensors(path, old)
    before = path.read_bytes()
    calls = []
    from dualdl.formats import safetensors as ST
    real = ST.bytes_of

    def fail_on_third(a):
        calls.append(a.nbytes)
        if len(calls) == 3:
            raise OSError("No space left on device (simulated)")
        return real(a)
    monkeypatch.setattr(ST, "bytes_of", fail_on_third)
    with pytest.raises(OSError, match="simulated"):
        F.write_safetensors(path, {f"t{i}": np.full(1000, i, np.float64) for i in range(5)})
    monkeypatch.undo()
    assert len(calls) == 3 and path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


def test_concurrent_saves_of_one_path_never_mix(tmp_path):
    """Two threads saving the same path: each uses its own temporary file, so the result is one
    of the two complete files (the last rename wins), never a mixture or an error."""
    import threading
    path = tmp_path / "c.safetensors"
    payloads = [{"w": np.full(300_000, i, np.float32)} for i in range(2)]
    errors = []

    def save(t):
        try:
            for _ in range(5):
                F.write_safetensors(path, t)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=save, args=(p,)) for p in payloads]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors
    w = F.read_tensors(path)["w"]
    assert w.shape == (300_000,) and (np.all(w == 0) or np.all(w == 1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.safetensors"]


@pytest.mark.parametrize("fmt", ["gluon", "torch"])
def test_every_truncation_of_a_native_file_is_a_format_error(tmp_path, fmt):
    """The Gluon reader reads each array straight into its own buffer; cut anywhere, the file is
    a FormatError, never a crash or a short array."""
    t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([7], np.int64),
         "c": np.zeros((0,), np.uint8)}
    WRITERS[fmt](tmp_path / "ok", t)
    data = (tmp_path / "ok").read_bytes()
    _assert_same(t, F.read_tensors(tmp_path / "ok"))
    step = 1 if fmt == "gluon" else max(1, len(data) // 60)
    for cut in range(0, len(data), step):
        (tmp_path / "bad").write_bytes(data[:cut])
        with pytest.raises(FormatError):
            F.read_tensors(tmp_path / "bad")
