"""Seeding every source of randomness at once.

Hides: MXNet draws initialisers and dropout masks from its own RNG (fixed default seed, so it is
reproducible even unseeded) and its Gluon DataLoader shuffles with numpy's global RNG; torch needs
``torch.manual_seed`` for init, dropout and its DataLoader. ``seed`` sets Python ``random``, numpy
and every backend: one whose framework is already imported is seeded now, and a framework imported
later is seeded right after its import (a one-shot import hook), also when the user imports it
directly instead of through dualdl.
"""
from __future__ import annotations

import importlib.abc
import random as _pyrandom
import sys
from typing import Dict, Optional

import numpy as np

from .backend import KNOWN_BACKENDS, _instances, get_backend, on_backend_created

__all__ = ["seed", "initial_seed"]

_SEED: Optional[int] = None
_DETERMINISTIC = False


def seed(n: int, deterministic: bool = False) -> None:
    """Seed Python ``random``, numpy, and each backend (torch CPU+CUDA, ``mx.random.seed``).

    ``deterministic=True`` also turns on the frameworks' determinism switches:
    torch: ``torch.use_deterministic_algorithms(True)``, ``cudnn.deterministic=True``,
    ``cudnn.benchmark=False`` and ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (needed by cuBLAS);
    MXNet: ``MXNET_ENFORCE_DETERMINISM=1`` and ``MXNET_CUDNN_AUTOTUNE_DEFAULT=0`` (cuDNN
    algorithm choice; read by MXNet when it picks kernels, so set before the first GPU op).
    On CPU, torch is deterministic for the same thread count. MXNet is not always: with its
    default threaded engine, a Gluon net that ran another batch shape before (an initialising
    forward, a smaller last batch) trains differently in each process - measured on gluoncv's
    cifar_resnet20_v1 after one (1,3,32,32) forward and 4 NAG steps on 16 images: weights 2.0e-3
    apart across processes hybridized, 1.8e-3 not hybridized; 0 without that first forward, and
    0 with ``MXNET_ENGINE_TYPE=NaiveEngine``. That variable is read when mxnet is imported, so
    ``seed`` cannot set it: export it before the process starts (or before ``import mxnet``)
    for a reproducible Gluon baseline (``dualdl.testing.check_native_training`` notes the case).
    """
    global _SEED, _DETERMINISTIC
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= int(n) < 2 ** 32:
        raise ValueError(f"seed must be an int in [0, 2**32), got {n!r}")
    _SEED, _DETERMINISTIC = int(n), bool(deterministic)
    _pyrandom.seed(_SEED)
    np.random.seed(_SEED)
    for key, (_, framework, _) in KNOWN_BACKENDS.items():
        if key in _instances:
            _instances[key].seed(_SEED, _DETERMINISTIC)
        elif framework in sys.modules:
            get_backend(key)            # seeds it (_apply_pending)
        else:
            _SEED_ON_IMPORT.pending[framework] = key
    if _SEED_ON_IMPORT.pending and _SEED_ON_IMPORT not in sys.meta_path:
        sys.meta_path.insert(0, _SEED_ON_IMPORT)


def initial_seed() -> Optional[int]:
    """The seed last passed to :func:`seed` (``None`` if never called)."""
    return _SEED


class _SeedOnImport(importlib.abc.MetaPathFinder):
    """Seeds a framework right after its first import, once: ``dl.seed(0); import mxnet`` then
    draws the seeded stream, as ``dl.seed(0)`` after the import would."""

    def __init__(self) -> None:
        self.pending: Dict[str, str] = {}     # framework module -> backend name

    def find_spec(self, fullname, path=None, target=None):
        key = self.pending.pop(fullname, None)
        if key is None:
            return None
        if not self.pending and self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_seed(module) -> None:
            exec_module(module)
            # imported by its dualdl adapter: get_backend seeds it once the adapter is built
            if KNOWN_BACKENDS[key][0] not in sys.modules and _SEED is not None:
                get_backend(key)
        loader.exec_module = exec_then_seed
        return spec


_SEED_ON_IMPORT = _SeedOnImport()


def _apply_pending(be) -> None:
    """Called when a backend is first instantiated: apply an earlier ``seed()`` to it."""
    if _SEED is not None:
        be.seed(_SEED, _DETERMINISTIC)


on_backend_created(_apply_pending)
