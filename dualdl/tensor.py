"""Backend-neutral tensor functions; they dispatch on the tensor's type or the active backend.

dtype rule (identical on both backends): ``from_numpy`` keeps the numpy dtype exactly
(float64 stays float64, int64 stays int64). MXNet's ``nd.array`` would silently give float32;
PyTorch keeps the dtype, so dualdl follows PyTorch and passes ``dtype=`` through to MXNet.
Python scalars and lists become float32 (floats) / int64 (ints) / bool, on both.
Supported dtypes: float16/32/64, int8/32/64, uint8, bool.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from .backend import backend_for, backend_of, get_backend
from .devices import Device, DeviceLike, device as _parse_device

__all__ = [
    "from_numpy", "to_numpy", "item", "reshape", "to_device", "device_of", "is_tensor",
    "zeros", "ones", "full", "arange", "zeros_like", "ones_like", "full_like", "SUPPORTED_DTYPES",
]

SUPPORTED_DTYPES = tuple(np.dtype(d) for d in (
    "float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"))

ShapeLike = Union[int, Sequence[int]]


def _dtype(dtype: Any, default: Optional[np.dtype] = None) -> np.dtype:
    if dtype is None:
        return default
    if not isinstance(dtype, (str, np.dtype, type)):
        owner = backend_of(dtype, default=None)     # a framework's dtype object (torch.float32)
        if owner is not None:
            dtype = owner.numpy_dtype(dtype)
    d = np.dtype(dtype)
    if d not in SUPPORTED_DTYPES:
        raise TypeError(f"unsupported dtype {d}; dualdl supports {', '.join(map(str, SUPPORTED_DTYPES))}")
    return d


def _as_array(a: Any) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    arr = np.asarray(a)
    if arr.dtype.kind == "f" and not isinstance(a, np.generic):
        arr = arr.astype(np.float32)   # Python floats: float32, like torch.tensor; np.float64(1.5) keeps its dtype
    elif arr.dtype.kind in "iu" and not isinstance(a, np.generic):
        arr = arr.astype(np.int64)
    return arr


def from_numpy(a: Any, device: DeviceLike = None, dtype: Any = None, backend: Optional[str] = None):
    """A native tensor (of ``backend``, default the active one) holding a **copy** of ``a``.

    Hides: ``torch.from_numpy`` shares memory and ``mx.nd.array`` copies and casts to float32;
    here both copy and keep the dtype (see the module docstring).
    """
    arr = _as_array(a)
    dt = _dtype(dtype, arr.dtype)
    if arr.dtype not in SUPPORTED_DTYPES and dtype is None:
        raise TypeError(f"unsupported numpy dtype {arr.dtype}; pass dtype= one of "
                        f"{', '.join(map(str, SUPPORTED_DTYPES))}")
    be, d = get_backend(backend), _parse_device(device)
    _check_device(be, d)
    return be.from_numpy(arr, d, dt)


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a native tensor of an imported backend."""
    try:
        backend_for(x)
        return True
    except TypeError:
        return False


def to_numpy(t: Any) -> np.ndarray:
    """A numpy copy of a native tensor, detached from autograd, from any device
    (``asnumpy()`` on MXNet, ``detach().cpu().numpy()`` on torch)."""
    if isinstance(t, np.ndarray):
        return t
    return backend_for(t).to_numpy(t)


def item(t: Any) -> Union[float, int, bool]:
    """The Python scalar held by a one-element tensor.

    Hides: MXNet's ``asscalar()`` returns a numpy scalar (and a (1,1,1) array for (1,1,1) input);
    torch's ``item()`` returns a Python number. Here: always a Python ``float``/``int``/``bool``,
    and a ``ValueError`` naming the shape for anything with more than one element.
    """
    be = backend_for(t)
    shape = be.shape(t)
    n = int(np.prod(shape)) if shape else 1
    if n != 1:
        raise ValueError(f"item() needs a tensor with exactly one element, got shape {tuple(shape)} "
                         f"({n} elements)")
    return be.to_numpy(t).reshape(()).item()


def resolve_shape(shape: ShapeLike, size: int, current: Tuple[int, ...] = None) -> Tuple[int, ...]:
    """Resolve one ``-1`` in ``shape`` for ``size`` elements; rejects MXNet's codes 0/-2/-3/-4."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    bad = [s for s in shape if s < -1 or s == 0 and size != 0]
    if bad:
        raise ValueError(
            f"invalid reshape target {shape}: sizes must be positive or a single -1 "
            f"(MXNet's special codes 0/-2/-3/-4 are not accepted; write the sizes out, "
            f"e.g. (x.shape[0], -1))")
    if shape.count(-1) > 1:
        raise ValueError(f"invalid reshape target {shape}: only one -1 can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape tensor of shape {current} ({size} elements) into {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    elif known != size:
        raise ValueError(f"cannot reshape tensor of shape {current} ({size} elements) into {shape}")
    return shape


def reshape(t: Any, shape: ShapeLike):
    """Reshape with PyTorch's meaning: positive sizes and at most one ``-1`` (inferred); also
    ``dualdl.ops.reshape``. Works on MXNet Symbols (inside a hybridized forward) too.

    Hides: MXNet's ``reshape`` gives 0/-2/-3/-4 special meanings (copy/merge/split dims); they
    never leak through here (a ``ValueError`` on both backends). On torch this is
    ``Tensor.reshape`` (a view when possible); MXNet NDArrays of shape ``()`` or with a 0 size,
    which legacy ``reshape`` cannot produce, are rebuilt.
    """
    be = backend_for(t)
    if be.is_symbolic(t):               # no shape to resolve against: the adapter checks the codes
        return be.module("ops").reshape(t, shape)
    cur = tuple(be.shape(t))
    return be.reshape(t, resolve_shape(shape, math.prod(cur), cur))


def device_of(t: Any) -> Device:
    """The :class:`~dualdl.Device` a tensor lives on."""
    return backend_for(t).device_of(t)


def to_device(t: Any, device: DeviceLike):
    """Move a tensor (``as_in_context`` on MXNet, ``.to`` on torch); returns ``t`` itself if it is
    already there, on both."""
    be = backend_for(t)
    d = _parse_device(device)
    _check_device(be, d)
    return be.to_device(t, d)


def _check_device(be, d: Device) -> None:
    if d.kind == "gpu":
        n = be.gpu_count()
        if d.index >= n:
            raise RuntimeError(
                f"{d!r} requested on the {be.name} backend, but it sees {n} GPU(s)"
                + (" (no CUDA device is available; use dualdl.cpu())" if n == 0 else ""))


def _shape(shape: ShapeLike) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def full(shape: ShapeLike, value: Any, dtype: Any = None, device: DeviceLike = None,
         backend: Optional[str] = None):
    """A tensor filled with ``value`` (default dtype float32, like torch's default)."""
    be = get_backend(backend)
    d = _parse_device(device)
    _check_device(be, d)
    return be.full(_shape(shape), value, _dtype(dtype, np.dtype("float32")), d)


def zeros(shape: ShapeLike, dtype: Any = None, device: DeviceLike = None, backend: Optional[str] = None):
    return full(shape, 0, dtype, device, backend)


def ones(shape: ShapeLike, dtype: Any = None, device: DeviceLike = None, backend: Optional[str] = None):
    return full(shape, 1, dtype, device, backend)


def arange(start: float, stop: float = None, step: float = 1, dtype: Any = None,
           device: DeviceLike = None, backend: Optional[str] = None):
    """``arange`` with torch's dtype rule: int64 when all of start/stop/step are ints, else float32
    (MXNet's ``nd.arange`` would give float32 always)."""
    if stop is None:
        start, stop = 0, start
    is_int = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
    dt = _dtype(dtype, np.dtype("int64") if is_int else np.dtype("float32"))
    be = get_backend(backend)
    d = _parse_device(device)
    _check_device(be, d)
    return be.arange(start, stop, step, dt, d)


def _like(t: Any, value: Any, dtype: Any, device: DeviceLike, symbolic: Optional[str] = None):
    be = backend_for(t)
    if be.is_symbolic(t):
        if symbolic is None or dtype is not None or device is not None:
            raise TypeError(f"{symbolic or 'full_like'}() of an MXNet Symbol (a hybridized forward) "
                            f"takes no value, dtype= or device=: the symbol's own are used")
        return getattr(be.module("ops"), symbolic)(t)
    if dtype is None and device is None:
        return be.full_like(t, value)
    d = _parse_device(device) if device is not None else be.device_of(t)
    return be.full(tuple(be.shape(t)), value, _dtype(dtype, be.dtype(t)), d)


def zeros_like(t: Any, dtype: Any = None, device: DeviceLike = None):
    """Zeros with ``t``'s shape, and its dtype and device unless given; also
    ``dualdl.ops.zeros_like``. Works on MXNet Symbols (without dtype=/device=) and on MXNet
    NDArrays of shape ``()`` or with a 0 size (which ``nd.zeros_like`` rejects)."""
    return _like(t, 0, dtype, device, "zeros_like")


def ones_like(t: Any, dtype: Any = None, device: DeviceLike = None):
    """Ones, as :func:`zeros_like`; also ``dualdl.ops.ones_like``."""
    return _like(t, 1, dtype, device, "ones_like")


def full_like(t: Any, value: Any, dtype: Any = None, device: DeviceLike = None):
    return _like(t, value, dtype, device)
