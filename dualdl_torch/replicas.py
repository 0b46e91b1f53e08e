"""Single-node data parallelism on PyTorch: the batch split over devices and one step's replicas.

Hides:
- ``nn.DataParallel`` without CUDA silently runs the plain module (``device_ids`` becomes ``[]``)
  and ``scatter``/``gather`` refuse CPU tensors, so multi-device code cannot be exercised on CPU.
  dualdl emulates DataParallel on *virtual* devices ``cpu(0..n-1)``: the batch is split, each piece
  runs through the same module, outputs are concatenated on the first device and one loss is taken
  there. Replicas share the parameters, so backward sums their gradients (DataParallel's
  ReduceAdd). Like real DataParallel, only replica 0's in-place buffer updates (BatchNorm running
  statistics) survive (``buffers.ReplicaBuffers``).
- With two or more CUDA devices the real ``nn.DataParallel`` is used, scattering with
  ``tensor_split`` sizes (``[4, 3, 3]`` for 10 rows on 3 GPUs) instead of ``chunk``'s ``[4, 4, 2]``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import numpy as np
import torch

from dualdl.devices import Device
from dualdl.parallel import split_bounds
from .buffers import ReplicaBuffers
from .core import native_device
from .grads import model_devices

__all__ = ["split_to", "Replicas"]


def split_to(a: Any, axis: int, sizes: List[int], devices: List[Device]) -> List[torch.Tensor]:
    """Pieces of ``a`` of the given sizes along ``axis``, piece i on devices[i]."""
    return [_to_device(_slice(a, axis, b, e), native_device(d))
            for (b, e), d in zip(split_bounds(sizes), devices)]


def _to_device(a: Any, dev: torch.device) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a if a.device == dev else a.to(dev)      # (what a.to(dev) returns, 0.2 us sooner)
    if isinstance(a, np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(a).copy())
        return t.to(dev) if dev.type != "cpu" else t
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


def _backward(obj: torch.Tensor) -> None:
    """backward of a scalar objective (torch makes its ones gradient itself), else with ones."""
    if obj.dim() == 0:
        obj.backward()
    else:
        obj.backward(torch.ones_like(obj))


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
            objective: Callable, read: bool = True) -> float:
        """Forward, loss and backward; returns the loss as a float. ``read=False`` (where MXNet
        returns it unread, to queue the step first) changes nothing on torch: its CPU ops have
        run, and a CUDA step's gradient check reads the device before the step anyway."""
        if self.real:
            return self._run_real(xs, x_axes, ys, y_axes, out_axis, sizes, loss_fn, objective)
        model, n, B = self.model, len(sizes), sum(sizes)
        if n == 1:                          # every strategy is one forward, loss and backward
            dev = self.dev0
            out = model(*[_to_device(a, dev) for a in xs])
            obj, rep = objective(loss_fn(out, *[_to_device(a, dev) for a in ys]), B)
            _backward(obj)
            # item() reads a scalar that requires grad without detach() (0.5 us) or a warning
            return float(rep.item()) if rep.dim() == 0 else float(rep.detach().sum())
        x_parts = self._inputs(xs, x_axes, sizes, lambda i: self.dev0)
        y_parts = None
        if self.strategy != "data_parallel":
            y_parts = self._inputs(ys, y_axes, sizes, lambda i: self.dev0)
        reports = []
        rule = ReplicaBuffers(model, n)
        try:
            outs = []
            for i in range(n):
                rule.enter(i)
                out = model(*x_parts[i])
                if self.strategy == "data_parallel":
                    outs.append(out)
                    continue
                obj, rep = objective(loss_fn(out, *y_parts[i]), sizes[i])
                _backward(obj)
                reports.append(rep.detach())
        finally:
            rule.finish()
        if self.strategy == "data_parallel":
            obj, rep = objective(loss_fn(_cat(outs, out_axis), *(_to_device(a, self.dev0) for a in ys)), B)
            _backward(obj)
            reports.append(rep.detach())
        if len(reports) == 1 and reports[0].dim() == 0:
            return float(reports[0])            # data_parallel's one report: no sum ops
        return float(sum(r.sum() for r in reports))

    @staticmethod
    def loss_value(loss: float) -> float:
        """The loss :meth:`run` returned (already read on torch)."""
        return loss

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
