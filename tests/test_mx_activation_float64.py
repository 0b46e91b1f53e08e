"""MXNet GELU / LeakyReLU / ELU (layers and ops) in float64 equal torch's to rounding (1e-14
relative), values and input gradients, at the edges too (zeros, tiny and huge inputs, slopes above
1 and below 0; LeakyReLU at +-inf and NaN); float32 NDArrays still run MXNet's LeakyReLU operator
(bit for bit), and a hybridized float64 layer is exact too (its dtype from the input or its cast();
the ops inside a hybridized graph keep the operator: the parity table's known entry)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as tF
from mxnet import autograd, nd

import dualdl_mx.activation as act
import dualdl_mx.ops as mo

EDGES = np.array([0.0, -0.0, 1e-300, -1e-300, 5e-8, -5e-8, -3.0, -12.0, -40.0, 2.5, 30.0, 800.0, -800.0])
CASES = {   # name: (dualdl_mx op, torch function)
    "gelu": (mo.gelu, tF.gelu),
    "leaky_relu 0.2": (lambda a: mo.leaky_relu(a, 0.2), lambda t: tF.leaky_relu(t, 0.2)),
    "leaky_relu 1.3": (lambda a: mo.leaky_relu(a, 1.3), lambda t: tF.leaky_relu(t, 1.3)),
    "leaky_relu -0.5": (lambda a: mo.leaky_relu(a, -0.5), lambda t: tF.leaky_relu(t, -0.5)),
    "elu 0.7": (lambda a: mo.elu(a, 0.7), lambda t: tF.elu(t, 0.7)),
    "GELU layer": (act.GELU(), torch.nn.GELU()),
    "LeakyReLU layer": (act.LeakyReLU(0.3), torch.nn.LeakyReLU(0.3)),
    "ELU layer": (act.ELU(1.7), torch.nn.ELU(1.7)),
}


def _mx(f, x, gout):
    a = nd.array(x, dtype=x.dtype)
    a.attach_grad()
    with autograd.record():
        y = f(a)
    y.backward(nd.array(gout, dtype=x.dtype))
    return y.asnumpy(), a.grad.asnumpy()


def _torch(f, x, gout):
    t = torch.tensor(x, requires_grad=True)
    y = f(t)
    y.backward(torch.tensor(gout))
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("name", list(CASES))
def test_float64_equals_torch_to_rounding(name):
    x = np.concatenate([EDGES, np.random.default_rng(0).normal(0, 3, 200)])
    gout = np.cos(np.arange(x.size))
    (ym, gm), (yt, gt) = _mx(CASES[name][0], x, gout), _torch(CASES[name][1], x, gout)
    assert ym.dtype == gm.dtype == np.float64
    np.testing.assert_allclose(ym, yt, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(gm, gt, rtol=1e-14, atol=1e-15)    # gelu': Phi(x) + x phi(x) cancels


def test_leaky_relu_float64_at_infinities_and_nan_as_torch():
    x = np.array([np.inf, -np.inf, np.nan])
    (ym, gm), (yt, gt) = _mx(lambda a: mo.leaky_relu(a, 0.2), x, np.ones(3)), \
        _torch(lambda t: tF.leaky_relu(t, 0.2), x, np.ones(3))
    np.testing.assert_array_equal(ym, yt)
    np.testing.assert_array_equal(gm, gt)          # 1 at +inf, the slope at -inf and NaN


@pytest.mark.parametrize("name", ["gelu", "leaky_relu 0.2", "elu 0.7"])
def test_float32_keeps_mxnets_operator_bit_for_bit(name):
    op = {"gelu": dict(act_type="gelu"), "leaky_relu 0.2": dict(act_type="leaky", slope=0.2),
          "elu 0.7": dict(act_type="elu", slope=0.7)}[name]
    x = np.random.default_rng(1).normal(0, 3, 300).astype(np.float32)
    gout = np.cos(np.arange(x.size)).astype(np.float32)
    (ym, gm), (yo, go) = _mx(CASES[name][0], x, gout), _mx(lambda a: nd.LeakyReLU(a, **op), x, gout)
    np.testing.assert_array_equal(ym, yo)
    np.testing.assert_array_equal(gm, go)


@pytest.mark.parametrize("layer", [act.GELU, act.ELU, lambda: act.LeakyReLU(0.2)],
                         ids=["GELU", "ELU", "LeakyReLU"])
def test_hybridized_float64_is_the_exact_formula_too(layer):
    """A hybridized layer called with float64 takes its dtype from the input: the exact formula, as
    eager (it used to run MXNet's float32-precision operator, ~1e-7 off)."""
    x = np.random.default_rng(2).normal(0, 3, (4, 30))
    eager, hyb = layer(), layer()
    hyb.hybridize()
    (ye, ge), (yh, gh) = (_mx(b, x, np.ones_like(x)) for b in (eager, hyb))
    assert yh.dtype == np.float64
    d = max(np.abs(ye - yh).max(), np.abs(ge - gh).max())
    assert d <= 1e-15, d
