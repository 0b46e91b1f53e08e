"""A neutral device value, mapped to ``torch.device`` or ``mx.Context`` by each backend.

Hides: MXNet names devices ``mx.cpu(i)``/``mx.gpu(i)`` (contexts), PyTorch ``torch.device("cuda:i")``.
MXNet has several real CPU contexts (``mx.cpu(0)``, ``mx.cpu(1)``) that behave as separate devices
for data parallelism; PyTorch has a single CPU device, so ``cpu(i)`` with ``i > 0`` maps to the
one torch CPU and is used as a virtual device by dualdl's data-parallel emulation.

A leaf: imports nothing from dualdl. Native device objects are parsed by the backend that owns
them (``Backend.device_from_native``), reached through a hook that :mod:`dualdl.backend` fills;
the questions that need a backend (:func:`dualdl.backend.devices`, :func:`dualdl.backend.visible_gpus`)
live there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

__all__ = ["Device", "cpu", "gpu", "device", "DeviceLike", "set_native_parser"]


@dataclass(frozen=True, order=True)
class Device:
    """``Device("cpu", 0)`` or ``Device("gpu", 1)``; hashable and comparable."""

    kind: str
    index: int = 0

    def __post_init__(self):
        if self.kind not in ("cpu", "gpu"):
            raise ValueError(f"device kind must be 'cpu' or 'gpu', got {self.kind!r}")
        if not isinstance(self.index, int) or self.index < 0:
            raise ValueError(f"device index must be a non-negative int, got {self.index!r}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"

    def __repr__(self) -> str:
        return f"dualdl.{self.kind}({self.index})"


DeviceLike = Union[Device, str, int, None, object]


def cpu(index: int = 0) -> Device:
    """The CPU; ``cpu(1)`` is MXNet's second CPU context (a virtual device on torch)."""
    return Device("cpu", index)


def gpu(index: int = 0) -> Device:
    """GPU ``index`` (as numbered after ``CUDA_VISIBLE_DEVICES``)."""
    return Device("gpu", index)


_PATTERN = re.compile(r"^\s*(cpu|gpu|cuda)\s*(?:[:(]\s*(\d+)\s*\)?)?\s*$", re.IGNORECASE)


# native device object -> Device, or None when no backend owns it; set by dualdl.backend
_native_parser: Optional[Callable[[Any], Optional[Device]]] = None


def set_native_parser(parser: Optional[Callable[[Any], Optional[Device]]]) -> None:
    """Install the function that maps a framework's device object (``torch.device``,
    ``mx.Context``, ...) to a :class:`Device`, or returns ``None`` for an object no backend owns."""
    global _native_parser
    _native_parser = parser


def device(spec: DeviceLike = None) -> Device:
    """Parse a device: ``"cpu"``, ``"cpu:1"``, ``"gpu:1"``, ``"cuda:1"``, ``"cuda"``, an int (a GPU
    index), a :class:`Device`, a ``torch.device`` or an ``mx.Context``. ``None`` means ``cpu(0)``."""
    if spec is None:
        return cpu(0)
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, bool):
        raise TypeError(f"cannot interpret {spec!r} as a device")
    if isinstance(spec, int):
        return gpu(spec)
    if isinstance(spec, str):
        m = _PATTERN.match(spec)
        if not m:
            raise ValueError(f"cannot parse device {spec!r}; expected 'cpu', 'cpu:N', 'gpu:N' or 'cuda:N'")
        kind = "cpu" if m.group(1).lower() == "cpu" else "gpu"
        return Device(kind, int(m.group(2) or 0))
    native = _native_parser(spec) if _native_parser is not None else None
    if native is not None:
        return native
    raise TypeError(f"cannot interpret {type(spec).__name__} {spec!r} as a device")
