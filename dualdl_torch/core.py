"""Tensors, devices and seeding on PyTorch."""
from __future__ import annotations

import os
from typing import Any, Tuple

import numpy as np
import torch

from dualdl.backend import Backend as _Contract
from dualdl.devices import Device

_NP_TO_TORCH = {
    np.dtype("float16"): torch.float16, np.dtype("float32"): torch.float32,
    np.dtype("float64"): torch.float64, np.dtype("int8"): torch.int8,
    np.dtype("int32"): torch.int32, np.dtype("int64"): torch.int64,
    np.dtype("uint8"): torch.uint8, np.dtype("bool"): torch.bool,
}
_TORCH_TO_NP = {v: k for k, v in _NP_TO_TORCH.items()}


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    return _NP_TO_TORCH[np.dtype(dtype)]


def native_device(device: Device) -> torch.device:
    """``gpu(i)`` -> ``cuda:i``; every ``cpu(i)`` -> the one torch CPU (``cpu(i>0)`` is virtual)."""
    return torch.device("cuda", device.index) if device.kind == "gpu" else torch.device("cpu")


class Backend(_Contract):
    name = "torch"
    framework = "torch"
    adapter = "dualdl_torch"

    def tensor_types(self) -> Tuple[type, ...]:
        return (torch.Tensor,)

    def from_numpy(self, a: np.ndarray, device: Device, dtype: np.dtype) -> torch.Tensor:
        # torch.from_numpy shares memory with `a`; dualdl always copies (as MXNet does).
        # (np.ascontiguousarray would turn a 0-d array into shape (1,))
        t = torch.from_numpy(np.array(a, dtype=dtype, order="C"))
        return t.to(native_device(device)) if device.kind == "gpu" else t

    def to_numpy(self, t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().numpy().copy()

    def shape(self, t):
        return tuple(t.shape)

    def dtype(self, t):
        return _TORCH_TO_NP[t.dtype]

    def reshape(self, t, shape):
        return t.reshape(shape)

    def device_of(self, t) -> Device:
        return Device("gpu", t.device.index or 0) if t.device.type == "cuda" else Device("cpu", 0)

    def to_device(self, t, device: Device):
        return t.to(native_device(device))

    def full(self, shape, value, dtype, device):
        return torch.full(shape, value, dtype=torch_dtype(dtype), device=native_device(device))

    def full_like(self, t, value):
        return torch.full_like(t, value)

    def arange(self, start, stop, step, dtype, device):
        return torch.arange(start, stop, step, dtype=torch_dtype(dtype), device=native_device(device))

    def gpu_count(self) -> int:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0

    def native_device(self, device: Device) -> torch.device:
        return native_device(device)

    def device_from_native(self, obj: torch.device) -> Device:
        kind = "gpu" if obj.type == "cuda" else obj.type
        if kind not in ("cpu", "gpu"):
            raise ValueError(f"unsupported torch device type {obj.type!r}; dualdl handles cpu and cuda")
        return Device(kind, obj.index or 0)

    def numpy_dtype(self, dtype) -> np.dtype:
        return _TORCH_TO_NP[dtype] if dtype in _TORCH_TO_NP else torch.empty((), dtype=dtype).numpy().dtype

    def native_lr_scheduler(self, name: str):
        # torch's own schedulers are the reference dualdl's neutral ones reproduce
        import torch.optim.lr_scheduler as tls
        return getattr(tls, name)

    native_state_tensors = True     # torch's optimizer.load_state_dict wants its tensors back

    def cuda_initialized(self) -> bool:
        return torch.cuda.is_initialized()

    def seed(self, seed: int, deterministic: bool) -> None:
        torch.manual_seed(seed)               # also seeds every CUDA device
        if deterministic:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.benchmark = False
            torch.use_deterministic_algorithms(True)
