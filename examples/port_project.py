"""Port a Gluon project to PyTorch as one journey, with a proof over its run (docs/porting-project.md).

Two real public Gluon training scripts, on small synthetic data of their real shapes:

* apache/mxnet ``example/gluon/mnist/mnist.py``: MLP 784-128-64-10, ``mx.init.Xavier(magnitude=2.24)``,
  ``sgd`` lr 0.1 momentum 0.9, ``SoftmaxCrossEntropyLoss``, ``mx.metric.Accuracy``, a shuffled
  ``DataLoader`` (``last_batch='discard'``) over images flattened and divided by 255.
* gluon-cv ``scripts/classification/cifar/train_cifar10.py``: ``cifar_resnet20_v1``,
  ``mx.init.Xavier()``, ``nag`` lr 0.1 momentum 0.9 wd 1e-4, ``trainer.set_learning_rate(lr * 0.1)``
  at the decay epochs, ToTensor + Normalize(CIFAR mean/std).

For each: (1) the Gluon script's objects, (2) ``dl.port.translate`` -> ``<name>.py`` (torch
module), ``<name>.safetensors``, ``<name>.report.json``, (3) ``dl.port.recipe.translate_recipe``
-> ``<name>_recipe.py`` (optimizer, schedule, init, metric, sampler, transforms: torch only),
(4) a pure-PyTorch training script ``train_<name>_torch.py`` importing only torch, numpy,
safetensors and the two generated files - run in a fresh interpreter, which reports that neither
mxnet nor dualdl was imported, (5) the proof: ``dl.testing.check_native_training`` replaying the
script's batches through both, with the translate report as the mapping.

    python examples/port_project.py --out /tmp/port_project --steps 12
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CIFAR_MEAN, CIFAR_STD = [0.4914, 0.4822, 0.4465], [0.2023, 0.1994, 0.2010]

# --------------------------------------------------------------------------- the torch scripts
# What a user writes once the model and recipe are translated: torch, numpy, safetensors and
# the two generated files. {name}, {cls} and the data paths are filled in by write_torch_script.
TORCH_SCRIPT = '''"""Pure-PyTorch port of {origin} (written by examples/port_project.py)."""
import json, sys
import numpy as np
import torch
from safetensors.torch import load_file
sys.path.insert(0, {out!r})
from {name} import {cls}
import {name}_recipe as R

images, labels = np.load({images!r}), np.load({labels!r})
model = {cls}()
model.load_state_dict(load_file({weights!r}))       # Gluon's initial weights (or R.init_parameters(model))
model.train()
opt = R.make_optimizer(model)
sched = R.make_scheduler(opt)
metric = R.make_metric()
np.random.seed({seed})                               # Gluon's DataLoader shuffles with numpy's RNG
sampler = R.make_batch_sampler(len(images))
losses, step = [], 0
for epoch in range({epochs}):
{epoch_rule}
    metric.reset()
    for idx in sampler:
        x = torch.stack([{transform} for i in idx])
        y = torch.from_numpy(labels[idx].astype(np.int64))
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        metric.update([y], [out.detach()])
        losses.append(float(loss))
        step += 1
torch.save(model.state_dict(), {final!r})
print(json.dumps({{"losses": losses, "metric": list(metric.get()),
                  "mxnet_imported": "mxnet" in sys.modules, "dualdl_imported": any(
                      m == "dualdl" or m.startswith(("dualdl.", "dualdl_")) for m in sys.modules)}}))
'''


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _torch_model(report) -> Any:
    from safetensors.torch import load_file
    mod = _load(report.source_path, report.name)
    model = getattr(mod, report.class_name)()
    model.load_state_dict(load_file(report.weights_path))
    return model


def _cifar_resnet20_v1():
    """gluoncv's model file alone (``import gluoncv`` refuses torch >= 2; see tests/_port_pairs.py)."""
    spec = importlib.util.find_spec("gluoncv")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("gluoncv is not installed: pip install --no-deps gluoncv==0.10.5.post0")
    path = os.path.join(spec.submodule_search_locations[0], "model_zoo", "cifarresnet.py")
    return _load(path, "gluoncv_cifarresnet").cifar_resnet20_v1(classes=10)


# --------------------------------------------------------------------------- the two scripts
def synthetic_images(n: int, shape: Tuple[int, ...], seed: int, ink: float, noise: float = 60.0,
                     wrong: float = 0.2) -> Tuple[np.ndarray, np.ndarray]:
    """``n`` uint8 HWC images of 10 classes and their int32 labels: each class a fixed random
    pattern (a fraction ``ink`` of the pixels lit, as MNIST's strokes are about 19% of its pixels),
    each image its class pattern at a random intensity plus Gaussian ``noise``, a fraction
    ``wrong`` of the labels wrong.
    Learnable like the real data, so training is stable (uniform noise images with random labels
    made lr 0.1 diverge), and never fits perfectly."""
    rng = np.random.default_rng(seed)
    protos = (rng.random((10,) + shape) < ink) * rng.uniform(100, 255, (10,) + shape)
    labels = rng.integers(0, 10, n).astype(np.int32)
    imgs = protos[labels] * rng.uniform(0.3, 1.0, (n,) + (1,) * len(shape)) + \
        rng.normal(0, noise, (n,) + shape)
    noisy = rng.random(n) < wrong             # wrong labels: the loss stays away from 0
    labels[noisy] = rng.integers(0, 10, int(noisy.sum()))
    return np.clip(imgs, 0, 255).astype(np.uint8), labels


def mnist_script(n: int, batch: int, seed: int):
    """mnist.py's objects on ``n`` synthetic 28x28 images: (net, trainer, loss, metric, loader,
    raw images, labels, transform)."""
    import mxnet as mx
    from mxnet import gluon
    from mxnet.gluon import nn
    images, labels = synthetic_images(n, (28, 28, 1), seed, ink=0.19)

    def transformer(data, label):
        data = data.reshape((-1,)).astype(np.float32) / 255
        return data, label
    mx.random.seed(seed)
    net = nn.Sequential()
    net.add(nn.Dense(128, activation='relu'))
    net.add(nn.Dense(64, activation='relu'))
    net.add(nn.Dense(10))
    net.initialize(mx.init.Xavier(magnitude=2.24))
    net(mx.nd.zeros((1, 784)))
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9})
    loader = gluon.data.DataLoader(
        gluon.data.ArrayDataset(images, labels).transform(transformer),
        batch_size=batch, shuffle=True, last_batch='discard')
    return dict(net=net, trainer=trainer, loss=gluon.loss.SoftmaxCrossEntropyLoss(),
                metric=mx.metric.Accuracy(), loader=loader, images=images, labels=labels,
                init=mx.init.Xavier(magnitude=2.24), transforms=None, decay_epochs=[],
                sample=np.zeros((2, 784), np.float32),
                torch_transform="torch.from_numpy(images[i].reshape(-1).astype(np.float32) / 255)")


def cifar_script(n: int, batch: int, seed: int, decay_epochs=(1,)):
    """train_cifar10.py's objects (cifar_resnet20_v1, NAG, wd, lr step) on ``n`` synthetic
    32x32 images (the test transform: ToTensor + Normalize)."""
    import mxnet as mx
    from mxnet import gluon
    from mxnet.gluon.data.vision import transforms
    # at lr 0.1 this ResNet's training amplifies rounding: by step 19-20 each float32 run is
    # 0.8 in loss from its own float64 twin (docs/porting-project.md, "Measured")
    images, labels = synthetic_images(n, (32, 32, 3), seed, ink=0.5, noise=30.0, wrong=0.0)
    transform = transforms.Compose([transforms.ToTensor(),
                                    transforms.Normalize(CIFAR_MEAN, CIFAR_STD)])
    mx.random.seed(seed)
    net = _cifar_resnet20_v1()
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 3, 32, 32)))
    trainer = gluon.Trainer(net.collect_params(), 'nag',
                            {'learning_rate': 0.1, 'wd': 1e-4, 'momentum': 0.9})
    loader = gluon.data.DataLoader(
        gluon.data.ArrayDataset(mx.nd.array(images, dtype=np.uint8), labels).transform_first(transform),
        batch_size=batch, shuffle=True, last_batch='discard')
    return dict(net=net, trainer=trainer, loss=gluon.loss.SoftmaxCrossEntropyLoss(),
                metric=mx.metric.Accuracy(), loader=loader, images=images, labels=labels,
                init=mx.init.Xavier(), transforms={"test": transform},
                decay_epochs=list(decay_epochs),
                sample=np.zeros((2, 3, 32, 32), np.float32),
                torch_transform="R.transform_test(torch.from_numpy(images[i]))")


# --------------------------------------------------------------------------- the journey
def translate_project(s: Dict[str, Any], out: str, name: str) -> Tuple[Any, Any, Any]:
    """Steps 2 and 3: the model and the recipe; returns (translate report, torch model, recipe)."""
    import dualdl as dl
    import dualdl.port.recipe  # noqa: F401
    report = dl.port.translate(s["net"], s["sample"], out, name)
    if not report.ok:
        raise RuntimeError(report.summary())
    tnet = _torch_model(report)
    recipe = dl.port.recipe.translate_recipe(
        s["trainer"], tnet, report, gluon_model=s["net"], initializer=s["init"],
        metrics=s["metric"], transforms=s["transforms"], loader=s["loader"],
        out=os.path.join(out, f"{name}_recipe.py"))
    return report, tnet, recipe


def write_torch_script(s: Dict[str, Any], report, out: str, name: str, origin: str, epochs: int,
                       seed: int) -> str:
    """Step 4: the pure-PyTorch training script (and the raw data it reads)."""
    images, labels = os.path.join(out, f"{name}_images.npy"), os.path.join(out, f"{name}_labels.npy")
    np.save(images, s["images"])
    np.save(labels, s["labels"])
    rule = "    pass"
    if s["decay_epochs"]:
        rule = (f"    if epoch in {s['decay_epochs']!r}:          # trainer.set_learning_rate(lr * 0.1)\n"
                f"        for g in opt.param_groups:\n            g['lr'] *= 0.1")
    path = os.path.join(out, f"train_{name}_torch.py")
    with open(path, "w") as f:
        f.write(TORCH_SCRIPT.format(origin=origin, out=out, name=name, cls=report.class_name,
                                    images=images, labels=labels, weights=report.weights_path,
                                    seed=seed, epochs=epochs, epoch_rule=rule,
                                    transform=s["torch_transform"],
                                    final=os.path.join(out, f"{name}_torch_final.pt")))
    return path


def run_gluon_script(s: Dict[str, Any], epochs: int, seed: int) -> List[float]:
    """The Gluon script's own loop (what the torch script must reproduce)."""
    from mxnet import autograd
    net, trainer, loss_fn = s["net"], s["trainer"], s["loss"]
    np.random.seed(seed)
    losses = []
    for epoch in range(epochs):
        if epoch in s["decay_epochs"]:
            trainer.set_learning_rate(trainer.learning_rate * 0.1)
        for data, label in s["loader"]:
            with autograd.record():
                L = loss_fn(net(data), label)
            L.backward()
            trainer.step(data.shape[0])
            losses.append(float(L.mean().asscalar()))
    return losses


def prove(s: Dict[str, Any], report, tnet, recipe, epochs: int, seed: int):
    """Step 5: both models replay the script's batches; every step compared."""
    import torch
    import dualdl as dl
    r = recipe.load()
    opt = r.make_optimizer(tnet)
    sched = r.make_scheduler(opt)
    decay, per_epoch = s["decay_epochs"], len(s["loader"])

    def on_step(step, trainer, optimizer):        # the script's set_learning_rate rule, both sides
        if step % per_epoch == 0 and step // per_epoch in decay:
            trainer.set_learning_rate(trainer.learning_rate * 0.1)
            for g in optimizer.param_groups:
                g["lr"] *= 0.1
    np.random.seed(seed)
    return dl.testing.check_native_training(
        s["net"], tnet, report, gluon_loss=s["loss"],
        torch_loss=lambda o, y: torch.nn.functional.cross_entropy(o, y),
        gluon_trainer=s["trainer"], torch_optimizer=opt, batches=s["loader"], epochs=epochs,
        scheduler=sched, scheduler_step="iteration", on_step=on_step)


def journey(which: str, out: str, n: int, batch: int, epochs: int, seed: int = 0) -> Dict[str, Any]:
    """The whole journey for ``which`` ("mnist" or "cifar"); returns the measured numbers."""
    import torch
    make, origin = {"mnist": (mnist_script, "apache/mxnet example/gluon/mnist/mnist.py"),
                    "cifar": (cifar_script, "gluon-cv scripts/classification/cifar/"
                                            "train_cifar10.py")}[which]
    name = {"mnist": "mnist_mlp", "cifar": "cifar_resnet20_v1"}[which]
    os.makedirs(out, exist_ok=True)
    s = make(n, batch, seed)
    report, tnet, recipe = translate_project(s, out, name)
    script = write_torch_script(s, report, out, name, origin, epochs, seed)
    proof = prove(s, report, tnet, recipe, epochs, seed)          # trains s["net"] from here on
    s2 = make(n, batch, seed)                                     # a fresh Gluon run of the script
    g_losses = run_gluon_script(s2, epochs, seed)
    res = subprocess.run([sys.executable, script], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{res.stderr[-3000:]}")
    ran = json.loads(res.stdout.strip().splitlines()[-1])
    final = torch.load(os.path.join(out, f"{name}_torch_final.pt"))
    g_final = s2["net"]._collect_params_with_prefix()
    from dualdl.port.mapping import as_mapping
    m = as_mapping(report)
    w = max(float(np.abs(e.compute({k: p.data().asnumpy() for k, p in g_final.items()})
                         - final[e.target].numpy()).max()) for e in m.entries if e.sources)
    loss_rows = [d for d in proof.diffs if d.phase == "forward" and d.name == "loss"]
    return {"name": name, "gluon_losses": [round(x, 4) for x in g_losses[::max(1, len(g_losses) // 8)]], "translate_ok": report.ok, "recipe": recipe.parts,
            "proof": proof, "proof_passed": proof.passed, "steps": proof.steps_run,
            "float64_loss": proof.max_abs("float64", "loss"),
            "float64_weights": proof.max_abs("float64", "param"),
            "float64_grads": proof.max_abs("float64", "grad"),
            "float32_loss": proof.max_abs("forward", "loss"),
            # what the proof allows the float32 losses to differ by: each side's measured rounding
            "float32_loss_allowance": max(d.max_abs / d.usage for d in loss_rows if d.usage > 0),
            "gluon_float32_vs_float64_loss": max(d.ref_mxnet or 0.0 for d in loss_rows),
            "torch_float32_vs_float64_loss": max(d.ref_torch or 0.0 for d in loss_rows),
            "torch_script": script, "torch_script_imports_mxnet": ran["mxnet_imported"],
            "torch_script_imports_dualdl": ran["dualdl_imported"],
            "script_loss_diff": max(abs(a - b) for a, b in zip(g_losses, ran["losses"])),
            "script_weight_diff": w, "script_steps": len(ran["losses"])}


def cifar_float_replay(out: str, steps: int = 110, batch: int = 32, seed: int = 0):
    """The long CIFAR proof of docs/porting-project.md ("Measured"): ``steps`` batches of float
    images (10 class patterns N(0,1) plus 0.5 N(0,1) noise), ``translate_trainer``'s NAG, the
    script's lr x0.1 by ``on_step`` on both sides at steps 50 and 80."""
    import torch
    import dualdl as dl
    s = cifar_script(2 * batch, batch, seed)
    report, tnet, _ = translate_project(s, out, "cifar_resnet20_v1")
    opt, sched = dl.port.translate_trainer(s["trainer"], tnet, report, gluon_model=s["net"])
    rng = np.random.default_rng(1)
    proto = rng.standard_normal((10, 3, 32, 32)).astype(np.float32)

    def one():
        y = rng.integers(0, 10, batch)
        return (proto[y] + 0.5 * rng.standard_normal((batch, 3, 32, 32))).astype(np.float32), y
    batches = [one() for _ in range(steps)]

    def on_step(step, tr, to):
        if step in (50, 80):
            tr.set_learning_rate(tr.learning_rate * 0.1)
            for g in to.param_groups:
                g["lr"] *= 0.1
    return dl.testing.check_native_training(
        s["net"], tnet, report, gluon_loss=s["loss"],
        torch_loss=lambda o, y: torch.nn.functional.cross_entropy(o, y),
        gluon_trainer=s["trainer"], torch_optimizer=opt, batches=batches, on_step=on_step,
        scheduler=sched)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="port_project_out")
    p.add_argument("--which", choices=("mnist", "cifar", "both", "cifar-float"), default="both",
                   help="cifar-float: the 110-step float-data CIFAR proof only")
    p.add_argument("--samples", type=int, default=0, help="images per dataset (default: 12 batches)")
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args(argv)
    if args.which == "cifar-float":
        r = cifar_float_replay(os.path.join(args.out, "cifar_float"))
        print(r.summary())
        print("float64 twins max abs: loss %.3g, gradients %.3g, weights %.3g, buffers %.3g" % (
            r.max_abs("float64", "loss"), r.max_abs("float64", "grad"),
            r.max_abs("float64", "param"), r.max_abs("float64", "buffer")))
        return 0 if r.passed else 1
    for which, batch in (("mnist", 100), ("cifar", 32)):
        if args.which not in (which, "both"):
            continue
        n = args.samples or 6 * batch
        r = journey(which, os.path.join(args.out, which), n, batch, args.epochs)
        print(r["proof"].summary())
        print(json.dumps({k: v for k, v in r.items() if k != "proof"}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
