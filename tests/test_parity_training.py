"""PyTorch vs MXNet through dl.Trainer: same initial weights (dl.load_state_dict), same batches,
every strategy and 1-3 devices -> the same weights after 5 steps. Measured max abs differences
are in each assertion message and in docs/training.md."""
import numpy as np
import pytest

import dualdl as dl
import dualdl.autograd  # noqa: F401

from _trainer_models import base_weights, data, make, maxdiff, train, weights

PAIRS = [("data_parallel", "split_and_load"),      # each framework's native recipe
         ("split_and_load", "data_parallel"),
         ("per_device_loss", "per_device_loss")]


@pytest.mark.parametrize("kind", ["mlp", "cnn", "cnn_bn", "lstm"])
@pytest.mark.parametrize("n_devices", [1, 2, 3])
def test_torch_and_mxnet_strategies_train_to_the_same_weights(kind, n_devices):
    worst = []
    for s_torch, s_mx in PAIRS:
        wt, _, _ = train(kind, "torch", n_devices, s_torch)
        wm, _, _ = train(kind, "mxnet", n_devices, s_mx)
        d = maxdiff(wt, wm)
        worst.append(d)
        assert d <= 2e-6, f"{kind} on {n_devices} device(s): torch {s_torch} vs mxnet {s_mx}: {d:.2e}"
    print(f"\n{kind} x{n_devices}: max |W_torch - W_mxnet| over strategy pairs = {max(worst):.2e}")


@pytest.mark.parametrize("optimizer", ["Adam", "RMSprop"])
def test_accumulation_clipping_and_schedules_agree_across_backends(optimizer):
    res = {}
    for be in ("torch", "mxnet"):
        with dl.use(be):
            m = make("mlp", be)
            dl.load_state_dict(m, base_weights("mlp"))
            opt = getattr(dl.optim, optimizer)(m.parameters(), lr=0.01, weight_decay=1e-3)
            sch = dl.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
            tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)], accumulate_steps=2,
                            clip_grad_norm=0.5, scheduler=sch)
            for s in range(6):
                x, y, _ = data("mlp", 10, seed=s)
                tr.train_step(x[:6], y[:6])
                tr.train_step(x[6:], y[6:])
            res[be] = weights(m)
    d = maxdiff(res["torch"], res["mxnet"])
    assert d <= 2e-6, f"{optimizer} + accumulation + clipping + StepLR: {d:.2e}"


def test_a_second_step_without_backward_reapplies_the_gradient_on_both():
    """A hand-written loop: torch re-applies a stale gradient; dualdl's MXNet optimizers do the same
    (Gluon's Trainer would raise). The Trainer never does this: it zeroes and skips instead."""
    res = {}
    x, y, _ = data("mlp")
    for be in ("torch", "mxnet"):
        with dl.use(be):
            m = make("mlp", be)
            dl.load_state_dict(m, base_weights("mlp"))
            opt = dl.optim.SGD(m.parameters(), lr=0.1)
            opt.zero_grad()
            with dl.autograd.record(m):
                loss = dl.losses.MSELoss()(m(dl.from_numpy(x)), dl.from_numpy(y))
            dl.autograd.backward(loss)
            opt.step()
            once = weights(m)
            opt.step()
            res[be] = (once, weights(m))
    for be, (once, twice) in res.items():
        moved = {k: twice[k] - once[k] for k in once}
        first = {k: once[k] - base_weights("mlp")[k] for k in once}
        assert maxdiff(moved, first) <= 1e-6, be            # the same update applied again
    assert maxdiff(res["torch"][1], res["mxnet"][1]) <= 1e-6


def test_eval_step_outputs_agree_across_backends():
    x, y, _ = data("cnn_bn")
    outs = {}
    for be in ("torch", "mxnet"):
        with dl.use(be):
            m = make("cnn_bn", be)
            dl.load_state_dict(m, base_weights("cnn_bn"))
            tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.01), dl.losses.MSELoss(),
                            devices=[dl.cpu(i) for i in range(3)])
            tr.train_step(x, y)
            loss, out = tr.eval_step(x, y)
            outs[be] = (loss, dl.to_numpy(out))
    assert abs(outs["torch"][0] - outs["mxnet"][0]) <= 1e-5
    assert np.abs(outs["torch"][1] - outs["mxnet"][1]).max() <= 1e-5


def test_cross_entropy_with_integer_labels_on_three_devices():
    """Classification: int64 labels split like the inputs; class-weighted CE is a weighted mean,
    exact with data_parallel (one loss on the gathered batch) on both backends; per-device
    strategies weight pieces by sample count, so they differ from it (documented)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 6)).astype("float32")
    y = rng.integers(0, 3, 10)
    w = np.array([0.2, 1.0, 3.0], "float32")
    res = {}
    for be in ("torch", "mxnet"):
        for n, strategy in ((1, "data_parallel"), (3, "data_parallel"), (3, "split_and_load")):
            with dl.use(be):
                m = make("mlp", be)
                dl.load_state_dict(m, base_weights("mlp"))
                loss = dl.losses.CrossEntropyLoss(weight=dl.from_numpy(w), label_smoothing=0.1)
                if strategy == "split_and_load":
                    with pytest.warns(UserWarning, match="class weights"):
                        tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), loss,
                                        devices=[dl.cpu(i) for i in range(n)], strategy=strategy)
                else:
                    tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), loss,
                                    devices=[dl.cpu(i) for i in range(n)], strategy=strategy)
                for _ in range(5):
                    tr.train_step(x, y)
                res[(be, n, strategy)] = weights(m)
    ref = res[("torch", 1, "data_parallel")]
    for key in (("torch", 3, "data_parallel"), ("mxnet", 1, "data_parallel"), ("mxnet", 3, "data_parallel")):
        assert maxdiff(res[key], ref) <= 1e-6, key
    assert maxdiff(res[("torch", 3, "split_and_load")], res[("mxnet", 3, "split_and_load")]) <= 1e-6
    assert maxdiff(res[("torch", 3, "split_and_load")], ref) > 1e-4
