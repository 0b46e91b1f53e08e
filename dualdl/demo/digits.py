"""Strings of real handwritten digits, built offline from scikit-learn's digits dataset.

Each sample is a 16-pixel-high strip holding ``min_len..max_len`` digit images (8x8 scans upscaled
2x) side by side with random gaps, padded on the right to a fixed width; its label is the digit
string. Train and held-out strings use disjoint sets of digit scans, so held-out accuracy measures
reading digits the model never saw.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

HEIGHT = 16
DIGIT_W = 16
BLANK = 0          # CTC blank (PyTorch's convention); digit d has class d + 1
NUM_CLASSES = 11


@dataclass
class DigitStrings:
    images: np.ndarray      # (N, 1, HEIGHT, width) float32 in [0, 1]
    labels: np.ndarray      # (N, 1 + max_len) int64: column 0 = length, then classes (digit+1), 0-padded

    def __len__(self) -> int:
        return len(self.images)

    def strings(self) -> list:
        return ["".join(str(c - 1) for c in row[1:1 + row[0]]) for row in self.labels]


def _load_scans() -> Tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:      # pragma: no cover - the demo extra installs it
        raise ImportError("the demo needs scikit-learn (pip install 'dualdl[demo]')") from e
    d = load_digits()
    scans = (d.images / 16.0).astype(np.float32)
    scans = np.kron(scans, np.ones((2, 2), np.float32))        # 8x8 -> 16x16, nearest
    return scans, d.target.astype(np.int64)


def make_splits(n_train: int, n_test: int, min_len: int = 3, max_len: int = 5, seed: int = 0,
                held_out_fraction: float = 0.25) -> Tuple[DigitStrings, DigitStrings]:
    """Train and held-out digit strings built from disjoint digit scans."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    scans, digits = _load_scans()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(scans))
    n_held = int(len(scans) * held_out_fraction)
    test_idx, train_idx = order[:n_held], order[n_held:]
    return (_compose(scans, digits, train_idx, n_train, min_len, max_len, rng),
            _compose(scans, digits, test_idx, n_test, min_len, max_len, rng))


def width_for(max_len: int) -> int:
    return max_len * (DIGIT_W + 3) + 4


def _compose(scans, digits, pool, n, min_len, max_len, rng) -> DigitStrings:
    width = width_for(max_len)
    images = np.zeros((n, 1, HEIGHT, width), np.float32)
    labels = np.zeros((n, 1 + max_len), np.int64)
    for i in range(n):
        length = int(rng.integers(min_len, max_len + 1))
        picks = rng.choice(pool, size=length)
        x = int(rng.integers(0, 4))
        for j, k in enumerate(picks):
            images[i, 0, :, x:x + DIGIT_W] = np.maximum(images[i, 0, :, x:x + DIGIT_W], scans[k])
            x += DIGIT_W + int(rng.integers(0, 4))
        labels[i, 0] = length
        labels[i, 1:1 + length] = digits[picks] + 1
    return DigitStrings(images, labels)


def greedy_decode(log_probs: np.ndarray) -> list:
    """Best-path CTC decoding of (N, T, C) scores: argmax, merge repeats, drop blanks."""
    best = log_probs.argmax(-1)
    out = []
    for row in best:
        s, prev = [], BLANK
        for c in row:
            if c != prev and c != BLANK:
                s.append(str(int(c) - 1))
            prev = c
        out.append("".join(s))
    return out


def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def accuracy(predicted: list, truth: list) -> Tuple[float, float]:
    """(per-digit accuracy = 1 - character error rate, whole-string accuracy)."""
    errors = sum(edit_distance(p, t) for p, t in zip(predicted, truth))
    total = sum(len(t) for t in truth)
    exact = sum(p == t for p, t in zip(predicted, truth))
    return max(0.0, 1.0 - errors / max(1, total)), exact / max(1, len(truth))
