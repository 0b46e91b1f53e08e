"""MXNet relu (``ops.relu`` and ``nn.ReLU``) on feature maps (float32, 3+ dims eager; after a Convolution,
BatchNorm or Pooling in a graph) runs MKLDNN's ``LeakyReLU(elu, slope=-0.0)``: torch's values with
NaN kept (``Activation(relu)`` maps NaN to 0), also right after a Convolution (MKLDNN's blocked
layout), eager and hybridized; in float32 torch's input gradients bit for bit (1 at NaN, where
MXNet's ``relu`` op gave NaN) except 0 for 0 < x <= 2**-24 (the operator's backward); only the sign
of some zeros differs (equal as numbers). Other inputs (2-D, float64, float16, integer) keep MXNet's
``relu`` op."""
import json

import numpy as np
import pytest
import torch
from mxnet import nd

import dualdl as dl
import dualdl_mx.activation as act
import dualdl_mx.ops as mo
from test_mx_activation_float64 import _mx

EDGES = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1e-30, -1e-30, 5e-8, -5e-8, 2.0 ** -24 * 1.5, 1.2e-7,
         -3.0, 2.5, -88.0, -104.0, 3e38, -3e38]


def _data(dtype, shape=(1, 3, 1, -1)):
    x = np.concatenate([EDGES, np.random.default_rng(0).normal(0, 3, 281)]).astype(dtype)
    return x.reshape(shape), np.cos(np.arange(x.size)).astype(dtype).reshape(shape)


def _torch(x, gout):
    t = torch.tensor(x, requires_grad=True)
    y = torch.relu(t)
    y.backward(torch.tensor(gout))
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("form", ["op", "layer"])
def test_float32_feature_map_values_and_gradients_are_torchs(form):
    x, gout = _data(np.float32)
    (ym, gm), (yt, gt) = _mx(mo.relu if form == "op" else act.ReLU(), x, gout), _torch(x, gout)
    assert ym.dtype == np.float32
    np.testing.assert_array_equal(ym, yt)                  # NaN where torch's is NaN, inf kept
    flat = x.ravel()
    assert np.isnan(ym.ravel()[2]) and ym.ravel()[3] == np.inf and ym.ravel()[4] == 0.0
    tiny = (x > 0) & (x <= 2.0 ** -24)                     # MKLDNN's elu backward: exp(x) rounds to 1
    assert tiny.sum() == 3 and not np.any(gm[tiny])
    np.testing.assert_array_equal(gm[~tiny], gt[~tiny])    # 1 at NaN and +inf, 0 at 0 and below
    sign_differs = (np.signbit(ym) != np.signbit(yt)).ravel()
    assert not np.any(sign_differs & ~((flat == 0) | ((flat < 0) & (flat > -1e-7)))), flat[sign_differs]


@pytest.mark.parametrize("hybrid", [False, True])
def test_nan_survives_relu_right_after_a_convolution(hybrid):
    """A Convolution's output is in MKLDNN's blocked layout, where ``Activation(relu)`` runs; a NaN
    in the input reaches the relu output as in torch. The graph runs MKLDNN's operator."""
    x = np.random.default_rng(1).normal(size=(2, 3, 6, 6)).astype(np.float32)
    x[1, 2, 3, 3] = np.nan
    with dl.use("mxnet"):
        m = dl.nn.Sequential(dl.nn.Conv2d(3, 16, 3, padding=1), dl.nn.ReLU())
    if hybrid:
        m.hybridize()
    out = m(nd.array(x)).asnumpy()
    conv = m[0]
    w, b = conv.weight.data().asnumpy(), conv.bias.data().asnumpy()
    ref = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref.numpy()))
    assert np.isnan(out).sum() == 16 * 9                   # the 3x3 window around it, every channel
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-5, atol=1e-5)
    if hybrid:
        ops = [n["op"] for n in json.loads(m._cached_graph[1].tojson())["nodes"]]
        assert "LeakyReLU" in ops and "relu" not in ops, ops


@pytest.mark.parametrize("dtype, shape", [(np.float64, (1, 3, 1, -1)), (np.float32, (3, -1)),
                                          (np.float16, (1, 3, 1, -1))],
                         ids=["float64 feature map", "float32 2-D", "float16 feature map"])
def test_other_inputs_keep_mxnets_relu_op_bit_for_bit(dtype, shape):
    x, gout = _data(dtype, shape)
    for f in (mo.relu, act.ReLU()):
        (ym, gm), (yo, go) = _mx(f, x, gout), _mx(nd.relu, x, gout)
        assert ym.dtype == dtype
        np.testing.assert_array_equal(ym, yo)
        np.testing.assert_array_equal(gm, go)
        np.testing.assert_array_equal(ym, _torch(x, gout)[0])


def test_a_graph_keeps_the_relu_op_after_a_linear_layer():
    with dl.use("mxnet"):
        m = dl.nn.Sequential(dl.nn.Linear(4, 8), dl.nn.ReLU())
    m.hybridize()
    m(nd.ones((2, 4)))
    ops = [n["op"] for n in json.loads(m._cached_graph[1].tojson())["nodes"]]
    assert "relu" in ops and "LeakyReLU" not in ops, ops


def test_integer_feature_maps_keep_the_relu_op():
    x = np.array([-2, 0, 3, 5, -7, 1]).reshape(1, 1, 2, 3)
    for dtype in ("int32", "int64"):
        for f in (mo.relu, act.ReLU()):
            y = f(nd.array(x, dtype=dtype))
            assert y.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(y.asnumpy(), np.maximum(x, 0))


def test_exact_relu_setting_keeps_the_relu_op_and_torchs_tiny_gradients():
    """DUALDL_MX_EXACT_RELU=1 (read when dualdl_mx's layers are imported, so in a fresh process):
    MXNet's relu op on feature maps too, whose gradient is torch's also for 0 < x <= 2**-24."""
    import os
    import subprocess
    import sys
    code = ("import numpy as np, mxnet as mx\n"
            "from mxnet import autograd, nd\n"
            "import dualdl_mx.ops as mo\n"
            "x = nd.array(np.array([5e-8, 1e-30, -1.0, 2.0], 'float32').reshape(1, 1, 1, 4)); x.attach_grad()\n"
            "with autograd.record():\n"
            "    y = mo.relu(x)\n"
            "y.backward(nd.ones_like(y))\n"
            "print(x.grad.asnumpy().ravel().tolist())\n")
    grads = {}
    for flag in ("0", "1"):
        env = dict(os.environ, DUALDL_MX_EXACT_RELU=flag)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        grads[flag] = out.stdout.strip()
    assert grads["1"] == "[1.0, 1.0, 0.0, 1.0]"            # torch's relu gradient
    assert [abs(v) for v in json.loads(grads["0"])] == [0.0, 0.0, 0.0, 1.0]   # the MKLDNN form's (signed zeros)
