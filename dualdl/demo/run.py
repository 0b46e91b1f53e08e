"""Train the demo CRNN on each backend from identical initial weights and compare."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

import dualdl as dl

from .digits import DigitStrings, accuracy, greedy_decode
from .model import CRNN
from .recipe import Recipe, make_trainer


@dataclass
class RunResult:
    backend: str
    devices: List[str]
    strategy: str
    seed: int = 0
    epoch_losses: List[float] = field(default_factory=list)
    step_losses: List[float] = field(default_factory=list)
    digit_accuracy: float = 0.0
    string_accuracy: float = 0.0
    seconds_per_step: float = 0.0
    weights: Dict[str, np.ndarray] = field(default_factory=dict)
    examples: List[tuple] = field(default_factory=list)
    epoch_accuracy: List[tuple] = field(default_factory=list)    # held-out (per digit, whole string) per epoch
    snapshots: Dict[int, Dict[str, np.ndarray]] = field(default_factory=dict)  # step -> weights after it


def snapshot_steps(total: int) -> List[int]:
    """Steps after which the weights are kept (about 1.5x apart, and the last): the report's
    parameter distance between the backends on a log axis."""
    out, s = set(), 1.0
    while s <= total:
        out.add(int(s))
        s *= 1.5
    return sorted(out | {total}) if total else []


def initial_weights(seed: int, hidden: int) -> Dict[str, np.ndarray]:
    """One set of initial weights (drawn on torch, PyTorch's init) that both backends start from."""
    dl.seed(seed)
    model = CRNN(hidden=hidden, backend="torch")
    return {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}


def default_devices(backend: str, n: Optional[int]) -> List[dl.Device]:
    gpus = dl.get_backend(backend).gpu_count()
    if gpus:
        return [dl.gpu(i) for i in range(n or gpus)]
    return [dl.cpu(i) for i in range(n or 2)]


def build_model(backend: str, init: Dict[str, np.ndarray], hidden: int, device: dl.Device):
    """The CRNN on ``backend`` holding ``init``, on ``device`` (the Trainer replicates it)."""
    with dl.use(backend):
        model = CRNN(hidden=hidden)
        dl.load_state_dict(model, init)
        if device.kind == "gpu":
            model.to(dl.get_backend(backend).native_device(device))
        return model


def predict(trainer: "dl.Trainer", images: np.ndarray, batch_size: int) -> List[str]:
    out = []
    for i in range(0, len(images), batch_size):
        _, scores = trainer.eval_step(images[i:i + batch_size])
        out += greedy_decode(dl.to_numpy(scores))
    return out


def steps_per_epoch(n_train: int, batch_size: int) -> int:
    return n_train // batch_size          # drop_last=True


def train_backend(backend: str, init: Dict[str, np.ndarray], train: DigitStrings, test: DigitStrings,
                  recipe: Recipe, seed: int, devices: Sequence[dl.Device], progress: bool = True) -> RunResult:
    from tqdm.auto import tqdm
    with dl.use(backend):
        dl.seed(seed)
        model = build_model(backend, init, recipe.hidden, devices[0])
        trainer = make_trainer(backend, model, recipe, steps_per_epoch(len(train), recipe.batch_size), devices)
        loader = dl.data.DataLoader(dl.data.ArrayDataset(train.images, train.labels),
                                    batch_size=recipe.batch_size, shuffle=True, drop_last=True, seed=seed)
        res = RunResult(backend, [str(d) for d in devices], trainer.strategy, seed)
        steps, busy = 0, 0.0
        keep = set(snapshot_steps(recipe.epochs * steps_per_epoch(len(train), recipe.batch_size)))
        for epoch in tqdm(range(recipe.epochs), desc=f"{backend:6s} epochs", disable=not progress, leave=False):
            total, n = 0.0, 0
            bar = tqdm(loader, desc=f"{backend:6s} epoch {epoch + 1}", disable=not progress, leave=False)
            for x, y in bar:
                t0 = time.perf_counter()
                loss = trainer.train_step(x, y)
                busy += time.perf_counter() - t0
                steps += 1
                res.step_losses.append(loss)
                if steps in keep:
                    res.snapshots[steps] = {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}
                total, n = total + loss, n + 1
                bar.set_postfix(loss=f"{loss:.3f}")
            res.epoch_losses.append(total / max(1, n))
            predicted = predict(trainer, test.images, 4 * recipe.batch_size)
            res.epoch_accuracy.append(accuracy(predicted, test.strings()))
        res.seconds_per_step = busy / max(1, steps)
        truth = test.strings()
        if not res.epoch_accuracy:                   # --epochs 0: the initial weights
            predicted = predict(trainer, test.images, 4 * recipe.batch_size)
            res.epoch_accuracy.append(accuracy(predicted, truth))
        res.digit_accuracy, res.string_accuracy = res.epoch_accuracy[-1]
        res.examples = list(zip(truth[:8], predicted[:8]))
        res.weights = {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}
        return res


@dataclass
class Comparison:
    """How far two backends' runs are apart after training (weights) and along the loss curves."""
    max_abs: float              # over every weight (parameters and running statistics)
    max_rel: float              # max over tensors of max|a-b| / max|a|
    worst: str                  # the tensor with the largest relative difference
    first_steps_loss: float     # max |loss_a - loss_b| over the first ``steps`` steps
    steps: int


def compare(a: RunResult, b: RunResult, steps: int = 20) -> Comparison:
    abs_d, rel_d = {}, {}
    for k in a.weights:
        d = float(np.abs(a.weights[k].astype(np.float64) - b.weights[k]).max()) if a.weights[k].size else 0.0
        abs_d[k] = d
        rel_d[k] = d / max(float(np.abs(a.weights[k]).max()), 1e-12)
    worst = max(rel_d, key=rel_d.get)
    n = min(steps, len(a.step_losses), len(b.step_losses))
    first = max((abs(x - y) for x, y in zip(a.step_losses[:n], b.step_losses[:n])), default=0.0)
    return Comparison(max(abs_d.values()), rel_d[worst], worst, first, n)
