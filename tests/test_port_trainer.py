"""dl.port.translate_trainer: the returned torch optimizer/scheduler update a torch twin exactly as
gluon.Trainer updates the Gluon model, compared after every one of 5 steps (float64 where Gluon
supports it, so that a wrong formula cannot hide inside the tolerance)."""
import io
import re

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

import dualdl as dl  # noqa: E402
from dualdl.port import TrainerTranslationError, translate_trainer  # noqa: E402
from dualdl_torch import gluon_optim as G  # noqa: E402
from _gluon_twins import gluon_torch_mlp, regression_batches  # noqa: E402

STEPS, BATCH = 5, 4
_models = gluon_torch_mlp
#: measured max abs diff over the 5 steps: <= 4.4e-16 in float64 (docs/porting-trainer.md); in
#: float32 the mean-loss vs sum-loss gradients differ by rounding, which Adam-type updates amplify
#: (8.3e-6 for bertadam; with identical gradients the float32 updates are bitwise equal, see
#: test_identical_gradients_float32). A wrong formula is off by >= 1e-4 (negative tests).
TOL = {"float64": 1e-12, "float32": 3e-5}


def _batches(dtype, seed=1):
    return regression_batches(dtype, STEPS, BATCH, seed)


def _max_diff(net, tnet):
    mad, scale = 0.0, 0.0
    for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
        a, b = gp.data().asnumpy().astype(np.float64), tp.detach().double().numpy()
        mad = max(mad, float(np.abs(a - b).max()))
        scale = max(scale, float(np.abs(a).max()))
    return mad, mad / scale


def _run(net, tnet, trainer, optimizer, scheduler, dtype, torch_step=None):
    """Gluon: per-sample loss, backward of its sum, trainer.step(batch). torch: batch-mean loss,
    optimizer.step(), scheduler.step(). Returns the max abs/rel diffs after each step."""
    from mxnet import autograd
    diffs = []
    for x, y in _batches(dtype):
        with autograd.record():
            loss = ((net(mx.nd.array(x, dtype=dtype)) - mx.nd.array(y, dtype=dtype)) ** 2).sum(axis=1)
        loss.backward()
        trainer.step(BATCH)
        optimizer.zero_grad()
        ((tnet(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).sum(1).mean().backward()
        (torch_step or optimizer.step)()
        if scheduler is not None:
            scheduler.step()
        diffs.append(_max_diff(net, tnet))
    return diffs


def _sched(kind):
    from mxnet import lr_scheduler as S
    return {"factor": lambda: S.FactorScheduler(step=2, factor=0.5, base_lr=0.1),
            "multifactor": lambda: S.MultiFactorScheduler(step=[1, 3], factor=0.3, base_lr=0.1),
            "poly": lambda: S.PolyScheduler(max_update=4, base_lr=0.05, pwr=2, final_lr=0.001,
                                            warmup_steps=2, warmup_begin_lr=0.01),
            "cosine": lambda: S.CosineScheduler(max_update=4, base_lr=0.1, final_lr=0.01,
                                                warmup_steps=2, warmup_begin_lr=0.02,
                                                warmup_mode="constant")}[kind]()


CASES = [  # (optimizer, params, scheduler, dtype, expected torch class)
    ("sgd", dict(learning_rate=0.1, wd=0.01), None, "float64", torch.optim.SGD),
    ("sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01), "factor", "float64", G.GluonSGD),
    ("sgd", dict(momentum=0.9, wd=0.05, clip_gradient=0.3, rescale_grad=2.0), "multifactor",
     "float64", G.GluonSGD),
    ("nag", dict(momentum=0.9, wd=0.01), "cosine", "float64", G.GluonNAG),
    ("nag", dict(learning_rate=0.1, momentum=0.8, wd=0.02, clip_gradient=0.5), None, "float64",
     G.GluonNAG),
    ("nag", dict(learning_rate=0.1, wd=0.02, clip_gradient=0.5), None, "float64", G.GluonNAG),
    ("adam", dict(learning_rate=0.05, wd=0.01), None, "float64", G.GluonAdam),
    ("adam", dict(wd=0.1, clip_gradient=0.2, epsilon=1e-3, beta1=0.8), "poly", "float64",
     G.GluonAdam),
    ("rmsprop", dict(learning_rate=0.01, wd=0.01), None, "float32", G.GluonRMSProp),
    ("rmsprop", dict(learning_rate=0.01, centered=True, clip_weights=1.5, clip_gradient=0.5,
                     gamma2=0.8), "factor", "float32", G.GluonRMSProp),
    ("bertadam", dict(learning_rate=0.05, wd=0.01, clip_gradient=0.4), "cosine", "float32",
     G.GluonBERTAdam),
]


@pytest.mark.parametrize("name,params,sched,dtype,cls", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_updates_match_gluon_step_by_step(name, params, sched, dtype, cls):
    from mxnet import gluon
    if name == "bertadam":
        pytest.importorskip("gluonnlp")
    net, tnet = _models(dtype)
    params = dict(params)
    if sched:
        params["lr_scheduler"] = _sched(sched)
    trainer = gluon.Trainer(net.collect_params(), name, params)
    res = translate_trainer(trainer, tnet, gluon_model=net)
    optimizer, scheduler = res
    assert type(optimizer) is cls
    assert (scheduler is None) == (sched is None)
    assert len(optimizer.param_groups) == 3  # lr_mult/wd_mult (1,1), (1,.5), (2,0)
    diffs = _run(net, tnet, trainer, optimizer, scheduler, dtype)
    mad = max(d[0] for d in diffs)
    assert mad <= TOL[dtype], (name, params, diffs)
    moved = max(_max_diff(net, _models(dtype)[1])[0], 0)
    assert moved > 1e-3  # the weights did move: the comparison is not trivially 0


@pytest.mark.parametrize("case", [c for c in CASES if c[4] is not torch.optim.SGD],
                         ids=lambda c: c[0])
def test_identical_gradients_float32(case):
    """Given Gluon's own gradient (divided by the batch), the float32 update is bitwise Gluon's
    (at most one float32 ulp apart: MXNet's C++ may contract a*b+c into one fma)."""
    from mxnet import autograd, gluon
    name, params, sched, _, _ = case
    if name == "bertadam":
        pytest.importorskip("gluonnlp")
    net, tnet = _models("float32")
    params = dict(params, **({"lr_scheduler": _sched(sched)} if sched else {}))
    trainer = gluon.Trainer(net.collect_params(), name, params)
    opt, sch = translate_trainer(trainer, tnet, gluon_model=net)
    for x, y in _batches("float32"):
        with autograd.record():
            loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum(axis=1)
        loss.backward()
        for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
            tp.grad = torch.from_numpy(gp.grad().asnumpy() / BATCH)
        trainer.step(BATCH)
        opt.step()
        if sch is not None:
            sch.step()
        _, rel = _max_diff(net, tnet)
        assert rel <= np.finfo(np.float32).eps, (name, rel)


def test_plain_torch_adam_does_not_match():
    """The negative control: torch.optim.Adam with Gluon's hyper-parameters drifts (eps
    placement), so the test above would catch a translation that returned it."""
    from mxnet import gluon
    net, tnet = _models(mults=False)
    trainer = gluon.Trainer(net.collect_params(), "adam", dict(learning_rate=0.05, epsilon=1e-3))
    opt = torch.optim.Adam(tnet.parameters(), lr=0.05, eps=1e-3)
    mad = max(d[0] for d in _run(net, tnet, trainer, opt, None, "float64"))
    assert mad > 1e3 * TOL["float64"], mad


def test_torch_sgd_momentum_with_schedule_does_not_match():
    """torch.optim.SGD's buffer does not carry the lr: after the first lr drop it departs."""
    from mxnet import gluon
    net, tnet = _models(mults=False)
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            dict(momentum=0.9, lr_scheduler=_sched("factor")))
    opt = torch.optim.SGD(tnet.parameters(), lr=0.1, momentum=0.9)
    sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** (e // 2))
    mad = max(d[0] for d in _run(net, tnet, trainer, opt, sch, "float64"))
    assert mad > 1e3 * TOL["float64"], mad


def test_sum_loss_with_step_batch_size_is_gluon_recipe():
    """``optimizer.step(batch_size=B)`` after a sum loss == trainer.step(B) after a sum loss."""
    from mxnet import autograd, gluon
    net, tnet = _models()
    trainer = gluon.Trainer(net.collect_params(), "adam", dict(learning_rate=0.05, wd=0.01))
    opt, _ = translate_trainer(trainer, tnet, gluon_model=net)
    for x, y in _batches("float64"):
        with autograd.record():
            loss = ((net(mx.nd.array(x, dtype="float64")) - mx.nd.array(y, dtype="float64")) ** 2)
        loss.backward()
        trainer.step(BATCH)
        opt.zero_grad()
        ((tnet(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).sum().backward()
        opt.step(batch_size=BATCH)
    assert _max_diff(net, tnet)[0] <= TOL["float64"]


def test_scheduler_lr_per_step_equals_gluon():
    """Every step's lr (times lr_mult) equals what the trainer's own scheduler object returns,
    also when the optimizer's learning_rate overwrote the scheduler's base_lr (Gluon then still
    decays poly/cosine from the original one) and past max_update."""
    from mxnet import gluon
    for kind, lr in [(k, v) for k in ("factor", "multifactor", "poly", "cosine")
                     for v in (None, 0.07)]:
        net, tnet = _models()
        params = dict(lr_scheduler=_sched(kind), **({"learning_rate": lr} if lr else {}))
        trainer = gluon.Trainer(net.collect_params(), "sgd", params)
        opt, sch = translate_trainer(trainer, tnet, gluon_model=net)
        ref = trainer._optimizer.lr_scheduler  # called in sequence, as Gluon does
        for n in range(1, 12):
            want = ref(n)
            assert [g["lr"] for g in opt.param_groups] == [want * g["lr_mult"]
                                                           for g in opt.param_groups], (kind, n)
            opt.step()
            sch.step()


def _fp16_step(trainer_params, name):
    """float16 weights, float32 master copies: gradients come from an elementwise loss (MXNet's
    CPU Dense has no float16 kernel)."""
    from mxnet import autograd, gluon
    rng = np.random.default_rng(3)
    w0 = rng.normal(size=(6, 5)).astype(np.float16)
    p = gluon.Parameter("w", shape=w0.shape, dtype="float16")
    p.initialize()
    p.set_data(mx.nd.array(w0, dtype="float16"))
    trainer = gluon.Trainer([p], name, dict(trainer_params, multi_precision=True))
    tw = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    holder = torch.nn.Module()
    holder.w = tw
    opt, _ = translate_trainer(trainer, holder, {p: "w"})
    for _ in range(STEPS):
        x = rng.normal(size=(BATCH,) + w0.shape).astype(np.float16)
        with autograd.record():
            loss = ((p.data() * mx.nd.array(x, dtype="float16")) ** 2).sum(axis=(1, 2))
        loss.backward()
        trainer.step(BATCH)
        opt.zero_grad()
        ((tw * torch.from_numpy(x)) ** 2).sum((1, 2)).mean().backward()
        opt.step()
    master = trainer._updaters[0].states[0]
    master = master[1] if name == "sgd" else master[0]
    return (p.data().asnumpy(), tw.detach().numpy(), master.asnumpy(),
            opt.state[tw]["master"].numpy(), w0)


@pytest.mark.parametrize("name,params", [("sgd", dict(learning_rate=0.01, momentum=0.9, wd=0.01)),
                                         ("adam", dict(learning_rate=0.01, wd=0.01))])
def test_multi_precision_float16_with_float32_master(name, params):
    g16, t16, g32, t32, w0 = _fp16_step(params, name)
    assert t16.dtype == np.float16 and t32.dtype == np.float32
    # the float32 master copies agree to float32 rounding of the float16 gradients
    assert np.abs(g32 - t32).max() <= 1e-3 * np.abs(g32).max()
    assert np.abs(g32 - w0.astype(np.float32)).max() > 1e-3  # it moved
    # the float16 weights are the master copies cast down
    np.testing.assert_array_equal(g16, g32.astype(np.float16))
    np.testing.assert_array_equal(t16, t32.astype(np.float16))


def test_pairs_through_a_port_report_and_a_dict():
    from mxnet import gluon
    net, _ = _models()
    _, tnet = _models(seed=5)  # different weights: port() copies Gluon's
    report = dl.port.port(net, tnet, np.zeros((2, 4)), verify=False)
    assert report.loaded
    trainer = gluon.Trainer(net.collect_params(), "adam", dict(learning_rate=0.05, wd=0.01))
    res = translate_trainer(trainer, tnet, report)
    assert [t for _, t in res.pairs] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    diffs = _run(net, tnet, trainer, res.optimizer, None, "float64")
    assert max(d[0] for d in diffs) <= TOL["float64"]
    names = [p.name for p in net.collect_params().values()]
    res2 = translate_trainer(gluon.Trainer(net.collect_params(), "sgd"), tnet,
                             dict(zip(names, ["0.weight", "0.bias", "2.weight", "2.bias"])))
    assert len(res2.pairs) == 4 and not res2.untrained


def test_saved_mapping_needs_gluon_model_for_structural_keys(tmp_path):
    from mxnet import gluon
    net, tnet = _models()
    report = dl.port.port(net, tnet, np.zeros((2, 4)), verify=False)
    path = tmp_path / "report.json"
    report.save(path)
    trainer = gluon.Trainer(net.collect_params(), "sgd", dict(momentum=0.9))
    with pytest.raises(TrainerTranslationError, match="gluon_model="):
        translate_trainer(trainer, tnet, str(path))
    res = translate_trainer(trainer, tnet, str(path), gluon_model=net)
    assert len(res.pairs) == 4


def test_errors_name_what_is_wrong():
    from mxnet import gluon
    net, tnet = _models()
    with pytest.raises(TrainerTranslationError, match="FTML"):
        translate_trainer(gluon.Trainer(net.collect_params(), "ftml"), tnet, gluon_model=net)
    small = torch.nn.Sequential(torch.nn.Linear(4, 5).double())
    with pytest.raises(TrainerTranslationError, match="4 parameters.*2 trainable"):
        translate_trainer(gluon.Trainer(net.collect_params(), "sgd"), small, gluon_model=net)
    with pytest.raises(TrainerTranslationError, match="no torch twin"):
        translate_trainer(gluon.Trainer(net.collect_params(), "sgd"), small,
                          {net[0].weight.name: "0.weight", net[0].bias.name: "0.bias"})
    wrong = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    with pytest.raises(TrainerTranslationError, match="shape"):
        translate_trainer(gluon.Trainer(net.collect_params(), "sgd"), wrong, gluon_model=net)

    class Step(mx.lr_scheduler.LRScheduler):
        def __call__(self, n):
            return 0.1

    with pytest.raises(TrainerTranslationError, match="Step"):
        translate_trainer(gluon.Trainer(net.collect_params(), "sgd",
                                        dict(lr_scheduler=Step(0.1))), tnet, gluon_model=net)
    trainer = gluon.Trainer(net.collect_params(), "sgd")
    _run(net, tnet, trainer, torch.optim.SGD(tnet.parameters(), lr=0.01), None, "float64")
    with pytest.raises(TrainerTranslationError, match="already stepped"):
        translate_trainer(trainer, tnet)
    with pytest.raises(TrainerTranslationError, match="gluon_model="):
        translate_trainer(gluon.Trainer(net.collect_params(), "sgd"), tnet)
    with pytest.raises(TrainerTranslationError, match="Trainer"):
        translate_trainer(torch.optim.SGD(tnet.parameters(), lr=0.1), tnet)


def test_gluon_parameter_folded_away_by_the_port_is_refused():
    """A Gluon conv bias that the port folds into torch's BatchNorm running_mean has no torch
    parameter to train: translate_trainer says so instead of silently not updating it."""
    from mxnet import gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, in_channels=2, use_bias=True), gluon.nn.BatchNorm(in_channels=4))
    net.initialize()
    tnet = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, bias=False), torch.nn.BatchNorm2d(4))
    report = dl.port.port(net, tnet, np.zeros((1, 2, 5, 5), np.float32))
    assert report.ok
    with pytest.raises(TrainerTranslationError, match=re.escape(f"{net[0].bias.name} has no torch twin")):
        translate_trainer(gluon.Trainer(net.collect_params(), "sgd"), tnet, report)
    net[0].bias.grad_req = "null"  # frozen in Gluon: then nothing is lost
    res = translate_trainer(gluon.Trainer(net.collect_params(), "sgd"), tnet, report)
    assert sorted(t for _, t in res.pairs) == ["0.weight", "1.bias", "1.weight"]


def test_state_dict_round_trip_resumes_identically():
    """Optimizer and scheduler state_dicts (torch's own format) resume the Gluon recipe exactly."""
    from mxnet import gluon
    net, tnet = _models()
    trainer = gluon.Trainer(net.collect_params(), "nag",
                            dict(momentum=0.9, wd=0.01, lr_scheduler=_sched("factor")))
    opt, sch = translate_trainer(trainer, tnet, gluon_model=net)
    batches = _batches("float64")

    def steps(model, o, s, bs):
        for x, y in bs:
            o.zero_grad()
            ((model(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).sum(1).mean().backward()
            o.step()
            s.step()
    steps(tnet, opt, sch, batches[:2])
    _, clone = _models(mults=False)
    clone.load_state_dict(tnet.state_dict())
    opt2, sch2 = translate_trainer(gluon.Trainer(net.collect_params(), "nag", dict(
        momentum=0.9, wd=0.01, lr_scheduler=_sched("factor"))), clone, gluon_model=net)
    buf = io.BytesIO()
    torch.save({"optimizer": opt.state_dict(), "scheduler": sch.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf)
    opt2.load_state_dict(saved["optimizer"])
    sch2.load_state_dict(saved["scheduler"])
    steps(tnet, opt, sch, batches[2:])
    steps(clone, opt2, sch2, batches[2:])
    for a, b in zip(tnet.parameters(), clone.parameters()):
        assert torch.equal(a, b)


def test_conv_batchnorm_model_through_port_report():
    """A conv-BN-ReLU-Dense model paired by dl.port.port, trained in train mode (batch statistics)
    for 5 SGD-momentum steps with wd and clipping: the weights follow Gluon's."""
    from mxnet import autograd, gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, in_channels=2, use_bias=False), gluon.nn.BatchNorm(in_channels=4),
            gluon.nn.Activation("relu"), gluon.nn.Dense(3, in_units=36))
    net.initialize(mx.init.Xavier())
    tnet = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, bias=False), torch.nn.BatchNorm2d(4),
                               torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(36, 3))
    rng = np.random.default_rng(0)
    report = dl.port.port(net, tnet, rng.normal(size=(2, 2, 5, 5)).astype(np.float32))
    assert report.ok, report
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            dict(learning_rate=0.1, momentum=0.9, wd=0.01, clip_gradient=0.5))
    res = translate_trainer(trainer, tnet, report)
    assert len(res.pairs) == 5 and not res.untrained
    tnet.train()
    gkeys = {k: p for k, p in net._collect_params_with_prefix().items() if p.grad_req != "null"}
    for _ in range(STEPS):
        x = rng.normal(size=(BATCH, 2, 5, 5)).astype(np.float32)
        y = rng.normal(size=(BATCH, 3)).astype(np.float32)
        with autograd.record():
            loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum(axis=1)
        loss.backward()
        trainer.step(BATCH)
        res.optimizer.zero_grad()
        ((tnet(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).sum(1).mean().backward()
        res.optimizer.step()
        tparams = dict(tnet.named_parameters())
        for gk, tk in zip(["0.weight", "1.gamma", "1.beta", "3.weight", "3.bias"],
                          ["0.weight", "1.weight", "1.bias", "4.weight", "4.bias"]):
            a, b = gkeys[gk].data().asnumpy(), tparams[tk].detach().numpy()
            assert np.abs(a - b).max() <= 1e-5 * max(1.0, np.abs(a).max()), (gk, np.abs(a - b).max())
