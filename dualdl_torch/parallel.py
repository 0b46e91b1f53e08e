"""Single-node data parallelism and autograd helpers on PyTorch.

Hides:
- ``nn.DataParallel`` without CUDA silently runs the plain module (``device_ids`` becomes ``[]``)
  and ``scatter``/``gather`` refuse CPU tensors, so multi-device code cannot be exercised on CPU.
  dualdl emulates DataParallel on *virtual* devices ``cpu(0..n-1)``: the batch is split, each piece
  runs through the same module, outputs are concatenated on the first device and one loss is taken
  there. Replicas share the parameters, so backward sums their gradients (DataParallel's
  ReduceAdd). Like real DataParallel, only replica 0's in-place buffer updates (BatchNorm running
  statistics) survive: replicas 1.. run on copies of the pre-forward buffers that are dropped.
- With two or more CUDA devices the real ``nn.DataParallel`` is used, scattering with
  ``tensor_split`` sizes (``[4, 3, 3]`` for 10 rows on 3 GPUs) instead of ``chunk``'s ``[4, 4, 2]``.
- torch records every operation; MXNet only inside ``autograd.record()`` (see ``dualdl.autograd``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from dualdl.devices import Device
from dualdl.parallel import split_bounds
from .core import native_device

__all__ = ["record", "no_grad", "backward", "is_model", "model_devices", "trainable", "Replicas",
           "zero_grad", "scale_grads", "allreduce_grads", "stale", "snapshot_buffers",
           "restore_buffers", "sync_buffers", "rng_state", "set_rng_state", "grad_arrays", "split_to"]


# ---- autograd --------------------------------------------------------------------------------
def record(train_mode: bool = True):
    return torch.enable_grad()


def no_grad():
    return torch.no_grad()


def backward(losses: List[torch.Tensor], grads: Optional[List[Any]], retain_graph: bool) -> None:
    """Backpropagate each loss; a non-scalar loss backpropagates its sum (MXNet's rule)."""
    heads, head_grads = [], []
    for i, loss in enumerate(losses):
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"backward() expects torch tensors on the torch backend, got {type(loss).__name__}")
        g = grads[i] if grads is not None else None
        heads.append(loss)
        head_grads.append(torch.ones_like(loss) if g is None else g)
    torch.autograd.backward(heads, head_grads, retain_graph=retain_graph)


# ---- model inspection ------------------------------------------------------------------------
def is_model(model: Any) -> bool:
    return isinstance(model, torch.nn.Module)


def _dev(t: torch.Tensor) -> Device:
    return Device("gpu", t.device.index or 0) if t.device.type == "cuda" else Device("cpu", 0)


def model_devices(model: torch.nn.Module) -> List[Device]:
    """The one device holding the model's tensors (``cpu(0)`` for an empty model)."""
    devs = sorted({_dev(t) for t in list(model.parameters()) + list(model.buffers())})
    if len(devs) > 1:
        raise ValueError(f"the model's parameters and buffers span several devices {devs}; data "
                         f"parallelism needs the whole model on the first device")
    return devs or [Device("cpu", 0)]


def trainable(model: torch.nn.Module) -> List[Tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


# ---- gradients -------------------------------------------------------------------------------
def zero_grad(params: Sequence[torch.Tensor], cache: Optional[Dict[str, Any]] = None) -> None:
    """``grad = None`` (torch's default ``set_to_none=True``): an unused parameter stays None.
    ``cache`` (the contract's: an adapter may keep state there between calls) is not needed here."""
    for p in params:
        p.grad = None


def allreduce_grads(params: Sequence[torch.Tensor]) -> None:
    """Nothing to do: replicas (virtual or DataParallel's) accumulate into the one parameter."""


@torch.no_grad()
def scale_grads(params: Sequence[torch.Tensor], factor: float) -> None:
    for p in params:
        if p.grad is not None:
            p.grad.mul_(factor)


def stale(named: Sequence[Tuple[str, torch.Tensor]]) -> List[str]:
    """Names of parameters with no gradient since the last zero_grad."""
    return [n for n, p in named if p.grad is None]


def grad_arrays(params: Sequence[torch.Tensor]) -> List[Optional[np.ndarray]]:
    return [None if p.grad is None else p.grad.detach().cpu().numpy().copy() for p in params]


# ---- buffers (BatchNorm running statistics) -------------------------------------------------
def _buffer_slots(model: torch.nn.Module) -> List[Tuple[torch.nn.Module, str]]:
    return [(m, k) for m in model.modules() for k, b in m._buffers.items() if b is not None]


@torch.no_grad()
def snapshot_buffers(model: torch.nn.Module) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    return [(m._buffers[k], m._buffers[k].clone()) for m, k in _buffer_slots(model)]


@torch.no_grad()
def restore_buffers(model: torch.nn.Module, snap) -> None:
    for live, saved in snap:
        live.copy_(saved)


def sync_buffers(model: torch.nn.Module) -> None:
    """Nothing to do: one module holds the buffers (replica 0's updates, as DataParallel)."""


class _ReplicaBuffers:
    """Replica 0 runs on the module's own buffers; replicas 1.. on throw-away copies of the
    pre-forward buffers (real DataParallel broadcasts them and discards the replicas)."""

    def __init__(self, model: torch.nn.Module, n: int):
        self.slots = _buffer_slots(model) if n > 1 and model.training else []
        with torch.no_grad():
            self.before = [m._buffers[k].detach().clone() for m, k in self.slots]
        self.originals = [m._buffers[k] for m, k in self.slots]

    def enter(self, i: int) -> None:
        if i == 0 or not self.slots:
            return
        for (m, k), b in zip(self.slots, self.before):
            m._buffers[k] = b.clone()

    def finish(self) -> None:
        for (m, k), b in zip(self.slots, self.originals):
            m._buffers[k] = b


# ---- randomness ------------------------------------------------------------------------------
def rng_state() -> Dict[str, Any]:
    st = {"torch": torch.get_rng_state().numpy().copy()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        st["cuda"] = [s.numpy().copy() for s in torch.cuda.get_rng_state_all()]
    return st


def set_rng_state(state: Dict[str, Any]) -> None:
    if state.get("torch") is not None:
        torch.set_rng_state(torch.from_numpy(np.asarray(state["torch"], dtype=np.uint8).copy()))
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.from_numpy(np.asarray(s, dtype=np.uint8).copy())
                                      for s in state["cuda"]])


def split_to(a: Any, axis: int, sizes: List[int], devices: List[Device]) -> List[torch.Tensor]:
    """Pieces of ``a`` of the given sizes along ``axis``, piece i on devices[i]."""
    return [_to_device(_slice(a, axis, b, e), native_device(d))
            for (b, e), d in zip(split_bounds(sizes), devices)]


# ---- the data-parallel step ------------------------------------------------------------------
def _to_device(a: Any, dev: torch.device) -> torch.Tensor:
    if isinstance(a, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(a).copy())
        return t.to(dev) if dev.type != "cpu" else t
    if isinstance(a, torch.Tensor):
        return a.to(dev)
    raise TypeError(f"expected a numpy array or a torch tensor, got {type(a).__name__}")


def _slice(a: Any, axis: int, begin: int, end: int):
    if isinstance(a, np.ndarray):
        idx = [slice(None)] * a.ndim
        idx[axis] = slice(begin, end)
        return a[tuple(idx)]
    return a.narrow(axis, begin, end - begin)


def _cat(outs: List[Any], axis: int):
    first = outs[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(outs, axis)
    if isinstance(first, (tuple, list)):
        return type(first)(_cat([o[i] for o in outs], axis) for i in range(len(first)))
    raise TypeError(f"cannot gather model outputs of type {type(first).__name__}; return a tensor "
                    f"or a tuple of tensors")


class _DataParallel(torch.nn.DataParallel):
    """Real DataParallel whose scatter splits each input on its own axis into given sizes."""

    def __init__(self, module, device_ids, output_dim: int):
        super().__init__(module, device_ids=device_ids, output_device=device_ids[0], dim=output_dim)
        self.dl_sizes: List[int] = []
        self.dl_axes: List[int] = []

    def scatter(self, inputs, kwargs, device_ids):
        from torch.nn.parallel._functions import Scatter
        parts = [Scatter.apply(device_ids, self.dl_sizes, ax, t) for t, ax in zip(inputs, self.dl_axes)]
        per_device = [tuple(p[i] for p in parts) for i in range(len(device_ids))]
        return per_device, tuple({} for _ in per_device)


class _LossReplica(torch.nn.Module):
    """model + loss inside each replica (per_device_loss on real GPUs)."""

    def __init__(self, model, loss_fn, objective, n_x: int, x_axis: int):
        super().__init__()
        self.model = model
        self.dl_loss_fn, self.dl_objective, self.dl_nx, self.dl_xaxis = loss_fn, objective, n_x, x_axis

    def forward(self, *args):
        xs, ys = args[:self.dl_nx], args[self.dl_nx:]
        out = self.model(*xs)
        b = xs[0].shape[self.dl_xaxis]
        obj, rep = self.dl_objective(self.dl_loss_fn(out, *ys), b)
        return obj.reshape(1), rep.detach().reshape(1)


class Replicas:
    """Runs forward, loss and backward of one batch over ``devices`` with a strategy.

    ``objective(L, b) -> (grad_objective, report)`` turns the loss of ``b`` samples into what is
    backpropagated and what is reported (both tensors); see ``dualdl.trainer``.
    """

    def __init__(self, model: torch.nn.Module, devices: List[Device], strategy: str):
        self.model, self.devices, self.strategy = model, devices, strategy
        have = model_devices(model)[0]
        first = devices[0]
        for d in devices:
            if d.kind == "gpu" and d.index >= (torch.cuda.device_count() if torch.cuda.is_available() else 0):
                raise ValueError(f"device {d!r} requested, but torch sees "
                                 f"{torch.cuda.device_count() if torch.cuda.is_available() else 0} GPU(s)")
        if native_device(have) != native_device(first):
            raise ValueError(f"the model is on {have!r} but the first device is {first!r}: move it "
                             f"first (model.to({'cuda:%d' % first.index if first.kind == 'gpu' else 'cpu'}))"
                             f" before creating the optimizer")
        self.dev0 = native_device(first)
        self.real = len(devices) > 1 and first.kind == "gpu"
        self._wrappers: Dict[Any, _DataParallel] = {}

    def _wrapper(self, key, make: Callable[[], "_DataParallel"]) -> "_DataParallel":
        """DataParallel wrappers, built once per configuration (real GPUs only)."""
        if key not in self._wrappers:
            self._wrappers[key] = make()
        return self._wrappers[key]

    def _inputs(self, arrays, axes, sizes, dev_fn):
        bounds = split_bounds(sizes)
        return [tuple(_to_device(_slice(a, ax, b, e), dev_fn(i)) for a, ax in zip(arrays, axes))
                for i, (b, e) in enumerate(bounds)]

    def run(self, xs, x_axes, ys, y_axes, out_axis: int, sizes: List[int], loss_fn: Callable,
            objective: Callable) -> float:
        if self.real:
            return self._run_real(xs, x_axes, ys, y_axes, out_axis, sizes, loss_fn, objective)
        model, n, B = self.model, len(sizes), sum(sizes)
        x_parts = self._inputs(xs, x_axes, sizes, lambda i: self.dev0) if n > 1 else \
            [tuple(_to_device(a, self.dev0) for a in xs)]
        y_parts = None
        if self.strategy != "data_parallel":
            y_parts = self._inputs(ys, y_axes, sizes, lambda i: self.dev0) if n > 1 else \
                [tuple(_to_device(a, self.dev0) for a in ys)]
        reports = []
        rule = _ReplicaBuffers(model, n)
        try:
            outs = []
            for i in range(n):
                rule.enter(i)
                out = model(*x_parts[i])
                if self.strategy == "data_parallel":
                    outs.append(out)
                    continue
                obj, rep = objective(loss_fn(out, *y_parts[i]), sizes[i])
                obj.backward(torch.ones_like(obj))
                reports.append(rep.detach())
        finally:
            rule.finish()
        if self.strategy == "data_parallel":
            out = _cat(outs, out_axis) if n > 1 else outs[0]
            obj, rep = objective(loss_fn(out, *(_to_device(a, self.dev0) for a in ys)), B)
            obj.backward(torch.ones_like(obj))
            reports.append(rep.detach())
        return float(sum(r.sum() for r in reports))

    def _run_real(self, xs, x_axes, ys, y_axes, out_axis, sizes, loss_fn, objective) -> float:
        ids = [d.index for d in self.devices]
        xs = [_to_device(a, self.dev0) for a in xs]
        ys = [_to_device(a, self.dev0) for a in ys]
        if self.strategy == "data_parallel":
            dp = self._wrapper(("dp", out_axis), lambda: _DataParallel(self.model, ids, out_axis))
            dp.dl_sizes, dp.dl_axes = list(sizes), list(x_axes)
            out = dp(*xs)
            obj, rep = objective(loss_fn(out, *ys), sum(sizes))
            obj.backward(torch.ones_like(obj))
            return float(rep.sum())
        dp = self._wrapper(("loss", len(xs), x_axes[0]), lambda: _DataParallel(
            _LossReplica(self.model, loss_fn, objective, len(xs), x_axes[0]), ids, 0))
        dp.module.dl_loss_fn, dp.module.dl_objective = loss_fn, objective
        dp.dl_sizes, dp.dl_axes = list(sizes), list(x_axes) + list(y_axes)
        objs, reps = dp(*xs, *ys)
        objs.sum().backward()
        return float(reps.sum())

    @torch.no_grad()
    def evaluate(self, xs, x_axes, ys, out_axis: int, sizes: List[int], loss_fn: Callable,
                 objective: Callable):
        """Forward each piece without recording, gather the outputs on the first device, one loss."""
        n = len(sizes)
        if self.real:
            ids = [d.index for d in self.devices]
            dp = self._wrapper(("dp", out_axis), lambda: _DataParallel(self.model, ids, out_axis))
            dp.dl_sizes, dp.dl_axes = list(sizes), list(x_axes)
            out = dp(*[_to_device(a, self.dev0) for a in xs])
        else:
            parts = self._inputs(xs, x_axes, sizes, lambda i: self.dev0) if n > 1 else \
                [tuple(_to_device(a, self.dev0) for a in xs)]
            outs = [self.model(*p) for p in parts]
            out = _cat(outs, out_axis) if n > 1 else outs[0]
        loss = None
        if ys is not None:
            _, rep = objective(loss_fn(out, *(_to_device(a, self.dev0) for a in ys)), sum(sizes))
            loss = float(rep.sum())
        return loss, out


# ---- across processes (dl.Trainer under dualdl launch / torchrun) ----------------------------
class DistReducer:
    """Sums gradients over the processes of ``torch.distributed`` (gloo on CPU, NCCL on CUDA).

    Not DDP: DDP *averages* in backward hooks and owns the model; the Trainer already weights
    each piece by its share of the *global* batch, so a plain SUM all-reduce gives the gradient
    of the global batch. Each step sends one flat buffer per (dtype, device) holding every
    gradient (zeros where a rank has none), a has-gradient count per parameter (a parameter
    that got a gradient on no rank stays ``None``, as in one process) and rank 0's floating
    buffers (zeros elsewhere), so BatchNorm running statistics become rank 0's everywhere.
    """

    def __init__(self, model: torch.nn.Module, named: Sequence[Tuple[str, torch.nn.Parameter]]):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        if isinstance(model, (DistributedDataParallel, torch.nn.DataParallel)):
            raise TypeError(f"pass the plain model to dl.Trainer, not a {type(model).__name__}: the "
                            f"Trainer combines gradients over processes itself (DDP would average "
                            f"them a second time)")
        self.dist = dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.params = [p for _, p in named]
        self.buffers = [b for b in model.buffers() if b.is_floating_point()]
        nccl = dist.get_backend() == "nccl"
        self.scalar_device = (torch.device("cuda", torch.cuda.current_device()) if nccl
                              else torch.device("cpu"))

    def sum_scalars(self, values: Sequence[float]) -> List[float]:
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.scalar_device)
        self.dist.all_reduce(t)
        return t.cpu().tolist()

    def broadcast_model(self, model: torch.nn.Module) -> None:
        with torch.no_grad():
            for t in list(model.parameters()) + list(model.buffers()):
                self.dist.broadcast(t.data, 0)

    @torch.no_grad()
    def allreduce(self, extra: Sequence[float]) -> List[float]:
        """Sum gradients (and ``extra`` scalars) over ranks, in place; rank 0's buffers to all.
        Returns the summed ``extra``."""
        groups: Dict[Any, List[Tuple[str, Any]]] = {}
        for p in self.params:
            groups.setdefault((p.dtype, p.device), []).append(("g", p))
        for b in self.buffers:
            groups.setdefault((b.dtype, b.device), []).append(("b", b))
        if not groups:
            return self.sum_scalars(extra)
        out: List[float] = []
        keys = list(groups)
        xi = max(range(len(keys)), key=lambda i: keys[i][0].itemsize)   # extras in the widest dtype
        for gi, ((dtype, dev), items) in enumerate(groups.items()):
            parts = []
            for kind, t in items:
                if kind == "g":
                    parts.append(t.grad.reshape(-1) if t.grad is not None else t.new_zeros(t.numel()))
                else:
                    parts.append(t.reshape(-1) if self.rank == 0 else torch.zeros_like(t).reshape(-1))
            grads = [t for kind, t in items if kind == "g"]
            tail = [0.0 if p.grad is None else 1.0 for p in grads] + (list(extra) if gi == xi else [])
            parts.append(torch.tensor(tail, dtype=dtype, device=dev))
            flat = torch.cat(parts)
            self.dist.all_reduce(flat)
            o = 0
            for kind, t in items:
                n = t.numel()
                piece = flat[o:o + n].view_as(t)
                o += n
                if kind == "b":
                    t.copy_(piece)
                elif t.grad is not None:
                    t.grad.copy_(piece)
                else:
                    t.grad = piece.clone()          # set back to None below if no rank had one
            tail_out = flat[o:].tolist()
            for p, f in zip(grads, tail_out):
                if f <= 0:
                    p.grad = None
            if gi == xi:
                out = tail_out[len(grads):]
        return out
