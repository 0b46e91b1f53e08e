"""Seeding every source of randomness at once.

Hides: MXNet draws initialisers and dropout masks from its own RNG (fixed default seed, so it is
reproducible even unseeded) and its Gluon DataLoader shuffles with numpy's global RNG; torch needs
``torch.manual_seed`` for init, dropout and its DataLoader. ``seed`` sets Python ``random``, numpy
and every backend; a backend imported later is seeded when it is first used.
"""
from __future__ import annotations

import random as _pyrandom
from typing import Optional

import numpy as np

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
    On CPU both frameworks are already deterministic for the same thread count.
    """
    global _SEED, _DETERMINISTIC
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= int(n) < 2 ** 32:
        raise ValueError(f"seed must be an int in [0, 2**32), got {n!r}")
    _SEED, _DETERMINISTIC = int(n), bool(deterministic)
    _pyrandom.seed(_SEED)
    np.random.seed(_SEED)
    from .backend import _instances
    for be in list(_instances.values()):
        be.seed(_SEED, _DETERMINISTIC)


def initial_seed() -> Optional[int]:
    """The seed last passed to :func:`seed` (``None`` if never called)."""
    return _SEED


def _apply_pending(be) -> None:
    """Called when a backend is first instantiated: apply an earlier ``seed()`` to it."""
    if _SEED is not None:
        be.seed(_SEED, _DETERMINISTIC)
