"""Activations and dropouts against torch.nn (issue 34), where the parity table cannot go: 0-d
inputs (MXNet 1.x has no 0-d arrays: run as shape (1,) and reshaped back), NaN/inf inputs of the
layers with branches, hybridized float64 GELU/LeakyReLU/ELU (exact: MXNet's LeakyReLU operator has
float32 precision), the argument and input refusals of the new layers, and the dropouts' 0-d and
unbatched inputs in train mode, eager and hybridized."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
from mxnet import autograd, nd  # noqa: E402

import dualdl as dl  # noqa: E402

CANDIDATES = ["torch", "mxnet", "mxnet:hybridized"]
ZERO_D = [("ReLU", ()), ("GELU", ()), ("ELU", (2.0,)), ("LeakyReLU", (0.5,)), ("LogSoftmax", (0,)),
          ("Mish", ()), ("PReLU", ()), ("ReLU6", ()), ("SiLU", ()), ("Sigmoid", ()), ("Softmax", (0,)),
          ("Softplus", (2.0, -100.0)), ("Tanh", ()), ("Hardswish", ()), ("Hardsigmoid", ()),
          ("Hardtanh", ()), ("Hardshrink", (0.5,)), ("Softshrink", (0.25,)), ("Tanhshrink", ()),
          ("Threshold", (-1.0, 5.0)), ("Softmin", (-1,)), ("Softsign", ()), ("LogSigmoid", ()), ("CELU", (2.0,)),
          ("SELU", ()), ("Dropout", ())]
BRANCHY = [("Hardtanh", (-1.0, 2.0)), ("Hardshrink", (1.0,)), ("Softshrink", (1.0,)), ("Threshold", (0.5, -4.0)),
           ("CELU", (0.75,)), ("SELU", ()), ("LogSigmoid", ()), ("Softsign", ()), ("Tanhshrink", ()),
           ("GLU", ()), ("Softmin", (1,)), ("Softmax2d", ())]


def _torch_run(name, args, x, gout):
    t = torch.tensor(x, requires_grad=True)
    y = getattr(torch.nn, name)(*args).to(t.dtype)(t)
    y.backward(torch.tensor(gout))
    return y.detach().numpy(), t.grad.numpy()


def _mx_input(x):
    """An NDArray with a gradient buffer; 0-d: ``attach_grad`` cannot make one (zeros_like of ())."""
    a = nd.array(x, dtype=x.dtype)
    autograd.mark_variables([a], [nd.array(np.zeros(x.shape, x.dtype), dtype=x.dtype)])
    return a


def _dl_run(cand, name, args, x, gout, train=True):
    backend = cand.split(":")[0]
    with dl.use(backend):
        m = getattr(dl.nn, name)(*args)
        m.train(train)
        if backend == "torch":
            t = torch.tensor(x, requires_grad=True)
            y = m.to(t.dtype)(input=t)
            y.backward(torch.tensor(gout))
            return y.detach().numpy(), t.grad.numpy()
        m.cast(x.dtype.name)
        if cand.endswith("hybridized"):
            m.hybridize()
        a = _mx_input(x)
        with autograd.record(train_mode=train):
            y = m(input=a)
        y.backward(nd.array(gout, dtype=x.dtype))
        return y.asnumpy(), a.grad.asnumpy()


@pytest.mark.parametrize("cand", CANDIDATES)
@pytest.mark.parametrize("name,args", ZERO_D, ids=[f"{n}{a}" for n, a in ZERO_D])
def test_zero_d_input_as_torch(cand, name, args):
    # torch's float64 hardsigmoid backward multiplies by 1/6 rounded to float32 (dualdl's MXNet side is exact)
    for dtype, tol in ((np.float64, 1e-7 if name == "Hardsigmoid" else 1e-12), (np.float32, 1e-6)):
        for v in (-0.7, 1.3):
            x, gout = np.array(v, dtype), np.array(0.6, dtype)
            if name == "Dropout":                   # eval: the identity (train: tests below)
                (y, g), (yt, gt) = _dl_run(cand, name, args, x, gout, train=False), (x, gout)
            else:
                (y, g), (yt, gt) = _dl_run(cand, name, args, x, gout), _torch_run(name, args, x, gout)
            assert y.shape == g.shape == () and y.dtype == g.dtype == dtype, (y.shape, g.shape, y.dtype)
            np.testing.assert_allclose(y, yt, rtol=tol, atol=tol)
            np.testing.assert_allclose(g, gt, rtol=tol, atol=tol)


@pytest.mark.parametrize("cand", ["mxnet", "mxnet:hybridized"])
def test_zero_d_refusals_name_the_0d_shape(cand):
    x = np.array(0.5, np.float32)
    with pytest.raises(ValueError, match=r"LogSoftmax\(dim=1\): dim out of range for input of shape \(\)"):
        _dl_run(cand, "LogSoftmax", (1,), x, x)
    with pytest.raises(ValueError, match="glu does not support scalars"):
        _dl_run(cand, "GLU", (), x, x)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 0D instead"):
        _dl_run(cand, "Softmax2d", (), x, x)


@pytest.mark.parametrize("cand", CANDIDATES)
@pytest.mark.parametrize("name,args", BRANCHY, ids=[n for n, _ in BRANCHY])
def test_nonfinite_and_branch_points_as_torch(cand, name, args):
    """NaN, +-inf, zeros and the branch points themselves (where torch's conditions decide the
    gradient): the same values (NaN where torch has NaN) and gradients."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -4.0, 30.0, -30.0, 1e-20,
                  -800.0, 800.0, 0.3, -0.3], np.float64)
    x = np.stack([x, x[::-1]])
    if name == "Softmax2d":
        x = np.stack([x, -x])[None]                  # (1, 2, 2, 18): channels 0 and 1
        x[np.isnan(x) | np.isinf(x)] = 3.0           # softmax of inf is NaN in both, with different gradients
    gout = np.cos(np.arange(x.size)).reshape(x.shape)
    if name == "GLU":
        gout = gout[..., :9]
    if name in ("Softmin",):
        x = np.nan_to_num(x, nan=1.5, posinf=2.5, neginf=-2.5)
    (y, g), (yt, gt) = _dl_run(cand, name, args, x, gout), _torch_run(name, args, x, gout)
    np.testing.assert_allclose(y, yt, rtol=1e-14, atol=1e-300, equal_nan=True)
    # torch's own gradient at NaN depends on where the NaN sits: its vectorized loop gives 0
    # (Hardtanh, the shrinks; dualdl too) or NaN (CELU, SELU; dualdl too), its scalar tail the slope
    g, gt = g[~np.isnan(x)], gt[~np.isnan(x)]
    np.testing.assert_allclose(g, gt, rtol=1e-14, atol=1e-15, equal_nan=True)


@pytest.mark.parametrize("name,args", [("GELU", ()), ("LeakyReLU", (0.2,)), ("ELU", (0.7,))])
def test_hybridized_float64_is_exact_and_float32_keeps_the_operator(name, args):
    """MXNet's LeakyReLU operator computes float64 in float32 precision: a hybridized float64 layer
    runs the exact formula, from the NDArray's dtype (alone) or from ``cast`` (in a parent's graph);
    float32 keeps the operator, bit for bit, also after float64 ran (the graph is rebuilt)."""
    x = np.random.default_rng(2).normal(0, 3, (4, 30))
    gout = np.cos(np.arange(x.size)).reshape(x.shape)
    yt, gt = _torch_run(name, args, x, gout)
    y, g = _dl_run("mxnet:hybridized", name, args, x, gout)
    np.testing.assert_allclose(y, yt, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(g, gt, rtol=1e-14, atol=1e-15)
    with dl.use("mxnet"):
        net = dl.nn.Sequential(dl.nn.Identity(), getattr(dl.nn, name)(*args))
        net.cast("float64")
        net.hybridize()
        assert np.abs(net(nd.array(x, dtype="float64")).asnumpy() - yt).max() <= 1e-14 * np.abs(yt).max()
        m = getattr(dl.nn, name)(*args)
        m.hybridize()
        m(nd.array(x, dtype="float64"))
        x32 = nd.array(x, dtype="float32")
        op = {"GELU": dict(act_type="gelu"), "LeakyReLU": dict(act_type="leaky", slope=0.2),
              "ELU": dict(act_type="elu", slope=0.7)}[name]
        y32 = m(x32)
        assert y32.dtype == np.float32
        np.testing.assert_array_equal(y32.asnumpy(), nd.LeakyReLU(x32, **op).asnumpy())


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_argument_refusals_on_both_backends(backend):
    with dl.use(backend):
        with pytest.raises(AssertionError, match=r"^max_val \(1\) must be greater than min_val \(1\)$"):
            dl.nn.Hardtanh(1, 1)
        with pytest.raises(AssertionError, match=r"^max_val \(0.5\) must be greater than min_val \(2\)$"):
            dl.nn.Hardtanh(max_value=0.5, min_val=2)
        with pytest.raises(ValueError, match=r"^Softshrink: lambd must be >= 0, got -1$"):
            dl.nn.Softshrink(-1)
        with pytest.raises(ValueError, match=r"^CELU: alpha cannot be 0"):
            dl.nn.CELU(0.0)
        with pytest.warns(FutureWarning, match="`min_value` is deprecated"):
            m = dl.nn.Hardtanh(min_value=-0.25)
        assert m.min_val == -0.25 and m.max_val == 1.0
        assert "min_val=-0.25, max_val=1.0" in repr(m)


@pytest.mark.parametrize("cand", CANDIDATES)
def test_input_refusals(cand):
    x = np.zeros((2, 3), np.float32)
    err = RuntimeError if cand == "torch" else ValueError
    with pytest.raises(err, match="Halving dimension must be even, but dimension 1 is size 3"):
        _dl_run(cand, "GLU", (), x, x)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        _dl_run(cand, "Softmax2d", (), x, x)


@pytest.mark.parametrize("cand", CANDIDATES)
def test_inplace_layers_give_torchs_values(cand):
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    for name, args in (("Hardtanh", (-1.0, 2.0, True)), ("Threshold", (0.5, -4.0, True)), ("CELU", (0.7, True)),
                       ("SELU", (True,))):
        want = getattr(torch.nn, name)(*args[:-1])(torch.tensor(x)).numpy()
        with dl.use(cand.split(":")[0]):
            m = getattr(dl.nn, name)(*args)
            assert m.inplace is True and "inplace=True" in repr(m)
            if cand.endswith("hybridized"):
                m.hybridize()
            t = torch.tensor(x) if cand == "torch" else nd.array(x, dtype="float64")
            y = m(t)
            np.testing.assert_allclose(y.numpy() if cand == "torch" else y.asnumpy(), want, rtol=1e-15)


@pytest.mark.parametrize("cand", ["mxnet", "mxnet:hybridized"])
def test_dropouts_train_on_0d_and_unbatched_inputs(cand):
    """Dropout of a 0-d input; Dropout1d of (C, L) (one mask value per channel); Dropout2d of
    (N, C, L) and (N, C, H, W) in one hybridized graph (one mask value per (N, C)); scaled 1/(1-p)."""
    rng = np.random.default_rng(0)
    with dl.use("mxnet"):
        for name, shape in (("Dropout", ()), ("Dropout1d", (40, 10)), ("Dropout2d", (3, 8, 20)),
                            ("Dropout2d", (3, 8, 4, 5))):
            m = getattr(dl.nn, name)(0.5)
            if cand.endswith("hybridized"):
                m.hybridize()
            x = np.asarray(rng.uniform(1, 2, shape), np.float32)
            a = _mx_input(x)
            with autograd.record():
                y = m(input=a)
            y.backward(nd.ones_like(y) if shape else nd.array(np.float32(1)))
            out, g = y.asnumpy(), a.grad.asnumpy()
            assert out.shape == g.shape == shape
            kept = out != 0
            np.testing.assert_allclose(out[kept], 2 * x[kept], rtol=1e-6)
            np.testing.assert_array_equal(g, 2.0 * kept)
            if name != "Dropout":
                channels = kept.reshape(shape[0] * (name == "Dropout2d" and shape[1] or 1), -1)
                assert all(c.all() or not c.any() for c in channels)       # whole channels kept or dropped
                assert 0 < kept.mean() < 1
            m.eval()
            np.testing.assert_array_equal(m(nd.array(x, dtype="float32")).asnumpy(), x)
