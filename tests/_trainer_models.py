"""Small write-once models and a training helper shared by the Trainer tests."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

import dualdl as dl
from dualdl import nn, ops


class MLP(nn.Module):
    def __init__(self, d_in: int = 6, d_h: int = 8, d_out: int = 3, unused: bool = False, p: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_h)
        self.fc2 = nn.Linear(d_h, d_out)
        self.drop = nn.Dropout(p)
        self.spare = nn.Linear(d_h, d_out) if unused else None

    def forward(self, x):
        return self.fc2(self.drop(ops.tanh(self.fc1(x))))


class LinearMLP(nn.Module):
    """Two Linear layers and nothing between: gradients are exact polynomials of the inputs
    (the optimizer tests compare update formulas, not activations)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 7)
        self.fc2 = nn.Linear(7, 3)

    def forward(self, x):
        return self.fc2(self.fc1(x))


class CNN(nn.Module):
    """NCHW (N, 2, 8, 8) -> (N, 3)."""

    def __init__(self, bn: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4) if bn else None
        self.pool = nn.MaxPool2d(2)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        h = self.conv(x)
        if self.bn is not None:
            h = self.bn(h)
        return self.fc(self.flat(self.pool(ops.relu(h))))


class SeqTNC(nn.Module):
    """LSTM on TNC input (T, N, 4) -> (T, N, 2): the batch is axis 1."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5)
        self.fc = nn.Linear(5, 2)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out)


MODELS = {"mlp": MLP, "cnn": CNN, "lstm": SeqTNC}


def data(kind: str, n: int = 10, seed: int = 0):
    """(x, y, batch_axis) for a model kind, ``n`` samples."""
    rng = np.random.default_rng(seed)
    if kind == "mlp":
        return rng.standard_normal((n, 6)).astype("float32"), rng.standard_normal((n, 3)).astype("float32"), 0
    if kind in ("cnn", "cnn_bn"):
        return (rng.standard_normal((n, 2, 8, 8)).astype("float32"),
                rng.standard_normal((n, 3)).astype("float32"), 0)
    if kind == "lstm":
        return (rng.standard_normal((5, n, 4)).astype("float32"),
                rng.standard_normal((5, n, 2)).astype("float32"), 1)
    raise KeyError(kind)


def make(kind: str, backend: str, **kw):
    if kind == "cnn_bn":
        return CNN(bn=True, backend=backend)
    return MODELS[kind](backend=backend, **kw)


LR = {"mlp": 0.1, "cnn": 0.01, "cnn_bn": 0.01, "lstm": 0.1}
_BASE: Dict[str, Dict[str, np.ndarray]] = {}


def base_weights(kind: str, **kw) -> Dict[str, np.ndarray]:
    """Randomised initial weights (norm scales/shifts and biases too), made once per kind."""
    key = kind + repr(sorted(kw.items()))
    if key not in _BASE:
        m = make(kind, "torch", **kw)
        rng = np.random.default_rng(123)
        sd = {}
        for k, v in dl.state_dict(m).items():
            a = dl.to_numpy(v)
            if k.endswith("running_var"):
                sd[k] = (0.5 + rng.random(a.shape)).astype(a.dtype)
            elif a.dtype.kind == "f":
                sd[k] = (0.4 * rng.standard_normal(a.shape)).astype(a.dtype)
            else:
                sd[k] = a
        _BASE[key] = sd
    return _BASE[key]


def weights(model) -> Dict[str, np.ndarray]:
    return {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}


def maxdiff(a: Dict[str, np.ndarray], b: Dict[str, np.ndarray]) -> float:
    assert set(a) == set(b)
    return max(float(np.abs(a[k].astype("float64") - b[k].astype("float64")).max()) for k in a)


def train(kind: str, backend: str, n_devices: int = 1, strategy: Optional[str] = None, steps: int = 5,
          n: int = 10, lr: Optional[float] = None, loss=None, model_kw=None, **trainer_kw):
    """Train a fresh model (from base_weights) for ``steps`` steps; returns (weights, model, trainer)."""
    model_kw = model_kw or {}
    lr = LR[kind] if lr is None else lr
    x, y, axis = data(kind, n)
    with dl.use(backend):
        model = make(kind, backend, **model_kw)
        dl.load_state_dict(model, base_weights(kind, **model_kw))
        opt = dl.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        tr = dl.Trainer(model, opt, loss or dl.losses.MSELoss(), devices=[dl.cpu(i) for i in range(n_devices)],
                        strategy=strategy, batch_axis=axis, **trainer_kw)
        for s in range(steps):
            xs, ys, _ = data(kind, n, seed=s)
            tr.train_step(xs, ys)
    return weights(model), model, tr
