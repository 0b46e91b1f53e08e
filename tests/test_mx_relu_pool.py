"""MXNet relu right before a max pooling, hybridized: MKLDNN's ``Activation`` in the graph (the
pooling skips NaN whatever the relu gives it), with the pooled values and the gradients of relu's
NaN-keeping form, torch's where torch's window holds no NaN, and the NaN-keeping form kept for the
relu's other consumers. Eager calls keep the NaN-keeping form (the relu has run when the pooling
is called): they are the reference here."""
import json

import numpy as np
import pytest
import torch

import dualdl as dl
from dualdl.trainer import NonFiniteLossError

TINY = np.float32(1e-8)                      # 0 < x <= 2**-24: the elu form's backward gives 0 there
LOWEST = np.finfo(np.float32).min


class IdentityConvReluPool(dl.nn.Module):
    """A 1x1 convolution with weight 1 and bias 0 (its output is its input, bit for bit, in
    MKLDNN's layout), relu, 2x2 max pooling; optionally the relu's output as a second output."""

    def __init__(self, layer: bool, both: bool = False):
        super().__init__()
        self.conv = dl.nn.Conv2d(1, 1, 1)
        self.act = dl.nn.ReLU() if layer else None
        self.pool = dl.nn.MaxPool2d(2)
        self.both = both

    def forward(self, x):
        y = self.conv(x)
        y = self.act(y) if self.act is not None else dl.ops.relu(y)
        return (self.pool(y), y) if self.both else self.pool(y)


def _inputs():
    """(1, 1, 4, 8): eight 2x2 windows: all NaN; one NaN among positives; NaN, -inf and negatives;
    +inf; tiny positives and negatives; signed zeros; ordinary values; NaN with zeros."""
    w = [[np.nan, np.nan, np.nan, np.nan], [np.nan, 1.5, 0.5, 2.0], [np.nan, -np.inf, -1.0, -2.0],
         [np.inf, 1.0, -1.0, 3.0], [TINY, -TINY, -3.0, -1e-30], [0.0, -0.0, -0.0, 0.0],
         [0.7, -0.2, 1.3, 0.9], [np.nan, 0.0, -0.0, -4.0]]
    x = np.zeros((1, 1, 4, 8), np.float32)
    for i, v in enumerate(w):
        r, c = 2 * (i // 4), 2 * (i % 4)
        x[0, 0, r:r + 2, c:c + 2] = np.array(v, np.float32).reshape(2, 2)
    return x


def _identity_conv(conv) -> None:
    from mxnet import nd
    conv.weight.set_data(nd.ones((1, 1, 1, 1)))
    conv.bias.set_data(nd.zeros((1,)))


def _backward(net, x, g, hybridize, both=False):
    """(pooled output, input gradient for output gradient ``g``, the graph's operators or None,
    the relu's output if the net returns it too)."""
    from mxnet import autograd, nd
    if hybridize:
        net.hybridize(static_alloc=True, static_shape=True)
    a = nd.array(x)
    a.attach_grad()
    with autograd.record():
        out = net(a)
        pooled = out[0] if both else out
    pooled.backward(nd.array(g))
    graph = ([n["op"] for n in json.loads(net._cached_graph[1].tojson())["nodes"]]
             if hybridize else None)
    return pooled.asnumpy(), a.grad.asnumpy(), graph, (out[1].asnumpy() if both else None)


def _mx(x, g, layer, hybridize, both=False):
    with dl.use("mxnet"):
        net = IdentityConvReluPool(layer, both)
        _identity_conv(net.conv)
    return _backward(net, x, g, hybridize, both)


def _torch(x, g):
    t = torch.tensor(x, requires_grad=True)
    out = torch.nn.functional.max_pool2d(torch.relu(t), 2)
    out.backward(torch.tensor(g))
    return out.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("layer", [False, True])
def test_a_graph_pools_mkldnn_activation_with_the_nan_keeping_forms_results(layer):
    x = _inputs()
    g = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 4)
    out, grad, graph, _ = _mx(x, g, layer, hybridize=True)
    assert "Activation" in graph and "LeakyReLU" not in graph and "relu" not in graph, graph
    ref_out, ref_grad, _, _ = _mx(x, g, layer, hybridize=False)       # eager: the NaN-keeping form
    want_out, want_grad = _torch(x, g)

    all_nan = np.array([[True] + [False] * 3, [False] * 4])[None, None]
    tiny = x == TINY
    # pooled values: the NaN-keeping form's bit for bit, but 0 where a window is all NaN (the
    # form gave float32's lowest value there, torch NaN)
    np.testing.assert_array_equal(out[~all_nan], ref_out[~all_nan])
    assert ref_out[all_nan] == LOWEST and out[all_nan] == 0.0 and np.isnan(want_out[all_nan])
    # torch's where torch's window holds no NaN (the pooling skips NaN: docs/differences.md)
    clean = ~np.isnan(want_out)
    assert clean.sum() == 4
    np.testing.assert_array_equal(out[clean], want_out[clean])
    # input gradients: the form's, but torch's 1 at a tiny positive maximum where the form gives
    # 0, and none into an all-NaN window, where the form and torch pass the window's gradient to
    # one of its elements (the form the first, torch the last; relu's gradient is 1 at NaN)
    nan_window = np.repeat(np.repeat(all_nan, 2, axis=2), 2, axis=3)
    same = ~tiny & ~nan_window
    np.testing.assert_array_equal(grad[same], ref_grad[same])
    assert (grad[nan_window] == 0).all()
    assert ref_grad[nan_window].sum() == want_grad[nan_window].sum() == g[all_nan].sum()
    assert (ref_grad[tiny] == 0).all() and (grad[tiny] == want_grad[tiny]).all() and (grad[tiny] > 0).all()
    # and torch's inside every window without NaN
    win_clean = np.repeat(np.repeat(clean, 2, axis=2), 2, axis=3)
    np.testing.assert_array_equal(grad[win_clean], want_grad[win_clean])


def test_the_relu_keeps_nan_for_its_other_consumers():
    x = _inputs()
    g = np.ones((1, 1, 2, 4), np.float32)
    out, _, graph, act = _mx(x, g, layer=True, hybridize=True, both=True)
    assert "Activation" in graph and "LeakyReLU" in graph, graph       # both forms, each for its use
    t = torch.tensor(x)
    np.testing.assert_array_equal(act, torch.relu(t).numpy())          # NaN == NaN, -0.0 == 0.0
    assert np.isnan(act).sum() == np.isnan(x).sum()
    assert out[0, 0, 0, 0] == 0.0


def test_exact_relu_setting_keeps_the_relu_op_before_a_pooling():
    import os
    import subprocess
    import sys
    code = ("import json, dualdl as dl, mxnet as mx\n"
            "from mxnet import nd\n"
            "with dl.use('mxnet'):\n"
            "    net = dl.nn.Sequential(dl.nn.Conv2d(1, 2, 3), dl.nn.ReLU(), dl.nn.MaxPool2d(2))\n"
            "    net.hybridize()\n"
            "net(nd.ones((1, 1, 6, 6)))\n"
            "print(json.dumps([n['op'] for n in json.loads(net._cached_graph[1].tojson())['nodes']]))\n")
    env = dict(os.environ, DUALDL_MX_EXACT_RELU="1")
    ops = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout.strip().splitlines()[-1])
    assert "relu" in ops and "Activation" not in ops and "LeakyReLU" not in ops, ops


def test_trainer_still_skips_a_step_whose_input_holds_nan():
    """The pooled feature map has no NaN (MXNet's pooling skips it, in either relu form), so the
    loss is finite; the first convolution's weight gradient carries the NaN (NaN * 0), and
    dl.Trainer's gradient check refuses the step, as torch's NaN loss would."""
    import mxnet as mx
    from mxnet import nd

    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = dl.nn.Conv2d(1, 4, 3, padding=1)
            self.pool1 = dl.nn.MaxPool2d(2)
            self.conv2 = dl.nn.Conv2d(4, 4, 3, padding=1)
            self.pool2 = dl.nn.MaxPool2d(2)
            self.fc = dl.nn.Linear(4 * 2 * 2, 3)

        def forward(self, x):
            x = self.pool1(dl.ops.relu(self.conv1(x)))
            x = self.pool2(dl.ops.relu(self.conv2(x)))
            return self.fc(dl.ops.flatten(x, 1))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 1, 8, 8)).astype(np.float32)
    x[1, 0, 2:4, 2:4] = np.nan                      # one all-NaN pooling window in sample 1
    y = np.array([0, 2])
    with dl.use("mxnet"):
        dl.seed(0)
        net = Net()
        net.hybridize(static_alloc=True, static_shape=True)
        loss_fn = dl.losses.CrossEntropyLoss()
        before = {k: dl.to_numpy(v).copy() for k, v in dl.state_dict(net).items()}
        xt, yt = dl.from_numpy(x), dl.from_numpy(y)
        with dl.autograd.record(net):
            loss = loss_fn(net(xt), yt)
        assert np.isfinite(float(loss.asnumpy()[0]))
        dl.autograd.backward(loss)
        assert np.isnan(net.conv1.weight.grad().asnumpy()).any()
        net.zero_grad()
        trainer = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=0.1), loss_fn)
        with pytest.raises(NonFiniteLossError, match="gradient"):
            trainer.train_step(xt, yt)
        after = {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])
    assert trainer.global_step == 0


def _sequential_run(x, g, hybridize, hook=None):
    with dl.use("mxnet"):
        net = dl.nn.Sequential(dl.nn.Conv2d(1, 1, 1), dl.nn.ReLU(), dl.nn.MaxPool2d(2))
        _identity_conv(net[0])
        if hook is not None:
            net[1].register_forward_hook(hook)
    return _backward(net, x, g, hybridize)[:2]


def test_an_eager_sequential_relu_before_a_max_pool_gives_the_graphs_results():
    """Sequential knows that its ReLU's output goes only into the MaxPool2d after it: eager calls
    then compute it as the graph does (MKLDNN's Activation), with the same pooled values and
    gradients bit for bit, all-NaN windows and tiny maxima included."""
    x = _inputs()
    g = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 2, 4)
    eager_out, eager_grad = _sequential_run(x, g, hybridize=False)
    graph_out, graph_grad = _sequential_run(x, g, hybridize=True)
    np.testing.assert_array_equal(eager_out, graph_out)
    np.testing.assert_array_equal(eager_grad, graph_grad)
    assert eager_out[0, 0, 0, 0] == 0.0 and (eager_grad[x == TINY] > 0).all()
    ref_out, _, _, _ = _mx(x, g, layer=True, hybridize=False)     # functional: the NaN-keeping form
    assert ref_out[0, 0, 0, 0] == LOWEST


def test_a_hook_on_the_relu_sees_nan_kept():
    x = _inputs()
    g = np.ones((1, 1, 2, 4), np.float32)
    seen = []
    _sequential_run(x, g, hybridize=False, hook=lambda m, inp, out: seen.append(out.asnumpy()))
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], torch.relu(torch.tensor(x)).numpy())   # NaN == NaN
