"""dl.port.translate on the MXNet ops real projects use beyond arithmetic (ops_contrib.py): each op
in a small HybridBlock, translated with the float64 proof (report.ok), and the generated torch code
measured against MXNet's op itself in float64 and float32; what cannot be written exactly is refused
with a TranslationError naming the op, the block and its path."""
import os
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from mxnet.gluon import nn  # noqa: E402

import dualdl.port as port  # noqa: E402
from dualdl.port.translate import TranslationError  # noqa: E402
from dualdl.port.translate.verify import load_generated  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
rng = np.random.default_rng(0)


class OpNet(nn.HybridBlock):
    """x * w + b (trainable, so the proof's train step reaches the op's backward), then
    ``fn(F, x * w + b, *rest)``."""

    def __init__(self, fn, **kw):
        super().__init__(**kw)
        self.fn = fn
        self.w = self.params.get("w", shape=(1,), init=mx.init.Constant(1.25))
        self.b = self.params.get("b", shape=(1,), init=mx.init.Constant(0.1))

    def hybrid_forward(self, F, x, *rest, w, b):
        return self.fn(F, F.broadcast_add(F.broadcast_mul(x, w), b), *rest)


def _flat(o):
    return [v for e in o for v in _flat(e)] if isinstance(o, (list, tuple)) else [o]


def measure(fn, inputs, tmp_path, expect=None, dtypes=("float64", "float32")):
    """Translate OpNet(fn) with the proof; then the generated module against MXNet in float64
    and float32 (same weights, same inputs): {dtype: max abs diff}. ``dtypes=("float32",)`` for
    graphs MXNet cannot run in float64 (a float32 constant or cast inside: the proof says so)."""
    net = fn if isinstance(fn, nn.Block) else OpNet(fn)
    if not isinstance(fn, nn.Block):
        net.initialize()
    r = port.translate(net, inputs, str(tmp_path))
    assert r.ok, r.summary()
    src = open(r.source_path).read()
    assert "import mxnet" not in src and "import dualdl" not in src
    if expect:
        assert expect in src, src
    assert r.dtype == dtypes[0], r.summary()
    cls = load_generated(r.source_path, r.class_name)
    diffs = {}
    for dt in dtypes:
        net.cast(dt)
        g = _flat(net(*[mx.nd.array(a, dtype=dt if a.dtype.kind == "f" else "float32") for a in inputs]))
        m = cls()
        m.load_state_dict(load_file(r.weights_path))
        m.to(getattr(torch, dt))
        t = _flat(m(*[torch.from_numpy(a.astype(dt)) if a.dtype.kind == "f" else torch.from_numpy(a) for a in inputs]))
        assert len(g) == len(t)
        d = 0.0
        for a, b in zip(g, t):
            a = a.asnumpy()
            b = b.detach().numpy()
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
            d = max(d, float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0)
        diffs[dt] = d
    net.cast("float32")
    print(fn, diffs)
    return r, src, diffs


X4 = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)


@pytest.mark.parametrize("size", [1, 3, (4, 5), (5, 2), (10, 11)])
def test_adaptive_avg_pooling(tmp_path, size):
    _, _, d = measure(lambda F, x: F.contrib.AdaptiveAvgPooling2D(x, output_size=size), [X4], tmp_path,
                      "F.adaptive_avg_pool2d(")
    assert d["float64"] < 1e-15 and d["float32"] < 1e-6


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("hw", [(14, 18), (4, 5), (3, 20), (1, 1)])
def test_bilinear_resize_size(tmp_path, align, hw):
    _, _, d = measure(lambda F, x: F.contrib.BilinearResize2D(x, height=hw[0], width=hw[1], align_corners=align),
                      [X4], tmp_path, "bilinear_resize(")
    # exact in float64: the helper computes MXNet's float32 coordinates (F.interpolate: 2.3e-6 off)
    assert d["float64"] < 1e-14 and d["float32"] < 1e-6


@pytest.mark.parametrize("align", [True, False])
def test_bilinear_resize_scale_like_and_even(tmp_path, align):
    like = rng.standard_normal((2, 1, 11, 5)).astype(np.float32)
    _, src, d = measure(lambda F, x, y: F.contrib.BilinearResize2D(x, y, mode="like", align_corners=align),
                        [X4, like], tmp_path / "like")
    assert d["float64"] < 1e-14 and d["float32"] < 1e-6
    # scale 0.7 on 10 rows: 7 rows in MXNet (the product rounds to 7.0 in float32, 6.99999 in double)
    x10 = rng.standard_normal((1, 2, 10, 6)).astype(np.float32)
    _, src, d = measure(lambda F, x: F.contrib.BilinearResize2D(x, scale_height=0.7, scale_width=1.5,
                                                                align_corners=align), [x10], tmp_path / "scale")
    assert "resize_scaled(" in src and d["float64"] < 1e-14 and d["float32"] < 1e-6
    _, _, d = measure(lambda F, x: F.contrib.BilinearResize2D(x, mode="to_even_up", align_corners=align),
                      [X4], tmp_path / "even")
    assert d["float64"] < 1e-14


def test_div_sqrt_dim(tmp_path):
    x = rng.standard_normal((2, 4, 10)).astype(np.float32)      # sqrt(10) is not a float32 number
    _, src, d = measure(lambda F, x: F.contrib.div_sqrt_dim(x), [x], tmp_path, ".shape[-1] ** 0.5")
    assert d["float64"] == 0.0 and d["float32"] == 0.0


def test_reshape_like(tmp_path):
    x, y = rng.standard_normal((2, 12)).astype(np.float32), rng.standard_normal((3, 4, 2)).astype(np.float32)
    _, src, d = measure(lambda F, x, y: F.reshape_like(x, y), [x, y], tmp_path / "all", ".reshape(")
    assert d["float64"] == 0.0 and d["float32"] == 0.0
    x, y = rng.standard_normal((2, 12, 5)).astype(np.float32), rng.standard_normal((7, 3, 4, 1)).astype(np.float32)
    _, src, d = measure(lambda F, x, y: F.reshape_like(x, y, lhs_begin=1, lhs_end=2, rhs_begin=1, rhs_end=3),
                        [x, y], tmp_path / "range")
    assert d["float64"] == 0.0 and d["float32"] == 0.0
    x, y = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    _, src, d = measure(lambda F, x, y: F.reshape_like(x, y, lhs_begin=0, lhs_end=-1), [x, y], tmp_path / "neg")
    assert d["float64"] == 0.0


@pytest.mark.parametrize("mode,value", [("constant", 0.0), ("constant", 0.5), ("edge", 0.0), ("reflect", 0.0)])
def test_pad(tmp_path, mode, value):
    _, src, d = measure(lambda F, x: F.pad(x, mode=mode, pad_width=(0, 0, 0, 0, 1, 2, 3, 1), constant_value=value),
                        [X4], tmp_path, "F.pad(")
    assert "(3, 1, 1, 2)" in src          # torch orders the pairs from the last axis
    assert d["float64"] == 0.0 and d["float32"] == 0.0


def test_pad_5d_constant(tmp_path):
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    _, _, d = measure(lambda F, x: F.pad(x, mode="constant", pad_width=(0, 0, 0, 0, 1, 0, 0, 2, 2, 1)), [x], tmp_path)
    assert d["float64"] == 0.0


def test_arange(tmp_path):
    x = rng.standard_normal((3, 6)).astype(np.float32)
    _, src, d = measure(lambda F, x: F.broadcast_add(x, F.reshape(F.arange(6), (1, 6))), [x], tmp_path / "int",
                        "torch.arange(6, dtype=torch.float32)", dtypes=("float32",))
    assert d["float32"] == 0.0
    # start + i * step in float32, as MXNet: torch.arange(0.3, ..., 0.1) accumulates in double
    _, src, d = measure(lambda F, x: F.broadcast_add(x, F.reshape(F.slice_axis(F.arange(0.3, 1.5, 0.1, repeat=2), axis=0, begin=0, end=6), (1, 6))),
                        [x], tmp_path / "step", dtypes=("float32",))
    assert d["float32"] == 0.0


def test_instance_norm_layer(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=3), nn.InstanceNorm(in_channels=4, epsilon=1e-3, scale=True))
    net.initialize()
    net[1].gamma.set_data(mx.nd.array(rng.uniform(0.5, 1.5, 4)))
    net[1].beta.set_data(mx.nd.array(rng.uniform(-0.5, 0.5, 4)))
    _, _, d = measure(net, [X4], tmp_path, "F.instance_norm(", dtypes=("float32",))   # no float64 in MXNet
    assert d["float32"] < 2e-6


@pytest.mark.parametrize("op", ["depth_to_space", "space_to_depth"])
def test_depth_space(tmp_path, op):
    x = rng.standard_normal((2, 8, 4, 6)).astype(np.float32)
    _, src, d = measure(lambda F, x: getattr(F, op)(x, 2), [x], tmp_path, f"{op}(")
    assert d["float64"] == 0.0 and d["float32"] == 0.0


def test_depth_to_space_is_not_pixel_shuffle():
    x = rng.standard_normal((1, 8, 2, 3))
    ref = mx.nd.depth_to_space(mx.nd.array(x, dtype="float64"), 2).asnumpy()
    assert np.abs(torch.nn.functional.pixel_shuffle(torch.from_numpy(x), 2).numpy() - ref).max() > 0.1


def test_shape_and_size_array(tmp_path):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    _, src, d = measure(lambda F, x: F.broadcast_mul(x, F.cast(F.slice_axis(F.shape_array(x), axis=0, begin=2,
                                                                                     end=3), "float32")),
                        [x], tmp_path / "shape", "torch.tensor(", dtypes=("float32",))
    assert d["float32"] == 0.0
    _, src, d = measure(lambda F, x: F.broadcast_mul(x, F.cast(F.size_array(x), "float32")), [x], tmp_path / "size",
                        ".numel()", dtypes=("float32",))
    assert d["float32"] == 0.0


@pytest.mark.parametrize("ret,asc,axis", [("value", False, -1), ("indices", False, 1), ("indices", True, None),
                                          ("mask", False, 1), ("both", True, 0)])
def test_topk(tmp_path, ret, asc, axis):
    x = rng.permutation(42).reshape(6, 7).astype(np.float32) / 7.0     # distinct values: no ties
    fn = (lambda F, x: F.topk(x, axis=axis, k=3, ret_typ=ret, is_ascend=asc)) if ret != "both" else (
        lambda F, x: (lambda vi: vi[0] * 2 + vi[1])(F.topk(x, axis=axis, k=3, ret_typ=ret, is_ascend=asc)))
    # indices come as float32 (MXNet's default dtype) also from float64 data; adding them to float64
    # values is refused by MXNet: that graph is proven in float32
    dtypes = ("float32",) if ret == "both" else ("float64", "float32")
    _, src, d = measure(fn, [x], tmp_path, "topk", dtypes=dtypes)
    assert all(v == 0.0 for v in d.values())


@pytest.mark.parametrize("mode", ["instance", "channel", "spatial"])
def test_l2_normalization(tmp_path, mode):
    x = X4 * 0.05     # small sums: eps (a float32 attribute, 1e-3 -> 0.0010000000474974513) matters
    _, src, d = measure(lambda F, x: F.L2Normalization(x, mode=mode, eps=1e-3), [x], tmp_path,
                        "+ 0.0010000000474974513)")
    assert d["float64"] < 1e-15 and d["float32"] < 3e-7


def test_sequence_reverse(tmp_path):
    x = rng.standard_normal((5, 3, 2)).astype(np.float32)
    _, src, d = measure(lambda F, x: F.SequenceReverse(x), [x], tmp_path / "plain", "torch.flip(")
    assert d["float64"] == 0.0
    length = np.array([5, 2, 3], np.float32)
    _, src, d = measure(lambda F, x, n: F.SequenceReverse(x, n, use_sequence_length=True), [x, length],
                        tmp_path / "len", "sequence_reverse(")
    assert d["float64"] == 0.0 and d["float32"] == 0.0


class _Foreach(nn.HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.fc = nn.Dense(3, in_units=3, flatten=False)

    def hybrid_forward(self, F, x):
        out, _ = F.contrib.foreach(lambda d, s: (d + s[0], [d + s[0]]), x, [F.zeros_like(F.slice_axis(x, 0, 0, 1)).reshape((-1, 3))])
        return self.fc(out)


def test_foreach_and_box_nms_refused_with_what_to_do(tmp_path):
    outer = nn.HybridSequential()
    outer.add(nn.Dense(3, in_units=3, flatten=False), _Foreach())
    outer.initialize()
    with pytest.raises(TranslationError) as e:
        port.translate(outer, rng.standard_normal((4, 2, 3)).astype(np.float32), str(tmp_path / "fe"))
    msg = str(e.value)
    assert "_foreach" in msg and "_Foreach" in msg and "'1'" in msg and "register_translation" in msg
    assert "Python loop" in msg

    net = OpNet(lambda F, x: F.contrib.box_nms(x, overlap_thresh=0.5))
    net.initialize()
    with pytest.raises(TranslationError) as e:
        port.translate(net, rng.uniform(0, 1, (1, 5, 6)).astype(np.float32), str(tmp_path / "nms"))
    assert "_contrib_box_nms" in str(e.value) and "register_translation" in str(e.value)


def test_slice_like_broadcast_like_upsampling(tmp_path):
    x, y = rng.standard_normal((4, 5, 6)).astype(np.float32), rng.standard_normal((2, 3, 6)).astype(np.float32)
    _, _, d = measure(lambda F, x, y: F.slice_like(x, y), [x, y], tmp_path / "sl", ":x1.shape[0]")
    assert d["float64"] == 0.0 and d["float32"] == 0.0
    _, _, d = measure(lambda F, x, y: F.slice_like(x, y, axes=(1, -1)), [x, y], tmp_path / "sl2")
    assert d["float64"] == 0.0
    a, b = rng.standard_normal((1, 5, 1)).astype(np.float32), rng.standard_normal((4, 5, 3)).astype(np.float32)
    _, _, d = measure(lambda F, x, y: F.broadcast_like(x, y), [a, b], tmp_path / "bl", ".expand_as(")
    assert d["float64"] == 0.0 and d["float32"] == 0.0
    _, _, d = measure(lambda F, x, y: F.broadcast_like(x, y, lhs_axes=(0,), rhs_axes=(2,)), [a, b], tmp_path / "bl2")
    assert d["float64"] == 0.0
    _, _, d = measure(lambda F, x: F.UpSampling(x, scale=3, sample_type="nearest"), [X4], tmp_path / "up",
                      "repeat_interleave(3")
    assert d["float64"] == 0.0 and d["float32"] == 0.0


def test_clip_with_infinite_bounds(tmp_path):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    _, src, d = measure(lambda F, x: F.clip(x, -np.inf, np.inf), [x], tmp_path / "none")
    assert "clamp" not in src and d["float64"] == 0.0
    _, src, d = measure(lambda F, x: F.clip(x, -np.inf, 0.5), [x], tmp_path / "hi", 'torch.clamp(')
    assert 'float("-inf")' in src and d["float64"] == 0.0
