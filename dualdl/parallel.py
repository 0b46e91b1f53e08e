"""Backend-neutral pieces of single-node data parallelism: strategies, devices, batch splits.

Hides: MXNet's ``split_and_load`` defaults to ``even_split=True`` (10 rows over 3 contexts raises)
and splits ``[4, 3, 3]`` with ``even_split=False``; torch's ``DataParallel`` scatters with
``Tensor.chunk`` (``[4, 4, 2]``, and fewer pieces than devices for small batches). dualdl splits
every batch the same way on both: ``np.array_split`` sizes (``[4, 3, 3]``), never fewer pieces than
devices (a batch smaller than the device count is an error).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .devices import Device, device as _parse_device

__all__ = ["STRATEGIES", "DEFAULT_STRATEGY", "resolve_strategy", "resolve_devices", "split_sizes",
           "split_bounds", "batch_size_of", "split_batch", "sum_gradients"]

# strategy -> one-line meaning (docs/training.md has the full story)
STRATEGIES = {
    "data_parallel": "PyTorch DataParallel: scatter -> replica forward -> outputs gathered on the "
                     "first device -> one loss there",
    "split_and_load": "MXNet's recipe: split -> per-device forward and loss -> backward per device -> "
                      "gradients summed over devices -> step with the global batch",
    "per_device_loss": "the loss runs next to each replica and only per-device losses come back "
                       "(same gradients as split_and_load; no first-device imbalance)",
}
# each backend's native recipe
DEFAULT_STRATEGY = {"torch": "data_parallel", "mxnet": "split_and_load"}


def resolve_strategy(strategy: Optional[str], backend: str) -> str:
    """The strategy name, defaulting to the backend's native one."""
    if strategy is None:
        return DEFAULT_STRATEGY[backend]
    key = str(strategy).strip().lower().replace("-", "_")
    if key not in STRATEGIES:
        raise ValueError(f"unknown data-parallel strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)} (or None for the backend's default, "
                         f"{DEFAULT_STRATEGY[backend]!r} on {backend})")
    return key


def resolve_devices(devices: Any, default: Device) -> List[Device]:
    """A non-empty list of distinct devices of one kind (``None`` -> ``[default]``)."""
    if devices is None:
        return [default]
    if isinstance(devices, (str, Device)) or not isinstance(devices, (list, tuple)):
        devices = [devices]
    out = [_parse_device(d) for d in devices]
    if not out:
        raise ValueError("devices must name at least one device, got an empty list")
    if len(set(out)) != len(out):
        raise ValueError(f"devices must be distinct, got {out}")
    kinds = {d.kind for d in out}
    if len(kinds) > 1:
        raise ValueError(f"devices mix CPUs and GPUs ({out}); data parallelism needs devices of one kind")
    return out


def split_sizes(n: int, parts: int) -> List[int]:
    """Sizes of ``n`` rows over ``parts`` devices, as ``np.array_split``/``torch.tensor_split``/
    MXNet ``split_and_load(even_split=False)``: the first ``n % parts`` pieces get one more."""
    if parts < 1:
        raise ValueError(f"need at least one device, got {parts}")
    if n < parts:
        raise ValueError(f"a batch of {n} sample(s) cannot be split over {parts} devices; "
                         f"use a batch of at least {parts} or fewer devices")
    q, r = divmod(n, parts)
    return [q + 1 if i < r else q for i in range(parts)]


def split_bounds(sizes: Sequence[int]) -> List[Tuple[int, int]]:
    """``[(begin, end), ...]`` for consecutive pieces of the given sizes."""
    ends = np.cumsum(sizes).tolist()
    return [(e - s, e) for s, e in zip(sizes, ends)]


def batch_size_of(shape: Tuple[int, ...], axis: int, what: str) -> int:
    """The size of ``shape`` along ``axis`` (negative counts from the end), with a clear error."""
    nd = len(shape)
    ax = axis + nd if axis < 0 else axis
    if not 0 <= ax < nd:
        raise ValueError(f"{what} has shape {tuple(shape)}: no batch axis {axis} "
                         f"(set batch_axis= to where the samples are, e.g. 1 for TNC)")
    return int(shape[ax])


# ---- pieces for hand-written data-parallel loops ---------------------------------------------------
def split_batch(x: Any, devices: Sequence[Any], batch_axis: int = 0, backend: Optional[str] = None) -> List[Any]:
    """Split ``x`` (numpy or a native tensor) into ``np.array_split`` pieces along ``batch_axis``,
    piece ``i`` on ``devices[i]``: MXNet's ``split_and_load(even_split=False)`` on both backends
    (on torch, ``cpu(i)`` are virtual devices: every piece is on the CPU). A 1-D array splits on
    axis 0. Numpy input becomes a tensor of ``backend`` (default: the active one)."""
    from .backend import backend_for, get_backend
    devs = resolve_devices(list(devices), Device("cpu", 0))
    be = get_backend(backend) if isinstance(x, np.ndarray) else backend_for(x)
    shape = tuple(x.shape)
    axis = 0 if len(shape) == 1 else batch_axis
    n = batch_size_of(shape, axis, "x")
    if n == 0:
        raise ValueError("cannot split an empty batch (0 samples on the batch axis)")
    axis = axis + len(shape) if axis < 0 else axis
    return be.module("replicas").split_to(x, axis, split_sizes(n, len(devs)), devs)


def sum_gradients(model: Any) -> None:
    """Sum the gradients of every context copy of ``model``'s parameters into every copy (what
    a Gluon kvstore does; without it the copies diverge silently). A no-op on torch, whose
    replicas accumulate into one parameter. Call it after backward, before ``opt.step()``."""
    from .state import backend_of_model
    grads = backend_of_model(model).module("grads")
    grads.allreduce_grads([p for _, p in grads.trainable(model)])
