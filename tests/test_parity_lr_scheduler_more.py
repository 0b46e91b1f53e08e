"""LinearLR, PolynomialLR, SequentialLR, OneCycleLR and ReduceLROnPlateau: torch's own objects on
torch, dualdl's re-implementations on MXNet, the same learning rates (and OneCycleLR's momentum /
beta1) at every step, the same trained weights, and state_dict round trips that resume exactly."""
import numpy as np
import pytest

import dualdl as dl
from dualdl.optim import lr_scheduler as S

from test_parity_optim_more import SHAPES, _backward_mx, _backward_torch, _diff, _mx_params, _torch_params, _weights

LOSSES = [1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]


def _linear_cosine(o):
    return S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3),
                              S.CosineAnnealingLR(o, T_max=7, eta_min=1e-4)], milestones=[3])


SCHEDULES = {
    "LinearLR": lambda o: S.LinearLR(o, start_factor=0.25, total_iters=4),
    "LinearLR-down": lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=6),
    "PolynomialLR": lambda o: S.PolynomialLR(o, total_iters=6, power=2.0),
    "Sequential-linear-poly": lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.PolynomialLR(o, total_iters=7, power=1.5)],
        milestones=[3]),
    "Sequential-linear-cosine": _linear_cosine,
    "Sequential-3": lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.5, total_iters=2), S.StepLR(o, step_size=2, gamma=0.5),
            S.ExponentialLR(o, gamma=0.8)], milestones=[2, 6]),
    "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=12),
    "OneCycleLR-3phase-linear": lambda o: S.OneCycleLR(o, max_lr=[0.4], epochs=3, steps_per_epoch=4,
                                                       pct_start=0.25, anneal_strategy="linear",
                                                       three_phase=True, base_momentum=0.8),
    "ReduceLROnPlateau": lambda o: S.ReduceLROnPlateau(o, factor=0.5, patience=2, cooldown=1),
    "ReduceLROnPlateau-max-abs": lambda o: S.ReduceLROnPlateau(o, mode="max", factor=0.3, patience=1,
                                                               threshold=0.05, threshold_mode="abs", min_lr=0.02),
}


def _step(sched, i):
    if "Plateau" in type(sched).__name__:
        sched.step(LOSSES[i])
    else:
        sched.step()


def _trace(optimizer, sched, steps=12, train=None):
    """lr, momentum and beta1 of every group after each step (``train``: a real update first)."""
    out = []
    for i in range(steps):
        if train:
            train(i)
        optimizer.step()
        _step(sched, i)
        out.append([(g["lr"], g.get("momentum"), g.get("betas", (None,))[0]) for g in optimizer.param_groups])
    return out


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "LAMB"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_same_lrs_momenta_and_weights_as_torch(name, opt_name):
    ws = _weights()
    tp, mp = _torch_params(ws, "float64"), _mx_params(ws, "float64")
    kw = dict(lr=0.1, momentum=0.9) if opt_name == "SGD" else dict(lr=0.1)
    kw["weight_decay"] = 0.01
    ot, om = getattr(dl.optim, opt_name)(tp, **kw), getattr(dl.optim, opt_name)(mp, **kw)
    st, sm = SCHEDULES[name](ot), SCHEDULES[name](om)
    assert type(st).__module__.startswith("torch.optim") and type(sm).__module__.startswith("dualdl.optim")
    assert st.get_last_lr() == sm.get_last_lr()
    rng = np.random.default_rng(3)
    grads = [[rng.normal(size=s) for s in SHAPES] for _ in range(12)]

    def train(opt, params, backward):
        def run(i):
            opt.zero_grad()
            backward(params, grads[i], cubic=0.0)          # linear loss: no blow-up at lr 0.5
        return run

    tt = _trace(ot, st, train=train(ot, tp, _backward_torch))
    tm = _trace(om, sm, train=train(om, mp, _backward_mx))
    assert tt == tm                                      # bit-identical lr / momentum / beta1
    assert len({step[0][0] for step in tt}) > 2          # the schedule really moves the lr
    if "OneCycle" in name:                               # momentum / beta1 cycles too
        assert len({step[0][1 if opt_name == "SGD" else 2] for step in tt}) > 2
    if "Plateau" in name:
        assert len({step[0][0] for step in tt}) >= 3     # reduced at least twice
    d = _diff(tp, mp)
    assert d[0] < 1e-13, f"{name} {opt_name}: weights differ by {d}"


@pytest.mark.parametrize("name", ["Sequential-linear-cosine", "OneCycleLR", "ReduceLROnPlateau", "PolynomialLR"])
def test_state_dict_round_trip_resumes_exactly(name):
    """Save after 5 steps, build a fresh optimizer and scheduler, load both, continue: the same lrs
    as an uninterrupted run (MXNet), and as torch's run."""
    ws = _weights()

    def fresh(params):
        o = dl.optim.SGD(params, lr=0.1, momentum=0.9)
        return o, SCHEDULES[name](o)

    ot, st = fresh(_torch_params(ws, "float64"))
    full_torch = _trace(ot, st)
    om, sm = fresh(_mx_params(ws, "float64"))
    head = _trace(om, sm, steps=5)
    osd, ssd = om.state_dict(), sm.state_dict()
    om2, sm2 = fresh(_mx_params(ws, "float64"))
    om2.load_state_dict(osd)
    sm2.load_state_dict(ssd)
    tail = []
    for i in range(5, 12):
        om2.step()
        _step(sm2, i)
        tail.append([(g["lr"], g.get("momentum"), g.get("betas", (None,))[0]) for g in om2.param_groups])
    assert head + tail == full_torch


def test_sequential_refuses_reduce_on_plateau_and_foreign_optimizers():
    mp = _mx_params(_weights(), "float32")
    o, o2 = dl.optim.SGD(mp, lr=0.1), dl.optim.SGD(_mx_params(_weights(), "float32"), lr=0.1)
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        S.SequentialLR(o, [S.LinearLR(o), S.ReduceLROnPlateau(o)], milestones=[2])
    with pytest.raises(ValueError, match="belong to the same optimizer"):
        S.SequentialLR(o, [S.LinearLR(o), S.LinearLR(o2)], milestones=[2])
    with pytest.raises(ValueError, match="one more than the number of milestone points"):
        S.SequentialLR(o, [S.LinearLR(o)], milestones=[2])


def test_one_cycle_refuses_an_optimizer_without_momentum_and_too_many_steps():
    mp = _mx_params(_weights(), "float32")
    with pytest.raises(ValueError, match="must support momentum or beta1"):
        S.OneCycleLR(dl.optim.Adagrad(mp), max_lr=0.1, total_steps=4)
    o = dl.optim.SGD(mp, lr=0.1, momentum=0.9)
    s = S.OneCycleLR(o, max_lr=0.1, total_steps=2)
    s.step(); s.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        s.step()


@pytest.mark.parametrize("make", [lambda o: S.StepLR(o, step_size=2, gamma=0.5),
                                  lambda o: S.MultiStepLR(o, milestones=[1, 3, 3], gamma=0.5),
                                  lambda o: S.ExponentialLR(o, gamma=0.8),
                                  lambda o: S.CosineAnnealingLR(o, T_max=6, eta_min=1e-3),
                                  lambda o: S.LinearLR(o, start_factor=0.2, total_iters=4),
                                  lambda o: S.PolynomialLR(o, total_iters=5, power=2.0),
                                  lambda o: S.ReduceLROnPlateau(o, patience=0)],
                         ids=["StepLR", "MultiStepLR", "ExponentialLR", "Cosine", "LinearLR", "PolynomialLR",
                              "ReduceLROnPlateau"])
def test_deprecated_step_epoch_jumps_through_the_closed_form_as_torch(make):
    ws = _weights()
    lrs = []
    for params in (_torch_params(ws, "float64"), _mx_params(ws, "float64")):
        o = dl.optim.SGD(params, lr=0.1)
        s = make(o)
        o.step()                                         # (torch warns about a scheduler step first)
        seen = []
        for epoch in (3, 1, 4, 7):
            with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
                s.step(1.0, epoch) if "Plateau" in type(s).__name__ else s.step(epoch)
            seen.append((s.get_last_lr(), s.last_epoch))
        lrs.append(seen)
    assert lrs[0] == lrs[1]
