"""dl.port.translate_recipe(trainer=...): the written file (torch only) rebuilds the optimizer and
lr schedule; over 20 real steps it updates weights bit for bit like dualdl_torch.gluon_optim (which
tests/test_port_trainer.py measures against gluon.Trainer), and like gluon.Trainer itself in
float64; its schedules equal mxnet's and gluon-cv's (LRScheduler / LRSequential) exactly over
thousands of updates."""
import ast
import copy
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl.port.recipe import RecipeError, translate_recipe  # noqa: E402
from dualdl.port.trainer_translate import translate_trainer  # noqa: E402
from _gluon_twins import gluon_torch_mlp, regression_batches  # noqa: E402

STEPS, BATCH = 20, 4
_models = gluon_torch_mlp
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOWED = {"torch", "numpy", "math", "struct", "random", "typing", "__future__"}


def gluoncv_lr():
    """gluon-cv's utils/lr_scheduler.py, loaded alone (``import gluoncv`` refuses torch >= 2)."""
    spec = importlib.util.find_spec("gluoncv")
    if spec is None:
        pytest.skip("gluoncv not installed")
    path = os.path.join(os.path.dirname(spec.origin), "utils", "lr_scheduler.py")
    s = importlib.util.spec_from_file_location("gluoncv_lr_scheduler", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def imports_of(src):
    out = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            out.add((node.module or "").split(".")[0])
    return out


def _batches(dtype, seed=1):
    return regression_batches(dtype, STEPS, BATCH, seed)


def _torch_step(tnet, opt, sched, x, y):
    opt.zero_grad()
    ((tnet(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).sum(1).mean().backward()
    opt.step()
    if sched is not None:
        sched.step()


def _sched(kind, gcv=None):
    from mxnet import lr_scheduler as S
    if kind == "factor":
        return S.FactorScheduler(step=3, factor=0.5, base_lr=0.1, warmup_steps=2,
                                 warmup_begin_lr=0.01)
    if kind == "multifactor":
        return S.MultiFactorScheduler(step=[4, 9], factor=0.3, base_lr=0.1)
    if kind == "poly":
        return S.PolyScheduler(max_update=15, base_lr=0.05, pwr=2, final_lr=0.001,
                               warmup_steps=3, warmup_begin_lr=0.01)
    if kind == "cosine":
        return S.CosineScheduler(max_update=15, base_lr=0.1, final_lr=0.01, warmup_steps=2,
                                 warmup_begin_lr=0.02, warmup_mode="constant")
    if kind == "gcv-step":  # train_cifar10.py: warmup then step decay at epochs
        return gcv.LRSequential([
            gcv.LRScheduler("linear", base_lr=0, target_lr=0.1, nepochs=1, iters_per_epoch=4),
            gcv.LRScheduler("step", base_lr=0.1, nepochs=4, iters_per_epoch=4, step_epoch=[2, 3],
                            step_factor=0.1)])
    if kind == "gcv-cosine":  # train_imagenet.py with --lr-mode cosine
        return gcv.LRSequential([
            gcv.LRScheduler("linear", base_lr=0, target_lr=0.2, nepochs=1, iters_per_epoch=5),
            gcv.LRScheduler("cosine", base_lr=0.2, target_lr=0.001, nepochs=3,
                            iters_per_epoch=5)])
    if kind == "gcv-poly":  # a bare LRScheduler (segmentation scripts)
        return gcv.LRScheduler("poly", base_lr=0.05, niters=12, power=0.9)
    raise KeyError(kind)


CASES = [  # (optimizer, params, scheduler, dtype)
    ("sgd", dict(learning_rate=0.1, wd=0.01), None, "float64"),
    ("sgd", dict(learning_rate=0.1, momentum=0.9, wd=1e-4), "factor", "float64"),
    ("sgd", dict(momentum=0.9, wd=0.05, clip_gradient=0.3, rescale_grad=2.0), "multifactor",
     "float64"),
    ("nag", dict(learning_rate=0.1, momentum=0.9, wd=1e-4), "gcv-step", "float64"),
    ("nag", dict(learning_rate=0.1, momentum=0.9, wd=0.01), "cosine", "float64"),
    ("sgd", dict(learning_rate=0.2, momentum=0.9, wd=1e-4), "gcv-cosine", "float64"),
    ("adam", dict(wd=0.1, clip_gradient=0.2, epsilon=1e-3, beta1=0.8), "poly", "float64"),
    ("adam", dict(learning_rate=0.05, wd=0.01), "gcv-poly", "float64"),
    ("rmsprop", dict(learning_rate=0.01, centered=True, clip_weights=1.5, clip_gradient=0.5,
                     gamma2=0.8), "factor", "float32"),
    ("rmsprop", dict(learning_rate=0.01, wd=0.01), None, "float32"),
    ("bertadam", dict(learning_rate=0.05, wd=0.01, clip_gradient=0.4), "gcv-poly", "float32"),
    ("adagrad", dict(learning_rate=0.1, wd=0.01, clip_gradient=0.5), "gcv-cosine", "float32"),
    ("adagrad", dict(learning_rate=0.05, eps=1e-3, rescale_grad=2.0), None, "float32"),
]
IDS = [f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)]


def _setup(name, params, sched, dtype):
    from mxnet import gluon
    if name == "bertadam":
        pytest.importorskip("gluonnlp")  # registers the optimizer
    gcv = gluoncv_lr() if sched and sched.startswith("gcv") else None
    net, tnet = _models(dtype)
    params = dict(params)
    if sched:
        params["lr_scheduler"] = _sched(sched, gcv)
    trainer = gluon.Trainer(net.collect_params(), name, params)
    return net, tnet, trainer


@pytest.mark.parametrize("name,params,sched,dtype", CASES, ids=IDS)
def test_written_optimizer_equals_gluon_optim_bitwise(name, params, sched, dtype, tmp_path):
    """20 steps: the generated classes (copied source) against dualdl_torch.gluon_optim: equal."""
    net, tnet, trainer = _setup(name, params, sched, dtype)
    tt = translate_trainer(trainer, tnet, gluon_model=net)
    recipe = translate_recipe(trainer=tt, out=tmp_path / "recipe.py")
    assert imports_of(recipe.source) <= ALLOWED
    mod = recipe.load()
    twin = copy.deepcopy(tnet)
    opt = mod.make_optimizer(twin)
    sch = mod.make_scheduler(opt)
    assert type(opt).__name__ == type(tt.optimizer).__name__
    for x, y in _batches(dtype):
        _torch_step(tnet, tt.optimizer, tt.scheduler, x, y)
        _torch_step(twin, opt, sch, x, y)
        for a, b in zip(tnet.parameters(), twin.parameters()):
            assert torch.equal(a, b)
    assert [g["lr"] for g in opt.param_groups] == [g["lr"] for g in tt.optimizer.param_groups]


@pytest.mark.parametrize("name,params,sched,dtype",
                         [c for c in CASES if c[3] == "float64"],
                         ids=[i for i, c in zip(IDS, CASES) if c[3] == "float64"])
def test_written_optimizer_matches_gluon_trainer_float64(name, params, sched, dtype):
    """20 steps against gluon.Trainer itself (sum loss + trainer.step(B)) in float64: measured
    <= 7e-16 max abs weight difference (docs/porting-trainer.md); 1e-12 leaves rounding only."""
    from mxnet import autograd
    net, tnet, trainer = _setup(name, params, sched, dtype)
    mod = translate_recipe(trainer, tnet, gluon_model=net).load()
    opt = mod.make_optimizer(tnet)
    sch = mod.make_scheduler(opt)
    worst = 0.0
    for x, y in _batches(dtype):
        with autograd.record():
            loss = ((net(mx.nd.array(x, dtype=dtype)) - mx.nd.array(y, dtype=dtype)) ** 2).sum(1)
        loss.backward()
        trainer.step(BATCH)
        _torch_step(tnet, opt, sch, x, y)
        for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
            worst = max(worst, float(np.abs(gp.data().asnumpy() - tp.detach().numpy()).max()))
    assert worst < 1e-12, worst


@pytest.mark.parametrize("name,params,sched,dtype", [c for c in CASES if c[0] == "adagrad"],
                         ids=[i for i, c in zip(IDS, CASES) if c[0] == "adagrad"])
def test_adagrad_matches_gluon_trainer_float32(name, params, sched, dtype):
    """Gluon's AdaGrad keeps its state in float32 (float64 weights are refused), so float32:
    20 steps within 3e-5 (measured 2.4e-7 and 8.9e-8; the mean-loss vs sum-loss gradients differ
    by float32 rounding). With Gluon's own gradients each update agrees to 1 ulp (next test)."""
    from mxnet import autograd
    net, tnet, trainer = _setup(name, params, sched, dtype)
    mod = translate_recipe(trainer, tnet, gluon_model=net).load()
    opt = mod.make_optimizer(tnet)
    sch = mod.make_scheduler(opt)
    worst = 0.0
    for x, y in _batches(dtype):
        with autograd.record():
            loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum(1)
        loss.backward()
        trainer.step(BATCH)
        _torch_step(tnet, opt, sch, x, y)
        for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
            worst = max(worst, float(np.abs(gp.data().asnumpy() - tp.detach().numpy()).max()))
    assert worst < 3e-5, worst


def test_adagrad_update_with_gluons_gradients():
    """Same gradients on both sides (Gluon's sum-loss gradient, step(batch_size=B) in torch),
    the weights re-synchronised after each step: each of 20 AdaGrad updates with wd, clipping and
    a schedule agrees to 1 float32 ulp (measured 3.0e-8 at most, on 3 of 20 elements of a step)."""
    from mxnet import autograd
    net, tnet, trainer = _setup("adagrad", dict(learning_rate=0.1, wd=0.01, clip_gradient=0.5),
                                "gcv-cosine", "float32")
    mod = translate_recipe(trainer, tnet, gluon_model=net).load()
    opt = mod.make_optimizer(tnet)
    sch = mod.make_scheduler(opt)
    for x, y in _batches("float32"):
        with autograd.record():
            loss = ((net(mx.nd.array(x)) - mx.nd.array(y)) ** 2).sum(1)
        loss.backward()
        for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
            tp.grad = torch.from_numpy(gp.grad().asnumpy().copy())
        trainer.step(BATCH)
        opt.step(batch_size=BATCH)
        sch.step()
        for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
            g = gp.data().asnumpy()
            np.testing.assert_allclose(tp.detach().numpy(), g, rtol=0, atol=float(
                np.spacing(np.abs(g).max())))
            with torch.no_grad():
                tp.copy_(torch.from_numpy(g))


def _gluon_lrs(sched, n):
    return [sched(i) for i in range(1, n + 1)]


@pytest.mark.filterwarnings("ignore:Detected call of")
@pytest.mark.parametrize("kind", ["factor", "multifactor", "poly", "cosine", "gcv-step",
                                  "gcv-cosine", "gcv-poly"])
def test_schedule_equals_gluon_over_5000_updates(kind):
    """The generated scheduler's lr at update n == the Gluon object's (n = 1..5000), exactly."""
    from mxnet import gluon
    gcv = gluoncv_lr() if kind.startswith("gcv") else None
    scale = 400  # stretch the schedules over thousands of updates
    if kind == "gcv-step":
        sched = gcv.LRSequential([
            gcv.LRScheduler("linear", base_lr=0, target_lr=0.1, nepochs=5, iters_per_epoch=391),
            gcv.LRScheduler("step", base_lr=0.1, nepochs=8, iters_per_epoch=391,
                            step_epoch=[3, 6], step_factor=0.1)])
    elif kind == "gcv-cosine":
        sched = gcv.LRSequential([
            gcv.LRScheduler("linear", base_lr=0.01, target_lr=0.4, nepochs=2, iters_per_epoch=500),
            gcv.LRScheduler("cosine", base_lr=0.4, target_lr=1e-5, nepochs=7,
                            iters_per_epoch=500)])
    elif kind == "gcv-poly":
        sched = gcv.LRScheduler("poly", base_lr=0.01, nepochs=9, iters_per_epoch=500, power=0.9)
    else:
        from mxnet import lr_scheduler as S
        sched = {"factor": S.FactorScheduler(step=scale, factor=0.7, stop_factor_lr=2e-3,
                                             base_lr=0.1, warmup_steps=300, warmup_begin_lr=0.01),
                 "multifactor": S.MultiFactorScheduler(step=[1000, 2500, 4000], factor=0.1,
                                                       base_lr=0.1, warmup_steps=500),
                 "poly": S.PolyScheduler(max_update=4500, base_lr=0.05, pwr=2, final_lr=1e-4,
                                         warmup_steps=250, warmup_begin_lr=0.001),
                 "cosine": S.CosineScheduler(max_update=4000, base_lr=0.1, final_lr=0.001,
                                             warmup_steps=200, warmup_mode="constant",
                                             warmup_begin_lr=0.005)}[kind]
    net, tnet = _models()
    reference = copy.deepcopy(sched)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"momentum": 0.9, "lr_scheduler": sched})
    mod = translate_recipe(trainer, tnet, gluon_model=net).load()
    opt = mod.make_optimizer(tnet)
    sch = mod.make_scheduler(opt)
    n = 5000
    want = _gluon_lrs(reference if kind.startswith("gcv") else trainer._optimizer.lr_scheduler, n)
    got = []
    for _ in range(n):
        got.append(opt.param_groups[0]["lr"])  # the lr the next optimizer.step() uses
        sch.step()
    assert got == want
    assert sorted(g["lr_mult"] for g in opt.param_groups) == [1.0, 1.0, 2.0]
    for g in opt.param_groups:  # lr_mult groups follow the schedule
        assert g["lr"] == sch.gluon_lr(n + 1) * g["lr_mult"]


def test_file_runs_without_dualdl_and_mxnet(tmp_path):
    """Import the written file in a fresh interpreter where dualdl and mxnet cannot be imported."""
    net, tnet, trainer = _setup("nag", dict(learning_rate=0.1, momentum=0.9, wd=1e-4),
                                "gcv-step", "float64")
    translate_recipe(trainer, tnet, gluon_model=net).write(tmp_path / "cifar_recipe.py")
    code = ("import sys; sys.modules['dualdl'] = None; sys.modules['mxnet'] = None; "
            "sys.modules['dualdl_torch'] = None; sys.path.insert(0, sys.argv[1]); "
            "import torch, cifar_recipe as r; "
            "L = torch.nn.Linear; "
            "m = torch.nn.Sequential(L(4, 5), torch.nn.Tanh(), L(5, 3)); "
            "o = r.make_optimizer(m); s = r.make_scheduler(o); "
            "m(torch.ones(2, 4)).sum().backward(); o.step(); s.step(); "
            "print(type(o).__name__, round(o.param_groups[0]['lr'], 6))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["GluonNAG", "0.066667"]  # update 2 of the warmup: 0.1 * 2/3


def test_translate_report_pairs_parameters(tmp_path):
    """translate_trainer / translate_recipe accept a dl.port.translate report (object or JSON)."""
    import dualdl as dl
    from mxnet import gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, activation="relu"), gluon.nn.Dense(3))
    net.initialize(mx.init.Xavier())
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    net(mx.nd.array(x))
    report = dl.port.translate(net, x, str(tmp_path), "mlp", verify=False)
    spec = importlib.util.spec_from_file_location("mlp", report.source_path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    tnet = getattr(gen, report.class_name)()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    for mapping in (report, report.report_path):
        tt = translate_trainer(trainer, tnet, mapping, gluon_model=net)
        assert sorted(t for _, t in tt.pairs) == sorted(n for n, _ in tnet.named_parameters())
    with pytest.raises(Exception, match="gluon_model"):
        translate_trainer(trainer, tnet, report)


def test_refusals_name_what_to_do():
    from mxnet import gluon
    net, tnet = _models()
    trainer = gluon.Trainer(net.collect_params(), "ftml", {"learning_rate": 0.1})
    with pytest.raises(ValueError, match="FTML"):
        translate_recipe(trainer, tnet, gluon_model=net)
    with pytest.raises(RecipeError, match="at least one"):
        translate_recipe()
    trainer = gluon.Trainer(net.collect_params(), "sgd")
    with pytest.raises(RecipeError, match="torch_model"):
        translate_recipe(trainer)


def test_negative_control_torch_nag_is_far_from_gluon():
    """The same run with torch.optim.SGD(nesterov=True) and the same lr per step is far from
    Gluon (the lr folded into NAG's momentum, and the updated-weight wd term): the 1e-12 bound
    above separates a right optimizer from a wrong one."""
    from mxnet import autograd
    net, tnet, trainer = _setup("nag", dict(learning_rate=0.1, momentum=0.9, wd=1e-4),
                                "gcv-step", "float64")
    mod = translate_recipe(trainer, tnet, gluon_model=net).load()
    lrs = mod.make_scheduler(mod.make_optimizer(copy.deepcopy(tnet)))
    named = dict(tnet.named_parameters())
    groups = [dict(params=[named[n] for n in g["params"]], weight_decay=g["weight_decay"],
                   lr_mult=g["lr_mult"]) for g in mod.PARAM_GROUPS]  # Gluon's lr_mult/wd_mult
    opt = torch.optim.SGD(groups, lr=lrs.gluon_lr(1), momentum=0.9, nesterov=True)
    worst = 0.0
    for n, (x, y) in enumerate(_batches("float64"), start=1):
        with autograd.record():
            out = net(mx.nd.array(x, dtype="float64"))
            loss = ((out - mx.nd.array(y, dtype="float64")) ** 2).sum(1)
        loss.backward()
        trainer.step(BATCH)
        for g in opt.param_groups:
            g["lr"] = lrs.gluon_lr(n) * g["lr_mult"]
        _torch_step(tnet, opt, None, x, y)
        for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
            worst = max(worst, float(np.abs(gp.data().asnumpy() - tp.detach().numpy()).max()))
    # measured 3.6 (the same loop with dualdl_torch's GluonNAG instead: 5.8e-15)
    assert worst > 1e-3, worst


def test_set_learning_rate_like_trainer():
    """gluon-cv scripts without an lr_scheduler call trainer.set_learning_rate(trainer.learning_rate
    * lr_decay) at decay epochs: the written set_learning_rate(optimizer, lr) does the same
    (lr_mult kept), float64 over 20 steps with decays after steps 6 and 13."""
    from mxnet import autograd
    net, tnet, trainer = _setup("nag", dict(learning_rate=0.1, momentum=0.9, wd=1e-4), None,
                                "float64")
    mod = translate_recipe(trainer, tnet, gluon_model=net).load()
    opt = mod.make_optimizer(tnet)
    worst = 0.0
    for n, (x, y) in enumerate(_batches("float64"), start=1):
        if n in (7, 14):
            trainer.set_learning_rate(trainer.learning_rate * 0.1)
            mod.set_learning_rate(opt, trainer.learning_rate)
        with autograd.record():
            out = net(mx.nd.array(x, dtype="float64"))
            loss = ((out - mx.nd.array(y, dtype="float64")) ** 2).sum(1)
        loss.backward()
        trainer.step(BATCH)
        _torch_step(tnet, opt, None, x, y)
        for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
            worst = max(worst, float(np.abs(gp.data().asnumpy() - tp.detach().numpy()).max()))
    assert worst < 1e-12, worst
    final = 0.1 * 0.1 * 0.1
    assert sorted(g["lr"] for g in opt.param_groups) == [final, final, final * 2]
    net, tnet, trainer = _setup("sgd", dict(momentum=0.9), "factor", "float64")
    mod = translate_recipe(trainer, tnet, gluon_model=net).load()
    with pytest.raises(UserWarning, match="already been defined"):
        mod.set_learning_rate(mod.make_optimizer(tnet), 0.01)
