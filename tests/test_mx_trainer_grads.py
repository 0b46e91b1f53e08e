"""dl.Trainer on MXNet without accumulation marks the gradients to be written by its one backward
(no ``reset_arrays``, no add-to) and marks them to accumulate again afterwards: the same training
bit for bit as zeroing first, the step's gradients kept (fresh) after the step, and a backward
outside the Trainer adds into them as torch's does."""
import types

import numpy as np
import pytest
from mxnet import autograd

import dualdl as dl
import dualdl_mx.grads as mx_grads

from _trainer_models import MLP, base_weights, data


def _model(hybridize: bool):
    m = MLP()
    dl.load_state_dict(m, base_weights("mlp"), strict=True)
    if hybridize:
        m.hybridize(static_alloc=True, static_shape=True)
    return m


def _bits(model):
    return [b for _, p in sorted(model._collect_params_with_prefix().items())
            for b in [d.asnumpy().tobytes() for d in p.list_data()]]


def _zeroing(trainer):
    """The same Trainer zeroing the gradients before each backward (the previous path)."""
    g = trainer._grads_impl
    trainer._grads_impl = types.SimpleNamespace(**{k: getattr(g, k) for k in dir(g) if not k.startswith("__")})
    trainer._grads_impl.overwrite_next_backward = g.zero_grad
    trainer._grads_impl.accumulate_again = lambda *a: None


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("n_devices", [1, 2])
def test_written_gradients_train_bit_for_bit_like_zeroed_ones(hybridize, n_devices):
    runs = {}
    for mode in ("written", "zeroed"):
        with dl.use("mxnet"):
            m = _model(hybridize)
            tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3),
                            dl.losses.MSELoss(), devices=[dl.cpu(i) for i in range(n_devices)])
        if mode == "zeroed":
            _zeroing(tr)
        losses = []
        for s in range(4):
            x, y, _ = data("mlp", 10, seed=s)
            losses.append(tr.train_step(x, y))
        runs[mode] = (_bits(m), losses)
    assert runs["written"] == runs["zeroed"]


def test_after_a_step_the_gradients_are_kept_and_a_later_backward_adds_as_in_torch():
    """After train_step: the step's gradients, fresh; a manual backward then adds into them (torch
    adds into an existing .grad), on both backends."""
    x, y, _ = data("mlp", 10, seed=0)
    x2, _, _ = data("mlp", 10, seed=1)
    grads = {}
    for be in ("torch", "mxnet"):
        with dl.use(be):
            m = _model(False)
            tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.0), dl.losses.MSELoss())
            tr.train_step(x, y)
            step = {n: dl.to_numpy(p.grad if be == "torch" else p.grad()) for n, p in tr._named}
            if be == "mxnet":
                assert all(p.data()._fresh_grad for _, p in tr._named)
                with autograd.record():
                    L = dl.ops.sum(m(dl.from_numpy(x2)))
                L.backward()
            else:
                dl.ops.sum(m(dl.from_numpy(x2))).backward()
            after = {n: dl.to_numpy(p.grad if be == "torch" else p.grad()) for n, p in tr._named}
            grads[be] = step, after
    for n in grads["torch"][0]:
        np.testing.assert_allclose(grads["mxnet"][0][n], grads["torch"][0][n], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads["mxnet"][1][n], grads["torch"][1][n], rtol=1e-5, atol=1e-6)
        assert np.abs(grads["mxnet"][1][n] - grads["mxnet"][0][n]).max() > 0     # it added


def test_other_grad_reqs_fall_back_to_zero_grad():
    with dl.use("mxnet"):
        m = _model(False)
    ps = [p for _, p in dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1), dl.losses.MSELoss())._named]
    assert mx_grads._marking(ps, {}) is not None
    ps[0].grad_req = "write"
    assert mx_grads._marking(ps, {}) is None
    x, _, _ = data("mlp", 10)
    with dl.use("mxnet"), autograd.record():
        L = dl.ops.sum(m(dl.from_numpy(x)))
    L.backward()
    mx_grads.overwrite_next_backward(ps, {})              # zero_grad: zeros, nothing fresh
    assert all(not p.data()._fresh_grad and not p.grad().asnumpy().any() for p in ps)


def test_fresh_flags_read_and_written_on_the_handles_are_mxnets():
    """dualdl_mx.fast.grad_state reads and writes the flags that Gluon's ``NDArray._fresh_grad`` does:
    set by backward, cleared by zero_grad, False for a deferred parameter and grad_req='null'."""
    from mxnet import gluon, nd
    import dualdl_mx.fast.grad_state as gs
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    frozen = gluon.Parameter("frozen", shape=(2,), grad_req="null")
    frozen.initialize()
    deferred = gluon.nn.Dense(3)
    deferred.initialize()                               # in_units unknown: no arrays yet
    params = list(net.collect_params().values())
    datas = [p.data() for p in params]
    assert gs.read_flags(datas) == [d._fresh_grad for d in datas] == [False, False]
    with autograd.record():
        y = net(nd.ones((2, 4)))
    y.backward()
    assert gs.read_flags(datas) == [d._fresh_grad for d in datas] == [True, True]
    assert gs.fresh_params(params + [frozen, deferred.weight]) == params
    assert gs.stale_names([("w", params[0]), ("f", frozen), ("d", deferred.weight)]) == ["f", "d"]
    gs.set_flags(datas[:1], False)
    assert [d._fresh_grad for d in datas] == [False, True] and not gs.is_fresh(params[0])
    mx_grads.zero_grad(params)
    assert gs.read_flags(datas) == [False, False]
    gs.set_flags(datas, False)
    gs.set_flags(datas, True)
    assert all(d._fresh_grad for d in datas)
