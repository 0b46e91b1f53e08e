"""Single-node data parallelism on MXNet/Gluon (several contexts): the batch split over
contexts, one step's replicas and the deadlock guard.

Hides:
- ``split_and_load`` defaults to ``even_split=True`` (raises for 10 rows over 3 contexts) and
  ``batch_axis=0`` (silently splits *time* for TNC input): dualdl splits with
  ``np.array_split`` sizes on the configured axis.
- With ``OMP_NUM_THREADS`` above 1, operators issued on two CPU contexts at once can deadlock
  (measured: ``nd.dot`` on cpu(0) and cpu(1) hangs every time). Then dualdl serialises the
  contexts (waits for one context's work before issuing the next's) and warns once. With
  ``MXNET_CPU_WORKER_NTHREADS`` > 1 as well it hangs even on one context: dualdl can only warn.
- ``data_parallel`` (PyTorch semantics) copies the outputs to context 0 and takes one loss there;
  its gradient is sent back to each context's output, whose backward then runs per context.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, List, Sequence, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

from dualdl import config
from dualdl.devices import Device
from dualdl.parallel import split_bounds
from .base import Module as _DlModule
from .core import native_device
from .grads import model_devices
from .fast.host import host_array

__all__ = ["split_to", "Replicas", "needs_serial", "worker_threads_risk"]


# ---- the deadlock guard ----------------------------------------------------------------------
def _env_int(name: str) -> int:
    try:
        return int(config.get(name) or "1")
    except ValueError:
        return 1


def needs_serial(devices: Sequence[Device]) -> bool:
    """Whether several CPU contexts with multi-threaded OpenMP operators risk MXNet's deadlock
    (measured: concurrent ``nd.dot`` on cpu(0) and cpu(1) hangs with OMP_NUM_THREADS=2, never
    with 1 or unset)."""
    return sum(d.kind == "cpu" for d in devices) > 1 and _env_int("OMP_NUM_THREADS") > 1


def worker_threads_risk(devices: Sequence[Device]) -> bool:
    """OMP_NUM_THREADS>1 with MXNET_CPU_WORKER_NTHREADS>1 hangs even on ONE CPU context (two dots
    run concurrently by the engine's workers); no ordering between contexts can prevent it."""
    return (any(d.kind == "cpu" for d in devices) and _env_int("OMP_NUM_THREADS") > 1
            and _env_int("MXNET_CPU_WORKER_NTHREADS") > 1)


_WARNED_SERIAL = False
_WARNED_WORKERS = False


def split_to(a: Any, axis: int, sizes: List[int], devices: List[Device]) -> List[nd.NDArray]:
    """Pieces of ``a`` of the given sizes along ``axis``, piece i on context devices[i]."""
    return [_slice(a, axis, b, e, native_device(d)) for (b, e), d in zip(split_bounds(sizes), devices)]


# ---- the data-parallel step ------------------------------------------------------------------
def _to_ctx(a: Any, ctx: mx.Context) -> nd.NDArray:
    if isinstance(a, np.ndarray):
        return host_array(a, ctx)
    if isinstance(a, nd.NDArray):
        return a.as_in_context(ctx)
    raise TypeError(f"expected a numpy array or an MXNet NDArray, got {type(a).__name__}")


def _slice(a: Any, axis: int, begin: int, end: int, ctx: mx.Context) -> nd.NDArray:
    if isinstance(a, np.ndarray):
        idx = [slice(None)] * a.ndim
        idx[axis] = slice(begin, end)
        return host_array(a[tuple(idx)], ctx)
    return nd.slice_axis(a, axis=axis, begin=begin, end=end).as_in_context(ctx)


def _flat(out: Any) -> List[nd.NDArray]:
    if isinstance(out, nd.NDArray):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    raise TypeError(f"cannot gather model outputs of type {type(out).__name__}; return an NDArray "
                    f"or a tuple of NDArrays")


def _unflat(like: Any, flat: List[nd.NDArray]):
    it = iter(flat)

    def build(o):
        if isinstance(o, nd.NDArray):
            return next(it)
        return type(o)(build(v) for v in o)
    return build(like)


class Replicas:
    """Runs forward, loss and backward of one batch over ``devices`` (MXNet contexts).

    The model must live on ``devices[0]`` (it is then replicated on every context) or already on
    exactly ``devices``. ``objective(L, b) -> (grad_objective, report)`` as in ``dualdl.trainer``.
    """

    def __init__(self, model: gluon.Block, devices: List[Device], strategy: str):
        global _WARNED_SERIAL, _WARNED_WORKERS
        self.model, self.devices, self.strategy = model, devices, strategy
        gpus = mx.context.num_gpus() if any(d.kind == "gpu" for d in devices) else 0
        for d in devices:
            if d.kind == "gpu" and d.index >= gpus:
                raise ValueError(f"device {d!r} requested, but MXNet sees {gpus} GPU(s)")
        self.ctxs = [native_device(d) for d in devices]
        have = model_devices(model)
        if have != list(devices):
            if have != [devices[0]]:
                raise ValueError(f"the model is on {have} but the devices are {list(devices)}: it must "
                                 f"be on the first device {devices[0]!r} (it is then replicated) or "
                                 f"on exactly these devices")
            if isinstance(model, _DlModule):
                model.to(list(self.ctxs))
            else:
                model.collect_params().reset_ctx(self.ctxs)
        self.serial = needs_serial(devices)
        if self.serial and not _WARNED_SERIAL:
            _WARNED_SERIAL = True
            warnings.warn(
                "MXNet with several CPU contexts and OMP_NUM_THREADS > 1 can deadlock when two contexts "
                "run operators at once; dualdl runs the contexts one after the other. Set "
                "OMP_NUM_THREADS=1 to run them concurrently.", RuntimeWarning, stacklevel=3)
        if worker_threads_risk(devices) and not _WARNED_WORKERS:
            _WARNED_WORKERS = True
            warnings.warn(
                "OMP_NUM_THREADS > 1 together with MXNET_CPU_WORKER_NTHREADS > 1 can deadlock MXNet even "
                "on one CPU context (measured with nd.dot); set one of them to 1.",
                RuntimeWarning, stacklevel=3)

    def _parts(self, arrays, axes, sizes) -> List[Tuple[nd.NDArray, ...]]:
        if len(sizes) == 1:
            return [tuple(_to_ctx(a, self.ctxs[0]) for a in arrays)]
        return [tuple(_slice(a, ax, b, e, c) for a, ax in zip(arrays, axes))
                for (b, e), c in zip(split_bounds(sizes), self.ctxs)]

    def _wait(self) -> None:
        if self.serial:
            nd.waitall()

    def run(self, xs, x_axes, ys, y_axes, out_axis: int, sizes: List[int], loss_fn: Callable,
            objective: Callable, read: bool = True) -> Any:
        """Forward, loss and backward; returns the loss as a float, or with ``read=False`` the
        loss arrays unread (for :meth:`loss_value` and ``optim.step_if_finite``): reading waits
        for the backward pass, so the Trainer queues its step first."""
        model, n, B = self.model, len(sizes), sum(sizes)
        training = bool(getattr(model, "training", True))
        x_parts = self._parts(xs, x_axes, sizes)
        reports = []
        if n == 1 or self.strategy != "data_parallel":
            y_parts = self._parts(ys, y_axes, sizes)
            objs = []
            for i in range(n):
                with autograd.record(train_mode=training):
                    obj, rep = objective(loss_fn(model(*x_parts[i]), *y_parts[i]), sizes[i])
                reports.append(rep)
                if self.serial:
                    obj.backward()
                    nd.waitall()
                else:
                    objs.append(obj)
            if objs:
                autograd.backward(objs)
        else:
            outs = []
            for i in range(n):
                with autograd.record(train_mode=training):
                    outs.append(model(*x_parts[i]))
                self._wait()
            flats = [_flat(o) for o in outs]
            leaves = []
            for f in flats:
                lv = [t.as_in_context(self.ctxs[0]).detach() for t in f]
                for t in lv:
                    t.attach_grad()
                leaves.append(lv)
            y0 = [_to_ctx(a, self.ctxs[0]) for a in ys]
            with autograd.record(train_mode=training):
                cat = [nd.concat(*[lv[k] for lv in leaves], dim=out_axis) for k in range(len(leaves[0]))]
                obj, rep = objective(loss_fn(_unflat(outs[0], cat), *y0), B)
            obj.backward()
            reports.append(rep)
            self._wait()
            for f, lv, c in zip(flats, leaves, self.ctxs):
                autograd.backward(f, head_grads=[t.grad.as_in_context(c) for t in lv])
                self._wait()
        return self.loss_value(reports) if read else reports

    @staticmethod
    def loss_value(reports: List[nd.NDArray]) -> float:
        """The loss :meth:`run` returned unread, as a float (a host read; summed in float64, so
        that finite pieces cannot add up to inf after ``step_if_finite`` found them finite)."""
        return float(sum(float(r.asnumpy().sum(dtype=np.float64)) for r in reports))

    def evaluate(self, xs, x_axes, ys, out_axis: int, sizes: List[int], loss_fn: Callable,
                 objective: Callable):
        """Forward each piece without recording, gather the outputs on context 0, one loss."""
        parts = self._parts(xs, x_axes, sizes)
        with autograd.predict_mode():
            outs = []
            for p in parts:
                outs.append(self.model(*p))
                self._wait()
            flats = [[t.as_in_context(self.ctxs[0]) for t in _flat(o)] for o in outs]
            cat = [nd.concat(*[f[k] for f in flats], dim=out_axis) if len(flats) > 1 else flats[0][k]
                   for k in range(len(flats[0]))]
            out = _unflat(outs[0], cat)
            loss = None
            if ys is not None:
                _, rep = objective(loss_fn(out, *[_to_ctx(a, self.ctxs[0]) for a in ys]), sum(sizes))
                loss = float(rep.asnumpy().sum())
        return loss, out
