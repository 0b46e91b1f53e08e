"""Parity tests for your own model in a few lines (run with ``pytest examples/test_parity_example.py``).

Write the model once with ``dualdl.nn``; the ``parity`` fixture builds it on PyTorch and on MXNet with
the same random weights, trains both for a few steps and compares outputs, loss, every gradient and
the weights after each step. A failure prints the table and names the first divergent layer.
Add ``--parity-report`` to see the measured differences of passing tests too.
"""
import numpy as np

import dualdl as dl
from dualdl import nn
# The fixture comes from dualdl's pytest plugin (pytest11 entry point ``dualdl``); importing it
# makes this file work with or without the plugin installed.
from dualdl.testing.pytest_plugin import parity  # noqa: F401


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(16 * 4 * 4, num_classes)

    def forward(self, x):
        return self.head(dl.ops.flatten(self.features(x), 1))


def test_small_cnn_trains_the_same_on_both_backends(parity):
    x = np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32)
    report = parity(SmallCNN, x, loss="cross_entropy", steps=3,
                    optimizer=lambda params: dl.optim.SGD(params, lr=0.05, momentum=0.9))
    assert report.max_abs("output") < 1e-4


def test_inference_parity_in_eval_mode(parity):
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    parity(SmallCNN, x, train=False, backward=False, steps=0)
