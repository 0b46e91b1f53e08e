"""The fast paths of the optimizers and losses compute the same numbers as the reference formulas.

MXNet: fused update ops (``sgd_mom_update``, ``adam_update``, ...) vs ``fused=False`` (the NDArray
formulas), and vs torch.optim; state_dict stays torch's and resumes bit for bit.
torch: the ``step`` override skips torch's hook wrapper of the parent (hooks fire once).
Losses: the device-side class-index check (torch) and the pick with the target NDArray (MXNet).
"""
import warnings

import numpy as np
import pytest

import dualdl as dl

from _trainer_models import LinearMLP as MLP


def _weights(m):
    return {k: dl.to_numpy(v).copy() for k, v in dl.state_dict(m).items()}


def _max_diff(a, b):
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


def _model(backend, seed=0):
    m = MLP(backend=backend)
    rng = np.random.default_rng(seed)
    dl.load_state_dict(m, {k: rng.normal(size=tuple(v.shape)).astype(np.float32)
                           for k, v in dl.state_dict(m).items()})
    return m


def _train(m, opt, backend, steps, start=0, lr_changes=(), batch_size=None):
    from mxnet import autograd
    rng = np.random.default_rng(100)
    xs = [rng.normal(size=(8, 5)).astype(np.float32) for _ in range(start + steps)]
    for s in range(start, start + steps):
        if s in lr_changes:
            for g in opt.param_groups:
                g["lr"] *= lr_changes[s]
        opt.zero_grad()
        if backend == "torch":
            (m(dl.from_numpy(xs[s], backend="torch")) ** 2).sum(1).mean().backward()
        else:
            with autograd.record():
                loss = (m(dl.from_numpy(xs[s], backend="mxnet")) ** 2).sum(1).mean()
            loss.backward()
        opt.step(batch_size=batch_size)


FUSED = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.002, momentum=0.9, weight_decay=0.01, maximize=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.002, momentum=0.8, dampening=0.3, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.002, weight_decay=0.1, eps=1e-3, maximize=True)),
    ("Adam", dict(lr=0.01, betas=(0.5, 0.9))),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
]
LR_CHANGES = {4: 0.3, 8: 0.0, 10: 5.0}          # including a step at lr = 0


@pytest.mark.parametrize("name,kw", FUSED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FUSED)])
def test_fused_matches_reference_formula_and_torch_across_lr_changes(name, kw):
    runs = {}
    for key, backend, extra in (("fused", "mxnet", {}), ("reference", "mxnet", {"fused": False}),
                                ("torch", "torch", {})):
        m = _model(backend)
        opt = getattr(dl.optim, name)(m.parameters(), **kw, **extra)
        _train(m, opt, backend, 14, lr_changes=LR_CHANGES, batch_size=4)
        runs[key] = _weights(m)
    d_ref = _max_diff(runs["fused"], runs["reference"])
    d_torch = _max_diff(runs["fused"], runs["torch"])
    assert d_ref <= 1e-6, f"{name} {kw}: fused vs reference formula {d_ref:.2e}"
    assert d_torch <= 1e-6, f"{name} {kw}: fused vs torch {d_torch:.2e}"
    assert _max_diff(runs["fused"], _weights(_model("mxnet"))) > 1e-3      # it did train


def test_adam_constants_make_the_fused_moments_torchs():
    """adam_update weighs gradients by 1 - float32(beta) (computed in float32); torch by
    float32(1 - beta). k scales the gradient so the second moment is torch's; s is the first
    moment's resulting scale, undone around the op."""
    from dualdl_mx.optim import _adam_constants
    f = np.float32
    for b1, b2 in ((0.9, 0.999), (0.5, 0.9), (0.0, 0.99)):
        k, s = _adam_constants(b1, b2)
        c1, c1_op = float(f(1 - b1)), float(f(1) - f(b1))
        c2, c2_op = float(f(1 - b2)), float(f(1) - f(b2))
        assert abs(c2_op * k * k / c2 - 1) < 1e-12
        assert abs(c1_op * k / s / c1 - 1) < 1e-12
    k, s = _adam_constants(0.9, 0.999)
    assert 5e-6 < k - 1 < 8e-6           # the bias it removes: 1 - 0.999f is 1.3e-5 off 0.001


def test_adam_long_run_stays_on_torch():
    """300 Adam steps: the uncorrected op constants drift by ~6e-6 relative per update."""
    runs = {}
    for backend in ("mxnet", "torch"):
        m = _model(backend, seed=3)
        opt = dl.optim.Adam(m.parameters(), lr=0.01, weight_decay=0.1, eps=1e-3)
        _train(m, opt, backend, 300)
        runs[backend] = _weights(m)
    assert _max_diff(runs["mxnet"], runs["torch"]) <= 1e-6


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
                                     ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
                                     ("Adam", dict(lr=0.01, weight_decay=0.01)),
                                     ("AdamW", dict(lr=0.01))])
def test_state_dict_from_fused_state_is_torchs_and_resumes_bit_for_bit(name, kw):
    mm, mt = _model("mxnet"), _model("torch")
    om = getattr(dl.optim, name)(mm.parameters(), **kw)
    ot = getattr(dl.optim, name)(mt.parameters(), **kw)
    _train(mm, om, "mxnet", 3)
    _train(mt, ot, "torch", 3)
    sdm, sdt = om.state_dict(), ot.state_dict()
    assert sorted(sdm["state"]) == sorted(sdt["state"])
    for i, st in sdt["state"].items():
        sm = sdm["state"][i]
        assert set(sm) == set(st), (set(sm), set(st))           # momentum_buffer / exp_avg / exp_avg_sq / step
        for key, v in st.items():
            a = np.asarray(v.detach().numpy() if hasattr(v, "detach") else v, dtype=np.float64)
            b = np.asarray(sm[key], dtype=np.float64)
            assert np.abs(a - b).max() <= 1e-6 * max(1.0, np.abs(a).max()), (i, key)
    # resume: a fresh optimizer (and model copy) loaded from the state dict continues bit for bit
    straight = _model("mxnet")
    dl.load_state_dict(straight, _weights(mm))
    resumed = _model("mxnet", seed=9)
    dl.load_state_dict(resumed, _weights(mm))
    o2 = getattr(dl.optim, name)(resumed.parameters(), **{**kw, "lr": 0.5})
    o2.load_state_dict(sdm)
    _train(mm, om, "mxnet", 3, start=3, lr_changes={4: 0.5})
    _train(resumed, o2, "mxnet", 3, start=3, lr_changes={4: 0.5})
    wa, wb = _weights(mm), _weights(resumed)
    assert all(np.array_equal(wa[k], wb[k]) for k in wa), _max_diff(wa, wb)
    sd2 = o2.state_dict()
    for i, s in om.state_dict()["state"].items():
        for key, v in s.items():
            assert np.array_equal(np.asarray(v), np.asarray(sd2["state"][i][key])), (i, key)


def test_fused_step_writes_every_context_and_zero_grad_resets_all():
    import mxnet as mx
    from mxnet import autograd, gluon
    from dualdl_mx.optim import SGD
    ctxs = [mx.cpu(0), mx.cpu(1)]
    w = gluon.Parameter("w", shape=(4, 3))
    w.initialize(mx.init.Constant(0.5), ctx=ctxs)
    opt = SGD([w], lr=0.1, momentum=0.9, weight_decay=0.01)
    x = mx.nd.arange(12).reshape((4, 3)) / 10
    for _ in range(3):
        opt.zero_grad()
        for c in ctxs:
            with autograd.record():
                loss = (w.data(c) * x.as_in_context(c) ** 2).sum()
            loss.backward()
        # torch semantics: the gradient of context 0 (the data-parallel code sums into it first)
        opt.step()
    a, b = (d.asnumpy() for d in w.list_data())
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - 0.5).max() > 0.01
    opt.zero_grad()
    assert all(float(g.abs().sum().asscalar()) == 0 for g in w.list_grad())
    before = w.data(ctxs[0]).asnumpy()
    opt.step()                                   # no backward since zero_grad: nothing moves
    np.testing.assert_array_equal(w.data(ctxs[0]).asnumpy(), before)


def test_float64_parameters_keep_the_reference_formula():
    """The fused ops take lr/wd/betas as float32: float64 weights must not go through them."""
    import mxnet as mx
    from mxnet import autograd, gluon, nd
    from dualdl_mx.optim import SGD, Adam
    for cls, kw in ((SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)), (Adam, dict(lr=0.01))):
        res = []
        for fused in (True, False):
            w = gluon.Parameter("w", shape=(5,), dtype="float64")
            w.initialize(mx.init.Constant(0.3))
            opt = cls([w], fused=fused, **kw)
            for _ in range(5):
                opt.zero_grad()
                with autograd.record():
                    loss = (w.data() ** 3 * nd.arange(5, dtype="float64")).sum()
                loss.backward()
                opt.step()
            res.append(w.data().asnumpy())
        assert res[0].dtype == np.float64
        np.testing.assert_array_equal(res[0], res[1])


# ---- torch: hooks fire once ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_torch_step_hooks_fire_once_and_schedulers_do_not_warn(name):
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from dualdl_torch import optim as to
    getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(1))], lr=0.1)   # patches the parent's step
    p = torch.nn.Parameter(torch.ones(3))
    opt = getattr(to, name)([p], lr=0.1)
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", k.get("batch_size"))))
    opt.register_step_post_hook(lambda o, a, k: calls.append(("post", k.get("batch_size"))))
    h = register_optimizer_step_post_hook(lambda o, a, k: calls.append(("global",)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
            p.grad = torch.full((3,), 4.0)
            opt.step(batch_size=4)
            sched.step()
    finally:
        h.remove()
    assert calls == [("pre", 4), ("post", 4), ("global",)]
    assert opt.param_groups[0]["lr"] == 0.05
    ref = torch.nn.Parameter(torch.ones(3))
    ro = getattr(torch.optim, name)([ref], lr=0.1)
    ref.grad = torch.ones(3)                      # 4 / batch_size
    ro.step()
    assert torch.equal(p.data, ref.data)


# ---- losses ------------------------------------------------------------------------------------------
def test_torch_device_index_check_raises_the_shared_errors():
    import torch
    from dualdl.losses import _checks as ck
    x = torch.randn(4, 3)
    for t, exc in ((torch.tensor([0, 3, 1, -2]), IndexError), (torch.tensor([0., 1.5, 1., 2.]), ValueError),
                   (torch.tensor([0., float("nan"), 1., 2.]), ValueError),
                   (torch.tensor([0., float("inf"), 1., 2.]), ValueError)):
        with pytest.raises(exc) as got:
            dl.losses.CrossEntropyLoss()(x, t)
        with pytest.raises(exc) as want:
            ck.check_class_indices("CrossEntropyLoss", t.numpy(), 3, -100)
        assert str(got.value) == str(want.value)
    ce = dl.losses.CrossEntropyLoss()
    assert "found [-2, 3]" in str(pytest.raises(IndexError, ce, x, torch.tensor([0, 3, 1, -2])).value)
    ok = torch.tensor([0, -100, 2, 1])                   # ignore_index is allowed
    np.testing.assert_allclose(float(ce(x, ok)),
                               float(torch.nn.functional.cross_entropy(x, ok)), rtol=0, atol=0)
    np.testing.assert_allclose(float(ce(x, ok.float())),
                               float(torch.nn.functional.cross_entropy(x, ok)), rtol=0, atol=0)
    # int64 CPU targets are range-checked by torch's own kernel; its error becomes the shared one
    for loss, xx, t in ((dl.losses.NLLLoss(), torch.randn(2, 3, 4).log_softmax(1),
                         torch.tensor([[0, 1, 3, 0], [1, 1, 1, 1]])),
                        (dl.losses.CrossEntropyLoss(label_smoothing=0.1, reduction="none"), x,
                         torch.tensor([0, 3, 1, 1]))):
        with pytest.raises(IndexError, match=r"found \[3\] \(1 bad entries\)\. MXNet would silently clip"):
            loss(xx, t)


def test_mxnet_pick_with_the_target_array_is_bit_identical():
    """The target NDArray itself (float32 labels, Gluon's habit) vs host-built int32 indices."""
    from mxnet import autograd, nd
    rng = np.random.default_rng(5)
    for shape, kw in (((8, 5), {}), ((4, 5, 3), dict(label_smoothing=0.1)),
                      ((6, 5), dict(weight=nd.array(rng.random(5)))), ((6, 5), dict(reduction="sum"))):
        x = nd.array(rng.normal(size=shape))
        t = rng.integers(0, 5, (shape[0],) + shape[2:])
        res = []
        for target in (nd.array(t), t, list(t.tolist())):
            xx = x.copy()
            xx.attach_grad()
            with autograd.record():
                loss = dl.losses.CrossEntropyLoss(**kw)(xx, target)
            loss.backward()
            res.append((loss.asnumpy(), xx.grad.asnumpy()))
        for r in res[1:]:
            np.testing.assert_array_equal(res[0][0], r[0])
            np.testing.assert_array_equal(res[0][1], r[1])
    with pytest.raises(IndexError, match="MXNet would silently clip"):
        dl.losses.CrossEntropyLoss()(nd.array(rng.normal(size=(3, 5))), nd.array([0, 5, 1]))


# ---- MXNet multi-tensor SGD (one multi_sgd_mom_update per chunk of parameters) ------------------
def test_size_chunks_bound_the_kernels_wasted_work_and_its_60_tensor_limit():
    from dualdl_mx.fast.invoke import MULTI_MAX
    from dualdl_mx.optim_multi import _MULTI_SLACK, _size_chunks
    rng = np.random.default_rng(0)
    for sizes in ([16384, 8192, 1280, 128, 128, 10], [1 << 20] + [10] * 9, [7] * 130,
                  rng.integers(1, 300000, 200).tolist()):
        chunks = _size_chunks([(s, i) for i, s in enumerate(sizes)])
        assert sorted(i for c in chunks for i in c) == list(range(len(sizes)))   # each once
        for c in chunks:
            cs = [sizes[i] for i in c]
            assert len(c) <= MULTI_MAX
            assert len(c) * max(cs) - sum(cs) <= max(_MULTI_SLACK, sum(cs))
    assert [len(c) for c in _size_chunks([(7, i) for i in range(130)])] == [60, 60, 10]
    assert len(_size_chunks([(1 << 20, 0)] + [(10, i) for i in range(1, 10)])) == 2   # big one alone


def test_multi_tensor_sgd_over_many_parameters_matches_torch():
    """130 parameters (more than one multi-op call takes) of very different sizes, weight decay,
    an lr change every step (folded into the op's momentum) and a step at lr = 0 (per-parameter
    path, torch's layout) and back."""
    rng = np.random.default_rng(3)
    shapes = [(int(rng.integers(1, 40)), int(rng.integers(1, 40))) for _ in range(128)] + [(300, 200), (3,)]
    init = [rng.normal(size=s).astype(np.float32) for s in shapes]
    xs = [[rng.normal(size=s).astype(np.float32) for s in shapes] for _ in range(8)]
    lrs = [0.1, 0.05, 0.05, 0.0, 0.2, 0.07, 0.07, 0.01]
    out = {}
    for backend in ("mxnet", "torch"):
        with dl.use(backend):
            if backend == "torch":
                import torch
                ps = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in init]
            else:
                import mxnet as mx
                from mxnet import gluon
                ps = []
                for i, a in enumerate(init):
                    p = gluon.Parameter(f"p{i}", shape=a.shape)
                    p.initialize(mx.init.Constant(0), ctx=mx.cpu())
                    p.set_data(mx.nd.array(a))
                    ps.append(p)
            opt = dl.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)
            for step, lr in enumerate(lrs):
                opt.param_groups[0]["lr"] = lr
                opt.zero_grad()
                if backend == "torch":
                    sum(((p * torch.from_numpy(x)) ** 2).sum() for p, x in zip(ps, xs[step])).backward()
                else:
                    from mxnet import autograd
                    with autograd.record():
                        loss = mx.nd.add_n(*[((p.data() * mx.nd.array(x)) ** 2).sum()
                                             for p, x in zip(ps, xs[step])])
                    loss.backward()
                opt.step()
            out[backend] = [dl.to_numpy(p.data() if backend == "mxnet" else p.detach()) for p in ps]
    d = max(float(np.abs(a - b).max() / max(1.0, np.abs(b).max())) for a, b in zip(out["mxnet"], out["torch"]))
    assert d <= 1e-6, f"multi-tensor SGD vs torch: {d:.2e}"
    assert max(float(np.abs(a - b).max()) for a, b in zip(out["mxnet"], init)) > 1e-2     # it trained


def test_state_dict_brings_the_live_sgd_state_to_torchs_layout():
    m = _model("mxnet")
    opt = dl.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    _train(m, opt, "mxnet", 2)
    assert all("mx_mom" in s for s in opt.state.values())          # MXNet's -lr*buf layout
    sd = opt.state_dict()
    assert all(set(s) == {"momentum_buffer"} for s in opt.state.values())
    assert all(set(s) == {"momentum_buffer"} for s in sd["state"].values())
    _train(m, opt, "mxnet", 1, start=2)                               # and back at the next step
    assert all("mx_mom" in s for s in opt.state.values())
