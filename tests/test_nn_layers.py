"""dualdl's core layers and containers on each backend: shapes, parameter names/shapes/counts,
default initialisation, train/eval behaviour, errors on bad input, containers, a write-once model."""
from collections import OrderedDict

import numpy as np
import pytest

import dualdl as dl
from dualdl import nn


def fwd(layer, a):
    """Run ``layer`` on numpy ``a`` (no autograd) and return a numpy array."""
    return dl.to_numpy(layer(dl.from_numpy(a)))


def params(m):
    return [(k, tuple(p.shape)) for k, p in m.named_parameters()]


def buffers(m):
    return [(k, tuple(b.shape)) for k, b in m.named_buffers() if not k.endswith("num_batches_tracked")]


def np_param(p):
    return dl.to_numpy(p.data() if hasattr(p, "list_ctx") else p.detach())


SHAPE_CASES = [
    # (factory, input shape, output shape, parameters, buffers)
    (lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1), (2, 4, 9), (2, 6, 5),
     [("weight", (6, 4, 3)), ("bias", (6,))], []),
    (lambda: nn.Conv1d(4, 6, 4, padding="same"), (2, 4, 9), (2, 6, 9), [("weight", (6, 4, 4)), ("bias", (6,))], []),
    (lambda: nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2, bias=False), (2, 4, 7, 7), (2, 6, 4, 4),
     [("weight", (6, 2, 3, 3))], []),
    (lambda: nn.Conv2d(3, 5, (2, 3), dilation=(1, 2)), (1, 3, 6, 8), (1, 5, 5, 4),
     [("weight", (5, 3, 2, 3)), ("bias", (5,))], []),
    (lambda: nn.MaxPool2d(2), (2, 3, 7, 6), (2, 3, 3, 3), [], []),
    (lambda: nn.MaxPool2d(2, 2, 1, ceil_mode=True), (2, 3, 5, 5), (2, 3, 3, 3), [], []),   # MXNet alone: 4x4
    (lambda: nn.AvgPool2d(2, 3, ceil_mode=True), (1, 1, 6, 6), (1, 1, 2, 2), [], []),     # MXNet alone: 3x3
    (lambda: nn.MaxPool1d(3, 2, 1), (2, 3, 8), (2, 3, 4), [], []),
    (lambda: nn.AvgPool1d(2, 2, 1, ceil_mode=True), (2, 3, 5), (2, 3, 3), [], []),
    (lambda: nn.AdaptiveAvgPool2d((1, 1)), (2, 3, 5, 4), (2, 3, 1, 1), [], []),
    (lambda: nn.AdaptiveAvgPool2d(3), (2, 3, 7, 5), (2, 3, 3, 3), [], []),
    (lambda: nn.BatchNorm1d(5), (4, 5), (4, 5), [("weight", (5,)), ("bias", (5,))],
     [("running_mean", (5,)), ("running_var", (5,))]),
    (lambda: nn.BatchNorm2d(3, affine=False), (4, 3, 2, 2), (4, 3, 2, 2), [],
     [("running_mean", (3,)), ("running_var", (3,))]),
    (lambda: nn.BatchNorm2d(3, track_running_stats=False), (4, 3, 2, 2), (4, 3, 2, 2),
     [("weight", (3,)), ("bias", (3,))], []),
    (lambda: nn.LayerNorm((4, 6)), (2, 3, 4, 6), (2, 3, 4, 6), [("weight", (4, 6)), ("bias", (4, 6))], []),
    (lambda: nn.LayerNorm(6, bias=False), (2, 6), (2, 6), [("weight", (6,))], []),
    (lambda: nn.Flatten(), (2, 3, 4, 5), (2, 60), [], []),
    (lambda: nn.Flatten(0, 2), (2, 3, 4, 5), (24, 5), [], []),
    (lambda: nn.Flatten(-3, -2), (2, 3, 4, 5), (2, 12, 5), [], []),
    (lambda: nn.Identity(54, unused=1), (2, 3), (2, 3), [], []),
    (lambda: nn.Softmax(dim=1), (2, 3, 4), (2, 3, 4), [], []),
]


@pytest.mark.parametrize("case", range(len(SHAPE_CASES)))
def test_shapes_and_parameter_names(backend, case):
    factory, in_shape, out_shape, want_params, want_buffers = SHAPE_CASES[case]
    layer = factory()
    layer.eval()
    x = np.random.default_rng(case).standard_normal(in_shape).astype(np.float32)
    assert fwd(layer, x).shape == out_shape
    assert params(layer) == want_params
    assert buffers(layer) == want_buffers


def test_isinstance_and_native_types(backend):
    conv = nn.Conv2d(1, 2, 3)
    assert isinstance(conv, nn.Conv2d) and isinstance(conv, nn.Module)
    assert not isinstance(conv, nn.Conv1d) and not isinstance(conv, nn.Linear)
    if backend == "torch":
        import torch
        assert isinstance(conv, torch.nn.Conv2d) and isinstance(nn.Sequential(), torch.nn.Sequential)
    else:
        from mxnet.gluon import HybridBlock
        assert isinstance(conv, HybridBlock) and isinstance(nn.ModuleList(), HybridBlock)


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 120), nn.ReLU(),
                         nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def test_lenet_parameter_count_and_names(backend):
    net = lenet()
    assert sum(int(np.prod(p.shape)) for p in net.parameters()) == 44426
    assert [k for k, _ in net.named_parameters()] == [
        "0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias", "9.weight", "9.bias",
        "11.weight", "11.bias"]
    x = np.random.default_rng(0).standard_normal((3, 1, 28, 28)).astype(np.float32)
    assert fwd(net, x).shape == (3, 10)


def test_default_initialisation(backend):
    dl.seed(0)
    conv = nn.Conv2d(8, 64, 3)                       # fan_in 72: U(+-1/sqrt(72))
    w, b = np_param(conv.weight), np_param(conv.bias)
    bound = 1 / np.sqrt(72)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.1 * bound / np.sqrt(3)
    emb = nn.Embedding(200, 50, padding_idx=3)
    e = np_param(emb.weight)
    assert abs(e.std() - 1.0) < 0.05 and abs(e.mean()) < 0.05      # N(0, 1), not U(+-0.07)
    assert np.all(e[3] == 0)
    bn = nn.BatchNorm2d(4)
    sd = dl.state_dict(bn)
    assert list(sd) == ["weight", "bias", "running_mean", "running_var"]
    np.testing.assert_array_equal(dl.to_numpy(sd["weight"]), np.ones(4))
    np.testing.assert_array_equal(dl.to_numpy(sd["bias"]), np.zeros(4))
    np.testing.assert_array_equal(dl.to_numpy(sd["running_mean"]), np.zeros(4))
    np.testing.assert_array_equal(dl.to_numpy(sd["running_var"]), np.ones(4))


def test_dropout_follows_train_eval_not_autograd(backend):
    drop = nn.Dropout(0.5)
    x = np.ones((200, 50), np.float32)
    y = fwd(drop, x)                                 # train mode, no autograd recording
    assert set(np.unique(y)) == {0.0, 2.0}
    assert 0.45 < (y == 0).mean() < 0.55
    drop.eval()
    np.testing.assert_array_equal(fwd(drop, x), x)
    drop.train()
    assert (fwd(nn.Dropout(1.0), x) == 0).all()
    assert (fwd(nn.Dropout(0.0), x) == x).all()


def test_batchnorm_running_stats_match_torch_formula(backend):
    """torch's update: new = (1-m) old + m batch, with the *unbiased* batch variance, in forward."""
    rng = np.random.default_rng(1)
    bn = nn.BatchNorm2d(3, momentum=0.3)
    rm, rv = np.zeros(3), np.ones(3)
    for _ in range(3):
        x = (rng.standard_normal((4, 3, 5, 5)) * 2 + 1).astype(np.float32)
        y = fwd(bn, x)
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
        expect = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
        np.testing.assert_allclose(y, expect, atol=2e-5)
        rm = 0.7 * rm + 0.3 * mean
        rv = 0.7 * rv + 0.3 * x.var(axis=(0, 2, 3), ddof=1)
    sd = dl.state_dict(bn)
    np.testing.assert_allclose(dl.to_numpy(sd["running_mean"]), rm, atol=1e-5)
    np.testing.assert_allclose(dl.to_numpy(sd["running_var"]), rv, atol=1e-5)
    bn.eval()                                         # eval: running statistics, no update
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    expect = (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(fwd(bn, x), expect, atol=2e-5)
    np.testing.assert_allclose(dl.to_numpy(dl.state_dict(bn)["running_mean"]), rm, atol=1e-5)


def test_embedding_lookup_and_padding(backend):
    emb = nn.Embedding(10, 3, padding_idx=0)
    idx = np.array([[1, 0, 9], [4, 4, 2]], np.int64)
    out = fwd(emb, idx)
    w = np_param(emb.weight)
    np.testing.assert_array_equal(out, w[idx])
    assert np.all(out[0, 1] == 0)


@pytest.mark.parametrize("make,shape,match", [
    (lambda: nn.Conv2d(3, 4, 3), (8, 8), r"Conv2d\(in_channels=3\).*\(N, 3, H, W\) or \(3, H, W\), got \(8, 8\)"),
    (lambda: nn.Conv2d(3, 4, 3), (1, 2, 8, 8), r"\(N, 3, H, W\).*\(1, 2, 8, 8\)"),
    (lambda: nn.Conv2d(3, 4, 5), (1, 3, 3, 3), r"Conv2d.*smaller than the kernel"),
    (lambda: nn.Conv1d(3, 4, 3), (2, 3, 4, 4), r"Conv1d.*\(N, 3, L\).*\(2, 3, 4, 4\)"),
    (lambda: nn.Conv1d(3, 4, 3, padding=4, padding_mode="reflect"), (2, 3, 4), r"Conv1d.*reflect.*padding < input"),
    (lambda: nn.BatchNorm2d(4), (2, 3, 5, 5), r"BatchNorm2d\(4\).*\(N, 4, H, W\).*\(2, 3, 5, 5\)"),
    (lambda: nn.BatchNorm2d(4), (2, 4, 5), r"BatchNorm2d.*\(2, 4, 5\)"),
    (lambda: nn.BatchNorm1d(4), (2, 4, 5, 5), r"BatchNorm1d\(4\).*\(N, 4\) or \(N, 4, L\)"),
    (lambda: nn.BatchNorm1d(4), (1, 4), r"more than 1 value per channel"),
    (lambda: nn.LayerNorm(6), (2, 5), r"LayerNorm\(\(6,\)\).*\(\*, 6\).*\(2, 5\)"),
    (lambda: nn.MaxPool2d(2), (8, 8), r"MaxPool2d.*\(N, C, H, W\) or \(C, H, W\), got \(8, 8\)"),
    (lambda: nn.AvgPool1d(3), (3,), r"AvgPool1d.*\(N, C, L\) or \(C, L\), got \(3,\)"),
    (lambda: nn.MaxPool2d(5), (1, 1, 3, 3), r"MaxPool2d.*too small"),
    (lambda: nn.AdaptiveAvgPool2d(1), (3, 4), r"AdaptiveAvgPool2d.*\(N, C, H, W\) or \(C, H, W\), got \(3, 4\)"),
    (lambda: nn.Flatten(2), (4, 5), r"Flatten\(start_dim=2"),
    (lambda: nn.Linear(4, 3), (2, 5), r"Linear\(in_features=4, out_features=3\).*\(\*, 4\).*\(2, 5\)"),
    (lambda: nn.Linear(4, 3), (2, 4, 3), r"Linear\(in_features=4.*\(2, 4, 3\)"),
])
def test_bad_input_shape_raises_value_error(backend, make, shape, match):
    layer = make()
    with pytest.raises(ValueError, match=match):
        fwd(layer, np.zeros(shape, np.float32))


@pytest.mark.parametrize("make,shape", [
    (lambda: nn.Conv2d(3, 4, 3), (3, 8, 8)), (lambda: nn.MaxPool2d(2), (3, 8, 8)),
    (lambda: nn.AvgPool1d(3), (2, 7)), (lambda: nn.AdaptiveAvgPool2d(2), (2, 3, 5)),
])
def test_unbatched_input_is_the_batched_result_without_its_batch_axis(backend, make, shape):
    layer = make()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(fwd(layer, x), fwd(layer, x[None])[0])


def test_embedding_bad_indices(backend):
    emb = nn.Embedding(10, 3)
    with pytest.raises(IndexError, match=r"index 12 is out of range \[0, 10\)"):
        fwd(emb, np.array([1, 12], np.int64))
    with pytest.raises(IndexError, match=r"index -1 is out of range \[0, 10\)"):
        fwd(emb, np.array([-1, 2], np.int64))
    with pytest.raises(TypeError, match="integer"):
        fwd(emb, np.array([1.0, 2.0], np.float32))
    assert fwd(emb, np.array([9, 0], np.int32)).shape == (2, 3)


@pytest.mark.parametrize("make,exc,match", [
    (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, "divisible by groups"),
    (lambda: nn.MaxPool2d(2, padding=2), ValueError, "at most half"),
    (lambda: nn.Dropout(1.5), ValueError, "between 0 and 1"),
    (lambda: nn.GELU(approximate="fast"), (ValueError, RuntimeError), "approximate|fast"),
])
def test_bad_arguments(backend, make, exc, match):
    with pytest.raises(exc, match=match):
        make()


# ---- containers --------------------------------------------------------------------------------
def test_sequential_api(backend):
    seq = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    assert len(seq) == 3 and [k for k, _ in seq.named_children()] == ["0", "1", "2"]
    assert isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Linear)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(fwd(seq, x), fwd(seq[2], fwd(head, x)), atol=1e-6)
    seq.append(nn.Tanh())
    assert len(seq) == 4 and [k for k, _ in seq.named_parameters()][-1] == "2.bias"
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(4, 2)), ("act", nn.Sigmoid())]))
    assert [k for k, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    assert fwd(named, x).shape == (3, 2)


def test_module_list_api(backend):
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    extra = nn.Linear(2, 3)
    ml.append(extra)
    ml.extend([nn.Linear(3, 3)])
    ml.insert(0, nn.Linear(1, 2))
    assert len(ml) == 5 and ml.index(extra) == 3 and ml[3] is extra
    assert [tuple(m.weight.shape) for m in ml] == [(2, 1), (2, 2), (2, 2), (3, 2), (3, 3)]
    assert [k for k, _ in ml.named_parameters()][:4] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert [k for k, _ in ml.named_parameters()][6] == "3.weight"
    del ml[0]
    assert len(ml) == 4 and ml.index(extra) == 2
    assert [k for k, _ in ml.named_parameters()][4] == "2.weight"


def test_module_dict_api(backend):
    md = nn.ModuleDict({"enc": nn.Linear(2, 3), "act": nn.ReLU()})
    md["dec"] = nn.Linear(3, 2)
    assert list(md.keys()) == ["enc", "act", "dec"] and "dec" in md and len(md) == 3
    assert [k for k, _ in md.named_parameters()] == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    md.pop("act")
    assert list(md) == ["enc", "dec"]
    with pytest.raises(KeyError, match=r"\."):
        md["a.b"] = nn.ReLU()
    assert list(md) == ["enc", "dec"]


def test_containers_reject_other_backend(backend):
    other = "mxnet" if backend == "torch" else "torch"
    foreign = nn.Linear(2, 2, backend=other)
    with pytest.raises(TypeError, match=f"on the {backend} backend.*{other}"):
        nn.Sequential(nn.ReLU(), foreign)
    ml = nn.ModuleList()
    with pytest.raises(TypeError, match=f"ModuleList on the {backend} backend"):
        ml.append(foreign)
    with pytest.raises(TypeError, match=f"ModuleList on the {backend} backend"):
        ml.insert(0, foreign)
    with pytest.raises(TypeError, match=f"ModuleDict on the {backend} backend"):
        nn.ModuleDict({"a": foreign})
    assert len(ml) == 0


class Net(nn.Module):
    """Write-once model: Sequential + ModuleList built in a loop (seed 002's register_child case) +
    a custom Parameter."""

    def __init__(self, n_heads: int = 2):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
        self.flatten = nn.Flatten()
        self.heads = nn.ModuleList()
        for _ in range(n_heads):
            self.heads.append(nn.Linear(4 * 3 * 3, 5))
        self.scale = nn.Parameter(np.full((5,), 2.0, np.float32))

    def forward(self, x):
        h = self.flatten(self.features(x))
        out = self.heads[0](h)
        for head in self.heads[1:]:
            out = out + head(h)
        return out * self.scale


def test_write_once_model_with_containers(backend):
    net = Net()
    assert isinstance(net, Net) and isinstance(net.heads, nn.ModuleList)
    assert list(dl.state_dict(net)) == [          # own parameters first, then children (torch's order)
        "scale", "features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias",
        "features.1.running_mean", "features.1.running_var",
        "heads.0.weight", "heads.0.bias", "heads.1.weight", "heads.1.bias"]
    assert [k for k, _ in net.named_parameters()][0] == "scale"
    assert len(list(net.parameters())) == 9
    x = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)
    net.eval()
    y = fwd(net, x)
    assert y.shape == (2, 5)
    # the Parameter takes part: halving it halves the output
    sd = {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}
    sd["scale"] = sd["scale"] / 2
    dl.load_state_dict(net, sd)
    np.testing.assert_allclose(fwd(net, x), y / 2, rtol=1e-6, atol=1e-6)


def test_mxnet_hybridized_mode_switch_rebuilds_graph():
    """On MXNet, train()/eval() also switch a hybridized graph (the cached graph is rebuilt)."""
    pytest.importorskip("mxnet")
    with dl.use("mxnet"):
        net = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm1d(50))
        net.hybridize()
        x = np.ones((200, 50), np.float32) + np.arange(50, dtype=np.float32)
        y_train = fwd(net, x)                      # batch statistics even outside autograd.record()
        assert np.abs(y_train.mean(axis=0)).max() < 1e-4 and abs(y_train.std() - 1) < 1e-3
        sd = {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}
        rm, rv = sd["1.running_mean"], sd["1.running_var"]   # updated by the train forward, as torch
        assert (rm > 0.05 * (1 + np.arange(50))).all()      # 0.1 * x's mean, but for Dropout's noise
        net.eval()
        y_eval = fwd(net, x)                       # identity dropout, the running stats
        np.testing.assert_allclose(y_eval, (x - rm) / np.sqrt(rv + 1e-5), rtol=1e-5, atol=1e-5)
        net.train()
        drop = nn.Dropout(0.5)
        drop.hybridize()
        assert (fwd(drop, x) == 0).mean() > 0.4
        drop.eval()
        np.testing.assert_array_equal(fwd(drop, x), x)
        drop.train()
        assert (fwd(drop, x) == 0).mean() > 0.4
