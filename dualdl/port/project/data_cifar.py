"""CIFAR for the proof over the real run: a synthetic CIFAR-10 in the files Gluon's
``vision.CIFAR10`` reads, and the Gluon run's record of the random choices MXNet's own RNG
makes in the vision transforms (the converted run replays them).

Hides two differences between a Gluon CIFAR script's run and its converted twin:

* Gluon checks the real dataset's sha1 and downloads ``cifar-10-binary.tar.gz`` when a batch file
  differs; the proof's driver serves a local archive (``download`` returns the file that is
  there), and Gluon extracts it: so the archive holds the synthetic batch files too.
* ``transforms.RandomFlipLeftRight`` draws with MXNet's RNG (the ``random_flip_left_right``
  op), which torch cannot reproduce: :func:`record_flips` records each decision of the Gluon run
  (the output differs from the input: flipped; a symmetric image reads as not flipped, which
  gives the same output), under ``random/flip_left_right`` of the run's record, and the
  converted run replays them in order (``GLUON2TORCH_RANDOM``). gluoncv's ``RandomCrop`` draws
  with Python's ``random``, seeded alike on both sides: nothing to record.
"""
from __future__ import annotations

import io
import os
import tarfile
from typing import Any, Dict, List

import numpy as np

__all__ = ["write_cifar10", "record_flips", "use_gluoncv", "FLIP_KEY"]

#: the record's key of the Gluon run's flip decisions (read by gluon2torch's _Replay)
FLIP_KEY = "random/flip_left_right"


def write_cifar10(root: str, train: int = 64, test: int = 16, seed: int = 0) -> None:
    """A synthetic CIFAR-10 in ``root``: ``data_batch_1..5.bin`` (``train`` images over the five
    files), ``test_batch.bin`` and ``cifar-10-binary.tar.gz`` holding them (Gluon's layout: one
    label byte, then 3x32x32 uint8 planes, per record); 10 class patterns plus noise, 20% of
    the labels wrong (the loss stays off 0)."""
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 256, (10, 3, 32, 32))
    os.makedirs(root, exist_ok=True)

    def records(n: int) -> bytes:
        y = rng.integers(0, 10, n)
        x = np.clip(patterns[y] * 0.6 + rng.normal(0, 50, (n, 3, 32, 32)), 0, 255).astype(np.uint8)
        y = np.where(rng.random(n) < 0.2, rng.integers(0, 10, n), y).astype(np.uint8)
        return np.concatenate([y[:, None], x.reshape(n, -1)], axis=1).tobytes()
    files: Dict[str, bytes] = {}
    sizes = [train // 5 + (i < train % 5) for i in range(5)]
    for i, n in enumerate(sizes, 1):
        files[f"data_batch_{i}.bin"] = records(n)
    files["test_batch.bin"] = records(test)
    with tarfile.open(os.path.join(root, "cifar-10-binary.tar.gz"), "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    for name, data in files.items():
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)


def record_flips(rec: Dict[str, Any], state: Dict[str, Any]) -> None:
    """A Gluon driver hook: every ``RandomFlipLeftRight`` call's decision appended to
    ``rec[FLIP_KEY]`` (a list, saved with the record)."""
    from mxnet.gluon.data.vision import transforms
    flips: List[bool] = rec.setdefault(FLIP_KEY, [])
    real = transforms.RandomFlipLeftRight.__call__

    def recorded(self, x, *args):
        out = real(self, x, *args)
        a, b = (v.asnumpy() if hasattr(v, "asnumpy") else np.asarray(v) for v in (x, out))
        flips.append(bool(a.shape == b.shape and not np.array_equal(a, b)))
        return out
    transforms.RandomFlipLeftRight.__call__ = recorded
    real_init = transforms.Compose.__init__

    def imperative_flips(self, blocks):
        """Compose hybridizes a run of HybridBlocks into one graph, which hides the draw: the
        group holding a flip runs imperatively (the same operators, so the same values)."""
        real_init(self, blocks)
        for group in self._children.values():
            if any(isinstance(b, transforms.RandomFlipLeftRight)
                   for b in getattr(group, "_children", {}).values()):
                group.hybridize(False)
    transforms.Compose.__init__ = imperative_flips


def use_gluoncv(rec: Dict[str, Any], state: Dict[str, Any]) -> None:
    """A Gluon driver hook: a real gluoncv script's plain ``import gluoncv`` refuses torch >= 2
    (installed beside it here); :func:`dualdl.port.import_gluoncv` imports it first."""
    import importlib.util
    if importlib.util.find_spec("gluoncv") is not None:
        from ..gluoncv_compat import import_gluoncv
        import_gluoncv()


def _register() -> None:
    from .proof_data import register_gluon_hook, register_writer
    register_writer("cifar10", write_cifar10, ("data/cifar10", "datasets/cifar10"),
                    "train=64, test=16")
    register_gluon_hook(use_gluoncv)
    register_gluon_hook(record_flips)


_register()
