"""The proof's data for d2l's training loops (Dive into Deep Learning, MXNet numpy interface):
a synthetic "time machine" text where d2l's ``read_time_machine`` opens it (registered as the
``time-machine`` writer of :mod:`dualdl.port.project.proof_data`; d2l's Fashion-MNIST is the
registry's ``fashion-mnist`` writer: ``FashionMNIST(train=...)`` without a root reads
``$MXNET_HOME/datasets/fashion-mnist``, and the proof sets ``MXNET_HOME`` to its folder).

Hides where d2l looks: ``d2l.download('time_machine')`` is ``../data/timemachine.txt`` from
the working folder, checked against the real book's sha1 (a mismatch downloads it), so the
writer's folder is ``../data`` and a script registers the synthetic file's sha1 in
``d2l.DATA_HUB`` as d2l registers its own (tests/scripts/d2l_ch8.py).
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["write_time_machine"]

_WORDS = ("the", "time", "traveller", "machine", "said", "and", "of", "a", "to", "in", "was",
          "we", "it", "that", "had", "for", "is", "with", "four", "dimensions", "space",
          "psychologist")


def write_time_machine(root: str, lines: int = 20, seed: int = 0) -> None:
    """``root/timemachine.txt``: ``lines`` lines (20: ~700 characters, 8 batches of 8 x 10 for
    d2l's sequential iterator) of words from a small vocabulary (60% of the
    time the next word in a fixed order, so a model has something to learn), capitalised and
    punctuated (what ``read_time_machine`` strips)."""
    rng = np.random.default_rng(seed)
    out, w = [], 0
    for _ in range(lines):
        words = []
        for _ in range(int(rng.integers(4, 10))):
            w = (w + 1) % len(_WORDS) if rng.random() < 0.6 else int(rng.integers(len(_WORDS)))
            words.append(_WORDS[w])
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + str(rng.choice([".", ",", ";", "!"])) + "\n")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "timemachine.txt"), "w") as f:
        f.write("".join(out))


def _register() -> None:
    from .proof_data import register_writer
    register_writer("time-machine", write_time_machine, ("../data",), "lines=20")


_register()
