"""dl.Trainer's step on MXNet queued behind dualdl's ``dl_finite_guard`` (dualdl_mx/guarded_step):
bit for bit the check-first path on finite steps, and a non-finite step undone exactly (weights,
momenta and the plan's learning rate), also right after a learning-rate change; the operators
on their own."""
import numpy as np
import pytest
from mxnet import nd

import dualdl as dl
from dualdl.trainer import NonFiniteLossError
from dualdl_mx import kernels

from _trainer_models import MLP, base_weights, data

needs_kernels = pytest.mark.skipif(kernels._compiler() is None, reason="no C++ compiler on PATH")


def _nan_grad_loss(out, y):
    """sqrt(mean(0 * out)) is 0 but its gradient is inf * 0 = NaN."""
    return dl.ops.sqrt(dl.ops.mean(dl.ops.mul(out, 0.0)))


def _state_bits(model, opt):
    """Every weight and every optimizer state array as bytes, with the SGD plan's learning rates,
    read without ``state_dict()`` (which would switch the live state to torch's layout)."""
    ws = [p.data().asnumpy().tobytes() for _, p in sorted(model._collect_params_with_prefix().items())]
    st = [(k, v.asnumpy().tobytes() if isinstance(v, nd.NDArray) else v)
          for p in opt.param_groups[0]["params"] for k, v in sorted(opt.state.get(p, {}).items())]
    return ws, st


def _run(hybrid: bool, guarded: bool, monkeypatch):
    if not guarded:
        monkeypatch.setattr(kernels, "_loaded", False)
    with dl.use("mxnet"):
        m = MLP()
        dl.load_state_dict(m, base_weights("mlp"), strict=True)
        if hybrid:
            m.hybridize()
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        tr = dl.Trainer(m, opt, dl.losses.MSELoss())
    mse = tr.loss_fn
    used = []
    for s in range(6):
        x, y, _ = data("mlp", 10, seed=s)
        if s in (2, 4):                       # a bad step; at 4 right after a learning-rate change
            if s == 4:
                opt.param_groups[0]["lr"] = 0.05
            before = _state_bits(m, opt)
            tr.loss_fn = _nan_grad_loss
            with pytest.raises(NonFiniteLossError, match=r"gradient \(largest \|g\|\) nan"):
                tr.train_step(x, y)
            tr.nonfinite = "skip"
            with pytest.warns(RuntimeWarning, match="non-finite gradient"):
                tr.train_step(x, y)
            tr.nonfinite, tr.loss_fn = "raise", mse
            assert _state_bits(m, opt) == before
        tr.train_step(x, y)
        used.append(tr._check_cache.get("finite_guard", (None, None))[1] is not None)
    monkeypatch.undo()
    return _state_bits(m, opt), tr.global_step, used, {k: v.asnumpy().tobytes() for k, v in opt.state_dict()["state"][0].items() if hasattr(v, "asnumpy")}


@needs_kernels
@pytest.mark.parametrize("hybrid", [False, True])
def test_guarded_steps_match_the_check_first_path_bit_for_bit(hybrid, monkeypatch):
    guarded = _run(hybrid, True, monkeypatch)
    plain = _run(hybrid, False, monkeypatch)
    assert guarded[2][1:] == [True] * 5 and not any(plain[2])      # the guard ran from the 2nd step on
    assert guarded[1] == plain[1] == 6
    assert guarded[0] == plain[0] and guarded[3] == plain[3]


@needs_kernels
def test_guard_and_restore_operators():
    assert kernels.available()
    g = [nd.ones((5, 3)), nd.ones((17,), dtype="float64"), nd.ones((40,))]
    w, mom = nd.array(np.arange(4.0)), nd.zeros((4,), dtype="float64")
    flag = lambda: nd.dl_finite_guard(*g, w, mom, num_grads=3, num_states=2, slot=991).asnumpy()[0]
    assert flag() == 1.0
    assert nd.dl_finite_restore(w, mom, num_states=2, slot=991).asnumpy()[0] == 0.0   # nothing saved
    for arr, idx, bad in ((g[0], (4, 2), np.nan), (g[1], (16,), np.inf), (g[2], (0,), -np.inf),
                          (g[2], (39,), np.nan)):
        arr[idx] = bad
        assert flag() == 0.0
        w[:] = 7.0
        mom[:] = np.nan
        assert nd.dl_finite_restore(w, mom, num_states=2, slot=991).asnumpy()[0] == 1.0
        np.testing.assert_array_equal(w.asnumpy(), np.arange(4.0))
        np.testing.assert_array_equal(mom.asnumpy(), 0.0)
        arr[idx] = 1.0
    g[2][3] = 3e38                                   # huge but finite: no false alarm
    assert flag() == 1.0


@needs_kernels
def test_the_guards_result_without_waiting_for_the_operators_after_it():
    """dl_finite_guard_wait gives the result of the slot's guard queued since dl_finite_guard_arm:
    -1 (after its timeout) before one is queued, then 1 or 0 as the flag says; the update queued
    after the guard need not have run."""
    assert kernels.available()
    arm, wait = kernels.guard_waiter()
    g, w = [nd.ones((5, 3))], nd.zeros((4,))
    arm(992)
    assert wait(992, 1) == -1                        # armed, nothing queued: times out
    for bad in (False, True, False):
        g[0][1, 1] = np.nan if bad else 1.0
        arm(992)
        flag = nd.dl_finite_guard(*g, w, num_grads=1, num_states=1, slot=992)
        later = nd.dot(nd.ones((512, 512)), nd.ones((512, 512)))   # queued after the guard
        assert wait(992, 5000) == (0 if bad else 1) == flag.asnumpy()[0]
        later.wait_to_read()
        if bad:
            assert nd.dl_finite_restore(w, num_states=1, slot=992).asnumpy()[0] == 1.0


def _inf_loss(out, y):
    """The MSE plus an infinite constant: a non-finite loss whose gradients are all finite."""
    return dl.ops.add(dl.losses.MSELoss()(out, y), float("inf"))


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
@pytest.mark.parametrize("hybrid", [False, True])
def test_a_non_finite_loss_with_finite_gradients_is_not_applied(backend, hybrid):
    """The Trainer reads the loss after the step is queued (MXNet): the guard checks the loss too,
    so the step is undone bit for bit, and training goes on exactly as if the batch never came."""
    if hybrid and backend == "torch":
        pytest.skip("hybridize is MXNet's")

    def build():
        with dl.use(backend):
            m = MLP()
            dl.load_state_dict(m, base_weights("mlp"), strict=True)
            if hybrid:
                m.hybridize()
            opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            return m, opt, dl.Trainer(m, opt, dl.losses.MSELoss())
    m, opt, tr = build()
    m2, opt2, tr2 = build()
    bits = (lambda: _state_bits(m, opt)) if backend == "mxnet" else \
        (lambda: [t.detach().numpy().tobytes() for t in m.state_dict().values()])
    for s in range(4):
        x, y, _ = data("mlp", 10, seed=s)
        if s == 2:
            before = bits()
            tr.loss_fn = _inf_loss
            with pytest.raises(NonFiniteLossError, match="non-finite loss inf"):
                tr.train_step(x, y)
            assert bits() == before and tr.global_step == 2
            tr.loss_fn = tr2.loss_fn
        assert tr.train_step(x, y) == tr2.train_step(x, y)
    assert tr.global_step == tr2.global_step == 4 and [k for st in tr.skipped_steps for k in st] == ["step", "loss"]
    final = bits()
    m, opt = m2, opt2
    assert final == bits()


@needs_kernels
def test_the_guard_checks_each_steps_loss_array():
    """``step_if_finite(losses=...)``: the guard's loss slot takes each call's array."""
    from dualdl_mx.guarded_step import step_if_finite
    with dl.use("mxnet"):
        m = MLP()
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x, y, _ = data("mlp", 10, seed=0)
    params = list(m.collect_params().values())
    cache = {}
    for loss, applied in ((1.0, True), (np.nan, False), (2.0, True), (-np.inf, False), (3.0, True)):
        from mxnet import autograd
        with autograd.record():
            out = ((m(nd.array(x)) - nd.array(y)) ** 2).mean()
        out.backward()
        before = _state_bits(m, opt)
        assert step_if_finite(opt, params, cache, [nd.array([loss])]) is applied
        assert (_state_bits(m, opt) == before) is not applied
    assert cache["finite_guard"][1] is not None           # one guard, its loss slot set per call
