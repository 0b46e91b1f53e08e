"""Single-node data parallelism and autograd helpers on MXNet/Gluon (several contexts).

Hides:
- ``split_and_load`` defaults to ``even_split=True`` (raises for 10 rows over 3 contexts) and
  ``batch_axis=0`` (silently splits *time* for TNC input): dualdl splits with
  ``np.array_split`` sizes on the configured axis.
- A Gluon ``Trainer`` with ``kvstore=None`` over two contexts updates each copy with its own
  gradient and the copies diverge silently. dualdl sums the gradients of all context copies into
  every copy before the optimizer reads copy 0, and dualdl optimizers write the result to all.
- BatchNorm running statistics are per context: each copy is updated by its own piece. dualdl
  keeps context 0's (as torch DataParallel keeps replica 0's) and copies them to the other
  contexts after each step, so the copies never drift.
- With ``OMP_NUM_THREADS`` above 1, operators issued on two CPU contexts at once can deadlock
  (measured: ``nd.dot`` on cpu(0) and cpu(1) hangs every time). Then dualdl serialises the
  contexts (waits for one context's work before issuing the next's) and warns once. With
  ``MXNET_CPU_WORKER_NTHREADS`` > 1 as well it hangs even on one context: dualdl can only warn.
- ``data_parallel`` (PyTorch semantics) copies the outputs to context 0 and takes one loss there;
  its gradient is sent back to each context's output, whose backward then runs per context.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

from dualdl.devices import Device
from dualdl.parallel import split_bounds
from .core import native_device

__all__ = ["record", "no_grad", "backward", "is_model", "model_devices", "trainable", "Replicas",
           "zero_grad", "scale_grads", "allreduce_grads", "stale", "snapshot_buffers",
           "restore_buffers", "sync_buffers", "rng_state", "set_rng_state", "grad_arrays", "split_to",
           "needs_serial", "worker_threads_risk"]


# ---- autograd --------------------------------------------------------------------------------
def record(train_mode: bool = True):
    return autograd.record(train_mode=train_mode)


def no_grad():
    return autograd.pause()


def backward(losses: List[nd.NDArray], grads: Optional[List[Any]], retain_graph: bool) -> None:
    for loss in losses:
        if not isinstance(loss, nd.NDArray):
            raise TypeError(f"backward() expects NDArrays on the mxnet backend, got {type(loss).__name__}")
    autograd.backward(losses, head_grads=grads, retain_graph=retain_graph)


# ---- model inspection ------------------------------------------------------------------------
def is_model(model: Any) -> bool:
    return isinstance(model, gluon.Block)


def _all_params(model: gluon.Block) -> List[Tuple[str, gluon.Parameter]]:
    return list(model._collect_params_with_prefix().items())


def _device(c: mx.Context) -> Device:
    return Device("gpu" if c.device_type == "gpu" else "cpu", int(c.device_id))


def model_devices(model: gluon.Block) -> List[Device]:
    """The contexts holding the model's parameters (the same list for all of them)."""
    lists = {tuple(p.list_ctx()) for _, p in _all_params(model)}
    if len(lists) > 1:
        raise ValueError(f"the model's parameters live on different context lists "
                         f"{sorted(map(str, lists))}; place the whole model with model.to(devices)")
    return [_device(c) for c in next(iter(lists))] if lists else [Device("cpu", 0)]


def trainable(model: gluon.Block) -> List[Tuple[str, gluon.Parameter]]:
    return [(n, p) for n, p in _all_params(model)
            if p.grad_req != "null" and not getattr(p, "_dl_buffer", False)]


def _buffers(model: gluon.Block) -> List[gluon.Parameter]:
    return [p for _, p in _all_params(model) if p.grad_req == "null" or getattr(p, "_dl_buffer", False)]


# ---- gradients -------------------------------------------------------------------------------
def _ready(p: gluon.Parameter) -> bool:
    """False for a Gluon parameter whose deferred initialisation has not run yet."""
    return p._data is not None


def _fresh(p: gluon.Parameter) -> bool:
    return _ready(p) and bool(getattr(p.list_data()[0], "_fresh_grad", False))


def zero_grad(params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]] = None) -> None:
    """Zero every context's gradient and mark it not fresh (torch's ``grad = None``): one
    ``reset_arrays`` per context (Gluon's ``Parameter.zero_grad`` runs a ``zeros_like`` per array).
    ``cache``: a dict the caller keeps (an optimizer's), holding the grouping by context until a
    parameter's arrays change."""
    dense, sparse, datas = _zero_plan(params, cache)
    for arrays in dense:
        nd.reset_arrays(*arrays, num_arrays=len(arrays))
    for g in sparse:
        nd.zeros_like(g, out=g)
    for d in datas:
        d._fresh_grad = False


def _zero_plan(params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]]):
    """(dense gradients grouped by context, sparse gradients, data arrays) of ``params``."""
    key = None
    if cache is not None:
        key = tuple((id(p._grad), id(p._data), p.grad_req) for p in params)
        hit = cache.get("zero_plan")
        if hit is not None and hit[0] == key:
            return hit[1]
    by_ctx: Dict[Any, List[nd.NDArray]] = {}
    sparse: List[nd.NDArray] = []
    datas: List[nd.NDArray] = []
    for p in params:
        if not _ready(p) or p.grad_req == "null" or p._grad is None:
            continue
        for g in p._grad:
            if g.stype == "default":
                by_ctx.setdefault(g.context, []).append(g)
            else:
                sparse.append(g)
        datas.extend(p.list_data())
    plan = (list(by_ctx.values()), sparse, datas)
    if cache is not None:     # the entry holds the keyed lists, so their ids cannot be reused
        cache["zero_plan"] = (key, plan, [(p._grad, p._data) for p in params])
    return plan


def allreduce_grads(params: Sequence[gluon.Parameter]) -> None:
    """Sum the gradients of all context copies into every copy (what a kvstore does)."""
    for p in params:
        if not _fresh(p):
            continue
        grads = p.list_grad()
        if len(grads) < 2:
            continue
        c0 = grads[0].context
        total = nd.add_n(*[g.as_in_context(c0) for g in grads])
        for g in grads:
            total.copyto(g)


def scale_grads(params: Sequence[gluon.Parameter], factor: float) -> None:
    for p in params:
        if _ready(p):
            for g in p.list_grad():
                g *= factor


def stale(named: Sequence[Tuple[str, gluon.Parameter]]) -> List[str]:
    """Names of parameters with no backward since the last zero_grad (Gluon's stale gradient)."""
    return [n for n, p in named if not _fresh(p)]


def grad_arrays(params: Sequence[gluon.Parameter]) -> List[Optional[np.ndarray]]:
    return [p.list_grad()[0].asnumpy() if _fresh(p) else None for p in params]


# ---- buffers ---------------------------------------------------------------------------------
def snapshot_buffers(model: gluon.Block):
    return [(p, [d.copy() for d in p.list_data()]) for p in _buffers(model) if _ready(p)]


def restore_buffers(model: gluon.Block, snap) -> None:
    for p, saved in snap:
        for d, s in zip(p.list_data(), saved):
            s.copyto(d)


def sync_buffers(model: gluon.Block) -> None:
    """Copy context 0's buffers (running statistics) to the other contexts."""
    for p in _buffers(model):
        if not _ready(p):
            continue
        data = p.list_data()
        for d in data[1:]:
            data[0].copyto(d)


# ---- randomness ------------------------------------------------------------------------------
def rng_state() -> Dict[str, Any]:
    """MXNet 1.x cannot read its RNG state (only ``mx.random.seed``): nothing to save."""
    return {}


def set_rng_state(state: Dict[str, Any]) -> None:
    return None


# ---- the deadlock guard ----------------------------------------------------------------------
def _env_int(name: str) -> int:
    try:
        return int(os.environ.get(name, "1") or "1")
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
        return nd.array(a, ctx=ctx, dtype=a.dtype)
    if isinstance(a, nd.NDArray):
        return a.as_in_context(ctx)
    raise TypeError(f"expected a numpy array or an MXNet NDArray, got {type(a).__name__}")


def _slice(a: Any, axis: int, begin: int, end: int, ctx: mx.Context) -> nd.NDArray:
    if isinstance(a, np.ndarray):
        idx = [slice(None)] * a.ndim
        idx[axis] = slice(begin, end)
        return nd.array(np.ascontiguousarray(a[tuple(idx)]), ctx=ctx, dtype=a.dtype)
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
            from .base import Module as _DlModule
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
            objective: Callable) -> float:
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
        return float(sum(float(r.asnumpy().sum()) for r in reports))

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


# ---- across processes (dl.Trainer under dualdl launch) -----------------------------------------
_DIST_KEY0 = 3 << 27          # apart from gluon.Trainer's keys (0..n) and broadcast's (1 << 28 ...)
_dist_next = [_DIST_KEY0]


def _dist_keys(n: int) -> List[int]:
    """Fresh kvstore keys; every rank builds its Trainers in the same order, so they agree."""
    keys = list(range(_dist_next[0], _dist_next[0] + n))
    _dist_next[0] += n
    return keys


class DistReducer:
    """Sums gradients over the workers of the ``dist_sync`` kvstore; dualdl's optimizer then
    applies torch's formula on every worker (the servers store sums, they run no optimizer).

    Hides the race of Gluon's ``update_on_kvstore=False`` (the pull writes into the array the push
    sends from; measured: wrong sums in 3 of 10 runs): each step pushes a *fresh* flat copy of
    the gradients (plus a has-gradient count per parameter and rank 0's buffers, zeros on other
    ranks) under one key per dtype, pulls into another fresh array, and waits for the result
    before anything touches the gradients again.
    """

    def __init__(self, model: gluon.Block, named: Sequence[Tuple[str, gluon.Parameter]]):
        from . import distributed as mdist
        kv = mdist._state["kv"]
        if kv is None:
            raise RuntimeError("dualdl.distributed is not initialised on the mxnet backend")
        self.kv, self.rank, self.world = kv, kv.rank, kv.num_workers
        not_ready = [n for n, p in _all_params(model) if not _ready(p)]
        if not_ready:
            raise ValueError(f"parameters {not_ready[:4]} are not initialised yet (Gluon deferred "
                             f"initialisation): give layers their input sizes (in_units=, in_channels=) "
                             f"or run one forward pass before creating a distributed dl.Trainer, so "
                             f"that rank 0's initial values can be broadcast")
        self.params = [p for _, p in named]
        self.buffers = [p for p in _buffers(model) if np.issubdtype(np.dtype(p.dtype), np.floating)]
        groups: Dict[str, List[Tuple[str, gluon.Parameter]]] = {}
        for p in self.params:
            groups.setdefault(np.dtype(p.dtype).name, []).append(("g", p))
        for b in self.buffers:
            groups.setdefault(np.dtype(b.dtype).name, []).append(("b", b))
        self.groups = list(groups.items())
        self.ctx0 = self.params[0].list_ctx()[0] if self.params else mx.cpu()
        self.keys = _dist_keys(len(self.groups) + 1)
        self.scalar_key = self.keys[-1]
        self.n_extra = 2         # [samples, loss sum], carried in the widest dtype's buffer
        self.extra_group = max(range(len(self.groups)), key=lambda i: np.dtype(self.groups[i][0]).itemsize,
                               default=0)
        sizes = [sum(p.data().size for _, p in items) + sum(k == "g" for k, _ in items)
                 + (self.n_extra if i == self.extra_group else 0)
                 for i, (_, items) in enumerate(self.groups)]
        inits = [nd.zeros((n,), ctx=mx.cpu(), dtype=dt) for n, (dt, _) in zip(sizes, self.groups)]
        self.kv.init(self.keys, inits + [nd.zeros((4,), ctx=mx.cpu(), dtype="float64")])
        nd.waitall()

    def sum_scalars(self, values: Sequence[float]) -> List[float]:
        if len(values) > 4:
            raise ValueError("at most 4 scalars per call")
        send = nd.array(list(values) + [0.0] * (4 - len(values)), ctx=mx.cpu(), dtype="float64")
        recv = nd.zeros((4,), ctx=mx.cpu(), dtype="float64")
        self.kv.push(self.scalar_key, send)
        self.kv.pull(self.scalar_key, out=recv)
        return recv.asnumpy().tolist()[:len(values)]

    def broadcast_model(self, model: gluon.Block) -> None:
        from . import distributed as mdist
        mdist.broadcast_parameters(model)

    def allreduce(self, extra: Sequence[float]) -> List[float]:
        """Sum gradients (and ``extra`` scalars) over workers into every context's gradient;
        rank 0's buffers to all. Returns the summed ``extra``."""
        if len(extra) != self.n_extra:
            raise ValueError(f"expected {self.n_extra} extra scalars, got {len(extra)}")
        if not self.groups:
            return self.sum_scalars(extra)
        nd.waitall()
        pending = []
        for gi, (key, (dt, items)) in enumerate(zip(self.keys, self.groups)):
            parts, grads = [], []
            for kind, p in items:
                d = p.list_data()[0]
                if kind == "g":
                    grads.append(p)
                    g = p.list_grad()[0] if _fresh(p) else nd.zeros(d.shape, ctx=d.context, dtype=d.dtype)
                    parts.append(g.reshape((-1,)).as_in_context(mx.cpu()))
                else:
                    src = d if self.rank == 0 else nd.zeros(d.shape, ctx=d.context, dtype=d.dtype)
                    parts.append(src.reshape((-1,)).as_in_context(mx.cpu()))
            tail = [1.0 if _fresh(p) else 0.0 for p in grads] + (list(extra) if gi == self.extra_group else [])
            parts.append(nd.array(tail, ctx=mx.cpu(), dtype=dt))
            send = nd.concat(*parts, dim=0)                 # a fresh array: never aliases a gradient
            recv = nd.zeros(send.shape, ctx=mx.cpu(), dtype=dt)
            self.kv.push(key, send)
            self.kv.pull(key, out=recv)
            pending.append((items, grads, recv))
        nd.waitall()
        out: List[float] = []
        for gi, (items, grads, recv) in enumerate(pending):
            o = 0
            for kind, p in items:
                d = p.list_data()[0]
                n = d.size
                piece = recv[o:o + n].reshape(d.shape)
                o += n
                for t in (p.list_grad() if kind == "g" else p.list_data()):
                    piece.copyto(t)
            tail = recv[o:].asnumpy().tolist()
            for p, f in zip(grads, tail):
                for d in p.list_data():
                    d._fresh_grad = bool(f > 0)
            if gi == self.extra_group:
                out = tail[len(grads):]
        nd.waitall()
        return out
