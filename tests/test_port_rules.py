"""Port rules for what pairing cannot see: transposed layouts, user transforms, tied weights,
and the report/mapping round trip. Real Gluon and torch models, small sizes."""
import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
from mxnet.gluon import nn as gnn  # noqa: E402
from torch import nn  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl.port import Mapping, Rename, Transpose, register_transform  # noqa: E402


class KernelLinear(nn.Module):
    """Stores its weight as (in, out), the JAX/TF 'kernel' layout: the transpose of Gluon's."""
    def __init__(self, i, o):
        super().__init__()
        self.kernel = nn.Parameter(torch.randn(i, o))
        self.bias = nn.Parameter(torch.zeros(o))

    def forward(self, x):
        return x @ self.kernel + self.bias


def _mlp_gluon(i=5, h=7, o=3):
    mx.random.seed(0)
    g = gnn.HybridSequential()
    g.add(gnn.Dense(h, in_units=i, activation="tanh"), gnn.Dense(o, in_units=h))
    g.initialize(mx.init.Xavier())
    return g


def _x(n=4, i=5):
    return np.random.default_rng(0).standard_normal((n, i)).astype(np.float32)


def test_transposed_layout_needs_and_reports_the_rule():
    g = _mlp_gluon()
    t = nn.Sequential(KernelLinear(5, 7), nn.Tanh(), KernelLinear(7, 3))
    report = dl.port.port_gluon_to_torch(g, t, _x())
    assert not report.complete and "0.kernel" in report.unpaired["target"]
    report = dl.port.port_gluon_to_torch(g, t, _x(), rules=[Transpose(r"\.kernel$")])
    assert report.ok, report.summary()
    assert report.max_rel_diff < 1e-6
    assert [e.transpose for e in report.mapping.entries if e.target.endswith("kernel")] == [True, True]
    assert [n for n in report.notes if n.startswith("rule transpose")] == [
        "rule transpose (target): 0.kernel stored transposed",
        "rule transpose (target): 2.kernel stored transposed"]
    assert np.array_equal(t[0].kernel.detach().numpy(), g[0].weight.data().asnumpy().T)
    # and back, with the same rule
    g2 = _mlp_gluon()
    with torch.no_grad():
        t[2].bias.add_(0.5)
    report = dl.port.port_torch_to_gluon(t, g2, _x(), rules=[Transpose(r"\.kernel$")])
    assert report.ok, report.summary()
    assert np.allclose(g2[1].bias.data().asnumpy(), t[2].bias.detach().numpy())


def test_square_transposed_weight_without_rule_is_caught_by_verification():
    """Same shapes both ways: pairing cannot see the transposition; the outputs can."""
    mx.random.seed(0)
    g = gnn.Dense(5, in_units=5)
    g.initialize(mx.init.Xavier())
    t = KernelLinear(5, 5)
    before = t.kernel.detach().clone()
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, _x())
    assert report.complete and not report.ok and report.max_rel_diff > 1e-2
    assert torch.equal(t.kernel.detach(), before)


class GluonScale(gnn.HybridBlock):
    def __init__(self, n, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.gamma = self.params.get("gamma", shape=(n,), init="ones")

    def hybrid_forward(self, F, x, gamma):
        return F.broadcast_mul(x, gamma)


class TorchLogScale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.log_gamma = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        return x * self.log_gamma.exp()


def test_user_transform_by_name_saved_in_the_mapping(tmp_path):
    register_transform("log", lambda srcs: np.log(srcs[0]))
    g = GluonScale(5)
    g.initialize()
    g.gamma.set_data(mx.nd.array([0.5, 1, 2, 3, 4]))
    t = TorchLogScale(5)
    rule = Rename(r"gamma", r"log_gamma", transform="log")
    report = dl.port.port_gluon_to_torch(g, t, _x(), rules=[rule])
    assert report.ok, report.summary()
    assert np.allclose(t.log_gamma.detach().numpy(), np.log([0.5, 1, 2, 3, 4]))
    assert report.pairs[0].how == "rule rename (log)"
    assert "rule rename (log): gamma -> log_gamma" in report.notes
    report.mapping.save(tmp_path / "m.json")
    fresh = TorchLogScale(5)
    Mapping.load(tmp_path / "m.json").apply(g, target=fresh)
    assert torch.equal(fresh.log_gamma, t.log_gamma)


class GluonLM(gnn.HybridBlock):
    def __init__(self, tie, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.embedding = gnn.Embedding(20, 8)
            self.decoder = gnn.Dense(20, in_units=8, flatten=False,
                                     params=self.embedding.params if tie else None)

    def hybrid_forward(self, F, x):
        return self.decoder(F.tanh(self.embedding(x)))


class TorchLM(nn.Module):
    def __init__(self, tie):
        super().__init__()
        self.embedding = nn.Embedding(20, 8)
        self.decoder = nn.Linear(8, 20)
        if tie:
            self.decoder.weight = self.embedding.weight

    def forward(self, x):
        return self.decoder(torch.tanh(self.embedding(x)))


def _tokens():
    return np.random.default_rng(0).integers(0, 20, (3, 6))


def _glm(tie):
    mx.random.seed(0)
    g = GluonLM(tie)
    g.initialize(mx.init.Xavier())
    return g


@pytest.mark.parametrize("g_tie,t_tie", [(True, True), (True, False)])
def test_tied_weights(g_tie, t_tie):
    g, t = _glm(g_tie), TorchLM(t_tie)
    report = dl.port.port_gluon_to_torch(g, t, _tokens())
    assert report.ok, report.summary()
    assert np.array_equal(t.decoder.weight.detach().numpy(), t.embedding.weight.detach().numpy())
    assert (t.decoder.weight is t.embedding.weight) == t_tie


def test_target_ties_what_the_source_does_not_is_a_conflict():
    g, t = _glm(False), TorchLM(True)
    before = t.embedding.weight.detach().clone()
    report = dl.port.port_gluon_to_torch(g, t, _tokens())
    assert not report.ok and not report.loaded and report.conflicts
    assert "ties embedding.weight and decoder.weight" in report.conflicts[0]
    assert "CONFLICT" in report.summary()
    assert torch.equal(t.embedding.weight.detach(), before)


def test_report_save_contents(tmp_path):
    import json
    g, t = _glm(True), TorchLM(True)
    report = dl.port.port_gluon_to_torch(g, t, _tokens())
    report.save(tmp_path / "r.json")
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["ok"] is True and d["max_abs_diff"] == report.max_abs_diff
    assert {p["target"] for p in d["pairs"]} == {"embedding.weight", "decoder.weight", "decoder.bias"}
    assert len(d["checks"]) == 2 and d["mapping"]["format"] == "dualdl-port-mapping"


def test_reverse_mapping_applied_to_a_torch_checkpoint_file(tmp_path):
    t = nn.Sequential(KernelLinear(5, 7), nn.Tanh(), KernelLinear(7, 3))
    report = dl.port.port_torch_to_gluon(t, _mlp_gluon(), _x(), rules=[Transpose(r"\.kernel$")])
    assert report.ok, report.summary()
    report.save(tmp_path / "t2g.json")
    with torch.no_grad():
        for p in t.parameters():
            p.mul_(1.5)  # new weights, same architecture: the saved mapping still applies
    torch.save({"model": torch.nn.DataParallel(t).state_dict(), "epoch": 2}, tmp_path / "ckpt.pth")
    fresh = _mlp_gluon()
    Mapping.load(tmp_path / "t2g.json").apply(str(tmp_path / "ckpt.pth"), target=fresh)
    x = _x(n=6)
    with torch.no_grad():
        ref = t(torch.from_numpy(x)).numpy()
    assert np.abs(fresh(mx.nd.array(x)).asnumpy() - ref).max() < 1e-5


def test_conv_bias_folds_only_into_a_batchnorm_right_after_it():
    mx.random.seed(0)
    g = gnn.HybridSequential()
    g.add(gnn.Conv2D(4, 3, in_channels=3), gnn.Activation("relu"),
          gnn.Conv2D(4, 3, in_channels=4, use_bias=False), gnn.BatchNorm(in_channels=4))
    g.initialize(mx.init.Xavier())
    t = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.ReLU(), nn.Conv2d(4, 4, 3, bias=False),
                      nn.BatchNorm2d(4))
    x = np.random.default_rng(0).standard_normal((2, 3, 9, 9)).astype(np.float32)
    report = dl.port.port_gluon_to_torch(g, t, x)
    assert not report.loaded and report.unpaired["source"] == ["0.bias"]
    # with the BatchNorm right after the biased conv, the fold applies and is exact
    g2 = gnn.HybridSequential()
    g2.add(gnn.Conv2D(4, 3, in_channels=3), gnn.BatchNorm(in_channels=4), gnn.Activation("relu"))
    g2.initialize(mx.init.Xavier())
    t2 = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU())
    report = dl.port.port_gluon_to_torch(g2, t2, x)
    assert report.ok and report.max_rel_diff < 1e-6, report.summary()
    assert [e.transform for e in report.mapping.entries if e.target == "1.running_mean"] == ["fold_bias"]


def test_uninitialized_gluon_block_is_a_clear_error():
    g = gnn.Dense(3, in_units=5)
    with pytest.raises(Exception, match="initialize|not been initialized"):
        dl.port.port_gluon_to_torch(g, nn.Linear(5, 3), _x())
