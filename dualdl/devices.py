"""A neutral device value, mapped to ``torch.device`` or ``mx.Context`` by each backend.

Hides: MXNet names devices ``mx.cpu(i)``/``mx.gpu(i)`` (contexts), PyTorch ``torch.device("cuda:i")``.
MXNet has several real CPU contexts (``mx.cpu(0)``, ``mx.cpu(1)``) that behave as separate devices
for data parallelism; PyTorch has a single CPU device, so ``cpu(i)`` with ``i > 0`` maps to the
one torch CPU and is used as a virtual device by dualdl's data-parallel emulation.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import List, Sequence, Union

__all__ = ["Device", "cpu", "gpu", "device", "devices", "visible_gpus", "DeviceLike"]


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
    # native device objects, recognised without importing their framework
    mod = type(spec).__module__
    if mod.startswith("torch"):
        kind = "gpu" if spec.type == "cuda" else spec.type
        if kind not in ("cpu", "gpu"):
            raise ValueError(f"unsupported torch device type {spec.type!r}; dualdl handles cpu and cuda")
        return Device(kind, spec.index or 0)
    if mod.startswith("mxnet"):
        return Device("gpu" if spec.device_type == "gpu" else "cpu", int(spec.device_id))
    if isinstance(spec, str):
        m = _PATTERN.match(spec)
        if not m:
            raise ValueError(f"cannot parse device {spec!r}; expected 'cpu', 'cpu:N', 'gpu:N' or 'cuda:N'")
        kind = "cpu" if m.group(1).lower() == "cpu" else "gpu"
        return Device(kind, int(m.group(2) or 0))
    raise TypeError(f"cannot interpret {type(spec).__name__} {spec!r} as a device")


def devices(backend: str = None) -> List[Device]:
    """The usable devices of a backend (default: the active one): every GPU, else the CPU."""
    from .backend import get_backend
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
    from .backend import KNOWN_BACKENDS, get_backend
    for name, (_, framework, _) in KNOWN_BACKENDS.items():
        if framework in sys.modules and get_backend(name).cuda_initialized():
            raise RuntimeError(
                f"{framework} has already initialised CUDA in this process, so CUDA_VISIBLE_DEVICES "
                f"can no longer change which GPUs it sees; call dualdl.visible_gpus() before any GPU use")
    os.environ["CUDA_VISIBLE_DEVICES"] = ids
