"""MXNet relu inside a hybridized graph (MKLDNN's ELU with slope 0, which keeps MKLDNN's layout
after a convolution): torch's values and gradients through conv -> relu -> pool, NaN kept after
the convolution, torch's gradient at a NaN input, zeros whose sign may differ (equal as numbers).
(MXNet's max pooling itself drops NaN, torch's keeps it: not
relu's doing, so NaN is compared before the pooling.)"""
import numpy as np
import pytest
import torch
from mxnet import autograd, nd

import dualdl as dl


class ConvReluPool(dl.nn.Module):
    def __init__(self, layer: bool):
        super().__init__()
        self.conv = dl.nn.Conv2d(2, 4, 3, padding=1)
        self.act = dl.nn.ReLU() if layer else None
        self.pool = dl.nn.MaxPool2d(2)

    def forward(self, x):
        y = self.conv(x)
        y = self.act(y) if self.act is not None else dl.ops.relu(y)
        return y, self.pool(y)


def _run(be, layer, hybridize, x, r):
    with dl.use(be):
        dl.seed(0)
        net = ConvReluPool(layer)
        if be == "mxnet" and hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        if be == "torch":
            dl.load_state_dict(net, _run.state)
        else:
            _run.state = {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}
        xt = dl.from_numpy(x)
        with dl.autograd.record(net):
            act, out = net(xt)
            loss = dl.ops.sum(out * dl.from_numpy(r))
        dl.autograd.backward(loss)
        grads = {k: dl.to_numpy(p.grad if be == "torch" else p.grad()) for k, p in net.named_parameters()}
        return dl.to_numpy(act), dl.to_numpy(out), grads


@pytest.mark.parametrize("layer", [False, True])
@pytest.mark.parametrize("hybridize", [False, True])
def test_conv_relu_pool_matches_torch_and_keeps_nan(layer, hybridize):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    r = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    act, out, grads = _run("mxnet", layer, hybridize, x, r)
    want_act, want, want_grads = _run("torch", layer, False, x, r)
    assert (want_act == 0).mean() > 0.3                             # relu cut something
    np.testing.assert_allclose(act, want_act, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    for k in want_grads:
        np.testing.assert_allclose(grads[k], want_grads[k], rtol=1e-4, atol=1e-5)
    x[1, 0, 2, 2] = np.nan                                        # one sample diverged
    act, out, _ = _run("mxnet", layer, hybridize, x, r)
    want_act, want, _ = _run("torch", layer, False, x, r)
    np.testing.assert_array_equal(np.isnan(act), np.isnan(want_act))
    assert np.isnan(act[1]).sum() >= 9 and not np.isnan(act[0]).any()
    np.testing.assert_allclose(act[0], want_act[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[0], want[0], rtol=1e-5, atol=1e-6)


def test_hybridized_relu_values_and_input_gradient_as_torch():
    """Values and input gradients at NaN, +-inf, +-0 and ordinary inputs, layer and op, applied to
    the graph's input: torch's, except the gradient at a NaN input (the relu op's NaN)."""
    edges = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, -1.0, 2.5, -3e-3, 7.0], np.float32)

    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = dl.nn.ReLU()

        def forward(self, x):
            return self.act(x) + dl.ops.relu(x)

    x = np.tile(edges, (2, 3, 4, 1))
    g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    with dl.use("mxnet"):
        net = Net()
        net.hybridize()
    a = nd.array(x)
    a.attach_grad()
    with autograd.record():
        y = net(a)
    y.backward(nd.array(g))
    t = torch.tensor(x, requires_grad=True)
    want = torch.relu(t) + torch.relu(t)
    want.backward(torch.tensor(g))
    np.testing.assert_array_equal(y.asnumpy(), want.detach().numpy())   # NaN == NaN, -0.0 == 0.0
    # the graph's input has no producing operator: the relu op (its gradient at a NaN input is
    # NaN, torch's is g; everywhere else torch's bit for bit)
    nan = np.isnan(x)
    np.testing.assert_array_equal(a.grad.asnumpy()[~nan], t.grad.numpy()[~nan])
    assert np.isnan(a.grad.asnumpy()[nan]).all()
    with dl.use("mxnet"):
        eager = Net()
    np.testing.assert_array_equal(eager(nd.array(x)).asnumpy(), want.detach().numpy())  # eager too
