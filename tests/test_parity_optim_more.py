"""Adagrad, Adadelta, Adamax, NAdam and LAMB: the same weights and gradients give the same
updates on both backends (torch's formulas; LAMB: MXNet 1.9.1's, checked against a float64 numpy
reference and against ``mx.optimizer.LAMB``), float32 and float64, with an lr change mid-run."""
import inspect

import numpy as np
import pytest
import torch

import dualdl as dl

SHAPES = [(3, 4), (5,), (1,)]


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in SHAPES]


def _torch_params(ws, dtype):
    return [torch.nn.Parameter(torch.tensor(w, dtype=getattr(torch, dtype))) for w in ws]


def _mx_params(ws, dtype):
    import mxnet as mx
    from mxnet import gluon
    ps = []
    for i, w in enumerate(ws):
        p = gluon.Parameter(f"w{i}", shape=w.shape, dtype=dtype)
        p.initialize(mx.init.Zero(), ctx=mx.cpu())
        p.set_data(mx.nd.array(w, dtype=dtype))
        ps.append(p)
    return ps


def _loss_terms(ws, gs, cubic):
    """d/dw of sum(g*w + c*w^3) = g + 3c*w^2: gradients that depend on the weights."""
    return [(w * g).sum() + cubic * (w * w * w).sum() for w, g in zip(ws, gs)]


def _backward_torch(ps, gs, cubic=0.1):
    sum(_loss_terms(ps, [torch.tensor(g, dtype=ps[0].dtype) for g in gs], cubic)).backward()


def _backward_mx(ps, gs, cubic=0.1):
    import mxnet as mx
    with mx.autograd.record():
        loss = mx.nd.add_n(*_loss_terms([p.data() for p in ps],
                                        [mx.nd.array(g, dtype=ps[0].dtype) for g in gs], cubic))
    loss.backward()


def _diff(tp, mp):
    a = np.concatenate([p.detach().numpy().ravel() for p in tp]).astype(np.float64)
    b = np.concatenate([p.data().asnumpy().ravel() for p in mp]).astype(np.float64)
    d = np.abs(a - b)
    return float(d.max()), float((d / np.maximum(np.abs(a), 1e-3)).max())


def _run_both(name, kw, dtype, steps=6, lr_change_at=3):
    ws = _weights()
    tp, mp = _torch_params(ws, dtype), _mx_params(ws, dtype)
    ot, om = getattr(dl.optim, name)(tp, **kw), getattr(dl.optim, name)(mp, **kw)
    rng = np.random.default_rng(1)
    worst = (0.0, 0.0)
    for step in range(steps):
        if step == lr_change_at:
            for o in (ot, om):
                for g in o.param_groups:
                    g["lr"] *= 0.3
        gs = [rng.normal(size=s) for s in SHAPES]
        ot.zero_grad(); om.zero_grad()
        _backward_torch(tp, gs); _backward_mx(mp, gs)
        ot.step(); om.step()
        d = _diff(tp, mp)
        worst = (max(worst[0], d[0]), max(worst[1], d[1]))
    return worst, ot, om, tp, mp


CASES = [
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01, maximize=True)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("LAMB", dict(lr=0.05)),
    ("LAMB", dict(lr=0.05, weight_decay=0.1, bias_correction=False, maximize=True)),
    ("LAMB", dict(lr=0.05, weight_decay=0.01, lower_bound=0.5, upper_bound=2.0)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),   # = AdamW on both
]
TOL = {"float32": (2e-6, 2e-5), "float64": (1e-13, 1e-12)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_same_updates_on_both_backends(name, kw, dtype):
    (abs_d, rel_d), ot, om, *_ = _run_both(name, kw, dtype)
    print(f"{name} {kw} {dtype}: max abs {abs_d:.1e} rel {rel_d:.1e}")
    assert abs_d < TOL[dtype][0] and rel_d < TOL[dtype][1], (abs_d, rel_d)
    # state in torch's names on both (LAMB: dualdl's own, the same names)
    st, sm = ot.state_dict()["state"], om.state_dict()["state"]
    assert sorted(st[0]) == sorted(sm[0]) and float(st[0]["step"]) == sm[0]["step"] == 6


def test_adam_decoupled_weight_decay_is_adamw():
    (d, _), *_ = _run_both("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True), "float64")
    ws = _weights()
    a, b = _mx_params(ws, "float64"), _mx_params(ws, "float64")
    oa = dl.optim.Adam(a, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)
    ob = dl.optim.AdamW(b, lr=0.05, weight_decay=0.1)
    for o, ps in ((oa, a), (ob, b)):
        _backward_mx(ps, [np.ones(s) for s in SHAPES])
        o.step()
    assert all(np.array_equal(p.data().asnumpy(), q.data().asnumpy()) for p, q in zip(a, b))


@pytest.mark.parametrize("n_params,low,high", [(1, 0.0, 1e-8), (3, 1e-2, 1.0)])
def test_mxnet_nadam_shares_one_momentum_schedule_across_parameters(n_params, low, high):
    """Why dualdl has its own NAdam: MXNet 1.9.1's ``Nadam`` advances one optimizer-wide
    momentum-schedule product at every parameter's update; with one parameter it is torch's."""
    import mxnet as mx
    ws = _weights()[:n_params]
    a, b = _mx_params(ws, "float64"), _mx_params(ws, "float64")
    ours, theirs = dl.optim.NAdam(a, lr=0.05), mx.optimizer.Nadam(learning_rate=0.05)
    states = [theirs.create_state(i, p.data()) for i, p in enumerate(b)]
    rng = np.random.default_rng(1)
    for _ in range(6):
        gs = [rng.normal(size=w.shape) for w in ws]
        ours.zero_grad()
        _backward_mx(a, gs, cubic=0.0)
        ours.step()
        for i, (p, g) in enumerate(zip(b, gs)):
            theirs.update(i, p.data(), mx.nd.array(g, dtype="float64"), states[i])
    d = max(float(np.abs(p.data().asnumpy() - q.data().asnumpy()).max()) for p, q in zip(a, b))
    assert low <= d < high, d


# ---- LAMB against its reference formula (float64 numpy) and MXNet's own optimizer ----------

def _lamb_reference(w, grads, lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, bias_correction=True,
                    lower_bound=None, upper_bound=None):
    """MXNet 1.9.1's lamb_update_phase1/2, in float64."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mh, vh = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if bias_correction else (m, v)
        u = mh / (np.sqrt(vh) + eps) + wd * w
        r1, r2 = np.linalg.norm(w), np.linalg.norm(u)
        if lower_bound is not None:
            r1 = max(r1, lower_bound)
        if upper_bound is not None:
            r1 = min(r1, upper_bound)
        w = w - lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1.0) * u
    return w


LAMB_CASES = [dict(), dict(wd=0.1), dict(bias_correction=False, wd=0.01),
              dict(lower_bound=8.0), dict(upper_bound=0.5, wd=0.1)]


def _lamb_kwargs(c):
    kw = dict(lr=0.02, weight_decay=c.get("wd", 0.0), bias_correction=c.get("bias_correction", True))
    for k in ("lower_bound", "upper_bound"):
        if k in c:
            kw[k] = c[k]
    return kw


@pytest.mark.parametrize("case", LAMB_CASES, ids=[str(c) for c in LAMB_CASES])
def test_lamb_matches_float64_reference_and_mxnet_lamb(case):
    import mxnet as mx
    rng = np.random.default_rng(4)
    w0 = rng.normal(size=(4, 6))
    grads = [rng.normal(size=w0.shape) for _ in range(5)]
    ref = _lamb_reference(w0, grads, 0.02, **case)
    assert np.abs(ref - w0).max() > 1e-3                      # the steps move the weights
    kw = _lamb_kwargs(case)
    out = {}
    for dtype in ("float64", "float32"):
        tp, mp = _torch_params([w0], dtype), _mx_params([w0], dtype)
        ot, om = dl.optim.LAMB(tp, **kw), dl.optim.LAMB(mp, **kw)
        for g in grads:
            tp[0].grad = torch.tensor(g, dtype=tp[0].dtype)
            with mx.autograd.record():
                loss = (mp[0].data() * mx.nd.array(g, dtype=dtype)).sum()
            loss.backward()                                   # gradient g, marked fresh
            ot.step(); om.step()
        out[dtype] = (tp[0].detach().numpy(), mp[0].data().asnumpy())
    for a in out["float64"]:
        assert np.abs(a - ref).max() < 1e-13
    for a in out["float32"]:
        assert np.abs(a - ref).max() < 5e-6
    # mx.optimizer.LAMB (lamb_update_phase1/2 ops, float32), same hyper-parameters
    opt = mx.optimizer.LAMB(learning_rate=0.02, wd=kw["weight_decay"], bias_correction=kw["bias_correction"],
                            lower_bound=case.get("lower_bound"), upper_bound=case.get("upper_bound"))
    w = mx.nd.array(w0, dtype="float32")
    state = opt.create_state(0, w)
    for g in grads:
        opt.update(0, w, mx.nd.array(g, dtype="float32"), state)
    d = np.abs(w.asnumpy() - out["float32"][1]).max()
    print(f"LAMB {case}: dualdl vs mx.optimizer.LAMB {d:.1e}, float32 vs float64 reference "
          f"{np.abs(out['float32'][1] - ref).max():.1e}")
    assert d < 5e-6


# ---- torch's signatures and switches --------------------------------------------------------

def _params_of(sig):
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam"])
def test_mxnet_optimizers_take_torch_signatures(name):
    import dualdl_mx.optim as mo
    import dualdl_mx.optim_adaptive as ma
    cls = getattr(mo, name, None) or getattr(ma, name)
    assert _params_of(inspect.signature(cls)) == _params_of(inspect.signature(getattr(torch.optim, name)))


def test_lamb_signature_is_the_same_on_both_backends():
    import dualdl_mx.optim_lamb as ml
    import dualdl_torch.optim_lamb as tl
    assert _params_of(inspect.signature(ml.LAMB)) == _params_of(inspect.signature(tl.LAMB))


@pytest.mark.parametrize("name,kw", [("SGD", dict(foreach=True, differentiable=False, fused=None)),
                                     ("Adam", dict(foreach=False, capturable=False, fused=False)),
                                     ("RMSprop", dict(foreach=True)), ("Adagrad", dict(foreach=True)),
                                     ("NAdam", dict(foreach=False, capturable=False))])
def test_switches_that_change_nothing_are_accepted_on_mxnet(name, kw):
    (d, _), *_ = _run_both(name, dict(lr=0.01, **kw), "float64", steps=2)
    assert d < 1e-12


@pytest.mark.parametrize("name,arg", [("SGD", "differentiable"), ("Adam", "capturable"),
                                      ("AdamW", "differentiable"), ("Adadelta", "capturable"),
                                      ("NAdam", "differentiable")])
def test_switches_mxnet_cannot_honour_are_refused_by_name(name, arg):
    with pytest.raises(ValueError, match=rf"{name}\({arg}=True\) cannot be honoured on the mxnet backend"):
        getattr(dl.optim, name)(_mx_params(_weights(), "float32"), **{arg: True})


@pytest.mark.parametrize("name,kw,msg", [("Adagrad", dict(lr=-1), "Invalid learning rate: -1"),
                                         ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
                                         ("Adamax", dict(betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
                                         ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
                                         ("LAMB", dict(eps=-1), "Invalid epsilon value: -1")])
def test_bad_hyperparameters_same_message_on_both_backends(name, kw, msg):
    ws = _weights()
    for ps in (_torch_params(ws, "float32"), _mx_params(ws, "float32")):
        with pytest.raises(ValueError, match=f"^{msg}$"):
            getattr(dl.optim, name)(ps, **kw)


def test_step_batch_size_on_new_optimizers():
    """``step(batch_size=B)`` divides the gradients by B first, on both backends."""
    ws = _weights()
    for mk, bw, read in ((_torch_params, _backward_torch, lambda p: p.detach().numpy()),
                         (_mx_params, _backward_mx, lambda p: p.data().asnumpy())):
        a, b = mk(ws, "float64"), mk(ws, "float64")
        oa, ob = dl.optim.NAdam(a, lr=0.05), dl.optim.NAdam(b, lr=0.05)
        gs = [np.ones(s) for s in SHAPES]
        bw(a, [4 * g for g in gs], cubic=0.0); bw(b, gs, cubic=0.0)
        oa.step(batch_size=4); ob.step()
        assert max(float(np.abs(read(x) - read(y)).max()) for x, y in zip(a, b)) < 1e-15
        assert max(float(np.abs(read(x) - w).max()) for x, w in zip(a, ws)) > 1e-3


@pytest.mark.parametrize("name", ["Adagrad", "Adadelta", "Adamax", "NAdam"])
def test_torch_backend_returns_torch_optimizers(name):
    opt = getattr(dl.optim, name)(_torch_params(_weights(), "float32"))
    assert isinstance(opt, getattr(torch.optim, name)) and type(opt).__name__ == name
    assert isinstance(dl.optim.LAMB(_torch_params(_weights(), "float32")), torch.optim.Optimizer)
