"""translate_recipe(initializer=...): the written ``init_parameters(model)`` applies, by torch name,
the mx.init rule Gluon applied to each tensor: scales equal MXNet's exactly (captured from MXNet's
own sampler call), deterministic rules equal bit for bit, random ones the same distribution (KS
test against Gluon's draws on gluon-cv's cifar_resnet20_v1 translated by dl.port.translate)."""
import importlib.util
import os
import struct

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
stats = pytest.importorskip("scipy.stats")

from dualdl.port.recipe import RecipeError, translate_recipe  # noqa: E402


def f32(x):
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _gluon_twin():
    """Conv-BN-Dense in Gluon and a torch module with the same structural names."""
    from mxnet import gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(8, 3, in_channels=3), gluon.nn.BatchNorm(in_channels=8),
            gluon.nn.Dense(10, in_units=8 * 6 * 6))
    tnet = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8),
                               torch.nn.Linear(8 * 6 * 6, 10))
    return net, tnet


class _Capture:
    """Stands in for mxnet.ndarray.random inside mxnet.initializer: records the sampler call."""

    def __init__(self):
        self.calls = []

    def uniform(self, low, high, shape=None, out=None, **kw):
        self.calls.append(("uniform", low, high))

    def normal(self, loc, scale, shape=None, out=None, **kw):
        self.calls.append(("normal", loc, scale))


@pytest.mark.parametrize("init,shape", [
    (lambda: mx.init.Xavier(), (64, 3, 7, 7)),
    (lambda: mx.init.Xavier(magnitude=2.24), (16, 16, 3, 3)),
    (lambda: mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2), (1000, 512)),
    (lambda: mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2), (30, 7, 5)),
    (lambda: mx.init.MSRAPrelu(), (32, 16, 3, 3)),
    (lambda: mx.init.MSRAPrelu(factor_type="in", slope=0.1), (10, 40)),
    (lambda: mx.init.Uniform(0.1), (5, 5)),
    (lambda: mx.init.Normal(0.02), (5, 5)),
])
def test_scale_equals_mxnet_exactly(init, shape, monkeypatch):
    """The bound/sigma the generated code draws with == the one MXNet passes to its sampler
    (as the C++ float it becomes)."""
    from mxnet import initializer as I
    cap = _Capture()
    monkeypatch.setattr(I, "random", cap)
    obj = init()
    obj(I.InitDesc("w", {"__init__": obj}), mx.nd.zeros(shape))
    kind, a, b = cap.calls[0]
    mxnet_scale = f32(b)  # high (uniform) or sigma (normal), a C++ float parameter
    from dualdl.port.recipe.init import rule_of
    from dualdl.port.recipe.torch_src import init as T
    rule, args = rule_of(obj, "w")
    if rule == "xavier":
        ours = f32(T.xavier_scale(shape, args["factor_type"], args["magnitude"]))
        assert (args["rnd_type"] == "uniform") == (kind == "uniform")
    else:
        ours = f32(args.get("scale", args.get("sigma")))
    assert ours == mxnet_scale
    if kind == "uniform":
        assert f32(a) == -mxnet_scale


def test_deterministic_rules_bitwise():
    """Bilinear, LSTMBias, Constant (scalar and per-row list), Zero, One: MXNet's arrays."""
    from mxnet import initializer as I
    from dualdl.port.recipe.init import rule_of
    from dualdl.port.recipe.torch_src import init as T
    cases = [(mx.init.Bilinear(), (4, 1, 6, 6)), (mx.init.Bilinear(), (2, 3, 5, 5)),
             (mx.init.LSTMBias(forget_bias=1.5), (40,)), (mx.init.Constant(0.3), (3, 4)),
             (mx.init.Constant([[1.0], [2.0], [3.0]]), (3, 4)), (mx.init.Zero(), (7,)),
             (mx.init.One(), (2, 2))]
    for obj, shape in cases:
        ref = mx.nd.zeros(shape)
        obj(I.InitDesc("w", {"__init__": obj}), ref)
        rule, args = rule_of(obj, "w")
        t = torch.full(shape, 9.0)
        T.apply_rule(t, rule, args, list(shape))
        np.testing.assert_array_equal(t.numpy(), ref.asnumpy(), err_msg=f"{obj} {shape}")


def test_orthogonal_is_orthogonal_at_gluons_scale():
    from dualdl.port.recipe.torch_src import init as T
    t = torch.empty(6, 4, 2)
    T.orthogonal_(t, [6, 4, 2], scale=1.414, rand_type="normal",
                  generator=torch.Generator().manual_seed(0))
    m = t.reshape(6, 8).double()
    np.testing.assert_allclose((m @ m.T).numpy(), 1.414 ** 2 * np.eye(6), atol=1e-5)


def test_own_initializers_win_and_names_pair(tmp_path):
    """Gluon's rule per tensor: Conv/Dense weights take the global Xavier, biases their own
    'zeros', BatchNorm gamma/beta/running stats ones/zeros."""
    net, tnet = _gluon_twin()
    init = mx.init.Xavier(rnd_type="gaussian", magnitude=2.24)
    net.initialize(init)
    # torch names differ from Gluon's for BatchNorm (gamma/beta -> weight/bias): a dict maps them
    mapping = {k: k for k in ["0.weight", "0.bias", "2.weight", "2.bias"]}
    mapping.update({"1.gamma": "1.weight", "1.beta": "1.bias", "1.running_mean": "1.running_mean",
                    "1.running_var": "1.running_var"})
    recipe = translate_recipe(initializer=init, gluon_model=net, torch_model=tnet,
                              mapping=mapping, out=tmp_path / "init_recipe.py")
    mod = recipe.load()
    rules = {r[0]: (r[2], r[3]) for r in mod.INIT_RULES}
    assert rules["0.weight"] == ("xavier", {"rnd_type": "gaussian", "factor_type": "avg",
                                            "magnitude": 2.24})
    assert rules["0.bias"] == ("constant", {"value": 0.0})
    assert rules["1.weight"] == ("constant", {"value": 1.0})  # Gluon's gamma 'ones'
    assert rules["1.running_var"] == ("constant", {"value": 1.0})
    with torch.no_grad():
        for p in tnet.parameters():
            p.fill_(5.0)
        for b in tnet.buffers():
            if b.is_floating_point():
                b.fill_(5.0)
    mod.init_parameters(tnet, torch.Generator().manual_seed(0))
    g = {k: p.data().asnumpy() for k, p in net._collect_params_with_prefix().items()}
    t = dict(tnet.state_dict())
    for gk, tk in mapping.items():
        if gk.endswith(("bias", "beta", "gamma", "running_mean", "running_var")):
            np.testing.assert_array_equal(t[tk].numpy(), g[gk], err_msg=gk)


def _cifar_resnet20():
    spec = importlib.util.find_spec("gluoncv")
    if spec is None:
        pytest.skip("gluoncv not installed")
    path = os.path.join(os.path.dirname(spec.origin), "model_zoo", "cifarresnet.py")
    s = importlib.util.spec_from_file_location("gluoncv_cifarresnet", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod.cifar_resnet20_v1(classes=10)


def test_cifar_resnet20_distribution_matches_gluon(tmp_path):
    """gluon-cv train_cifar10.py: ``net.initialize(mx.init.Xavier())`` on cifar_resnet20_v1,
    translated by dl.port.translate; every random tensor passes a two-sample KS test against
    Gluon's draws (p > 1e-3), every constant one is equal, bounds are MXNet's."""
    import dualdl as dl
    mx.random.seed(1)
    net = _cifar_resnet20()
    init = mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)
    net.initialize(init)
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    net(mx.nd.array(x))
    report = dl.port.translate(net, x, str(tmp_path), "resnet20", verify=False)
    spec = importlib.util.spec_from_file_location("resnet20", report.source_path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    tnet = getattr(gen, report.class_name)()
    recipe = translate_recipe(initializer=init, gluon_model=net, torch_model=tnet, mapping=report)
    mod = recipe.load()
    mod.init_parameters(tnet, torch.Generator().manual_seed(0))
    state = dict(tnet.named_parameters())
    state.update(tnet.named_buffers())
    gluon = {k: p.data().asnumpy() for k, p in net._collect_params_with_prefix().items()}
    ks_p, n_random = [], 0
    for tname, gname, kind, args, shape in mod.INIT_RULES:
        a, b = gluon[gname].ravel(), state[tname].detach().numpy().ravel()
        if kind == "constant":
            np.testing.assert_array_equal(b, a, err_msg=tname)
            continue
        n_random += 1
        sigma = f32(mod.xavier_scale(shape, args["factor_type"], args["magnitude"]))
        assert abs(b.std() / sigma - 1) < 0.25 and abs(a.std() / sigma - 1) < 0.25, tname
        if a.size >= 200:
            ks_p.append(stats.ks_2samp(a, b).pvalue)
    assert n_random >= 20 and len(ks_p) >= 18
    assert min(ks_p) > 1e-3, sorted(ks_p)[:3]  # measured: 22 tensors, smallest p 0.026


def test_refusals():
    net, tnet = _gluon_twin()
    net.initialize(mx.init.Xavier())

    class Custom(mx.init.Initializer):
        def _init_weight(self, _, arr):
            arr[:] = 0.5
    with pytest.raises(RecipeError, match="Custom.*has no translation"):
        translate_recipe(initializer=Custom(), gluon_model=net, torch_model=tnet,
                         mapping={"0.weight": "0.weight"})
    with pytest.raises(RecipeError, match="gluon_model"):
        translate_recipe(initializer=mx.init.Xavier())
    with pytest.raises(RecipeError, match="no torch tensor of the same name"):
        translate_recipe(initializer=mx.init.Xavier(), gluon_model=net, torch_model=tnet)
    mixed = mx.init.Mixed(["nothing"], [mx.init.Zero()])
    with pytest.raises(RecipeError, match="matches no pattern"):
        translate_recipe(initializer=mixed, gluon_model=net, torch_model=tnet,
                         mapping={"0.weight": "0.weight"})


def test_mixed_patterns_by_gluon_name():
    net, tnet = _gluon_twin()
    net.initialize()
    mixed = mx.init.Mixed([".*dense.*weight", ".*"], [mx.init.Normal(0.5), mx.init.Uniform(0.2)])
    mod = translate_recipe(initializer=mixed, gluon_model=net, torch_model=tnet,
                           mapping={"0.weight": "0.weight", "2.weight": "2.weight"}).load()
    rules = {r[0]: (r[2], r[3]) for r in mod.INIT_RULES}
    assert rules == {"0.weight": ("uniform", {"scale": 0.2}),
                     "2.weight": ("normal", {"sigma": 0.5})}
