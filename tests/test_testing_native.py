"""dl.testing.check_native_training: a Gluon block + Gluon loss + gluon.Trainer.step(batch_size)
against a torch module + torch loss + torch.optim, paired by a dl.port mapping. Real pairs train
alike for several steps; recipes that differ (weight decay on biases/norms, BatchNorm momentum
left unconverted) are caught and named."""
import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from mxnet import gluon  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl.testing import ParityError, assert_native_training, check_native_training  # noqa: E402

from _port_pairs import (_bert_inputs, _gluon_bert, _gluon_resnet, _hf_bert,  # noqa: E402
                         _hf_resnet, _lm, _tokens)

LR, MOM, WD = 0.01, 0.9, 1e-2
# 64x64: the last stage is 2x2, so a train-mode BatchNorm normalises 8 values, not 2
X = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)


def _sgd(g, t, torch_groups=None, wd=WD):
    trainer = gluon.Trainer(g.collect_params(), "sgd",
                            {"learning_rate": LR, "momentum": MOM, "wd": wd})
    opt = torch.optim.SGD(torch_groups or t.parameters(), lr=LR, momentum=MOM, weight_decay=wd)
    return trainer, opt


def _resnet18(momentum=0.1):
    g, t = _gluon_resnet("resnet18_v1"), _hf_resnet(False, False)
    for m in t.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = momentum
    report = dl.port.port_gluon_to_torch(g, t, X)
    assert report.ok, report.summary()
    return g, t, report


def _ce(g_out, y):
    return gluon.loss.SoftmaxCrossEntropyLoss()(g_out, y)


def _t_ce(t_out, y):
    return torch.nn.functional.cross_entropy(getattr(t_out, "logits", t_out), y)


LABELS = np.array([1, 7])


def test_resnet18_trains_alike_with_batchnorm_statistics():
    g, t, report = _resnet18()
    trainer, opt = _sgd(g, t)
    # one step: from the second on, fp32 differences flip max-pool/ReLU ties in places (measured:
    # stem conv gradient parts by 1e-3 at step 2), a discrete effect no tolerance separates
    r = assert_native_training(g, t, report, X, LABELS, _ce, _t_ce, trainer, opt, steps=1)
    print(r.summary())
    var = [d for d in r.diffs if d.name.endswith("running_var")]
    assert len(var) == 20 and all("unbiased (n=" in d.note for d in var)
    assert sum(d.phase == "backward" for d in r.diffs) == 62   # every gradient


def test_batchnorm_momentum_left_unconverted_is_named():
    g, t, report = _resnet18(momentum=0.9)        # Gluon's 0.9 copied as is
    trainer, opt = _sgd(g, t)
    r = check_native_training(g, t, report, X, LABELS, _ce, _t_ce, trainer, opt, steps=2)
    print(r.summary())
    assert not r.passed
    assert any("BatchNorm momentum left unconverted" in f and "momentum=0.1" in f
               for f in r.findings)
    assert r.first_failure.phase == "update" and "running_" in r.first_failure.name
    with pytest.raises(ParityError, match="BatchNorm momentum"):
        assert_native_training(g, t, report, X, LABELS, _ce, _t_ce, trainer, opt, steps=1)


def test_weight_decay_on_biases_and_norms_is_named():
    g, t, report = _resnet18()
    decay = [p for n, p in t.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in t.named_parameters() if p.ndim <= 1]
    trainer, opt = _sgd(g, t, [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], 0.1)
    r = check_native_training(g, t, report, X, LABELS, _ce, _t_ce, trainer, opt, steps=1)
    print(r.summary())
    assert not r.passed
    assert any(f.startswith("weight decay differs on biases/norms") for f in r.findings)
    # the matching Gluon recipe: wd_mult = 0 on biases and norm parameters
    g, t, report = _resnet18()
    for p in g.collect_params().values():
        if p.name.endswith(("bias", "gamma", "beta")):
            p.wd_mult = 0.0
    trainer, opt = _sgd(g, t, [{"params": [p for p in t.parameters() if p.ndim > 1]},
                               {"params": [p for p in t.parameters() if p.ndim <= 1],
                                "weight_decay": 0.0}], 0.1)
    assert check_native_training(g, t, report, X, LABELS, _ce, _t_ce, trainer, opt, steps=1).passed


def test_bert_trains_alike_in_train_mode():
    g, t = _gluon_bert(), _hf_bert()
    src_in, dst_in = _bert_inputs(lengths=(9, 9, 9))
    report = dl.port.port_gluon_to_torch(g, t, src_in, target_inputs=dst_in)
    assert report.ok, report.summary()
    target = np.random.default_rng(3).standard_normal((3, 32)).astype(np.float32)
    trainer, opt = _sgd(g, t)
    r = assert_native_training(
        g, t, report, src_in, target, lambda o, y: gluon.loss.L2Loss()(o[1], y),
        lambda o, y: 0.5 * ((o.pooler_output - y) ** 2).mean(1).mean(), trainer, opt, steps=3,
        target_inputs=dst_in)
    print(r.summary())
    assert sum(d.phase == "backward" for d in r.diffs) == 3 * 39


@pytest.mark.parametrize("kind", ["standard_rnn", "standard_lstm_lm_200", "awd_lstm_lm_600"])
def test_language_models_train_alike_with_dropout_off(kind):
    g, t = _lm(kind, dropout_off=True)
    report = dl.port.port_gluon_to_torch(g, t, _tokens())
    assert report.ok, report.summary()
    y = np.random.default_rng(2).integers(0, 50, (7, 3))
    trainer, opt = _sgd(g, t)
    r = assert_native_training(
        g, t, report, _tokens(), y, lambda o, yy: gluon.loss.SoftmaxCrossEntropyLoss()(o[0], yy),
        lambda o, yy: torch.nn.functional.cross_entropy(o[0].reshape(-1, 50), yy.reshape(-1)),
        trainer, opt, steps=3)
    print(kind, r.summary())
    assert t.decoder.weight is t.embedding.weight   # tied weights train as one


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50_v1", "resnet50_v1b"])
def test_resnet50_trains_alike_against_a_float64_reference(name):
    """ResNet-50's train-mode float32 gradients are ill-conditioned (torch's own differ from its
    float64 ones by 50-270x the plain tolerance; MXNet's by up to 877x torch's on an AMD EPYC):
    the float64 copies of the two agree to 1e-12 of the largest gradient, and the float32 values
    within the two sides' own rounding."""
    g, t = _gluon_resnet(name), _hf_resnet(True, name == "resnet50_v1")
    report = dl.port.port_gluon_to_torch(g, t, X)
    assert report.ok, report.summary()
    trainer, opt = _sgd(g, t)
    r = assert_native_training(g, t, report, X, LABELS, _ce, _t_ce, trainer, opt, steps=1,
                               float64_reference=True)
    print(name, r.summary())
    backward = [d for d in r.diffs if d.phase == "backward"]
    float64 = [d for d in r.diffs if d.phase == "float64"]
    assert len(backward) == 161 and len(float64) == 1 + 161      # the loss and every gradient
    assert max(d.usage for d in float64) < 0.1
    assert all(d.ref_torch is not None and d.ref_mxnet is not None for d in backward)


def test_float64_twins_allow_each_sides_own_rounding_and_still_catch_a_different_layer():
    """BatchNorm on activations of mean 1000 and std 0.1: MXNet's float32 operator is far less
    precise than torch's (its bias gradient 160x further from float64 than torch's here), which
    the tolerance allows once each side's float64 twin measures it; an epsilon that differs
    (1e-5 against 1e-3) is an implementation difference, which the float64 rows catch."""
    from mxnet.gluon import nn as gnn

    def pair(torch_eps):
        mx.random.seed(0)
        g = gnn.HybridSequential()
        g.add(gnn.BatchNorm(in_channels=3), gnn.Activation("relu"), gnn.Flatten(), gnn.Dense(4, in_units=192))
        g.initialize(mx.init.Xavier())
        t = torch.nn.Sequential(torch.nn.BatchNorm2d(3, eps=torch_eps), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(192, 4))
        x = (1000 + 0.1 * np.random.default_rng(1).standard_normal((4, 3, 8, 8))).astype(np.float32)
        g(mx.nd.array(x))
        report = dl.port.port_gluon_to_torch(g, t, x)
        trainer, opt = _sgd(g, t)
        return check_native_training(g, t, report, x, np.array([0, 1, 2, 3]), _ce,
                                     lambda o, y: torch.nn.functional.cross_entropy(o, y),
                                     trainer, opt, steps=2, float64_reference=True)

    r = pair(1e-5)
    print(r.summary())
    assert r.passed, r.summary()
    bn = [d for d in r.diffs if d.phase == "backward" and d.name.startswith("grad 0.")]
    # an allowance of 16 x torch's own rounding (the torch-only reference) would not cover these
    assert max(d.ref_mxnet / d.ref_torch for d in bn) > 16, [(d.ref_mxnet, d.ref_torch) for d in bn]
    r = pair(1e-3)
    print(r.summary())
    assert not r.passed and r.first_failure.phase == "float64"
