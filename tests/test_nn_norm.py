"""The norm family beyond the parity table (tests/parity_table/norm_rows.py): the same error, word
for word, from the real layers on both backends; torch's parameter/buffer names, order, shapes and
default values; the input dtype kept; float32 precision on adversarial activations (mean 1000,
std 0.1) against float64, next to torch's own error; and the Gluon differences docs/models.md names."""
import numpy as np
import pytest

import dualdl as dl

pytest.importorskip("torch")
pytest.importorskip("mxnet")


def _error(backend, make, shape, train=True):
    with dl.use(backend):
        m = make()
        m.train(train)
        x = dl.from_numpy(np.ones(shape, np.float32) * np.arange(np.prod(shape)).reshape(shape).astype(np.float32))
        with pytest.raises((ValueError, TypeError, IndexError, NotImplementedError)) as e:
            m(x)
    return e.type, str(e.value)


BAD_INPUTS = [
    (lambda: dl.nn.BatchNorm3d(4), (2, 4, 3, 3), True),
    (lambda: dl.nn.BatchNorm3d(4), (2, 3, 2, 2, 2), True),
    (lambda: dl.nn.BatchNorm3d(4), (1, 4, 1, 1, 1), True),
    (lambda: dl.nn.BatchNorm2d(4), (2, 3, 5, 5), False),
    (lambda: dl.nn.BatchNorm1d(4), (1, 4), True),
    (lambda: dl.nn.LayerNorm((2, 3)), (4, 3, 2), True),
    (lambda: dl.nn.GroupNorm(2, 4), (2, 6, 3), True),
    (lambda: dl.nn.GroupNorm(2, 4), (4,), True),
    (lambda: dl.nn.GroupNorm(2, 4), (0, 4, 3), True),
    (lambda: dl.nn.InstanceNorm1d(3), (2, 3, 1), True),
    (lambda: dl.nn.InstanceNorm2d(3), (0, 3, 2, 2), False),
    (lambda: dl.nn.InstanceNorm2d(3, affine=True), (2, 3, 4), True),
]


@pytest.mark.parametrize("make,shape,train", BAD_INPUTS)
def test_bad_inputs_get_the_same_error_on_both_backends(make, shape, train):
    t, m = _error("torch", make, shape, train), _error("mxnet", make, shape, train)
    assert t == m and t[0] is ValueError


def test_a_single_spatial_element_is_fine_in_eval_with_running_stats_on_both():
    x = np.random.default_rng(0).standard_normal((2, 3, 1)).astype(np.float32)
    outs = {}
    for be in ("torch", "mxnet"):
        with dl.use(be):
            m = dl.nn.InstanceNorm1d(3, track_running_stats=True).eval()
            outs[be] = dl.to_numpy(m(dl.from_numpy(x)))
    np.testing.assert_allclose(outs["torch"], outs["mxnet"], rtol=0, atol=1e-6)


BAD_ARGS = [
    (lambda: dl.nn.GroupNorm(3, 4), ValueError, r"^num_channels \(4\) must be divisible by num_groups \(3\)$"),
    (lambda: dl.nn.GroupNorm(-2, 4), ValueError, r"^GroupNorm: num_groups must be positive, got -2$"),
]


@pytest.mark.parametrize("make,err,match", BAD_ARGS)
def test_bad_arguments_refused_on_both(make, err, match):
    for be in ("torch", "mxnet"):
        with dl.use(be):
            with pytest.raises(err, match=match):
                make()


# momentum=None (torch's cumulative average) on both backends, eager and hybridized, unbatched
# InstanceNorm and InstanceNorm without weight on another channel count: tests/test_nn_norm_more.py


NATIVE = [
    ("BatchNorm3d", (5,), {}),
    ("GroupNorm", (2, 6), {}),
    ("GroupNorm", (3, 6), {"affine": False}),
    ("InstanceNorm1d", (4,), {}),
    ("InstanceNorm2d", (4,), {"affine": True, "track_running_stats": True}),
    ("InstanceNorm2d", (4,), {"affine": True, "bias": False}),
]


def _tensors(named):
    return [(k, tuple(v.shape), dl.to_numpy(v.data() if callable(getattr(v, "data", None)) else v.data))
            for k, v in named]


@pytest.mark.parametrize("name,args,kwargs", NATIVE)
def test_names_order_shapes_and_defaults_are_torchs(name, args, kwargs):
    import torch
    ref = getattr(torch.nn, name)(*args, **kwargs)
    want_p = [(k, tuple(v.shape), v.detach().numpy()) for k, v in ref.named_parameters()]
    want_b = [(k, tuple(v.shape), v.numpy()) for k, v in ref.named_buffers() if k != "num_batches_tracked"]
    for be in ("torch", "mxnet"):
        with dl.use(be):
            m = getattr(dl.nn, name)(*args, **kwargs)
            got_p, got_b = _tensors(m.named_parameters()), _tensors(m.named_buffers())
        got_b = [b for b in got_b if b[0] != "num_batches_tracked"]
        for want, got in ((want_p, got_p), (want_b, got_b)):
            assert [(k, s) for k, s, _ in got] == [(k, s) for k, s, _ in want], be
            for (_, _, a), (_, _, b) in zip(got, want):
                np.testing.assert_array_equal(a, b)
        assert isinstance(m, getattr(dl.nn, name))


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("make", [lambda: dl.nn.GroupNorm(2, 4), lambda: dl.nn.InstanceNorm2d(4, affine=True),
                                  lambda: dl.nn.InstanceNorm2d(4, track_running_stats=True)])
def test_mxnet_output_keeps_the_input_dtype(make, dtype, hybridize):
    """The statistics are computed in float64; the output comes back in the input's dtype."""
    import mxnet as mx
    with dl.use("mxnet"):
        m = make()
        m.cast(dtype)
        if hybridize:
            m.hybridize()
        x = mx.nd.array(np.random.default_rng(0).standard_normal((2, 4, 3, 3)), dtype=dtype)
        x.attach_grad()
        for train in (True, False):
            m.train(train)
            with mx.autograd.record():
                y = m(x)
            y.backward()
            assert y.dtype == np.dtype(dtype) and x.grad.dtype == np.dtype(dtype)


def _errors_vs_float64(name, make, x, g):
    """max |y - y64| / max |y64| and the same for dx: torch float32, dualdl-MXNet eager and hybridized."""
    import torch
    import mxnet as mx

    def torch_run(dtype):
        m = make(torch.nn).to(dtype)
        t = torch.tensor(x, dtype=dtype, requires_grad=True)
        y = m(t)
        y.backward(torch.tensor(g, dtype=dtype))
        return y.detach().double().numpy(), t.grad.double().numpy()

    def mx_run(hyb):
        with dl.use("mxnet"):
            m = make(dl.nn)
            if hyb:
                m.hybridize()
            t = mx.nd.array(x)
            t.attach_grad()
            with mx.autograd.record():
                y = m(t)
            y.backward(mx.nd.array(g))
            return y.asnumpy().astype(np.float64), t.grad.asnumpy().astype(np.float64)

    ref = torch_run(torch.float64)
    out = {}
    for label, r in (("torch", torch_run(torch.float32)), ("mxnet", mx_run(False)), ("mxnet:hybridized", mx_run(True))):
        out[label] = tuple(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(r, ref))
    print(f"\n{name} at mean 1000, std 0.1: max rel (output, grad input) vs float64: {out}")
    return out


@pytest.mark.parametrize("name,make", [("GroupNorm(4, 8)", lambda nn: nn.GroupNorm(4, 8)),
                                       ("InstanceNorm2d(8)", lambda nn: nn.InstanceNorm2d(8))])
def test_adversarial_activations_keep_float32_rounding_on_mxnet(name, make):
    """Mean 1000, std 0.1 (a cancellation-prone input): dualdl-MXNet, float64 statistics, stays at
    float32 rounding (measured 3.1e-8 output, 5.7e-8 grad); torch's float32 kernels lose more
    (measured 1.7e-4..2.2e-4 output, 3e-5..1.1e-4 grad)."""
    rng = np.random.default_rng(0)
    x = (1000 + 0.1 * rng.standard_normal((4, 8, 16, 16))).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    err = _errors_vs_float64(name, make, x, g)
    for cand in ("mxnet", "mxnet:hybridized"):
        assert err[cand][0] <= 1e-7 and err[cand][1] <= 2e-7, (cand, err)
        assert err[cand][0] < err["torch"][0], err


def test_hybridized_running_stats_update_in_forward_as_eager():
    """As dualdl's hybridized BatchNorm: the outermost dualdl graph outputs torch's update, copied in
    after each call, so a forward alone updates the running statistics hybridized too, as eager
    and torch (a native Gluon parent leaves it to MXNet's fused op in backward)."""
    import mxnet as mx
    x = mx.nd.array(np.random.default_rng(0).standard_normal((2, 3, 5)) + 2.0)
    x.attach_grad()                 # a graph with nothing to differentiate runs no backward
    with dl.use("mxnet"):
        for hyb in (False, True):
            m = dl.nn.InstanceNorm1d(3, track_running_stats=True)
            if hyb:
                m.hybridize()
            m(x)
            assert not np.allclose(m.running_mean.data().asnumpy(), 0.0), hyb
            with mx.autograd.record():
                y = m(x)
            y.backward()
            assert np.all(m.running_mean.data().asnumpy() > 0.1)


def test_gluon_differences_named_in_the_docs():
    """docs/models.md: Gluon's GroupNorm has gamma/beta per group (num_groups,), not per channel;
    Gluon's InstanceNorm defaults center=True, scale=False (gamma fixed, beta learnt)."""
    import mxnet as mx
    from mxnet.gluon import nn as gnn
    g = gnn.GroupNorm(num_groups=2)
    g.initialize()
    g(mx.nd.ones((2, 6, 3)))
    assert sorted(p.shape for p in g.collect_params().values()) == [(2,), (2,)]
    i = gnn.InstanceNorm()
    i.initialize()
    i(mx.nd.ones((2, 6, 3)))
    req = {k.split("_")[-1]: p.grad_req for k, p in i.collect_params().items()}
    assert req == {"gamma": "null", "beta": "write"}


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("name,make,shape", [
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    ("InstanceNorm2d", lambda nn: nn.InstanceNorm2d(4, affine=True), (1, 4, 3, 3))])   # N*C == C
def test_mxnet_eager_operator_form_matches_torch_in_either_mode_after_a_batchnorm(name, make, shape, train):
    """Eager GroupNorm/InstanceNorm run MXNet's BatchNorm op in float64, which uses batch
    statistics only in train mode, and a second one for the affine that reads (C,) zeros/ones:
    also in eval mode outside record(), with weight/bias not 1/0, and after a BatchNorm2d of the
    same size wrote its scratch statistics, output and gradients (x, weight, bias) are torch's."""
    import mxnet as mx
    import torch
    rng = np.random.default_rng(1)
    x = (3 + 2 * rng.standard_normal(shape))
    g = rng.standard_normal(shape)
    w, b = rng.standard_normal(4) + 1.0, rng.standard_normal(4)
    t = make(torch.nn).double().train(train)
    with torch.no_grad():
        t.weight.copy_(torch.tensor(w))
        t.bias.copy_(torch.tensor(b))
    tx = torch.tensor(x, requires_grad=True)
    t(tx).backward(torch.tensor(g))
    want = [t(tx).detach().numpy(), tx.grad.numpy(), t.weight.grad.numpy(), t.bias.grad.numpy()]
    with dl.use("mxnet"):
        other = dl.nn.BatchNorm2d(shape[0] * (2 if name == "GroupNorm" else 4))
        other.cast("float64")
        other(mx.nd.array(rng.standard_normal((2, other.num_features, 2, 2)), dtype="float64"))
        m = make(dl.nn)
        m.train(train)
        m.weight.set_data(mx.nd.array(w))
        m.bias.set_data(mx.nd.array(b))
        mx_x = mx.nd.array(x, dtype="float32")
        mx_x.attach_grad()
        y_plain = m(mx_x).asnumpy()
        with mx.autograd.record():
            y = m(mx_x)
        y.backward(mx.nd.array(g, dtype="float32"))
        got = [y_plain, mx_x.grad.asnumpy(), m.weight.grad().asnumpy(), m.bias.grad().asnumpy()]
    for label, a, r in zip(("out", "dx", "dweight", "dbias"), got, want):
        rel = float(np.abs(a - r).max() / np.abs(r).max())
        assert rel < 1e-6, (name, train, label, rel)


def test_mxnet_hybridized_affine_scratch_is_in_no_state_dict_and_follows_cast():
    """Hybridized, the affine runs as MXNet's BatchNorm op on (C,) float64 scratch statistics:
    parameters of the block outside torch's names (state dict: weight, bias only), kept float64
    by ``cast()`` (the op refuses float32 statistics for float64 data), so graphs rebuilt after
    a cast still run and the float64 one matches torch."""
    import mxnet as mx
    import torch
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 3))
    with dl.use("mxnet"):
        m = dl.nn.GroupNorm(2, 4)
        m.hybridize()
        m(mx.nd.array(x))
        assert list(m.state_dict()) == ["weight", "bias"]
        m.cast("float32")               # Gluon's cast() would make the scratch float32 too
        m.hybridize()
        m(mx.nd.array(x))
        m.cast("float64")
        m.hybridize()
        mx_x = mx.nd.array(x, dtype="float64")
        mx_x.attach_grad()
        with mx.autograd.record():
            y = m(mx_x)
        y.backward()
    t = torch.tensor(x, requires_grad=True)
    want = torch.nn.GroupNorm(2, 4).double()(t)
    want.backward(torch.ones_like(want))
    assert y.dtype == np.float64
    assert np.abs(y.asnumpy() - want.detach().numpy()).max() < 1e-12
    assert np.abs(mx_x.grad.asnumpy() - t.grad.numpy()).max() < 1e-12
