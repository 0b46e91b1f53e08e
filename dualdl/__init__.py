"""dualdl: write deep-learning code once, run it on PyTorch or MXNet/Gluon with the same numbers.

``import dualdl`` imports no framework: a backend's framework is imported the first time that
backend is used. Submodules (``dualdl.nn``, ``dualdl.ops``, ``dualdl.losses``, ``dualdl.optim``,
``dualdl.data``, ...) load on first attribute access.
"""
from __future__ import annotations

import importlib as _importlib

from .backend import (BackendNotInstalledError, available_backends, backend, backend_for,
                      devices, get_backend, use, visible_gpus)
from .devices import Device, cpu, device, gpu
from .random import (bernoulli, multinomial, normal, rand, rand_like, randint, randint_like, randn, randn_like,
                     seed)
from .tensor import (arange, device_of, from_numpy, full, full_like, is_tensor, item, ones,
                     ones_like, reshape, to_device, to_numpy, zeros, zeros_like)

__version__ = "0.1.0"

# Submodules imported on first access (each may import a framework only when used).
_LAZY_SUBMODULES = frozenset({
    "nn", "ops", "losses", "optim", "data", "parallel", "distributed", "state", "checkpoint",
    "port", "testing", "formats", "cli", "demo", "trainer", "autograd", "info",
})
# Names re-exported lazily from submodules: name -> module
_LAZY_NAMES = {
    "state_dict": "state", "load_state_dict": "state", "named_parameters": "state",
    "save": "checkpoint", "load": "checkpoint",
    "Trainer": "trainer",
    "record": "autograd", "backward": "autograd", "no_grad": "autograd",
    **dict.fromkeys(["to_dtype", "numel", "dim", "requires_grad", "requires_grad_", "grad", "add_"], "params"),
    "backend_of": "backend",
}

__all__ = [
    "use", "backend", "get_backend", "backend_for", "available_backends", "BackendNotInstalledError",
    "Device", "cpu", "gpu", "device", "devices", "visible_gpus", "seed",
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "multinomial", "bernoulli", "normal",
    "from_numpy", "to_numpy", "item", "reshape", "to_device", "device_of", "is_tensor",
    "zeros", "ones", "full", "arange", "zeros_like", "ones_like", "full_like",
    *sorted(_LAZY_NAMES), *sorted(_LAZY_SUBMODULES),
]


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        return getattr(_importlib.import_module(f"{__name__}.{_LAZY_NAMES[name]}"), name)
    raise AttributeError(f"module 'dualdl' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _LAZY_SUBMODULES | set(_LAZY_NAMES))
