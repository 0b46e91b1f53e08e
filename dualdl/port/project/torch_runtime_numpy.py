"""The numpy-interface part of a converted project's ``gluon2torch.py`` (see
:mod:`dualdl.port.project.torch_runtime`, copied into the same file): ``mx.np`` array creation,
``np.dot``, ``npx.set_np``, a Gluon Parameter's ``data()``/``list_ctx()`` and
``gluon.data.vision`` used as a value. Torch and numpy only.

What it hides:

* ``mx.np.array`` of Python data is float32 (numpy's and torch's: float64 / int64); of a numpy
  array it keeps the dtype. ``np.zeros``/``np.ones`` are float32 unless told; all take ``ctx``. In
  the proof's float64 run (``GLUON2TORCH_DTYPE=float64``) MXNet's float32 default is float64, as
  the batches are.
* ``np.dot`` contracts the last axis of ``a`` with the second-to-last of ``b`` (``matmul`` on
  2-D, ``tensordot`` beyond; the registry's ``_np_dot`` needs the ranks, known here at run time).
* MXNet records only inside ``autograd.record()`` and ``attach_grad()``'s gradient is
  overwritten by each backward (``grad_req='write'``); torch records every op on a tensor that
  requires grad (an in-place write on such a leaf is refused: d2l's ``sgd`` does
  ``param[:] = param - lr * param.grad / batch_size``) and accumulates gradients:
  :func:`unrecorded` and :func:`attach_grad`.
* Gluon's ``Parameter.data()`` is the array; torch's parameter is the array itself (with its
  ``.grad``), so ``data(p)`` is ``p`` and ``list_ctx(p)`` its device.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional

import numpy as np
import torch

from .torch_runtime import _TRAINING, asnumpy
from .torch_runtime_train import _float64


def set_np(shape: bool = True, array: bool = True, dtype: bool = False) -> None:
    """``npx.set_np()``: MXNet's numpy semantics (zero-size shapes, numpy arrays) are torch's own;
    nothing to switch."""


def _default_float(dtype: Any) -> Any:
    if dtype is None or dtype in ("float32", np.float32, torch.float32):
        return torch.float64 if _float64() else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    return torch.from_numpy(np.zeros(0, np.dtype(dtype))).dtype


def np_array(obj: Any, dtype: Any = None, ctx: Any = None, **_: Any) -> torch.Tensor:
    """``mx.np.array(obj, dtype, ctx)``: float32 for Python data unless ``dtype``; a numpy array's
    or a tensor's dtype kept (float32 data read as float64 in the proof's float64 run)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().clone()
        if dtype is not None:
            t = t.to(_default_float(dtype))
        elif t.dtype == torch.float32 and _float64():
            t = t.double()
    elif isinstance(obj, np.ndarray) and dtype is None:
        t = torch.from_numpy(np.array(obj))
        if t.dtype == torch.float32 and _float64():
            t = t.double()
    else:
        t = torch.tensor(np.asarray(obj, dtype=np.float64 if dtype is None else None),
                         dtype=_default_float(dtype))
    return t.to(ctx) if ctx is not None else t


def np_zeros(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
             **_: Any) -> torch.Tensor:
    """``mx.np.zeros(shape, dtype=float32, order, ctx)``."""
    return torch.zeros(shape, dtype=_default_float(dtype), device=ctx)


def np_ones(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
            **_: Any) -> torch.Tensor:
    return torch.ones(shape, dtype=_default_float(dtype), device=ctx)


def np_random_normal(loc: float = 0.0, scale: float = 1.0, size: Any = None, dtype: Any = None,
                     ctx: Any = None, **_: Any) -> torch.Tensor:
    """``mx.np.random.normal``: float32 draws from torch's generator (not MXNet's: the values
    differ; a proof starts both runs from the Gluon run's weights)."""
    size = () if size is None else (size,) if isinstance(size, int) else tuple(size)
    return torch.normal(float(loc), float(scale), size, dtype=_default_float(dtype), device=ctx)


def np_random_uniform(low: float = 0.0, high: float = 1.0, size: Any = None, dtype: Any = None,
                      ctx: Any = None, **_: Any) -> torch.Tensor:
    size = () if size is None else (size,) if isinstance(size, int) else tuple(size)
    return torch.empty(size, dtype=_default_float(dtype), device=ctx).uniform_(low, high)


def np_arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, ctx: Any = None,
              **_: Any) -> torch.Tensor:
    """``mx.np.arange``: float32 unless ``dtype`` (numpy's and torch's: int64 for integers)."""
    if stop is None:
        start, stop = 0, start
    return torch.arange(start, stop, step, dtype=_default_float(dtype), device=ctx)


def np_full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
            **_: Any) -> torch.Tensor:
    return torch.full((shape,) if isinstance(shape, int) else tuple(shape), float(fill_value),
                      dtype=_default_float(dtype), device=ctx)


def np_linspace(start: float, stop: float, num: int = 50, endpoint: bool = True,
                retstep: bool = False, dtype: Any = None, ctx: Any = None, **_: Any) -> Any:
    """``mx.np.linspace`` (float32), computed in float64 as numpy does, then rounded."""
    step = (stop - start) / max(num - 1 if endpoint else num, 1)
    out = (torch.arange(num, dtype=torch.float64) * step + start).to(_default_float(dtype))
    if endpoint and num > 1:
        out[-1] = stop
    out = out.to(ctx) if ctx is not None else out
    return (out, step) if retstep else out


def np_eye(N: int, M: Optional[int] = None, k: int = 0, dtype: Any = None, ctx: Any = None,
           **_: Any) -> torch.Tensor:
    """``mx.np.eye``: float32 ones on the ``k``-th diagonal."""
    out = torch.zeros(N, N if M is None else M, dtype=_default_float(dtype), device=ctx)
    out.diagonal(k).fill_(1.0)
    return out


def np_dot(a: Any, b: Any) -> Any:
    """``mx.np.dot``: numpy's dot (``matmul`` up to 2-D, else the last axis of ``a`` with the
    second-to-last of ``b``)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return np.dot(asnumpy(a), asnumpy(b))
    if a.dim() == 0 or b.dim() == 0:
        return a * b
    if a.dim() <= 2 and b.dim() <= 2:
        return torch.matmul(a, b)
    return torch.tensordot(a, b, dims=([a.dim() - 1], [max(b.dim() - 2, 0)]))


def npx_batch_dot(a: torch.Tensor, b: torch.Tensor, transpose_a: bool = False,
                  transpose_b: bool = False, **_: Any) -> torch.Tensor:
    """``npx.batch_dot``: a matmul over the last two axes, either side transposed there."""
    return torch.matmul(a.transpose(-1, -2) if transpose_a else a,
                        b.transpose(-1, -2) if transpose_b else b)


def np_transpose(a: Any, axes: Any = None) -> Any:
    """``mx.np.transpose(a, axes)``: the axes reversed without ``axes`` (torch's ``transpose``
    swaps two)."""
    if not isinstance(a, torch.Tensor):
        return np.transpose(asnumpy(a), axes)
    return a.permute(*(tuple(axes) if axes is not None else range(a.dim() - 1, -1, -1)))


def data(p: Any, ctx: Any = None) -> Any:
    """``param.data(ctx)``: a torch parameter is its own data (``.grad`` included); anything
    else keeps its own ``data`` method."""
    if isinstance(p, torch.Tensor):
        return p
    return p.data(ctx) if ctx is not None else p.data()


def list_ctx(p: Any) -> List[Any]:
    """``param.list_ctx()``: the one device a torch parameter lives on."""
    return [p.device] if isinstance(p, torch.Tensor) else p.list_ctx()


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """A whole-array write (``x[:] = ...``) as MXNet runs it: outside ``record()`` no graph op
    (torch's no_grad; torch would refuse it on a leaf that requires grad), inside it recorded."""
    if len(_TRAINING) > 1 and torch.is_grad_enabled():
        yield
        return
    with torch.no_grad():
        yield


def attach_grad(x: torch.Tensor, grad_req: str = "write", stype: Any = None) -> None:
    """``x.attach_grad(grad_req)``: a gradient for ``x``; ``'write'`` (Gluon's default) is
    overwritten by each backward (torch accumulates: a hook clears the old gradient before the
    new one lands, once per backward), ``'add'`` accumulates, ``'null'`` none."""
    x.requires_grad_(grad_req != "null")
    if grad_req == "write" and not getattr(x, "_dualdl_write", False):
        x._dualdl_write = True
        x.register_hook(lambda g, x=x: setattr(x, "grad", None))


class _Namespace:
    """A Gluon module used as a value (``dataset = gluon.data.vision``): its names, resolved in
    this file when used (``dataset.FashionMNIST``, ``dataset.transforms.ToTensor``)."""

    def __init__(self, path: str, children: Optional[dict] = None):
        self._path, self._children = path, dict(children or {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._children:
            return self._children[name]
        if name in globals():
            return globals()[name]
        raise AttributeError(f"{self._path}.{name} has no torch twin in gluon2torch; convert "
                             f"the code that uses it by hand")


vision = _Namespace("gluon.data.vision",
                    {"transforms": _Namespace("gluon.data.vision.transforms")})
