"""A ``gluon.SymbolBlock`` built inside a Gluon model (gluoncv's ``FeatureExpander``: a feature
extractor from a net's internal outputs plus extra layers) translates through the symbol path as
a child of the generated module, proven against MXNet (symbol_nested.py)."""
import importlib.util
import sys
import time
import warnings

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from mxnet import gluon  # noqa: E402
from mxnet.gluon import nn as gnn  # noqa: E402

from dualdl.port.translate import translate  # noqa: E402
from dualdl.port.translate.safe import check_source  # noqa: E402

warnings.filterwarnings("ignore", module="mxnet")


def _expander(prefix):
    """Like gluoncv's FeatureExpander: a base net's internal output + conv/BN/relu, two outputs."""
    base = gnn.HybridSequential(prefix=prefix + "base_")
    with base.name_scope():
        base.add(gnn.Conv2D(8, 3, padding=1), gnn.BatchNorm(), gnn.Activation("relu"),
                 gnn.Conv2D(8, 3, strides=2, padding=1), gnn.Activation("relu"))
    base.initialize(mx.init.Xavier())
    data = mx.sym.var("data")
    internals = base(data).get_internals()
    names = [n for n in internals.list_outputs() if n.endswith("relu1_fwd_output")]
    y = internals[names[0]]
    y2 = mx.sym.Convolution(y, mx.sym.var(prefix + "extra_weight"), mx.sym.var(prefix + "extra_bias"),
                            kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=6, name=prefix + "extra")
    y2 = mx.sym.BatchNorm(y2, name=prefix + "extra_bn", fix_gamma=False)
    y2 = mx.sym.Activation(y2, act_type="relu", name=prefix + "extra_relu")
    blk = gluon.SymbolBlock([y, y2], data, params=base.collect_params())
    blk.collect_params().initialize(mx.init.Normal(0.3))   # the extra layers (base ones stay)
    blk(mx.nd.zeros((1, 3, 16, 16)))    # deferred shapes
    for p in blk.collect_params().values():
        if p.name.endswith(("moving_mean", "bias", "beta")):
            p.set_data(mx.nd.random.normal(0, 0.2, p.shape))
        elif p.name.endswith("moving_var"):
            p.set_data(mx.nd.random.uniform(0.5, 1.5, p.shape))
    return blk


class Detector(gluon.HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.features = _expander(self.prefix + "feat_")
            self.head = gnn.Dense(5)

    def hybrid_forward(self, F, x):
        a, b = self.features(x)
        return self.head(F.concat(F.flatten(a), F.flatten(b), dim=1)) + F.mean(b)


def _load(path, cls):
    spec = importlib.util.spec_from_file_location(f"_nested_{id(path)}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, cls)


def test_symbolblock_child_translates_and_matches(tmp_path):
    mx.random.seed(1)
    net = Detector()
    net.head.initialize(mx.init.Xavier())
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    want = net(mx.nd.array(x)).asnumpy()
    rep = translate(net, x, str(tmp_path), "det")
    assert rep.ok, [(c.name, c.max_rel_diff, c.detail) for c in rep.checks]
    src = open(rep.source_path).read()
    check_source(src)
    assert "class SymbolBlock(nn.Module)" in src and "self.features = SymbolBlock()" in src
    from safetensors.torch import load_file
    model = _load(rep.source_path, rep.class_name)()
    model.load_state_dict(load_file(rep.weights_path))
    model.eval()
    with torch.no_grad():
        got = model(torch.from_numpy(x)).numpy()
    assert np.abs(got - want).max() < 1e-4
    gluon_keys = {m["gluon"] for m in rep.mapping}
    assert any(k.startswith("features.") and k.endswith("extra_weight") for k in gluon_keys)


def test_gluoncv_ssd_feature_expander(tmp_path):
    """gluoncv's SSD ``features`` (a FeatureExpander: a SymbolBlock built inside the model from the
    MobileNet's internal outputs) as a child of a Gluon block: generated classes, real weights."""
    from dualdl.port.gluoncv_compat import import_gluoncv
    try:
        gcv = import_gluoncv()
    except Exception as e:   # gluoncv not installed here
        pytest.skip(f"gluoncv: {e}")
    mx.random.seed(0)
    ssd = gcv.model_zoo.get_model("ssd_512_mobilenet1.0_voc", pretrained=False, pretrained_base=False)
    ssd.initialize(mx.init.Normal(0.05))
    x = np.random.default_rng(0).standard_normal((2, 3, 128, 128)).astype(np.float32)
    ssd(mx.nd.array(x))
    for p in ssd.collect_params().values():     # a Normal init draws negative running variances
        if p.name.endswith(("running_var", "moving_var")):
            p.set_data(mx.nd.random.uniform(0.5, 1.5, p.shape))

    class Wrap(gluon.HybridBlock):
        def __init__(self, f, **kw):
            super().__init__(**kw)
            self.features = f

        def hybrid_forward(self, F, x):
            return self.features(x)
    net = Wrap(ssd.features)
    want = [o.asnumpy() for o in net(mx.nd.array(x))]
    rep = translate(net, x, str(tmp_path), "ssd_features", verify=False)
    src = open(rep.source_path).read()
    check_source(src)
    assert "class FeatureExpander(nn.Module)" in src
    from safetensors.torch import load_file
    model = _load(rep.source_path, rep.class_name)()
    model.load_state_dict(load_file(rep.weights_path))
    model.eval()
    with torch.no_grad():
        got = model(torch.from_numpy(x))
    assert len(got) == len(want) == 6
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert np.abs(g.numpy() - w).max() <= 1e-4 * max(1.0, np.abs(w).max())
