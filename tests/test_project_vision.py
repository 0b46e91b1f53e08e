"""Issue 42, vision: a gluoncv CIFAR-10 training script (tests/scripts/gluon_cifar_resnet.py:
a model-zoo ResNet, random crop + flip, ToTensor + Normalize, CIFAR10 files, nag with a
MultiFactorScheduler, split_and_load, a metric, checkpoints) converted by ``convert-project``
with no hand edit: the zoo call translated at conversion time into ``dualdl_models/`` (torch
only, Gluon's ``save_parameters`` names), gluon2torch's transforms and CIFAR reader equal to
Gluon's bitwise, the converted script run, and proven update by update against the Gluon run."""
import importlib
import os
import random
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("libcst")
mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl.port import import_gluoncv  # noqa: E402
from dualdl.port.project import ProjectError, convert_project  # noqa: E402
from dualdl.port.project.api import check_torch_only  # noqa: E402
from dualdl.port.project.data_cifar import FLIP_KEY, record_flips, write_cifar10  # noqa: E402
from dualdl.port.project.zoo import find_calls, parse_spec, write_models  # noqa: E402

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
SCRIPT = "gluon_cifar_resnet.py"
MEAN, STD = [0.4914, 0.4822, 0.4465], [0.2023, 0.1994, 0.2010]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    import shutil
    src, out = tmp_path_factory.mktemp("gluon_cifar"), tmp_path_factory.mktemp("torch_cifar")
    shutil.copy(os.path.join(SCRIPTS, SCRIPT), src / SCRIPT)
    return convert_project(str(src), str(out)), out


@pytest.fixture()
def g2t(converted, monkeypatch):
    _, out = converted
    monkeypatch.syspath_prepend(str(out))
    monkeypatch.delenv("GLUON2TORCH_RANDOM", raising=False)
    sys.modules.pop("gluon2torch", None)
    yield importlib.import_module("gluon2torch")
    sys.modules.pop("gluon2torch", None)


def test_the_script_converts_whole_with_its_zoo_model(converted):
    report, out = converted
    src = (out / SCRIPT).read_text()
    for line in ("net = g2t.zoo('gluoncv.model_zoo.get_model')('cifar_resnet20_v1', classes=10)",
                 "    g2t.RandomCrop(32, pad=4),", "    g2t.RandomFlipLeftRight(),",
                 "g2t.CIFAR10(root='./data/cifar10', train=True).transform_first(transform_train),",
                 "schedule = g2t.MultiFactorScheduler(step=[steps, steps + 2], factor=0.5)",
                 "data = g2t.split_and_load(batch[0], ctx_list=ctx, batch_axis=0)",
                 "g2t.makedirs(opt.save_dir)"):
        assert line in src, line
    f = report.files[0]
    assert f["todo_lines"] == 0 and f["converted"] == f["api_lines"] >= 30
    [m] = report.models
    assert (m["module"], m["class"], m["kwargs"]) == ("cifar_resnet20_v1", "CIFARResNetV1", {"classes": 10})
    model_src = (out / "dualdl_models" / "cifar_resnet20_v1.py").read_text()
    check_torch_only(src, forbidden_only=True)
    check_torch_only(model_src)                     # the translator's module: torch only


def test_the_zoo_model_is_gluons_under_gluons_names(g2t):
    """The converted call builds the translated ResNet-20: its state_dict keys are Gluon's
    save_parameters keys, it follows record()'s training mode, and on Gluon's weights its
    outputs and BatchNorm statistics equal Gluon's (train and eval)."""
    gcv = import_gluoncv()
    from mxnet import autograd
    mx.random.seed(0)
    g = gcv.model_zoo.get_model("cifar_resnet20_v1", classes=10)
    g.initialize(mx.init.Xavier())
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
    g(mx.nd.array(x))
    t = g2t.zoo("gluoncv.model_zoo.get_model")("cifar_resnet20_v1", classes=10, ctx=g2t.cpu())
    gp = {k: v.data().asnumpy() for k, v in g._collect_params_with_prefix().items()}
    assert list(t.state_dict()) == list(gp) or sorted(t.state_dict()) == sorted(gp)
    t.load_state_dict({k: torch.from_numpy(v) for k, v in gp.items()})
    with autograd.record():
        yg = g(mx.nd.array(x))
    yg.backward()
    with g2t.record():
        yt = t(torch.from_numpy(x))
    assert t.training and np.abs(yt.detach().numpy() - yg.asnumpy()).max() < 1e-4
    rv = "features.2.0.body.1.running_var"
    assert np.abs(t.state_dict()[rv].numpy() - g._collect_params_with_prefix()[rv].data().asnumpy()).max() < 1e-5
    ye = t(torch.from_numpy(x))
    assert not t.training and np.abs(ye.detach().numpy() - g(mx.nd.array(x)).asnumpy()).max() < 1e-4
    with pytest.raises(ValueError, match="--zoo 'cifar_resnet56_v1:classes=100'"):
        g2t.zoo("gluoncv.model_zoo.get_model")("cifar_resnet56_v1", classes=100)


def test_transforms_and_cifar_files_are_gluons_bitwise(g2t, tmp_path, monkeypatch):
    """ToTensor + Normalize equal MXNet's bitwise; gluoncv's RandomCrop(pad) crops alike from the
    same Python seed; a hybridized Compose's flips recorded from the Gluon run replay in torch;
    the CIFAR-10 files read alike."""
    gcv = import_gluoncv()
    from mxnet.gluon.data.vision import transforms as T
    from mxnet.gluon.data.vision import datasets
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (6, 32, 32, 3)).astype(np.uint8)
    rec: dict = {}
    record_flips(rec, {})
    gc = T.Compose([gcv.data.transforms.RandomCrop(32, pad=4), T.RandomFlipLeftRight(),
                    T.ToTensor(), T.Normalize(MEAN, STD)])
    random.seed(3)
    gout = [gc(mx.nd.array(im, dtype=np.uint8)).asnumpy() for im in imgs]
    flips = list(rec[FLIP_KEY])
    assert len(flips) == 6 and 0 < sum(flips) < 6
    np.savez(tmp_path / "rec.npz", **{FLIP_KEY: np.array(flips)})
    monkeypatch.setenv("GLUON2TORCH_RANDOM", str(tmp_path / "rec.npz"))
    tc = g2t.Compose([g2t.RandomCrop(32, pad=4), g2t.RandomFlipLeftRight(), g2t.ToTensor(),
                      g2t.Normalize(MEAN, STD)])
    g2t._REPLAY.__init__()
    random.seed(3)
    tout = [tc(im).numpy() for im in imgs]
    assert all(np.array_equal(a, b) for a, b in zip(gout, tout))
    with pytest.raises(RuntimeError, match="no more flip_left_right decisions"):
        tc(imgs[0])
    write_cifar10(str(tmp_path / "c10"), train=12, test=5)
    monkeypatch.setattr(datasets, "download", lambda url, path=None, **kw: os.path.join(path, url.split("/")[-1]))
    for train in (True, False):
        gd = datasets.CIFAR10(str(tmp_path / "c10"), train=train)
        td = g2t.CIFAR10(str(tmp_path / "c10"), train=train)
        assert len(gd) == len(td) == (12 if train else 5)
        for i in (0, len(td) - 1):
            assert np.array_equal(gd[i][0].asnumpy(), td[i][0]) and gd[i][1] == td[i][1]
            assert gd[i][1].dtype == td[i][1].dtype == np.int32


def test_zoo_calls_known_at_run_time_and_refusals(tmp_path):
    text = ("from gluoncv.model_zoo import get_model\nimport mxnet as mx\n"
            "net = get_model(args.model, classes=10)\n"
            "v = mx.gluon.model_zoo.vision.resnet18_v1(pretrained=True, ctx=mx.cpu())\n")
    calls = find_calls(text)
    assert [(c.factory, c.args, c.kwargs) for c in calls] == [
        ("gluoncv.model_zoo.get_model", None, None),
        ("mxnet.gluon.model_zoo.vision.resnet18_v1", (), {"pretrained": True})]
    assert parse_spec("cifar_resnet20_v1:classes=10,drop_rate=0.1") == (
        ("cifar_resnet20_v1",), {"classes": 10, "drop_rate": 0.1})
    with pytest.raises(ValueError, match="is not key=value"):
        parse_spec("cifar_resnet20_v1:classes")
    with pytest.raises(ProjectError, match="pretrained weights are not translated"):
        write_models({"a.py": text}, str(tmp_path))
    late = write_models({"a.py": text.splitlines(True)[0] + text.splitlines(True)[2]}, str(tmp_path))
    assert late[0]["todo"].startswith("arguments known at run time only: name the configuration with --zoo")
    with pytest.raises(ProjectError, match="cannot be built at conversion time"):
        write_models({"a.py": text.splitlines(True)[0] + text.splitlines(True)[2]}, str(tmp_path),
                     ["no_such_model"])


def test_the_vision_factories_are_mxnets():
    """table_vision's list is MXNet's own get_model table (the functions its names call)."""
    import inspect
    import re
    from mxnet.gluon.model_zoo import vision
    from dualdl.port.project.table_vision import VISION_FACTORIES
    table = inspect.getsource(vision.get_model).split("models = {")[1].split("}")[0]
    assert set(re.findall(r":\s*(\w+)", table)) == set(VISION_FACTORIES)


def test_the_converted_script_runs_without_mxnet(converted, tmp_path):
    """Two updates of the converted script in a fresh interpreter, on a synthetic CIFAR-10: it
    runs, saves nothing from mxnet and imports neither mxnet nor gluoncv nor dualdl."""
    _, out = converted
    write_cifar10(str(tmp_path / "data" / "cifar10"), train=16, test=8)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLUON2TORCH_", "DUALDL_"))}
    env.update(GLUON2TORCH_RECORD=str(tmp_path / "rec.npz"), GLUON2TORCH_STEPS="2",
               PYTHONPATH=str(out), OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(out / SCRIPT)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rec = np.load(tmp_path / "rec.npz")
    mods = set(rec["modules"].tolist())
    assert "torch" in mods and not mods & {"mxnet", "gluoncv", "dualdl"}
    assert rec["1/batch/0"].shape == (8, 3, 32, 32) and float(rec["0/lr"]) == 0.1
    assert "1/param/features.1.gamma" in rec.files and "1/grad/output.weight" in rec.files


def test_the_zoo_model_notes_kinks_in_the_proofs_float64_run(g2t, monkeypatch):
    """In the proof's float64 run the translated ReLUs are gluon2torch's (same values), which note
    inputs within float32 rounding of 0: a float32 failure across one is named, then settled by
    the float64 runs of both scripts."""
    monkeypatch.setenv("GLUON2TORCH_DTYPE", "float64")
    monkeypatch.setenv("GLUON2TORCH_RECORD", "unused.npz")
    t = g2t.zoo("gluoncv.model_zoo.get_model")("cifar_resnet20_v1", classes=10).double()
    x = torch.zeros((2, 3, 32, 32), dtype=torch.float64)
    x[:, :, 0, 0] = 1e-9                            # BatchNorm outputs at 0: ReLU inputs at the kink
    with g2t.record():
        y = t(x)
    g2t._KINKS.clear()
    y.sum().backward()
    assert g2t._KINKS and "ReLU input at 0" in g2t._KINKS[0]
    g2t._KINKS.clear()


@pytest.mark.slow
def test_the_converted_cifar_run_is_the_gluon_run(converted, tmp_path):
    """Both scripts unmodified in their own processes, 2 epochs of 4 batches of 8 (evaluation and
    checkpoints between, the lr halved after update 4): batches bitwise equal (crops from the same
    Python seed, flips replayed from the Gluon run's record); float32 rounding crosses a ReLU kink
    (update 0 on this seed: grads 3e-4 off where torch's own distance is 1e-7), so the verdict is
    the float64 runs of both scripts: every update within 1e-9 (measured 1e-15 -> 1e-10). A
    control: the converted script with momentum 0.891 fails: its float64 run differs from Gluon's
    at update 0 on a weight (6.5e-4, allowance 3.8e-11), NAG's first step using the momentum."""
    from dualdl.port.project.proof import prove_scripts
    _, out = converted
    write_cifar10(str(tmp_path / "data" / "cifar10"), train=32, test=16)
    p = prove_scripts(os.path.join(SCRIPTS, SCRIPT), str(out / SCRIPT), str(tmp_path), steps=8, seed=2)
    assert p.passed, p.summary()
    assert p.max_diff["batch"] == 0 and p.max_diff["lr"] == 0
    assert "both" in p.evidence and "float64" in p.evidence, p.evidence
    assert max(v for k, v in p.max_diff64.items() if k != "batch") < 1e-9, p.max_diff64
    bad = (out / SCRIPT).read_text().replace("'momentum': 0.9,", "'momentum': 0.891,")
    (out / "bad.py").write_text(bad)
    p = prove_scripts(os.path.join(SCRIPTS, SCRIPT), str(out / "bad.py"), str(tmp_path), steps=3, seed=2)
    assert not p.passed and "float64 runs of both scripts differ" in p.first_failure, p.summary()
    import re
    row = re.search(r"float64 runs of both scripts differ[^:]*: update (\d+): (\S+)", p.first_failure)
    assert row and row.group(2).startswith("param/"), p.first_failure


def test_gluoncv_lr_schedulers_step_as_gluons(g2t):
    """gluoncv's LRScheduler / LRSequential in a Trainer: the same learning rate at every update
    (a linear warmup then cosine; step with the Trainer's learning_rate overriding base_lr; poly)
    and the same weights after nag's updates."""
    from mxnet import autograd, gluon
    cv = import_gluoncv().utils
    cases = [
        (lambda m: m.LRSequential([m.LRScheduler("linear", base_lr=0, target_lr=0.1, nepochs=1,
                                                  iters_per_epoch=3),
                                   m.LRScheduler("cosine", base_lr=0.1, target_lr=0.001,
                                                 nepochs=2, iters_per_epoch=3)]), None),
        (lambda m: m.LRScheduler("step", base_lr=0.1, niters=9, step_iter=[3, 6], step_factor=0.5), 0.2),
        (lambda m: m.LRScheduler("poly", base_lr=0.05, target_lr=0.01, nepochs=3, iters_per_epoch=3,
                                 power=2), None)]
    for make, lr in cases:
        seen = {}
        for side in ("gluon", "torch"):
            opts = {"momentum": 0.9, "lr_scheduler": make(cv if side == "gluon" else g2t)}
            if lr is not None:
                opts["learning_rate"] = lr
            if side == "gluon":
                p = gluon.Parameter("w", shape=(3,), init=mx.init.One())
                p.initialize()
                tr = gluon.Trainer([p], "nag", opts)
            else:
                w = torch.nn.Parameter(torch.ones(3))
                tr = g2t.Trainer([w], "nag", opts)
            lrs = []
            for i in range(11):
                if side == "gluon":
                    with autograd.record():
                        (p.data() * (i + 1.0)).sum().backward()
                else:
                    (w * (i + 1.0)).sum().backward()
                lrs.append(tr.learning_rate)
                tr.step(1)
            seen[side] = (lrs, p.data().asnumpy() if side == "gluon" else w.detach().numpy())
        assert seen["gluon"][0] == seen["torch"][0] and len(set(seen["torch"][0])) >= 3, seen
        assert np.abs(seen["gluon"][1] - seen["torch"][1]).max() < 1e-5
