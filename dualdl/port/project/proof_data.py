"""The proof's synthetic data and Gluon-run hooks: what ``convert-project --prove SCRIPT --data
NAME`` writes in the folder both runs read, and what the Gluon driver patches before it runs the
script.

Hides that a real script reads a real dataset (a download with a sha1, a cache folder under
``$MXNET_HOME``) that a proof cannot fetch: a writer puts a synthetic dataset of the real format
in the files the script's Gluon reader opens (the proof sets ``MXNET_HOME`` to its folder, so
the readers' default roots land there too), and a driver hook patches the Gluon process (a sha1
check, a record of random choices MXNet's own RNG makes).

Domain files register here at import: every ``dualdl/port/project/data_*.py`` is imported on
first use (it must not import mxnet at import time), calling :func:`register_writer` and
:func:`register_gluon_hook`.
"""
from __future__ import annotations

import gzip
import importlib
import os
import struct
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

__all__ = ["DataWriter", "register_writer", "register_gluon_hook", "writers", "gluon_hooks",
           "write_data", "write_mnist", "DataSpecError"]


class DataSpecError(ValueError):
    """A ``--data`` spec names no writer or gives it options it does not take."""


@dataclass
class DataWriter:
    name: str
    write: Callable[..., None]          # write(root, seed=0, **options)
    folders: Tuple[str, ...]            # where under the proof's folder, by default
    help: str = ""


WRITERS: Dict[str, DataWriter] = {}
#: ``hook(rec, state)``, called by the Gluon driver after its own patches, before the script
#: runs: ``rec`` is the run's record (saved with ``np.savez``), ``state`` holds ``path`` (the
#: record's file), ``n`` (the update being recorded) and ``batch`` (the last DataLoader batch)
GLUON_HOOKS: List[Callable[[Dict[str, Any], Dict[str, Any]], None]] = []
_LOADED = [False]


def register_writer(name: str, write: Callable[..., None], folders: Sequence[str] = ("data",),
                    help: str = "") -> None:
    """``--data name`` writes a dataset with ``write(root, seed=seed, **options)`` into each of
    ``folders`` (relative to the proof's folder) unless the spec names one."""
    if name in WRITERS and WRITERS[name].write is not write:
        raise RuntimeError(f"two dataset writers are named {name!r}: one name per writer")
    WRITERS[name] = DataWriter(name, write, tuple(folders), help)


def register_gluon_hook(hook: Callable[[Dict[str, Any], Dict[str, Any]], None]) -> None:
    if hook not in GLUON_HOOKS:
        GLUON_HOOKS.append(hook)


def _load_domains() -> None:
    if _LOADED[0]:
        return
    _LOADED[0] = True
    here = os.path.dirname(os.path.abspath(__file__))
    for f in sorted(os.listdir(here)):
        if f.startswith("data_") and f.endswith(".py"):
            importlib.import_module(f"{__package__}.{f[:-3]}")


def writers() -> Dict[str, DataWriter]:
    _load_domains()
    return WRITERS


def gluon_hooks() -> List[Callable[[Dict[str, Any], Dict[str, Any]], None]]:
    _load_domains()
    return GLUON_HOOKS


def _value(text: str) -> Any:
    import ast
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def write_data(spec: str, workdir: str, seed: int = 0) -> List[str]:
    """Write the dataset ``spec`` names (``NAME[:FOLDER][,key=value...]``, e.g. ``mnist``,
    ``cifar10:data,train=256``) under ``workdir``; returns the folders written."""
    head, *opts = spec.split(",")
    name, _, folder = head.partition(":")
    known = writers()
    if name not in known:
        raise DataSpecError(f"--data {spec}: no dataset writer {name!r} (one of "
                            f"{', '.join(sorted(known))})")
    kw: Dict[str, Any] = {}
    for o in opts:
        k, eq, v = o.partition("=")
        if not eq or not k.strip().isidentifier():
            raise DataSpecError(f"--data {spec}: {o!r} is not key=value")
        kw[k.strip()] = _value(v.strip())
    w = known[name]
    out = []
    for sub in ([folder] if folder else w.folders):
        root = os.path.join(workdir, sub)
        try:
            w.write(root, seed=seed, **kw)
        except TypeError as e:
            raise DataSpecError(f"--data {spec}: {e}; the writer takes "
                                f"{w.help or 'no such option'}") from None
        out.append(root)
    return out


# ----------------------------------------------------------------------------- built-in writers
def write_mnist(root: str, train: int = 600, test: int = 100, seed: int = 0) -> None:
    """A synthetic MNIST in the files Gluon's ``vision.MNIST`` reads (gzip idx, uint8 28x28,
    labels 0-9): 10 class patterns plus noise, 20% of labels wrong (the loss stays off 0)."""
    rng = np.random.default_rng(seed)
    patterns = rng.integers(0, 256, (10, 28, 28))
    os.makedirs(root, exist_ok=True)
    for prefix, n in (("train", train), ("t10k", test)):
        y = rng.integers(0, 10, n)
        x = np.clip(patterns[y] * 0.6 + rng.normal(0, 60, (n, 28, 28)), 0, 255).astype(np.uint8)
        y = np.where(rng.random(n) < 0.2, rng.integers(0, 10, n), y).astype(np.uint8)
        with gzip.open(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + x.tobytes())
        with gzip.open(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">II", 2049, n) + y.tobytes())


def write_arrays(root: str, n: int = 256, features: int = 20, classes: int = 10,
                 seed: int = 0) -> None:
    """``x.npy`` (float32, ``n`` x ``features``) and ``y.npy`` (int64 class labels from a random
    linear rule, 20% wrong), for a script that loads arrays with ``np.load``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = (x @ rng.normal(size=(features, classes))).argmax(1)
    y = np.where(rng.random(n) < 0.2, rng.integers(0, classes, n), y).astype(np.int64)
    os.makedirs(root, exist_ok=True)
    np.save(os.path.join(root, "x.npy"), x)
    np.save(os.path.join(root, "y.npy"), y)


register_writer("mnist", write_mnist, ("data", "datasets/mnist"), "train=600, test=100")
register_writer("fashion-mnist", write_mnist, ("data", "datasets/fashion-mnist"),
                "train=600, test=100")
register_writer("arrays", write_arrays, ("data",), "n=256, features=20, classes=10")
