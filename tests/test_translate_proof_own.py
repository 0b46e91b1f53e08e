"""The proof on the user's own weights, beside the randomised ones: a module that is right on
random norms can still differ on the block's actual values (negative running variances drawn by
an initializer give NaN, which MXNet's relu maps to 0 and torch's keeps). Also a batch-1 sample
proven in train mode at batch 2, and a float64 proof whose default-dtype tensors are float64."""
import os
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from mxnet.gluon import nn  # noqa: E402

import dualdl.port as port  # noqa: E402
from dualdl.port.translate.verify import load_generated  # noqa: E402


def _check(report, prefix):
    return next(c for c in report.checks if c.name.startswith(prefix))


def _bn_relu_net():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, in_channels=3), nn.BatchNorm(in_channels=8), nn.Activation("relu"),
            nn.GlobalAvgPool2D(), nn.Dense(2, in_units=8))
    return net


def test_negative_running_variance_in_own_weights_is_named(tmp_path):
    """In float64 MXNet's relu keeps a NaN as torch's does: the outputs agree (NaN at the same
    positions) and a note says where the NaN starts."""
    mx.random.seed(0)
    net = _bn_relu_net()
    net.initialize(mx.init.Xavier())
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    net(mx.nd.array(x))
    # what mx.init.Normal gives a SymbolBlock's BatchNorm (gluoncv's SSD FeatureExpander): negative variances
    net[1].running_var.set_data(mx.nd.array(np.random.default_rng(1).normal(0, 0.5, 8)))
    r = port.translate(net, x, str(tmp_path))
    own = _check(r, "eval outputs (the block's own")
    assert r.ok and own.passed and "4 output values are NaN/inf on both sides, at the same positions" in own.detail
    note = next(n for n in r.notes if n.startswith("eval outputs (the block's own weights): the outputs hold NaN"))
    assert "torch's 1 (BatchNorm2d) makes NaN from finite inputs: its running_var holds 2 negative" in note, note


def test_own_weights_of_a_sound_model_are_proven(tmp_path):
    mx.random.seed(0)
    net = _bn_relu_net()
    net.initialize(mx.init.Xavier())
    r = port.translate(net, np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32), str(tmp_path))
    own = _check(r, "eval outputs (the block's own")
    assert r.ok and own.passed and own.max_rel_diff < 1e-13, r.summary()


def test_gluoncv_ssd_custom_normal_init_the_case_of_the_issue(tmp_path):
    """ssd_300_mobilenet0.25_custom(classes=2) initialised with Normal(0.1), train=False: the
    report was ok while Gluon's scores were 1.0 and the module's 0.333."""
    import warnings
    gcv = port.import_gluoncv()
    mx.random.seed(0)
    net = gcv.model_zoo.get_model("ssd_300_mobilenet0.25_custom", classes=["a", "b"], pretrained_base=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net.initialize(mx.init.Normal(0.1))
    x = np.random.default_rng(0).standard_normal((1, 3, 128, 128)).astype(np.float32)
    r = port.translate(net, x, str(tmp_path), train=False)
    assert _check(r, "eval outputs (randomised").passed
    own = _check(r, "eval outputs (the block's own")
    assert not r.ok and not own.passed, r.summary()
    assert "features.expand.bn0 (BatchNorm2d) makes NaN from finite inputs" in own.detail, own.detail
    assert "8 running variance(s) of the block hold negative values" in own.detail
    assert r.first_divergent == "features"


def test_batch_one_batchnorm_on_1x1_map_is_proven_at_batch_two(tmp_path):
    """Gluon's train-mode BatchNorm on one value per channel returns beta, torch's refuses it:
    the proof builds a batch-2 sample for the train step and says so."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=3), nn.BatchNorm(in_channels=4), nn.Dense(2, in_units=4))
    net.initialize()
    r = port.translate(net, np.random.default_rng(0).standard_normal((1, 3, 3, 3)).astype(np.float32),
                       str(tmp_path))
    assert r.ok, r.summary()
    assert any("train mode proven at batch 2" in n and "BatchNorm 1 sees one value per channel" in n
               for n in r.notes), r.notes
    train = _check(r, "train-mode outputs")
    assert train.passed and train.max_rel_diff < 1e-12
    assert _check(r, "running statistics").passed          # n = 2 per channel: torch's unbiased factor 2


def test_d2l_rnnlm_with_int_ids_is_proven(tmp_path):
    """d2l 1.0's RNNLM: ``npx.one_hot(X.T, vocab)`` (float32 unless asked) into an RNN. Fed int ids,
    the module's one-hot is torch's default dtype: the float64 run makes it float64, as every
    other tensor of that run (it stopped on 'RNN input dtype float32 does not match weight dtype
    float64')."""
    from mxnet import np as mnp, npx
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import _translate_d2l as d2l

    npx.set_np()
    try:
        mx.random.seed(0)
        net = d2l.RNNLM(d2l.RNN(8), 12)
        x = np.random.default_rng(0).integers(0, 12, (3, 5)).astype(np.int32)
        net(mnp.array(x))
        r = port.translate(net, x, str(tmp_path))
    finally:
        npx.reset_np()
    assert r.ok, r.summary()
    assert r.dtype == "float32"     # MXNet's own one-hot is float32 into a float64 RNN: Gluon runs float32
    assert r.max_rel_diff < 1e-5


def test_nan_weight_is_refused_naming_it(tmp_path):
    """NaN outputs would agree with NaN outputs: a weight holding NaN is refused in one line (it
    ended in 'could not restore Gluon parameter ... after verification')."""
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=4))
    net.initialize()
    w = net[0].weight.data().asnumpy()
    w[1, 2] = np.nan
    net[0].weight.set_data(mx.nd.array(w))
    with pytest.raises(port.TranslationError, match=r"parameter .*weight holds NaN or inf values"):
        port.translate(net, np.ones((2, 4), np.float32), str(tmp_path))
    assert np.isnan(net[0].weight.data().asnumpy()[1, 2])       # the block is left as it was


def test_user_input_errors_met_in_the_proof_are_the_users(tmp_path):
    """ids past an Embedding's rows (MXNet clips them, torch raises IndexError) and int64 inputs into
    a float layer are the sample's fault: one line saying what to give, not 'a bug in dualdl'."""
    net = nn.HybridSequential()
    net.add(nn.Embedding(5, 3))
    net.initialize()
    with pytest.raises(ValueError, match=r"^translate: the sample inputs hold ids beyond the rows of an embedding"):
        port.translate(net, np.array([[1, 7]], np.int64), str(tmp_path / "emb"))
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2))
    net.initialize()
    with pytest.raises(ValueError, match=r"^translate: an integer sample input reaches a float layer .* float32"):
        port.translate(net, np.array([[1, 2]], np.int64), str(tmp_path / "dense"))
