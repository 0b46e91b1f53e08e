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
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from .backend import KNOWN_BACKENDS, _instances, get_backend, on_backend_created
from .ops_dispatch import _ops as _like     # the adapter's ops module by tensor type (cached)
from .tensor import _dtype as _dt          # None stays None (the input's dtype)

__all__ = ["seed", "initial_seed", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
           "multinomial", "bernoulli", "normal", "normal_", "uniform_"]

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


# ---- random tensors (torch's names), drawn from the generator ``seed`` seeds -----------------------
_NOTE = ("Drawn from the backend's own generator, which :func:`seed` seeds: the same seed gives the same "
         "numbers on each backend, but torch and MXNet draw other numbers (their generators differ).")
Size = Union[int, Sequence[int]]


def _size(size: tuple) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in size):
        raise ValueError(f"size must be non-negative ints, got {size!r}")
    return tuple(int(s) for s in size)


def _make(dtype: Any, device: Any, backend: Optional[str], default: str = "float32"):
    from .ops import _creation
    be, dt, dev = _creation(dtype, device, backend)
    if dtype is None:
        dt = np.dtype(default)
    return be, dt, dev


def rand(*size: Size, dtype: Any = None, device: Any = None, backend: Optional[str] = None):
    """``torch.rand``: uniform on [0, 1), ``rand(2, 3)`` or ``rand((2, 3))``, on the active backend
    (inside an MXNet forward: MXNet; hybridized: a graph node drawn at each call). """ + _NOTE
    be, dt, dev = _make(dtype, device, backend)
    return be.module("ops").rand(_size(size), dt, dev)


def randn(*size: Size, dtype: Any = None, device: Any = None, backend: Optional[str] = None):
    """``torch.randn``: standard normal, sizes as :func:`rand`. """ + _NOTE
    be, dt, dev = _make(dtype, device, backend)
    return be.module("ops").randn(_size(size), dt, dev)


def randint(*args: Any, dtype: Any = None, device: Any = None, backend: Optional[str] = None):
    """``torch.randint(high, size)`` or ``randint(low, high, size)``: integers uniform in [low, high),
    int64 by default. """ + _NOTE
    if len(args) == 2:
        low, (high, size) = 0, args
    elif len(args) == 3:
        low, high, size = args
    else:
        raise TypeError("randint() takes (high, size) or (low, high, size)")
    if int(high) <= int(low):
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    be, dt, dev = _make(dtype, device, backend, default="int64")
    return be.module("ops").randint(int(low), int(high), _size((size,)), dt, dev)


def rand_like(input: Any, *, dtype: Any = None):
    """``torch.rand_like``: input's shape, dtype (unless ``dtype``) and device; works on MXNet Symbols
    (hybridized). """ + _NOTE
    return _like(input).rand_like(input, _dt(dtype))


def randn_like(input: Any, *, dtype: Any = None):
    """``torch.randn_like`` (a VAE's noise: ``mu + eps * std`` with ``eps = randn_like(std)``); works on
    MXNet Symbols (hybridized). """ + _NOTE
    return _like(input).randn_like(input, _dt(dtype))


def randint_like(input: Any, low: int = 0, high: Optional[int] = None, *, dtype: Any = None):
    """``torch.randint_like(input, high)`` or ``(input, low, high)``: integers in [low, high) in the
    input's shape (and dtype unless ``dtype``). """ + _NOTE
    if high is None:
        low, high = 0, low
    return _like(input).randint_like(input, int(low), int(high), _dt(dtype))


def multinomial(input: Any, num_samples: int, replacement: bool = False):
    """``torch.multinomial``: int64 indices of ``num_samples`` draws per row of the non-negative
    weights ``input`` (1-D or 2-D, need not sum to 1); without replacement no index repeats in a row.
    MXNet: its multinomial op with replacement, the Gumbel top-k without. """ + _NOTE
    if int(num_samples) <= 0:
        raise ValueError(f"multinomial: num_samples must be positive, got {num_samples}")
    return _like(input).multinomial(input, int(num_samples), bool(replacement))


def bernoulli(input: Any, p: Optional[float] = None):
    """``torch.bernoulli``: 1 with probability ``input`` elementwise (or the float ``p``), in the input's
    dtype; no gradient. """ + _NOTE
    if p is not None and not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"bernoulli: p must be in [0, 1], got {p}")
    return _like(input).bernoulli(input, p)


def normal(mean: Any, std: Any = 1.0, size: Optional[Size] = None, *, dtype: Any = None, device: Any = None,
           backend: Optional[str] = None):
    """``torch.normal``: ``mean + std * randn``; ``mean``/``std`` tensors (broadcast) or floats with
    ``size``. """ + _NOTE
    from . import ops
    tensors = [t for t in (mean, std) if not isinstance(t, (int, float))]
    if tensors:                          # the noise takes the broadcast shape of mean and std
        like = ops.mul(tensors[0], 0.0) if len(tensors) == 1 else ops.add(ops.mul(mean, 0.0), ops.mul(std, 0.0))
        return ops.add(ops.mul(randn_like(like), std), mean)
    if size is None:
        raise ValueError("normal: with a float mean and std, pass size=")
    return ops.add(ops.mul(randn(size, dtype=dtype, device=device, backend=backend), float(std)), float(mean))


def normal_(tensor: Any, mean: float = 0.0, std: float = 1.0):
    """``Tensor.normal_(mean, std)``: fill ``tensor`` (a torch tensor, an MXNet NDArray or a Gluon
    Parameter, every context) in place, outside autograd; returns it. """ + _NOTE
    from .backend import backend_of
    return backend_of(tensor).module("ops").normal_(tensor, float(mean), float(std))


def uniform_(tensor: Any, a: float = 0.0, b: float = 1.0):
    """``Tensor.uniform_(a, b)``: as :func:`normal_`, uniform on [a, b). """ + _NOTE
    from .backend import backend_of
    return backend_of(tensor).module("ops").uniform_(tensor, float(a), float(b))
