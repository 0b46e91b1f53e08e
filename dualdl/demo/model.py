"""The demo's CRNN (seed 000): a VGG-style CNN (conv-BatchNorm-ReLU-pool blocks) reads a 16-pixel strip into a sequence of column
features, two bidirectional LSTM layers read the sequence, a Linear layer scores 11 classes
(CTC blank + 10 digits) per time step. Written once with dualdl; built natively on either backend."""
from __future__ import annotations

from typing import Any

import numpy as np

import dualdl as dl
from dualdl import nn, ops

from .digits import NUM_CLASSES


def _block(cin: int, cout: int, pool) -> list:
    # no conv bias before BatchNorm: the normalisation cancels it (its gradient is rounding noise)
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.MaxPool2d(pool, pool)]


class CRNN(nn.Module):
    """(N, 1, 16, W) images -> (N, W // 4, 11) per-column class scores (batch-first)."""

    def __init__(self, hidden: int = 64, channels=(16, 32, 64, 64)) -> None:
        super().__init__()
        c1, c2, c3, c4 = channels
        self.cnn = nn.Sequential(*_block(1, c1, (2, 2)), *_block(c1, c2, (2, 2)),
                                 *_block(c2, c3, (2, 1)), *_block(c3, c4, (2, 1)))
        self.rnn = nn.LSTM(c4, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, NUM_CLASSES)

    def forward(self, x):
        f = self.cnn(x)                                   # (N, C, 1, T)
        f = ops.permute(ops.squeeze(f, 2), (0, 2, 1))     # (N, T, C)
        seq, _ = self.rnn(f)                              # (N, T, 2H)
        return self.fc(seq)                               # (N, T, 11)


class PackedCTCLoss:
    """CTC on labels packed as (N, 1 + S): column 0 is the length, then the padded classes.

    Packing keeps the label one tensor, so data-parallel strategies split it like any target.
    Per-sample losses are CTC negative log-likelihoods (PyTorch's conventions: blank 0,
    (T, N, C) log-probabilities); ``reduction`` as in every dualdl loss. The scores go through
    ``log_softmax`` here, so the CTC loss skips its normalisation check (a sync per call).
    """

    def __init__(self, reduction: str = "mean") -> None:
        self.ctc = dl.losses.CTCLoss(blank=0, reduction="none", zero_infinity=True, check_log_probs=False)
        self.reduction = reduction

    def __call__(self, scores: Any, packed: Any) -> Any:
        log_probs = ops.permute(ops.log_softmax(scores, dim=2), (1, 0, 2))   # (T, N, C)
        # the CTC loss checks labels and lengths on the host anyway: one copy here, not a device
        # slice and a host copy for each of labels, lengths and input lengths
        p = dl.to_numpy(packed)
        input_lengths = np.full(p.shape[0], int(log_probs.shape[0]), dtype=np.int64)
        loss = self.ctc(log_probs, p[:, 1:], input_lengths, p[:, 0])
        return dl.losses.reduce(loss, self.reduction)
