"""dl.Trainer on each backend: the step contract, accumulation, resume, NaN policy, stale
gradients, bad input, and the hand-written-loop pieces (dl.autograd)."""
import pickle
import warnings

import numpy as np
import pytest

import dualdl as dl
import dualdl.autograd  # noqa: F401  (dl.autograd; the lead adds it to dualdl.__init__ lazily)
from dualdl.trainer import NonFiniteLossError, StaleGradientWarning, TrainerStateError

from _trainer_models import MLP, base_weights, data, make, maxdiff, weights


def _mlp(backend, **kw):
    m = MLP(backend=backend, **kw)
    dl.load_state_dict(m, base_weights("mlp", **kw), strict=True)
    return m


def _opt_state(opt):
    """Optimizer state as comparable numpy arrays."""
    sd = opt.state_dict()
    return {(i, k): dl.to_numpy(v) if dl.is_tensor(v) else np.asarray(v)
            for i, s in sd["state"].items() for k, v in s.items()}


def _same_opt_state(a, b):
    return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)


# ---- the step contract ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_devices", [1, 2])
def test_mean_none_and_sum_reductions_give_the_same_training(backend, n_devices):
    """mean loss + step() == per-sample losses averaged over the GLOBAL batch == sum loss with lr/B."""
    B = 10
    res = {}
    for red, lr in (("mean", 0.1), ("none", 0.1), ("sum", 0.1 / (B * 3))):   # MSE sums B*3 elements
        m = _mlp(backend)
        opt = dl.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
        tr = dl.Trainer(m, opt, dl.losses.MSELoss(reduction=red), devices=[dl.cpu(i) for i in range(n_devices)])
        for s in range(5):
            x, y, _ = data("mlp", B, seed=s)
            tr.train_step(x, y)
        res[red] = weights(m)
    for red in ("none", "sum"):
        d = maxdiff(res[red], res["mean"])
        assert d <= 1e-6, f"{backend} reduction={red} vs mean on {n_devices} device(s): {d:.2e}"


def test_hand_written_loop_follows_the_same_contract(backend):
    """per-sample loss + dl.backward (sums) + step(batch_size=B) == mean loss + step() == Trainer."""
    res = {}
    for mode in ("per_sample", "mean", "trainer"):
        m = _mlp(backend)
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        tr = dl.Trainer(m, opt, dl.losses.MSELoss()) if mode == "trainer" else None
        for s in range(5):
            x, y, _ = data("mlp", 10, seed=s)
            if tr is not None:
                tr.train_step(x, y)
                continue
            xt, yt = dl.from_numpy(x), dl.from_numpy(y)
            opt.zero_grad()
            with dl.autograd.record(m):
                out = m(xt)
                if mode == "per_sample":
                    loss = dl.ops.mean(dl.losses.MSELoss(reduction="none")(out, yt), dim=1)   # (B,)
                else:
                    loss = dl.losses.MSELoss()(out, yt)
            dl.autograd.backward(loss)
            opt.step(batch_size=10) if mode == "per_sample" else opt.step()
        res[mode] = weights(m)
    assert maxdiff(res["per_sample"], res["mean"]) <= 1e-6
    assert maxdiff(res["trainer"], res["mean"]) <= 1e-6


def test_backward_of_a_non_scalar_loss_is_the_backward_of_its_sum(backend):
    w = np.array([1.0, 2.0, 3.0], "float32")
    m = dl.nn.Linear(3, 2)
    dl.load_state_dict(m, {"weight": np.ones((2, 3), "float32"), "bias": np.zeros(2, "float32")})
    x = dl.from_numpy(np.stack([w, 2 * w]))
    with dl.autograd.record(m):
        out = m(x)                                   # (2, 2), not a scalar
    dl.autograd.backward(out)
    g = dl.to_numpy(next(iter(m.parameters())).grad if backend == "torch"
                    else next(iter(m.parameters())).grad())
    np.testing.assert_allclose(g, np.stack([3 * w, 3 * w]), rtol=0, atol=0)


# ---- accumulation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("red", ["mean", "sum"])
@pytest.mark.parametrize("n_devices", [1, 2])
def test_accumulating_uneven_micro_batches_equals_one_big_batch(backend, red, n_devices):
    devs = [dl.cpu(i) for i in range(n_devices)]
    big = _mlp(backend)
    tb = dl.Trainer(big, dl.optim.SGD(big.parameters(), lr=0.05, momentum=0.9), dl.losses.MSELoss(reduction=red),
                    devices=devs)
    acc = _mlp(backend)
    ta = dl.Trainer(acc, dl.optim.SGD(acc.parameters(), lr=0.05, momentum=0.9), dl.losses.MSELoss(reduction=red),
                    devices=devs, accumulate_steps=3)
    for s in range(4):
        x, y, _ = data("mlp", 10, seed=s)
        tb.train_step(x, y)
        for b, e in ((0, 4), (4, 7), (7, 10)):               # 4 + 3 + 3 samples
            ta.train_step(x[b:e], y[b:e])
    assert ta.global_step == tb.global_step == 4
    d = maxdiff(weights(acc), weights(big))
    assert d <= 1e-6, f"{backend} accumulation ({red}, {n_devices} devices) vs big batch: {d:.2e}"


# ---- resume ----------------------------------------------------------------------------------------
def _resume_run(backend, seed, split_at, total, model_seed=0, checkpoint_at=None):
    """Train ``total`` steps; if ``split_at`` resume from a pickled state at that step into fresh
    objects; at ``checkpoint_at`` only write the state (the run goes on with the same objects)."""
    base = base_weights("mlp", p=0.3)                   # (made once: it draws from torch's RNG)

    def build(perturb):
        m = MLP(backend=backend, p=0.3)
        sd = {k: v + perturb for k, v in base.items()}
        dl.load_state_dict(m, sd)
        opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
        sch = dl.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return m, opt, dl.Trainer(m, opt, dl.losses.MSELoss(), scheduler=sch, seed=seed,
                                  devices=[dl.cpu(0), dl.cpu(1)])
    dl.seed(model_seed)
    m, opt, tr = build(0.0)
    for s in range(total):
        if s == checkpoint_at:
            pickle.dumps(tr.state_dict())
        if split_at is not None and s == split_at:
            blob = pickle.dumps(tr.state_dict())
            m, opt, tr = build(0.5)                     # different weights, fresh optimizer state
            dl.seed(999)                                 # and a disturbed RNG
            tr.load_state_dict(pickle.loads(blob))
            assert tr.global_step == split_at
        x, y, _ = data("mlp", 10, seed=s)
        tr.train_step(x, y)
    return weights(m), opt.param_groups[0]["lr"], tr.global_step


@pytest.mark.parametrize("seed", [None, 7])
def test_resume_from_state_dict_is_bit_for_bit(backend, seed):
    if backend == "mxnet" and seed is None:
        pytest.skip("MXNet cannot save its RNG state: dropout resumes exactly only with Trainer(seed=...)")
    # The straight run checkpoints at step 3, as a training loop does; the other is killed after
    # that checkpoint and resumed from it. (On MXNet, state_dict() brings SGD's momentum from
    # MXNet's lr-scaled layout into torch's, live too: that moves later weights by up to 1 ulp
    # of the momentum, identically in both runs.)
    straight = _resume_run(backend, seed, None, 6, checkpoint_at=3)
    resumed = _resume_run(backend, seed, 3, 6)
    assert straight[1] == resumed[1] and straight[2] == resumed[2] == 6
    for k in straight[0]:
        assert np.array_equal(straight[0][k], resumed[0][k]), \
            f"{k}: resumed run differs by {np.abs(straight[0][k] - resumed[0][k]).max()}"


def test_state_dict_errors_change_nothing(backend):
    m = _mlp(backend)
    opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss(), accumulate_steps=2)
    x, y, _ = data("mlp")
    tr.train_step(x, y)
    with pytest.raises(TrainerStateError, match="inside an accumulation window"):
        tr.state_dict()
    tr.train_step(x, y)
    good = tr.state_dict()
    before, ostate = weights(m), _opt_state(opt)
    other = "mxnet" if backend == "torch" else "torch"
    with pytest.raises(TrainerStateError, match=f"saved on the '{other}' backend"):
        tr.load_state_dict({**good, "backend": other})
    bad = dict(good, model={**good["model"], "fc1.weight": np.zeros((2, 2), "float32")})
    bad["step"] = 99
    with pytest.raises(TrainerStateError, match="fc1.weight"):
        tr.load_state_dict(bad)
    with pytest.raises(TrainerStateError, match="not a dualdl Trainer state"):
        tr.load_state_dict({"model": {}})
    assert tr.global_step == 1 and maxdiff(weights(m), before) == 0 and _same_opt_state(_opt_state(opt), ostate)


# ---- non-finite losses -------------------------------------------------------------------------------
def test_nan_loss_raises_and_changes_nothing(backend):
    m = make("cnn_bn", backend)
    dl.load_state_dict(m, base_weights("cnn_bn"))
    opt = dl.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)])
    x, y, _ = data("cnn_bn")
    tr.train_step(x, y)
    before, ostate = weights(m), _opt_state(opt)
    bad = x.copy()
    bad[7, 0, 0, 0] = np.nan                             # on the second device
    with pytest.raises(NonFiniteLossError, match="non-finite loss nan at step 1"):
        tr.train_step(bad, y)
    assert tr.global_step == 1 and tr.skipped_steps == [{"step": 1, "loss": pytest.approx(float("nan"), nan_ok=True)}]
    assert maxdiff(weights(m), before) == 0                # parameters AND BatchNorm running stats
    assert _same_opt_state(_opt_state(opt), ostate)
    assert np.isfinite(tr.train_step(x, y)) and tr.global_step == 2


def test_nan_loss_skip_policy_warns_and_drops_the_window(backend):
    m = _mlp(backend)
    opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss(), nonfinite="skip", accumulate_steps=2)
    x, y, _ = data("mlp")
    before = weights(m)
    tr.train_step(x, y)                                  # first micro-batch of the window
    inf_y = y.copy()
    inf_y[0, 0] = np.inf
    with pytest.warns(RuntimeWarning, match="non-finite loss inf"):
        v = tr.train_step(x, inf_y)
    assert np.isinf(v) and tr.global_step == 0 and len(tr.skipped_steps) == 1
    assert maxdiff(weights(m), before) == 0
    # the window was dropped: the next two micro-batches make a full, clean step
    ref = _mlp(backend)
    tref = dl.Trainer(ref, dl.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9), dl.losses.MSELoss(),
                      accumulate_steps=2)
    for t in (tr, tref):
        t.train_step(x[:5], y[:5])
        t.train_step(x[5:], y[5:])
    assert tr.global_step == 1 and maxdiff(weights(m), weights(ref)) == 0


@pytest.mark.parametrize("n_devices", [1, 2])
def test_kept_batch_plans_train_as_checking_every_batch_does(backend, n_devices):
    """The Trainer keeps each batch shape's checked size, device split and loss scaling; batches
    of changing sizes train bit for bit as a Trainer that works them out again for every batch."""
    x, y, _ = data("mlp", 10)
    devs = [dl.cpu(i) for i in range(n_devices)]
    kept, fresh = _mlp(backend), _mlp(backend)
    trs = [dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), dl.losses.MSELoss(),
                      devices=devs) for m in (kept, fresh)]
    for b in (10, 7, 10, 3, 7):
        trs[1]._plans.clear()
        assert trs[0].train_step(x[:b], y[:b]) == trs[1].train_step(x[:b], y[:b])
    assert len(trs[0]._plans) == 3 and maxdiff(weights(kept), weights(fresh)) == 0
    with pytest.raises(ValueError, match="target y\\[0\\] has 7 samples"):
        trs[0].train_step(x, y[:7])                     # a new signature is checked again


def test_a_dropped_trainer_frees_its_model_at_once_on_torch():
    """The kept batch plans hold no reference cycle: without the garbage collector, dropping the
    Trainer and the model frees both (GPU memory comes back at once)."""
    import gc
    import weakref
    pytest.importorskip("torch")
    with dl.use("torch"):
        m = dl.nn.Linear(4, 2)
    tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1), dl.losses.MSELoss())
    tr.train_step(np.ones((3, 4), "float32"), np.ones((3, 2), "float32"))
    refs = (weakref.ref(tr), weakref.ref(m))
    gc.disable()
    try:
        del tr, m
        assert [r() is None for r in refs] == [True, True]
    finally:
        gc.enable()


# ---- stale gradients ---------------------------------------------------------------------------------
def test_parameters_without_gradient_are_skipped_with_a_warning(backend):
    m = _mlp(backend, unused=True)
    opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)])
    before = weights(m)
    x, y, _ = data("mlp")
    with pytest.warns(StaleGradientWarning, match="spare.weight, spare.bias"):
        tr.train_step(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleGradientWarning)     # warned once, not every step
        tr.train_step(x, y)
    after = weights(m)
    for k in ("spare.weight", "spare.bias"):
        assert np.array_equal(after[k], before[k]), k            # no decay, no momentum either
    assert np.abs(after["fc1.weight"] - before["fc1.weight"]).max() > 1e-3


# ---- clipping, eval ----------------------------------------------------------------------------------
def test_clip_grad_norm_matches_a_hand_written_loop(backend):
    x, y, _ = data("mlp")
    m = _mlp(backend)
    opt = dl.optim.SGD(m.parameters(), lr=0.1)
    dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(1)], clip_grad_norm=0.05).train_step(x, y)
    r = _mlp(backend)
    ropt = dl.optim.SGD(r.parameters(), lr=0.1)
    ropt.zero_grad()
    with dl.autograd.record(r):
        loss = dl.losses.MSELoss()(r(dl.from_numpy(x)), dl.from_numpy(y))
    dl.autograd.backward(loss)
    norm = dl.optim.clip_grad_norm_(r.parameters(), 0.05)
    ropt.step()
    assert norm > 0.05
    assert maxdiff(weights(m), weights(r)) <= 1e-6
    assert maxdiff(weights(m), base_weights("mlp")) > 1e-4


def test_eval_step_gathers_outputs_and_restores_train_mode(backend):
    m = _mlp(backend)
    opt = dl.optim.SGD(m.parameters(), lr=0.1)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(i) for i in range(3)])
    x, y, _ = data("mlp")
    loss, out = tr.eval_step(x, y)
    ref = _mlp(backend)
    ref.eval()
    want = dl.to_numpy(ref(dl.from_numpy(x)))
    assert dl.to_numpy(out).shape == (10, 3)
    assert np.abs(dl.to_numpy(out) - want).max() <= 1e-6
    assert abs(loss - float(((want - y) ** 2).mean())) <= 1e-6
    assert m.training and tr.global_step == 0 and maxdiff(weights(m), base_weights("mlp")) == 0
    assert tr.eval_step(x)[0] is None


# ---- bad input ---------------------------------------------------------------------------------------
def _bad_batches(backend):
    x, y, _ = data("mlp")
    other = "mxnet" if backend == "torch" else "torch"
    return [
        ("empty", x[:0], y[:0], ValueError, "empty batch"),
        ("fewer samples than devices", x[:2], y[:2], ValueError, "2 sample.*3 devices"),
        ("x/y mismatch", x, y[:9], ValueError, "target y\\[0\\] has 9 samples"),
        ("other backend", dl.from_numpy(x, backend=other), y, TypeError, f"{other} tensor"),
        ("wrong features", x[:, :5], y, ValueError, "Linear"),
        ("not an array", {"x": 1}, y, TypeError, "numpy arrays"),
    ]


def test_bad_batches_raise_clear_errors_and_change_nothing(backend):
    m = _mlp(backend)
    opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(i) for i in range(3)])
    x, y, _ = data("mlp")
    tr.train_step(x, y)
    before, ostate = weights(m), _opt_state(opt)
    for name, bx, by, exc, msg in _bad_batches(backend):
        with pytest.raises(exc, match=msg):
            tr.train_step(bx, by)
        assert tr.global_step == 1 and maxdiff(weights(m), before) == 0, name
        assert _same_opt_state(_opt_state(opt), ostate), name
    with pytest.raises(ValueError, match="no batch axis 2"):
        dl.Trainer(m, opt, dl.losses.MSELoss(), batch_axis=2).train_step(x, y)
    tr.train_step(x, y)
    assert tr.global_step == 2


def test_bad_configuration_is_rejected(backend):
    m = _mlp(backend)
    opt = dl.optim.SGD(m.parameters(), lr=0.1)
    loss = dl.losses.MSELoss()
    with pytest.raises(ValueError, match="unknown data-parallel strategy"):
        dl.Trainer(m, opt, loss, strategy="ddp")
    with pytest.raises(ValueError, match="nonfinite must be"):
        dl.Trainer(m, opt, loss, nonfinite="ignore")
    with pytest.raises(ValueError, match="accumulate_steps"):
        dl.Trainer(m, opt, loss, accumulate_steps=0)
    with pytest.raises(ValueError, match="clip_grad_norm"):
        dl.Trainer(m, opt, loss, clip_grad_norm=-1)
    other = _mlp(backend)
    with pytest.raises(ValueError, match="not trainable parameters of this model"):
        dl.Trainer(m, dl.optim.SGD(other.parameters(), lr=0.1), loss)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        dl.Trainer(m, opt, "mse")


def test_mxnet_model_on_other_contexts_is_a_clear_error():
    with dl.use("mxnet"):
        m = _mlp("mxnet")
        m.to(dl.cpu(1))
        opt = dl.optim.SGD(m.parameters(), lr=0.1)
        with pytest.raises(ValueError, match=r"the model is on \[dualdl.cpu\(1\)\].*first device dualdl.cpu\(0\)"):
            dl.Trainer(m, opt, dl.losses.MSELoss(), devices=[dl.cpu(0), dl.cpu(2)])
        import mxnet as mx
        assert m.fc1.weight.list_ctx() == [mx.cpu(1)]


def _zero_loss_nan_grad(out, y):
    """sqrt(mean(0 * out)) is 0 but its gradient is inf * 0 = NaN on both backends."""
    return dl.ops.sqrt(dl.ops.mean(dl.ops.mul(out, 0.0)))


def _nan_grad_setup(backend):
    m = _mlp(backend)
    opt = dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    x, y, _ = data("mlp")
    return m, opt, x, y, weights(m)


def test_nan_gradient_with_a_finite_loss_is_caught_by_clip_grad_norm(backend):
    m, opt, x, y, before = _nan_grad_setup(backend)
    tr = dl.Trainer(m, opt, _zero_loss_nan_grad, clip_grad_norm=1.0, devices=[dl.cpu(0), dl.cpu(1)])
    with pytest.raises(NonFiniteLossError, match="non-finite gradient norm nan at step 0"):
        tr.train_step(x, y)
    assert tr.global_step == 0 and maxdiff(weights(m), before) == 0 and _opt_state(opt) == {}
    tr.nonfinite = "skip"
    with pytest.warns(RuntimeWarning, match="gradient norm"):
        assert tr.train_step(x, y) == 0.0
    assert tr.skipped_steps[-1]["step"] == 0 and np.isnan(tr.skipped_steps[-1]["grad_norm"])
    assert maxdiff(weights(m), before) == 0


@pytest.mark.parametrize("accumulate", [1, 2])
def test_nan_gradient_with_a_finite_loss_is_never_applied(backend, accumulate):
    """Without clip_grad_norm: a finite loss (0) with a NaN gradient (issue 16.1)."""
    m, opt, x, y, before = _nan_grad_setup(backend)
    tr = dl.Trainer(m, opt, _zero_loss_nan_grad, accumulate_steps=accumulate)
    for _ in range(accumulate - 1):
        assert tr.train_step(x, y) == 0.0                   # inside the window: no step yet
    with pytest.raises(NonFiniteLossError, match=r"non-finite gradient \(largest \|g\|\) nan at step 0"):
        tr.train_step(x, y)
    assert tr.global_step == 0 and maxdiff(weights(m), before) == 0 and _opt_state(opt) == {}
    assert np.isnan(tr.skipped_steps[-1]["grad_max_abs"])
    tr.nonfinite = "skip"
    with pytest.warns(RuntimeWarning, match="non-finite gradient"):
        for _ in range(accumulate):
            assert tr.train_step(x, y) == 0.0
    assert tr.global_step == 0 and maxdiff(weights(m), before) == 0 and len(tr.skipped_steps) == 2
    tr.loss_fn = dl.losses.MSELoss()                         # the Trainer trains on afterwards
    for _ in range(accumulate):
        assert np.isfinite(tr.train_step(x, y))
    assert tr.global_step == 1 and maxdiff(weights(m), before) > 0


def test_inf_gradient_is_caught_with_value_clipping_too(backend):
    """sum(sqrt(out - c)) with c = out is 0 (finite); its gradient is +inf everywhere. With
    clip_grad_value the raw gradient is checked (clipping would make the inf finite)."""
    m = dl.nn.Linear(3, 1)
    x = np.array([[1.0, 2.0, 3.0]], "float32")
    c = dl.to_numpy(m(dl.from_numpy(x)))

    def loss_fn(out, y):
        return dl.ops.sum(dl.ops.sqrt(dl.ops.sub(out, dl.from_numpy(c))))
    before = weights(m)
    opt = dl.optim.SGD(m.parameters(), lr=0.1)
    tr = dl.Trainer(m, opt, loss_fn, clip_grad_value=1.0, clip_grad_norm=1.0, loss_reduction="sum")
    with pytest.raises(NonFiniteLossError, match=r"non-finite gradient \(largest \|g\|\) inf at step 0"):
        tr.train_step(x, np.zeros((1, 1), "float32"))
    assert maxdiff(weights(m), before) == 0 and tr.skipped_steps == [{"step": 0, "grad_max_abs": float("inf")}]


def test_grads_finite_and_grad_max_abs_are_exact(backend):
    """Gradients of sum(w * c) are c: huge finite values (whose sum of squares overflows float32)
    pass; one NaN or one -inf anywhere is found, and the largest |g| is reported."""
    m = dl.nn.Linear(4, 3)
    opt = dl.optim.SGD(m.parameters(), lr=0.1)
    x = np.ones((1, 4), "float32")
    for c, finite, peak in (([[3e30, -3e30, 1.0]], True, 3e30), ([[1.0, np.nan, 2.0]], False, np.nan),
                            ([[1.0, -np.inf, 2.0]], False, np.inf)):
        opt.zero_grad()                                      # gradients accumulate, as in torch
        with dl.autograd.record():
            out = dl.ops.sum(dl.ops.mul(m(dl.from_numpy(x)), dl.from_numpy(np.array(c, "float32"))))
        dl.autograd.backward(out)
        ps = list(m.parameters())
        assert dl.optim.grads_finite(ps) is finite
        got = dl.optim.grad_max_abs(ps)
        assert (np.isnan(got) if np.isnan(peak) else got == pytest.approx(peak, rel=1e-6)), got
    assert dl.optim.grads_finite([]) and dl.optim.grad_max_abs([]) == 0.0


# ---- Trainer state of another optimizer -------------------------------------------------------------
def _saved_state(backend, make_opt):
    m = _mlp(backend)
    tr = dl.Trainer(m, make_opt(m), dl.losses.MSELoss())
    x, y, _ = data("mlp")
    tr.train_step(x, y)
    return tr.state_dict()


_SGD_MOMENTUM = ("the file holds the state of SGD (hyper-parameters: dampening, lr, maximize, momentum, "
                 "nesterov, weight_decay; state: momentum_buffer), but this Trainer's optimizer is Adam "
                 "(hyper-parameters: amsgrad, betas, eps, lr, maximize, weight_decay; state: none yet): "
                 "build the Trainer with the optimizer that wrote the state (nothing was changed)")


@pytest.mark.parametrize("via_file", [False, True])
def test_state_of_another_optimizer_is_refused_the_same_on_both(backend, via_file, tmp_path):
    """An SGD-momentum Trainer state into an Adam Trainer: one message on both backends, naming what
    the file holds and what the Trainer expects; nothing changed (issue 16.2)."""
    state = _saved_state(backend, lambda m: dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
    m = _mlp(backend)
    opt = dl.optim.Adam(m.parameters(), lr=0.01)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss())
    before = weights(m)
    if via_file:
        path = tmp_path / "sgd.npz"
        from dualdl import trainer_io
        trainer_io.write(state, str(path))
        with pytest.raises(TrainerStateError) as e:
            tr.load(path)
    else:
        with pytest.raises(TrainerStateError) as e:
            tr.load_state_dict(state)
    assert str(e.value) == _SGD_MOMENTUM
    assert maxdiff(weights(m), before) == 0 and _opt_state(opt) == {} and tr.global_step == 0
    x, y, _ = data("mlp")
    tr.train_step(x, y)                                  # Adam starts from its own fresh state
    assert set(k for _, k in _opt_state(opt)) == {"step", "exp_avg", "exp_avg_sq"}


def test_optimizer_state_with_wrong_names_keys_or_shapes_is_refused(backend):
    adam = _saved_state(backend, lambda m: dl.optim.Adam(m.parameters(), lr=0.01))
    m = _mlp(backend)
    opt = dl.optim.Adam(m.parameters(), lr=0.01)
    tr = dl.Trainer(m, opt, dl.losses.MSELoss())
    tr.load_state_dict(adam)                              # the right one loads
    assert tr.global_step == 1 and _opt_state(opt)
    ostate = _opt_state(opt)
    old = {k: v for k, v in adam.items() if k != "optimizer_type"}      # a file without the type
    sgd = _saved_state(backend, lambda m: dl.optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
    sgd.pop("optimizer_type")
    with pytest.raises(TrainerStateError, match="holds the state of SGD .* is Adam"):
        tr.load_state_dict(sgd)
    g0 = dict(old["optimizer"]["param_groups"][0])
    del g0["betas"]
    g0["alpha"] = 0.99
    bad = dict(adam, optimizer={**adam["optimizer"], "param_groups": [g0]})
    with pytest.raises(TrainerStateError, match="parameter group 0 of the file lacks betas and has alpha "
                                                "that Adam does not take"):
        tr.load_state_dict(bad)
    st = {i: dict(s) for i, s in adam["optimizer"]["state"].items()}
    st[0]["momentum_buffer"] = st[0]["exp_avg"]
    with pytest.raises(TrainerStateError, match="parameter 0 has state momentum_buffer that Adam does not keep"):
        tr.load_state_dict(dict(adam, optimizer={**adam["optimizer"], "state": st}))
    st = {i: dict(s) for i, s in adam["optimizer"]["state"].items()}
    st[1]["exp_avg"] = np.zeros((2, 2), "float32")
    with pytest.raises(TrainerStateError,
                       match=r"the exp_avg of parameter 1 has shape \(2, 2\), the parameter \(8,\)"):
        tr.load_state_dict(dict(adam, optimizer={**adam["optimizer"], "state": st}))
    with pytest.raises(TrainerStateError, match="is not an optimizer state_dict .* optimizer is Adam"):
        tr.load_state_dict(dict(adam, optimizer=None))
    assert _same_opt_state(_opt_state(opt), ostate) and tr.global_step == 1
    tr.load_state_dict(old)                                # no type in the file: inferred (Adam)


def test_gluon_style_trainer_step_call_explains_itself(backend):
    m = _mlp(backend)
    tr = dl.Trainer(m, dl.optim.SGD(m.parameters(), lr=0.1), dl.losses.MSELoss())
    with pytest.raises(TypeError, match="has no step\\(\\): train_step"):
        tr.step(10)


def test_grads_finite_with_sparse_and_mixed_dtype_gradients_on_torch():
    """The multi-tensor check takes one dtype and dense tensors; other gradients are checked per
    (dtype, device) group or one by one, with the same answer."""
    torch = pytest.importorskip("torch")
    emb, lin = torch.nn.Embedding(5, 3, sparse=True), torch.nn.Linear(3, 1).double()
    lin(emb(torch.tensor([1, 2])).double()).sum().backward()
    ps = list(emb.parameters()) + list(lin.parameters())
    assert emb.weight.grad.is_sparse and dl.optim.grads_finite(ps)
    lin.weight.grad[0, 1] = float("inf")
    assert not dl.optim.grads_finite(ps) and dl.optim.grad_max_abs(ps) == float("inf")
    lin.weight.grad[0, 1] = 0.0
    emb.weight.grad = torch.sparse_coo_tensor([[3]], [[0.0, float("nan"), 0.0]], (5, 3), check_invariants=True)
    assert not dl.optim.grads_finite(ps) and np.isnan(dl.optim.grad_max_abs(ps))
