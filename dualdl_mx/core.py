"""Tensors, devices and seeding on MXNet (legacy ``mx.nd`` NDArrays, as Gluon 1.x uses)."""
from __future__ import annotations

import os
from typing import Tuple

import numpy as np
import mxnet as mx

from dualdl.backend import Backend as _Contract
from dualdl.devices import Device
from .fast.host import host_array
from .torch_style import tracing


def native_device(device: Device) -> mx.Context:
    return mx.gpu(device.index) if device.kind == "gpu" else mx.cpu(device.index)


def _legacy_unshapeable(shape) -> bool:
    """Shapes that legacy ``mx.nd`` operators cannot produce: ``()`` and any size 0 mean "unknown"
    to their shape inference (``nd.zeros(())``, ``nd.full((5, 0), 1)`` and ``reshape((5, 0))``
    raise), though ``nd.array`` holds such arrays; they are built from numpy instead."""
    return len(shape) == 0 or 0 in shape


class Backend(_Contract):
    name = "mxnet"
    framework = "mxnet"
    adapter = "dualdl_mx"
    packages = ("gluonnlp", "gluoncv")

    def tensor_types(self) -> Tuple[type, ...]:
        # Symbols too: dualdl.ops dispatch inside hybridized forward passes
        return (mx.nd.NDArray, mx.sym.Symbol)

    def from_numpy(self, a: np.ndarray, device: Device, dtype: np.dtype) -> mx.nd.NDArray:
        # nd.array would cast float64/int64 to float32 unless dtype= is given.
        return host_array(a, native_device(device), dtype)

    def to_numpy(self, t) -> np.ndarray:
        return t.asnumpy()

    def shape(self, t):
        return tuple(t.shape)

    def dtype(self, t):
        return np.dtype(t.dtype)

    def reshape(self, t, shape):
        # shape is fully resolved by dualdl (positive sizes only): MXNet's 0/-2/-3/-4 codes never apply
        if _legacy_unshapeable(shape):        # no elements to keep a graph for: a new array
            return mx.nd.array(t.asnumpy().reshape(shape), ctx=t.context, dtype=t.dtype)
        return t.reshape(shape)

    def device_of(self, t) -> Device:
        if isinstance(t, mx.sym.Symbol):      # a hybridized forward: the graph runs where its inputs are
            return self.device_from_native(mx.current_context())
        return self.device_from_native(t.context)

    def to_device(self, t, device: Device):
        if isinstance(t, mx.sym.Symbol):      # a hybridized forward: the graph runs where its inputs are
            return t
        ctx = native_device(device)
        if t.context != ctx and _legacy_unshapeable(t.shape):     # _copyto cannot infer it either
            return mx.nd.array(t.asnumpy(), ctx=ctx, dtype=t.dtype)
        return t.as_in_context(ctx)

    def full(self, shape, value, dtype, device):
        if tracing():                         # made in a hybridized forward: a graph node
            return mx.sym.full(shape, value, dtype=np.dtype(dtype).name)
        if _legacy_unshapeable(shape):
            return mx.nd.array(np.full(shape, value, dtype=dtype), ctx=native_device(device), dtype=dtype)
        return mx.nd.full(shape, value, ctx=native_device(device), dtype=dtype)

    def full_like(self, t, value):
        if _legacy_unshapeable(t.shape):      # nd.zeros_like rejects () and 0-size arrays
            return mx.nd.array(np.full(t.shape, value, dtype=t.dtype), ctx=t.context, dtype=t.dtype)
        if value == 0:
            return mx.nd.zeros_like(t)
        if value == 1:
            return mx.nd.ones_like(t)
        return mx.nd.full(t.shape, value, ctx=t.context, dtype=t.dtype)

    def arange(self, start, stop, step, dtype, device):
        # nd.arange computes in the requested dtype; build in numpy for torch-identical values.
        if tracing():                         # made in a hybridized forward: a graph node (float64 steps)
            return mx.sym.arange(start, stop, step, dtype="float64").astype(np.dtype(dtype).name)
        return host_array(np.arange(start, stop, step, dtype=dtype), native_device(device), dtype)

    def gpu_count(self) -> int:
        try:
            return mx.context.num_gpus()
        except mx.base.MXNetError:
            return 0

    def native_device(self, device: Device) -> mx.Context:
        return native_device(device)

    def is_symbolic(self, t) -> bool:
        return isinstance(t, mx.sym.Symbol)

    def device_from_native(self, obj: mx.Context) -> Device:
        return Device("gpu" if obj.device_type == "gpu" else "cpu", int(obj.device_id))

    def cuda_initialized(self) -> bool:
        # MXNet initialises CUDA lazily on the first GPU op; a GPU-less build never does.
        return False

    def seed(self, seed: int, deterministic: bool) -> None:
        mx.random.seed(seed)                  # all contexts
        if deterministic:
            os.environ["MXNET_ENFORCE_DETERMINISM"] = "1"
            os.environ["MXNET_CUDNN_AUTOTUNE_DEFAULT"] = "0"
