"""The backend contract and the registry that finds backends by name or by tensor type.

Each adapter package (``dualdl_torch``, ``dualdl_mx``) exposes a ``Backend`` subclass in its
``__init__`` and the same set of modules (``ADAPTER_MODULES``), with the names listed in
:mod:`dualdl.contract`. Nothing here imports a framework:
an adapter is imported the first time its backend is used, and a tensor is matched to a backend
only among frameworks already in ``sys.modules`` (the einops rule), so ``import dualdl`` stays cheap
and both backends can live in one process.
"""
from __future__ import annotations

import abc
import contextlib
import contextvars
import importlib
import importlib.util
import os
import re
import sys
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import config
from . import devices as _devices
from .contract import CONTRACT
from .devices import Device, cpu, gpu

__all__ = [
    "Backend", "BackendNotInstalledError", "KNOWN_BACKENDS", "ADAPTER_MODULES",
    "get_backend", "backend_for", "backend_of", "use", "backend", "available_backends",
    "canonical_name", "devices", "visible_gpus", "on_backend_created",
]

# name -> (adapter package, framework module, pip extra)
KNOWN_BACKENDS: Dict[str, Tuple[str, str, str]] = {
    "torch": ("dualdl_torch", "torch", "torch"),
    "mxnet": ("dualdl_mx", "mxnet", "mxnet"),
}
_ALIASES = {"pytorch": "torch", "mx": "mxnet", "gluon": "mxnet"}
# name -> "module:function" run before the framework's first import (it must import no framework):
# leaked DMLC_* variables would turn `import mxnet` into a blocking ps-lite node
_BEFORE_IMPORT: Dict[str, str] = {"mxnet": "dualdl.distributed.env:check_mxnet_node_env"}

# The modules every adapter package provides, with the same names (Keras 3's rule); what each
# must contain is written down in dualdl/contract.py.
ADAPTER_MODULES: Tuple[str, ...] = tuple(CONTRACT)


class BackendNotInstalledError(ImportError):
    """The framework behind a backend is not installed; the message names the pip extra."""


class Backend(abc.ABC):
    """What an adapter implements. Tensor functions receive native tensors and return native ones.

    Larger concerns (layers, ops, losses, optimizers, data parallel, distributed, state dicts)
    live in the adapter's modules of the same names, reached with :meth:`module`.
    """

    name: str = ""
    framework: str = ""     # the framework's top-level module name
    adapter: str = ""       # the adapter package name
    #: other top-level packages whose classes belong to this backend (ecosystem libraries whose
    #: objects are not subclasses of a framework class); the framework and adapter are implied
    packages: Tuple[str, ...] = ()

    def owns(self, obj: Any) -> bool:
        """Whether ``obj`` (a tensor, model, parameter, optimizer or native device) is
        this backend's: some class in its MRO is defined in the framework, the adapter or
        ``packages``. A write-once model is its native class's (``Net`` under torch is a
        ``torch.nn.Module`` subclass)."""
        roots = (self.framework, self.adapter, *self.packages)
        return any(c.__module__.partition(".")[0] in roots for c in type(obj).__mro__)

    # ---- tensors ---------------------------------------------------------------------------
    @abc.abstractmethod
    def tensor_types(self) -> Tuple[type, ...]:
        """Native tensor classes (used for dispatch by type)."""

    @abc.abstractmethod
    def from_numpy(self, a: np.ndarray, device: Device, dtype: np.dtype) -> Any:
        """A native tensor holding a copy of ``a`` cast to ``dtype`` on ``device``."""

    @abc.abstractmethod
    def to_numpy(self, t: Any) -> np.ndarray:
        """A numpy copy of ``t`` (detached, from any device)."""

    @abc.abstractmethod
    def shape(self, t: Any) -> Tuple[int, ...]: ...

    @abc.abstractmethod
    def dtype(self, t: Any) -> np.dtype: ...

    @abc.abstractmethod
    def reshape(self, t: Any, shape: Tuple[int, ...]) -> Any:
        """Reshape with a fully resolved shape (no -1, no MXNet special codes)."""

    @abc.abstractmethod
    def device_of(self, t: Any) -> Device: ...

    @abc.abstractmethod
    def to_device(self, t: Any, device: Device) -> Any: ...

    @abc.abstractmethod
    def full(self, shape: Tuple[int, ...], value: Any, dtype: np.dtype, device: Device) -> Any: ...

    def full_like(self, t: Any, value: Any) -> Any:
        """A tensor of ``t``'s shape, dtype and device filled with ``value`` (override with the
        framework's own ``*_like``: this is on forward paths)."""
        return self.full(tuple(self.shape(t)), value, self.dtype(t), self.device_of(t))

    @abc.abstractmethod
    def arange(self, start: float, stop: float, step: float, dtype: np.dtype, device: Device) -> Any: ...

    # ---- devices and randomness ------------------------------------------------------------
    @abc.abstractmethod
    def gpu_count(self) -> int: ...

    @abc.abstractmethod
    def native_device(self, device: Device) -> Any:
        """The framework's own device object (``torch.device`` / ``mx.Context``)."""

    @abc.abstractmethod
    def device_from_native(self, obj: Any) -> Device:
        """The :class:`Device` for this framework's own device object (``torch.device`` /
        ``mx.Context``); ``ValueError`` for a kind dualdl does not handle."""

    def is_symbolic(self, t: Any) -> bool:
        """Whether ``t`` is a graph node without a shape (an MXNet Symbol in a hybridized
        forward) rather than an array: the tensor functions then go to the adapter's ``ops``."""
        return False

    def numpy_dtype(self, dtype: Any) -> np.dtype:
        """The numpy dtype for this framework's own dtype object (``torch.float32`` ...)."""
        return np.dtype(dtype)

    def native_lr_scheduler(self, name: str) -> Optional[type]:
        """The framework's own scheduler class ``name`` (``StepLR`` ...) when it has PyTorch's
        semantics, else ``None`` (then dualdl's neutral scheduler drives the optimizer)."""
        return None

    #: whether tensors in this framework's optimizer/scheduler states come back from a Trainer
    #: state file as native tensors (torch's ``optimizer.load_state_dict`` wants tensors) rather
    #: than numpy arrays
    native_state_tensors: bool = False

    @abc.abstractmethod
    def cuda_initialized(self) -> bool:
        """Whether this framework already initialised CUDA in this process."""

    @abc.abstractmethod
    def seed(self, seed: int, deterministic: bool) -> None: ...

    # ---- adapter modules -------------------------------------------------------------------
    def module(self, name: str):
        """The adapter module ``name`` (one of ``ADAPTER_MODULES``), imported on first use (this is
        on every loss/op call's path: cached per backend object after the first import)."""
        cache = self.__dict__.setdefault("_dl_modules", {})
        mod = cache.get(name)
        if mod is None:
            if name not in ADAPTER_MODULES:
                raise ValueError(f"unknown adapter module {name!r}; expected one of {ADAPTER_MODULES}")
            mod = cache[name] = importlib.import_module(f"{self.adapter}.{name}")
        return mod

    def __repr__(self) -> str:
        return f"<dualdl backend {self.name!r}>"


_instances: Dict[str, Backend] = {}
_type_cache: Dict[type, Backend] = {}


def canonical_name(name: str) -> str:
    """The registry's name for ``name`` or one of its aliases (``"pytorch"`` -> ``"torch"``);
    ``ValueError`` listing the known backends otherwise."""
    return _canonical(name)


def _canonical(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in KNOWN_BACKENDS:
        raise ValueError(
            f"unknown backend {name!r}; known backends: {', '.join(sorted(KNOWN_BACKENDS))}")
    return key


def get_backend(name: Optional[str] = None) -> Backend:
    """The backend called ``name`` (default: the active one), importing its adapter on first use."""
    key = _canonical(name) if name is not None else _active_name()
    inst = _instances.get(key)
    if inst is not None:
        return inst
    adapter, framework, extra = KNOWN_BACKENDS[key]
    if importlib.util.find_spec(framework) is None:
        raise BackendNotInstalledError(
            f"the {key!r} backend needs the {framework!r} package, which is not installed; "
            f"install it with: pip install 'dualdl[{extra}]'")
    check = _BEFORE_IMPORT.get(key)
    if check is not None and framework not in sys.modules:
        mod_name, _, func = check.partition(":")
        getattr(importlib.import_module(mod_name), func)()
    module = importlib.import_module(adapter)
    inst = module.Backend()
    _instances[key] = inst
    for hook in _ON_CREATED:
        hook(inst)
    return inst


# called with each backend right after it is first built (dualdl.random applies a pending seed)
_ON_CREATED: List[Callable[[Backend], None]] = []


def on_backend_created(hook: Callable[[Backend], None]) -> None:
    """Run ``hook(backend)`` whenever a backend is first instantiated in this process."""
    _ON_CREATED.append(hook)


def backend_for(x: Any) -> Backend:
    """The backend that owns tensor ``x``, found by its type among frameworks already imported."""
    t = type(x)
    inst = _type_cache.get(t)
    if inst is not None:
        return inst
    for key, (_, framework, _) in KNOWN_BACKENDS.items():
        if framework in sys.modules:
            cand = get_backend(key)
            if isinstance(x, cand.tensor_types()):
                _type_cache[t] = cand
                return cand
    raise TypeError(
        f"expected a native tensor of a dualdl backend ({', '.join(KNOWN_BACKENDS)}), "
        f"got {t.__module__}.{t.__qualname__}")


# weak: a strong cache would keep write-once model classes (and what their module holds) alive
# until interpreter teardown, after MXNet's engine stopped (a distributed worker then aborts at exit)
_owner_cache: "weakref.WeakKeyDictionary[type, Optional[Backend]]" = weakref.WeakKeyDictionary()
_RAISE = object()


def backend_of(obj: Any, default: Any = _RAISE) -> Backend:
    """The backend that owns ``obj``: a native tensor, model, parameter, optimizer or
    device object (``torch.device`` / ``mx.Context``), found by its class among the frameworks
    already imported (an object of a framework that was never imported cannot exist). The one
    place where dualdl decides "which framework is this?".

    Raises ``TypeError`` naming the type when no backend owns it, unless ``default`` is given
    (returned instead, e.g. ``None``).
    """
    t = type(obj)
    if t in _owner_cache:
        inst = _owner_cache[t]
    else:
        inst = None
        for key, (adapter, framework, _) in KNOWN_BACKENDS.items():
            if framework in sys.modules or adapter in sys.modules:
                cand = get_backend(key)
                if cand.owns(obj):
                    inst = cand
                    break
        _owner_cache[t] = inst      # ownership is fixed by the class: a miss stays a miss
    if inst is not None:
        return inst
    if default is not _RAISE:
        return default
    raise TypeError(
        f"expected an object of a dualdl backend ({', '.join(KNOWN_BACKENDS)}): a native tensor, "
        f"model, parameter, optimizer or device; got {t.__module__}.{t.__qualname__}")


def _device_from_native(obj: Any) -> Optional[Device]:
    """A framework device object as a :class:`Device` (``None`` when no backend owns it)."""
    be = backend_of(obj, default=None)
    return be.device_from_native(obj) if be is not None else None


_devices.set_native_parser(_device_from_native)


def devices(backend: Optional[str] = None) -> List[Device]:
    """The usable devices of a backend (default: the active one): every GPU, else the CPU."""
    n = get_backend(backend).gpu_count()
    return [gpu(i) for i in range(n)] if n else [cpu(0)]


def visible_gpus(ids: Union[str, Sequence[int]]) -> None:
    """Set ``CUDA_VISIBLE_DEVICES`` (e.g. ``"1,2,3"``): afterwards those GPUs are ``gpu(0..2)``.

    Must run before any framework initialises CUDA: the variable is read once per process.
    Raises ``RuntimeError`` if torch or MXNet already did so (the setting would be ignored).
    """
    if not isinstance(ids, str):
        ids = ",".join(str(int(i)) for i in ids)
    ids = ids.replace(" ", "")
    if ids and not re.fullmatch(r"\d+(,\d+)*", ids):
        raise ValueError(f"visible_gpus expects comma-separated GPU indices like '1,2,3', got {ids!r}")
    for name, (_, framework, _) in KNOWN_BACKENDS.items():
        if framework in sys.modules and get_backend(name).cuda_initialized():
            raise RuntimeError(
                f"{framework} has already initialised CUDA in this process, so CUDA_VISIBLE_DEVICES "
                f"can no longer change which GPUs it sees; call dualdl.visible_gpus() before any GPU use")
    os.environ["CUDA_VISIBLE_DEVICES"] = ids


def available_backends() -> Sequence[str]:
    """Names of the backends whose framework is installed (nothing is imported)."""
    return [k for k, (_, fw, _) in KNOWN_BACKENDS.items() if importlib.util.find_spec(fw) is not None]


# ---- the active backend: a context variable, so threads and asyncio tasks each see their own --
def _default_name() -> str:
    env = config.backend()
    if env:
        try:
            return _canonical(env)
        except ValueError as e:
            raise ValueError(f"DUALDL_BACKEND: {e}") from None
    return "torch"


_active: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("dualdl_backend", default=None)


def _active_name() -> str:
    name = _active.get()
    return name if name is not None else _default_name()


def backend() -> str:
    """The name of the active backend ("torch" or "mxnet")."""
    return _active_name()


class use:
    """Set the active backend: ``dualdl.use("mxnet")``, or for a block only::

        with dualdl.use("mxnet"):
            net = Net()        # a Gluon HybridBlock

    The setting lives in a ``contextvars.ContextVar``: the context-manager form restores the
    previous backend on exit and is safe across threads and asyncio tasks.
    """

    def __init__(self, name: str):
        self.name = _canonical(name)
        self._token = _active.set(self.name)

    def __enter__(self) -> "use":
        return self

    def __exit__(self, *exc) -> None:
        _active.reset(self._token)

    def __repr__(self) -> str:
        return f"dualdl.use({self.name!r})"


@contextlib.contextmanager
def _using(name: Optional[str]) -> Iterator[Backend]:
    """Internal: run a block with ``name`` active (no-op for ``None``)."""
    be = get_backend(name)
    token = _active.set(be.name)
    try:
        yield be
    finally:
        _active.reset(token)
