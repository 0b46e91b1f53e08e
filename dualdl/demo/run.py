"""Train the demo CRNN on each backend from identical initial weights and compare."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

import dualdl as dl

from .digits import DigitStrings, accuracy, greedy_decode
from .model import CRNN, PackedCTCLoss

NATIVE_STRATEGY = {"torch": "data_parallel", "mxnet": "split_and_load"}


@dataclass
class RunResult:
    backend: str
    devices: List[str]
    strategy: str
    epoch_losses: List[float] = field(default_factory=list)
    step_losses: List[float] = field(default_factory=list)
    digit_accuracy: float = 0.0
    string_accuracy: float = 0.0
    seconds_per_step: float = 0.0
    weights: Dict[str, np.ndarray] = field(default_factory=dict)
    examples: List[tuple] = field(default_factory=list)


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


def predict(trainer: "dl.Trainer", images: np.ndarray, batch_size: int) -> List[str]:
    out = []
    for i in range(0, len(images), batch_size):
        _, scores = trainer.eval_step(images[i:i + batch_size])
        out += greedy_decode(dl.to_numpy(scores))
    return out


def train_backend(backend: str, init: Dict[str, np.ndarray], train: DigitStrings, test: DigitStrings,
                  epochs: int, batch_size: int, lr: float, hidden: int, seed: int,
                  devices: Sequence[dl.Device], progress: bool = True) -> RunResult:
    from tqdm.auto import tqdm
    with dl.use(backend):
        dl.seed(seed)
        model = CRNN(hidden=hidden)
        dl.load_state_dict(model, init)
        opt = dl.optim.Adam(model.parameters(), lr=lr)
        strategy = NATIVE_STRATEGY[backend]
        trainer = dl.Trainer(model, opt, PackedCTCLoss(), devices=list(devices), strategy=strategy,
                             clip_grad_norm=5.0)
        loader = dl.data.DataLoader(dl.data.ArrayDataset(train.images, train.labels),
                                    batch_size=batch_size, shuffle=True, drop_last=True, seed=seed)
        res = RunResult(backend, [str(d) for d in devices], strategy)
        steps, busy = 0, 0.0
        for epoch in tqdm(range(epochs), desc=f"{backend:6s} epochs", disable=not progress, leave=False):
            total, n = 0.0, 0
            bar = tqdm(loader, desc=f"{backend:6s} epoch {epoch + 1}", disable=not progress, leave=False)
            for x, y in bar:
                t0 = time.perf_counter()
                loss = trainer.train_step(x, y)
                busy += time.perf_counter() - t0
                steps += 1
                res.step_losses.append(loss)
                total, n = total + loss, n + 1
                bar.set_postfix(loss=f"{loss:.3f}")
            res.epoch_losses.append(total / max(1, n))
        res.seconds_per_step = busy / max(1, steps)
        predicted = predict(trainer, test.images, 4 * batch_size)
        truth = test.strings()
        res.digit_accuracy, res.string_accuracy = accuracy(predicted, truth)
        res.examples = list(zip(truth[:8], predicted[:8]))
        res.weights = {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}
        return res


def one_step_difference(weights: Dict[str, np.ndarray], images: np.ndarray, labels: np.ndarray,
                        hidden: int, lr: float, devices_per_backend: Dict[str, Sequence[dl.Device]]) -> float:
    """Lockstep check: load the *same* trained weights on both backends, take one data-parallel SGD
    step on the same batch, and return the max abs difference of the resulting weights. This
    separates per-step agreement (fp32 rounding) from the chaotic growth over a whole run."""
    out = {}
    for backend, devs in devices_per_backend.items():
        with dl.use(backend):
            model = CRNN(hidden=hidden)
            dl.load_state_dict(model, weights)
            trainer = dl.Trainer(model, dl.optim.SGD(model.parameters(), lr=lr), PackedCTCLoss(),
                                 devices=list(devs), strategy=NATIVE_STRATEGY[backend])
            trainer.train_step(images, labels)
            out[backend] = {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}
    a, b = out.values()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


@dataclass
class Comparison:
    """How far two backends' runs are apart: weights after training and the loss curves."""
    max_abs: float              # over every weight (parameters and running statistics)
    max_rel: float              # max over tensors of max|a-b| / max|a|
    worst: str                  # the tensor with the largest relative difference
    first_steps_loss: float     # max |loss_a - loss_b| over the first ``steps`` steps
    steps: int
    first_step_loss: float      # |loss_a - loss_b| at the first step (same weights, same batch)
    lockstep: Optional[float] = None   # see one_step_difference


def compare(a: RunResult, b: RunResult, steps: int = 20) -> Comparison:
    abs_d, rel_d = {}, {}
    for k in a.weights:
        d = float(np.abs(a.weights[k].astype(np.float64) - b.weights[k]).max()) if a.weights[k].size else 0.0
        abs_d[k] = d
        rel_d[k] = d / max(float(np.abs(a.weights[k]).max()), 1e-12)
    worst = max(rel_d, key=rel_d.get)
    n = min(steps, len(a.step_losses), len(b.step_losses))
    first = max((abs(x - y) for x, y in zip(a.step_losses[:n], b.step_losses[:n])), default=0.0)
    step1 = abs(a.step_losses[0] - b.step_losses[0]) if n else 0.0
    return Comparison(max(abs_d.values()), rel_d[worst], worst, first, n, step1)
