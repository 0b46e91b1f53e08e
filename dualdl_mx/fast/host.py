"""Host (numpy) data into NDArrays without waiting for MXNet's engine.

MXNet difference hidden here: ``nd.array`` copies with ``SyncCopyFromCPU``, which first pushes an
empty write op onto the new array and waits for it. On CPU that op runs on the engine's worker
queue behind every operator already pushed, so a constant made in the middle of a step (a loss's
label table, a piece of a host batch, an index list) waits for the forward pass queued before it,
and the engine then idles while Python queues the rest. Measured: ``nd.array`` of 100 floats takes
0.29 ms on an idle engine and 24 ms behind ten queued (512, 512) matmuls; the demo CRNN's eager
step spent 2.3 ms in its CTC loss that way (benchmarks/findings.md).

:func:`host_array` instead copies the data into a private, 64-byte aligned host buffer (MXNet's
own CPU alignment) and hands that buffer to MXNet through DLPack (``nd.from_numpy(zero_copy=True)``):
the NDArray owns it, and no engine op is pushed. Another context gets it by an engine-ordered copy.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import mxnet as mx
from mxnet import nd

__all__ = ["host_array"]

_DLPACK = frozenset(("float16", "float32", "float64", "int32", "int64", "uint8"))  # dtypes both sides know
_ALIGN = 64
_CPU0 = mx.cpu(0)


def _aligned_copy(a: Any, dt: np.dtype) -> np.ndarray:
    """A C-contiguous copy of ``a`` in dtype ``dt`` whose data starts on a 64-byte boundary."""
    src = np.asarray(a, dtype=dt)
    buf = np.empty(src.nbytes + _ALIGN, dtype=np.uint8)
    off = (-buf.ctypes.data) % _ALIGN
    out = buf[off:off + src.nbytes].view(dt).reshape(src.shape)
    np.copyto(out, src)
    return out


def host_array(a: Any, ctx: mx.Context, dtype: Optional[Any] = None) -> nd.NDArray:
    """``nd.array(a, ctx=ctx, dtype=dtype)`` (a copy; ``dtype`` defaults to ``a``'s) that does
    not wait for the operators queued on the engine. 0-d and empty arrays, and dtypes DLPack
    and MXNet do not share (int8, bool), take ``nd.array``."""
    dt = np.dtype(dtype if dtype is not None else np.asarray(a).dtype)
    src = np.asarray(a, dtype=dt)
    if src.ndim == 0 or src.size == 0 or dt.name not in _DLPACK:
        return nd.array(src, ctx=ctx, dtype=dt.name)
    out = nd.from_numpy(_aligned_copy(src, dt), zero_copy=True)
    return out if ctx == _CPU0 else out.as_in_context(ctx)
