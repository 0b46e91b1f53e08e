"""MXNet dispatch speed-ups keep every number: prepared operator calls (``dualdl_mx.fast.invoke``), SGD's
cached multi-tensor plan, and the Trainer's step prepared before its gradient check's host read."""
import numpy as np
import pytest
from mxnet import autograd, nd

import dualdl as dl
from dualdl.trainer import NonFiniteLossError
from dualdl_mx.fast.invoke import PreparedCall

from _trainer_models import MLP, base_weights, data, weights


def _bits(arrays):
    return [a.asnumpy().tobytes() for a in arrays]


# ---- PreparedCall --------------------------------------------------------------------------------
def test_prepared_call_matches_the_nd_call_bit_for_bit():
    rng = np.random.default_rng(0)
    shapes = [(7, 5), (5,), (3, 7)]

    def arrays():
        ws = [nd.array(rng.standard_normal(s), dtype="float32") for s in shapes]
        return ws, [nd.array(rng.standard_normal(s), dtype="float32") for s in shapes], \
            [nd.array(rng.standard_normal(s), dtype="float32") for s in shapes]
    ws, gs, ms = arrays()
    ws2, gs2, ms2 = [w.copy() for w in ws], [g.copy() for g in gs], [m.copy() for m in ms]
    n = len(ws)
    args = [a for t in zip(ws2, gs2, ms2) for a in t]
    call = PreparedCall("multi_sgd_mom_update", args, ws2, num_weights=n)
    for lr, mu, wd in ((0.1, 0.9, 0.0), (0.1, 0.9, 0.0), (0.03, 0.5, 1e-3)):
        nd.multi_sgd_mom_update(*[a for t in zip(ws, gs, ms) for a in t], lrs=(lr,) * n, wds=(wd,) * n,
                                momentum=mu, rescale_grad=0.5, num_weights=n, out=ws)
        call.set_attrs(lrs=(lr,) * n, wds=(wd,) * n, momentum=mu, rescale_grad=0.5)
        assert call() is call.outputs
        assert _bits(ws) == _bits(ws2) and _bits(ms) == _bits(ms2)
    assert _bits(ws) != _bits(arrays()[0])          # the arrays did move


def test_prepared_call_for_an_operator_without_outputs_and_bad_arguments():
    a, b = nd.ones((3,)), nd.ones((2, 2))
    PreparedCall("reset_arrays", [a, b], [], num_arrays=2)()
    assert a.asnumpy().tolist() == [0, 0, 0] and b.asnumpy().sum() == 0
    with pytest.raises(TypeError, match="every input must be an mxnet NDArray, got ndarray"):
        PreparedCall("reset_arrays", [np.ones(3)], [], num_arrays=1)
    with pytest.raises(ValueError, match="no operator 'no_such_op'"):
        PreparedCall("no_such_op", [a], [a])


# ---- SGD's multi-tensor plan ---------------------------------------------------------------------
def _sgd_run(cached: bool, steps: int = 6):
    """SGD with momentum and weight decay, an lr change and a state_dict() mid-run; ``cached=False``
    drops the plan before every step (the unprepared path)."""
    with dl.use("mxnet"):
        m = MLP()
        dl.load_state_dict(m, base_weights("mlp"), strict=True)
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        loss = dl.losses.MSELoss()
        plans = []
        for s in range(steps):
            x, y, _ = data("mlp", 10, seed=s)
            opt.zero_grad()
            with autograd.record():
                L = loss(m(dl.from_numpy(x)), dl.from_numpy(y))
            L.backward()
            if s == 3:
                opt.param_groups[0]["lr"] = 0.05
            if s == 4:
                opt.state_dict()                     # switches the live state to torch's layout
            if not cached:
                opt.__dict__.pop("_multi_plans", None)
            opt.step()
            plans.append(opt.__dict__.get("_multi_plans", {}).get(id(opt.param_groups[0])))
        return weights(m), {k: dl.to_numpy(v) for k, v in opt.state_dict()["state"][0].items()
                            if hasattr(v, "shape")}, plans


def test_sgd_plan_steps_bit_for_bit_like_the_unprepared_path():
    w1, s1, plans = _sgd_run(cached=True)
    w0, s0, _ = _sgd_run(cached=False)
    assert all(w1[k].tobytes() == w0[k].tobytes() for k in w0)
    assert all(s1[k].tobytes() == s0[k].tobytes() for k in s0)
    # the plan was reused across steps, an lr change included, and rebuilt once after
    # state_dict() switched the state's layout
    assert plans[1] is not None and plans[1] is plans[2] is plans[3]
    assert plans[4] is not plans[3] and plans[5] is plans[4]


# ---- the Trainer's prepared step -------------------------------------------------------------------
def _zero_loss_nan_grad(out, y):
    """sqrt(mean(0 * out)) is 0 but its gradient is inf * 0 = NaN."""
    return dl.ops.sqrt(dl.ops.mean(dl.ops.mul(out, 0.0)))


def _opt_bits(opt):
    return {(i, k): (v.tobytes() if isinstance(v, np.ndarray) else v)
            for i, s in opt.state_dict()["state"].items() for k, v in s.items()}


def _context_bits(model):
    return [b for _, p in sorted(model._collect_params_with_prefix().items()) for b in _bits(p.list_data())]


@pytest.mark.parametrize("n_devices", [1, 2])
def test_trainer_with_prepared_steps_and_a_skipped_step_matches_the_unprepared_path(n_devices):
    """Three steps, a finite loss with a NaN gradient (raise, then skip: nothing changes), two more
    steps: the same bits on every context as when every step rebuilds its plan."""
    runs = {}
    for mode in ("prepared", "unprepared"):
        with dl.use("mxnet"):
            m = MLP()
            dl.load_state_dict(m, base_weights("mlp"), strict=True)
            opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
            tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(i) for i in range(n_devices)])

        def step(x, y):
            if mode == "unprepared":
                opt.__dict__.pop("_multi_plans", None)
            return tr.train_step(x, y)
        for s in range(3):
            x, y, _ = data("mlp", 10, seed=s)
            step(x, y)
        before, opt_before = _context_bits(m), _opt_bits(opt)
        tr.loss_fn = _zero_loss_nan_grad
        with pytest.raises(NonFiniteLossError, match=r"gradient \(largest \|g\|\) nan at step 3"):
            step(x, y)
        tr.nonfinite = "skip"
        with pytest.warns(RuntimeWarning, match="non-finite gradient"):
            step(x, y)
        assert _context_bits(m) == before and _opt_bits(opt) == opt_before and tr.global_step == 3
        tr.loss_fn = dl.losses.MSELoss()
        plans = []
        for s in range(3, 5):
            x, y, _ = data("mlp", 10, seed=s)
            step(x, y)
            plans.append(next(iter(opt._multi_plans.values())))
        assert (plans[0] is plans[1]) == (mode == "prepared")      # the prepared step reused it
        runs[mode] = (_context_bits(m), _opt_bits(opt), tr.global_step)
    assert runs["prepared"] == runs["unprepared"]
