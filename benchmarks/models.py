"""The benchmarked models, each three times: written once with dualdl, and hand-written natively
with torch.nn and with Gluon, with the same layers, shapes and math.

Sizes come from :func:`sizes` (``quick`` shrinks them for the smoke test). Frameworks are imported
inside the builders only.
"""
from __future__ import annotations

import math
from typing import Any, Dict

import dualdl as dl
from dualdl import nn, ops


def sizes(quick: bool) -> Dict[str, Dict[str, Any]]:
    """Model and batch sizes per model kind."""
    if quick:
        return {
            "mlp": dict(batch=8, d_in=16, d_h=16, d_out=4),
            "lenet": dict(batch=4),
            "crnn": dict(batch=2, width=32, hidden=8, channels=(4, 8, 8, 8), label_len=3),
            "transformer": dict(batch=2, seq=6, d_model=16, nhead=2, ff=32, layers=1),
        }
    return {
        "mlp": dict(batch=32, d_in=64, d_h=128, d_out=10),
        "lenet": dict(batch=32),
        "crnn": dict(batch=16, width=64, hidden=64, channels=(16, 32, 64, 64), label_len=4),   # the demo's
        "transformer": dict(batch=16, seq=32, d_model=64, nhead=4, ff=128, layers=2),
    }


# ---- written once with dualdl --------------------------------------------------------------------
class MLP(nn.Module):
    """Three Linear layers with ReLU: small enough that per-step Python overhead dominates."""

    def __init__(self, d_in: int, d_h: int, d_out: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_h)
        self.fc2 = nn.Linear(d_h, d_h)
        self.fc3 = nn.Linear(d_h, d_out)

    def forward(self, x):
        return self.fc3(ops.relu(self.fc2(ops.relu(self.fc1(x)))))


class LeNet(nn.Module):
    """LeNet-5 on (N, 1, 28, 28): conv5(pad 2)-pool-conv5-pool-120-84-10."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.pool2 = nn.MaxPool2d(2)
        self.flat = nn.Flatten()
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool1(ops.relu(self.conv1(x)))
        x = self.pool2(ops.relu(self.conv2(x)))
        x = self.flat(x)
        return self.fc3(ops.relu(self.fc2(ops.relu(self.fc1(x)))))


def dl_transformer(s: Dict[str, Any]):
    """dl.nn.TransformerEncoder on the active backend (TNC, post-LN, relu, dropout 0)."""
    layer = nn.TransformerEncoderLayer(s["d_model"], s["nhead"], s["ff"], dropout=0.0)
    return nn.TransformerEncoder(layer, s["layers"])


def dl_crnn(s: Dict[str, Any]):
    from dualdl.demo.model import CRNN
    return CRNN(hidden=s["hidden"], channels=s["channels"])


def dl_model(kind: str, s: Dict[str, Any]):
    if kind == "mlp":
        return MLP(s["d_in"], s["d_h"], s["d_out"])
    if kind == "lenet":
        return LeNet()
    if kind == "crnn":
        return dl_crnn(s)
    if kind == "transformer":
        return dl_transformer(s)
    raise ValueError(f"unknown model kind {kind!r}")


def dl_loss(kind: str):
    if kind in ("mlp", "lenet"):
        return dl.losses.CrossEntropyLoss()
    if kind == "crnn":
        from dualdl.demo.model import PackedCTCLoss
        return PackedCTCLoss()
    return dl.losses.MSELoss()


# ---- hand-written PyTorch -------------------------------------------------------------------------
def torch_model(kind: str, s: Dict[str, Any]):
    import torch
    from torch import nn as tnn
    F = torch.nn.functional

    if kind == "mlp":
        class TMLP(tnn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = tnn.Linear(s["d_in"], s["d_h"])
                self.fc2 = tnn.Linear(s["d_h"], s["d_h"])
                self.fc3 = tnn.Linear(s["d_h"], s["d_out"])

            def forward(self, x):
                return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))
        return TMLP()
    if kind == "lenet":
        return tnn.Sequential(tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2),
                              tnn.Conv2d(6, 16, 5), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                              tnn.Linear(400, 120), tnn.ReLU(), tnn.Linear(120, 84), tnn.ReLU(),
                              tnn.Linear(84, 10))
    if kind == "crnn":
        c1, c2, c3, c4 = s["channels"]

        def block(cin, cout, pool):
            return [tnn.Conv2d(cin, cout, 3, padding=1, bias=False), tnn.BatchNorm2d(cout), tnn.ReLU(),
                    tnn.MaxPool2d(pool, pool)]

        class TCRNN(tnn.Module):
            def __init__(self):
                super().__init__()
                self.cnn = tnn.Sequential(*block(1, c1, (2, 2)), *block(c1, c2, (2, 2)),
                                          *block(c2, c3, (2, 1)), *block(c3, c4, (2, 1)))
                self.rnn = tnn.LSTM(c4, s["hidden"], num_layers=2, bidirectional=True, batch_first=True)
                self.fc = tnn.Linear(2 * s["hidden"], 11)

            def forward(self, x):
                f = self.cnn(x).squeeze(2).permute(0, 2, 1)
                seq, _ = self.rnn(f)
                return self.fc(seq)
        return TCRNN()
    if kind == "transformer":
        layer = tnn.TransformerEncoderLayer(s["d_model"], s["nhead"], s["ff"], dropout=0.0)
        return tnn.TransformerEncoder(layer, s["layers"], enable_nested_tensor=False)
    raise ValueError(kind)


def torch_loss(kind: str):
    import torch
    F = torch.nn.functional
    if kind in ("mlp", "lenet"):
        return F.cross_entropy
    if kind == "crnn":
        def ctc(scores, packed):
            lp = F.log_softmax(scores, dim=2).permute(1, 0, 2)
            lengths = packed[:, 0]
            inp = torch.full_like(lengths, lp.shape[0])
            return F.ctc_loss(lp, packed[:, 1:], inp, lengths, blank=0, reduction="mean", zero_infinity=True)
        return ctc
    return F.mse_loss


# ---- hand-written Gluon ---------------------------------------------------------------------------
def gluon_model(kind: str, s: Dict[str, Any]):
    import mxnet as mx
    from mxnet.gluon import nn as gnn

    if kind == "mlp":
        net = gnn.HybridSequential()
        net.add(gnn.Dense(s["d_h"], activation="relu", in_units=s["d_in"]),
                gnn.Dense(s["d_h"], activation="relu", in_units=s["d_h"]),
                gnn.Dense(s["d_out"], in_units=s["d_h"]))
    elif kind == "lenet":
        net = gnn.HybridSequential()
        net.add(gnn.Conv2D(6, 5, padding=2, activation="relu", in_channels=1), gnn.MaxPool2D(2),
                gnn.Conv2D(16, 5, activation="relu", in_channels=6), gnn.MaxPool2D(2),
                gnn.Dense(120, activation="relu", in_units=400),
                gnn.Dense(84, activation="relu", in_units=120), gnn.Dense(10, in_units=84))
    elif kind == "crnn":
        net = _GluonCRNN(s)
    elif kind == "transformer":
        net = _gluon_encoder(s)
    else:
        raise ValueError(kind)
    net.initialize(mx.init.Xavier())
    return net


def gluon_loss(kind: str):
    """Native Gluon loss returning per-sample values (the Gluon idiom: backward sums them,
    ``trainer.step(batch_size)`` divides)."""
    from mxnet import gluon
    if kind in ("mlp", "lenet"):
        return gluon.loss.SoftmaxCrossEntropyLoss()
    if kind == "crnn":
        def ctc(scores, packed):
            from mxnet import nd
            lengths = packed[:, 0]
            per = nd.CTCLoss(nd.transpose(scores, axes=(1, 0, 2)), packed[:, 1:], None, lengths,
                             use_label_lengths=True, blank_label="first")
            return per / lengths       # torch's 'mean': per-sample loss / target length
        return ctc
    return lambda out, y: ((out - y) ** 2).mean()      # MSE, batch mean (trainer.step(1))


def _GluonCRNN(s):
    from mxnet.gluon import HybridBlock, nn as gnn, rnn as grnn

    class GluonCRNN(HybridBlock):
        def __init__(self):
            super().__init__()
            c = (1,) + tuple(s["channels"])
            pools = [(2, 2), (2, 2), (2, 1), (2, 1)]
            with self.name_scope():
                self.cnn = gnn.HybridSequential()
                for i in range(4):
                    self.cnn.add(gnn.Conv2D(c[i + 1], 3, padding=1, in_channels=c[i], use_bias=False),
                                 gnn.BatchNorm(in_channels=c[i + 1]), gnn.Activation("relu"),
                                 gnn.MaxPool2D(pools[i], pools[i]))
                self.rnn = grnn.LSTM(s["hidden"], num_layers=2, bidirectional=True, layout="NTC",
                                     input_size=c[4])
                self.fc = gnn.Dense(11, flatten=False, in_units=2 * s["hidden"])

        def hybrid_forward(self, F, x):
            f = F.transpose(F.squeeze(self.cnn(x), axis=2), axes=(0, 2, 1))
            return self.fc(self.rnn(f))
    return GluonCRNN()


def _gluon_encoder(s):
    """A hand-written Gluon Transformer encoder (TNC, post-LN, relu FFN), the way a Gluon user writes it."""
    from mxnet.gluon import HybridBlock, nn as gnn
    E, H, FF = s["d_model"], s["nhead"], s["ff"]
    D = E // H

    class Layer(HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.qkv = gnn.Dense(3 * E, flatten=False, in_units=E)
                self.proj = gnn.Dense(E, flatten=False, in_units=E)
                self.ln1 = gnn.LayerNorm(in_channels=E)
                self.ffn1 = gnn.Dense(FF, flatten=False, activation="relu", in_units=E)
                self.ffn2 = gnn.Dense(E, flatten=False, in_units=FF)
                self.ln2 = gnn.LayerNorm(in_channels=E)

        def hybrid_forward(self, F, x):                                  # x: (T, N, E)
            qkv = F.transpose(F.reshape(self.qkv(x), shape=(0, 0, 3, H, D)), axes=(2, 1, 3, 0, 4))
            q, k, v = F.split(qkv, num_outputs=3, axis=0, squeeze_axis=True)   # (N, H, T, D)
            q, k, v = (F.reshape(t, shape=(-3, 0, 0)) for t in (q, k, v))     # (N*H, T, D)
            att = F.softmax(F.batch_dot(q, k, transpose_b=True) / math.sqrt(D), axis=-1)
            o = F.reshape(F.batch_dot(att, v), shape=(-4, -1, H, 0, 0))       # (N, H, T, D)
            o = F.reshape(F.transpose(o, axes=(2, 0, 1, 3)), shape=(0, 0, -3))  # (T, N, E)
            x = self.ln1(x + self.proj(o))
            return self.ln2(x + self.ffn2(self.ffn1(x)))

    net = gnn.HybridSequential()
    for _ in range(s["layers"]):
        net.add(Layer())
    return net


# ---- data -----------------------------------------------------------------------------------------
def batch(kind: str, s: Dict[str, Any], seed: int = 0):
    """(x, y) numpy arrays for one batch of ``kind``."""
    import numpy as np
    rng = np.random.default_rng(seed)
    B = s["batch"]
    if kind == "mlp":
        return (rng.standard_normal((B, s["d_in"])).astype(np.float32),
                rng.integers(0, s["d_out"], B).astype(np.int64))
    if kind == "lenet":
        return (rng.standard_normal((B, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, B).astype(np.int64))
    if kind == "crnn":
        L = s["label_len"]
        y = np.zeros((B, 1 + L), np.int64)
        y[:, 0] = rng.integers(1, L + 1, B)
        for i in range(B):
            y[i, 1:1 + y[i, 0]] = rng.integers(1, 11, y[i, 0])
        return rng.random((B, 1, 16, s["width"])).astype(np.float32), y
    x = rng.standard_normal((s["seq"], B, s["d_model"])).astype(np.float32)
    return x, rng.standard_normal(x.shape).astype(np.float32)
