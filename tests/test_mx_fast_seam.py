"""The MXNet speed code behind one seam (dualdl_mx/fast/, switched by ``DUALDL_MX_FAST``): with it
off every layer, loss and step takes its precise form, and the fast forms give the same numbers.

Measured here: a conv net with BatchNorm-ReLU-MaxPool (the kernel's fused pass), one with ReLUs
on feature maps (MKLDNN's relu forms), the cross-entropy loss and dl.Trainer's guarded SGD step
(one step with a NaN input refused), 6 steps eager and hybridized: the losses are equal bit for
bit with the fast forms and without them, the weights within 4.9e-7 (BatchNorm net) and 1.4e-7
(plain net) of each tensor's largest value: the only form that rounds differently is log-softmax's
gradient (``dl_log_softmax`` computes in float64, its precise form, the formula, in float32; within
2e-7 per element). The BatchNorm kernel, the fused Sequential and the relu forms are bit for bit
(tests/test_mx_kernels.py, tests/test_mx_relu.py).
"""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn, ops

pytest.importorskip("mxnet")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(ops.flatten(self.features(x), 1))


class PlainNet(nn.Module):
    """relu on feature maps outside a BatchNorm (the fast relu form, and relu into a max pooling)."""
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(ops.flatten(self.features(x), 1))


def _train(monkeypatch, fast: bool, hybrid: bool, batches, model=Net):
    monkeypatch.setenv("DUALDL_MX_FAST", "1" if fast else "0")
    with dl.use("torch"):
        dl.seed(0)
        ref = model()
    with dl.use("mxnet"):
        net = model()
    dl.load_state_dict(net, dl.state_dict(ref))
    if hybrid:
        net.hybridize()
    tr = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), dl.losses.CrossEntropyLoss(),
                    nonfinite="skip")
    with pytest.warns(RuntimeWarning, match="non-finite"):
        losses = [tr.train_step(x, y) for x, y in batches]
    return np.array(losses), {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}, len(tr.skipped_steps)


def _batches():
    rs = np.random.RandomState(0)
    out = [(rs.rand(16, 3, 16, 16).astype("float32"), rs.randint(0, 10, 16)) for _ in range(5)]
    bad = out[2][0].copy()
    bad[0, 0, 0, 0] = np.nan                    # one step the guarded check must refuse, on both forms
    out.insert(3, (bad, out[2][1]))
    return out


@pytest.mark.parametrize("model", [Net, PlainNet], ids=["batchnorm", "plain"])
@pytest.mark.parametrize("hybrid", [False, True], ids=["eager", "hybridized"])
def test_fast_forms_give_the_precise_forms_numbers(monkeypatch, hybrid, model):
    batches = _batches()
    fast_loss, fast_w, fast_skipped = _train(monkeypatch, True, hybrid, batches, model)
    slow_loss, slow_w, slow_skipped = _train(monkeypatch, False, hybrid, batches, model)
    assert fast_skipped == slow_skipped == 1
    # the refused step's loss is not compared: MXNet's max pooling skips NaN, and a window that is
    # all NaN pools to 0 after the fast relu form, to -3.4e38 after MXNet's relu op (torch: NaN;
    # docs/differences.md); both forms refuse the step on its NaN gradients
    keep = [i for i in range(len(batches)) if i != 3]
    np.testing.assert_array_equal(fast_loss[keep], slow_loss[keep])
    assert fast_w.keys() == slow_w.keys()
    for k in fast_w:                # float32 rounding of the log-softmax gradient (measured <= 4.9e-7)
        scale = float(np.abs(slow_w[k]).max()) or 1.0
        np.testing.assert_allclose(fast_w[k], slow_w[k], rtol=0, atol=2e-6 * scale, err_msg=k)


def test_the_switch_turns_every_fast_form_off(monkeypatch):
    """With DUALDL_MX_FAST=0 none of the fast forms is called (read at each call, in one process)."""
    import dualdl_mx.containers as containers
    import dualdl_mx.fast.batch_norm as fast_bn
    import dualdl_mx.fast.guarded_step as guarded
    import dualdl_mx.fast.relu as fast_relu
    calls = {}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return fn(*args, **kwargs)
        return wrapper
    monkeypatch.setattr(fast_bn, "kernel_formula", counted("batch_norm", fast_bn.kernel_formula))
    monkeypatch.setattr(containers.fast_sequential, "forward", counted("sequential", containers.fast_sequential.forward))
    monkeypatch.setattr(fast_relu, "relu", counted("relu", fast_relu.relu))
    monkeypatch.setattr(guarded, "_guarded", counted("guarded_step", guarded._guarded))
    batches = _batches()[:3]
    for fast in (True, False):
        calls.clear()
        monkeypatch.setenv("DUALDL_MX_FAST", "1" if fast else "0")
        with dl.use("mxnet"):
            dl.seed(0)
            net = Net()
        tr = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), dl.losses.CrossEntropyLoss())
        for x, y in batches:
            tr.train_step(x, y)
        if fast:
            assert set(calls) >= {"sequential", "batch_norm", "guarded_step"}, calls
        else:
            assert not calls, calls
