"""``dl.Trainer``: one training step with the same gradient contract on PyTorch and MXNet, on one
device or data-parallel over several (docs/training.md).

The step contract (the same on both backends, for every strategy and device count):
the gradient handed to ``optimizer.step()`` is the gradient of the loss that ``loss_fn`` gives on
the **whole** batch (``reduction="mean"``: the batch mean; ``"sum"``: the batch sum; ``"none"``:
the mean over samples of each sample's mean loss). Pieces on several devices are combined
exactly: each device backpropagates its piece's loss weighted by its share (``b_i / B`` for a
mean, i.e. the per-device *sum* of per-sample losses divided by the *global* batch size), and the
gradients are summed over devices. This is MXNet's ``per-sample loss + trainer.step(batch_size)``
and torch's ``mean loss + optimizer.step()`` at once; averaging per-device means (a classic bug,
0.047-0.116 off in shared/reference) cannot happen. ``accumulate_steps=k`` sums k micro-batches'
gradients and divides by the total sample count: the same update as one batch of all of them.

Hides: Gluon's ``Trainer.step`` raises on stale gradients while torch re-applies or skips them.
Here a parameter that got no gradient in a step is skipped (not updated, no weight decay, no
momentum), as torch skips ``grad is None``, and a ``StaleGradientWarning`` names it, on both.
"""
from __future__ import annotations

import copy
import math
import operator
import os
import random as _pyrandom
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import optim as _optim
from .backend import backend_for
from .optim.state_check import check_optimizer_state, optimizer_name
from .parallel import (batch_size_of, resolve_devices, resolve_strategy, split_sizes)

__all__ = ["Trainer", "NonFiniteLossError", "StaleGradientWarning", "TrainerStateError"]

_FORMAT = "dualdl.Trainer/1"
# what was non-finite -> its key in ``Trainer.skipped_steps``
_SKIP_KEYS = {"loss": "loss", "gradient norm": "grad_norm", "gradient (largest |g|)": "grad_max_abs"}
_REDUCTIONS = ("mean", "sum", "none")
_MAX_PLANS = 64        # batch plans kept per Trainer (one per input/target shape signature)
_shape = operator.attrgetter("shape")


class NonFiniteLossError(FloatingPointError):
    """The loss or a gradient was NaN or infinite; the step was not applied (model and optimizer
    unchanged)."""


class StaleGradientWarning(UserWarning):
    """Some trainable parameters received no gradient in a step and were not updated."""


class TrainerStateError(ValueError):
    """A Trainer state dict does not fit this Trainer; nothing was changed."""


def _known_shape(p: Any) -> Optional[Tuple[int, ...]]:
    """A parameter's shape; None while Gluon's deferred initialisation leaves it unknown (0s)."""
    shape = tuple(p.shape)
    return None if 0 in shape else shape


def _as_tuple(v: Any) -> Tuple[Any, ...]:
    if v is None:
        return ()
    return tuple(v) if isinstance(v, (tuple, list)) and not _is_scalar_list(v) else (v,)


def _is_scalar_list(v) -> bool:
    return len(v) > 0 and not hasattr(v[0], "shape") and not isinstance(v[0], (list, tuple))


class Trainer:
    """Train ``model`` with ``optimizer`` on ``loss_fn(model(x), y)``, on one or several devices.

    Args:
        model: a torch ``nn.Module`` or a Gluon ``Block`` (e.g. a ``dl.nn.Module``), placed on the
            first device (on MXNet it is replicated on every context here).
        optimizer: a ``dl.optim`` optimizer over the model's parameters.
        loss_fn: ``loss_fn(output, *targets)``; its ``reduction`` attribute (or ``loss_reduction=``)
            says whether it returns a batch mean, a sum or per-sample values (a plain function
            returning one value is taken as a mean).
        devices: e.g. ``[dl.cpu(0), dl.cpu(1)]`` or ``[dl.gpu(0), dl.gpu(1)]``; default: where the
            model is. ``cpu(i)`` are real contexts on MXNet and virtual devices on torch.
        strategy: ``"data_parallel"`` (torch's default), ``"split_and_load"`` (MXNet's default) or
            ``"per_device_loss"``; see ``dualdl.parallel.STRATEGIES`` and docs/training.md.
        batch_axis: the samples axis of the inputs (1 for TNC sequences); ``target_batch_axis`` and
            ``output_batch_axis`` default to it (1-D arrays always split on axis 0).
        nonfinite: ``"raise"`` (:class:`NonFiniteLossError`) or ``"skip"`` (warn, drop the step
            and the current accumulation window, record it in ``skipped_steps``) for a NaN/Inf
            loss or a NaN/Inf gradient (checked before every optimizer step: one fused check and
            one host read, or the gradient norm when ``clip_grad_norm`` computes it anyway).
        clip_grad_norm / clip_grad_value: clip the final (summed, scaled) gradients before the step.
        accumulate_steps: micro-batches per optimizer step.
        scheduler: a ``dl.optim.lr_scheduler`` stepped after every optimizer step.
        seed: if given, every micro-batch reseeds the backend's RNG from ``(seed, step)``, which
            makes dropout reproducible across a resume on MXNet too (MXNet's RNG state cannot be
            saved). In a multi-process run the rank is mixed in (ranks draw different masks).
        distributed: combine gradients over the processes of ``dl.distributed`` (None: whenever
            ``dl.distributed.init()`` joined a job of more than one process; False: each process
            trains alone). Then N processes, each given its shard of the global batch, take the
            update of one process given the whole global batch (docs/distributed.md).
    """

    def __init__(self, model: Any, optimizer: Any, loss_fn: Callable, devices: Any = None,
                 strategy: Optional[str] = None, batch_axis: int = 0, nonfinite: str = "raise",
                 clip_grad_norm: Optional[float] = None, clip_grad_value: Optional[float] = None,
                 accumulate_steps: int = 1, scheduler: Any = None, *,
                 target_batch_axis: Optional[int] = None, output_batch_axis: Optional[int] = None,
                 loss_reduction: Optional[str] = None, seed: Optional[int] = None,
                 distributed: Optional[bool] = None) -> None:
        from .state import backend_of_model
        self.model, self.optimizer, self.loss_fn, self.scheduler = model, optimizer, loss_fn, scheduler
        self._be = backend_of_model(model)
        # the adapter's modules, resolved once (train_step calls into them on every step)
        self._grads_impl = self._be.module("grads")
        self._buffers_impl = self._be.module("buffers")
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
        if nonfinite not in ("raise", "skip"):
            raise ValueError(f"nonfinite must be 'raise' or 'skip', got {nonfinite!r}")
        if isinstance(accumulate_steps, bool) or not isinstance(accumulate_steps, int) or accumulate_steps < 1:
            raise ValueError(f"accumulate_steps must be an int >= 1, got {accumulate_steps!r}")
        for name, v in (("clip_grad_norm", clip_grad_norm), ("clip_grad_value", clip_grad_value)):
            if v is not None and not (isinstance(v, (int, float)) and v > 0):
                raise ValueError(f"{name} must be a positive number or None, got {v!r}")
        self.loss_reduction = loss_reduction if loss_reduction is not None else getattr(loss_fn, "reduction", None)
        if self.loss_reduction is not None and self.loss_reduction not in _REDUCTIONS:
            raise ValueError(f"loss reduction must be one of {_REDUCTIONS}, got {self.loss_reduction!r}")
        self.nonfinite, self.accumulate_steps = nonfinite, accumulate_steps
        self.clip_grad_norm, self.clip_grad_value = clip_grad_norm, clip_grad_value
        self.batch_axis = int(batch_axis)
        self.target_batch_axis = self.batch_axis if target_batch_axis is None else int(target_batch_axis)
        self.output_batch_axis = self.batch_axis if output_batch_axis is None else int(output_batch_axis)
        self.seed = seed
        self._named = self._grads_impl.trainable(model)
        self._params = [p for _, p in self._named]
        self._zero_cache: Dict[str, Any] = {}            # the adapter's zero_grad plan (MXNet)
        self._optim_impl = self._be.module("optim")
        self._check_cache: Dict[str, Any] = {}           # the adapter's gradient-check plan (MXNet)
        self._written = False      # gradients marked to be written by this step's backward (not added)
        self._buffer_cache: Dict[str, Any] = {}          # the adapter's buffer snapshot plan (MXNet)
        self._plans: Dict[Any, Tuple[int, List[int], List[int], List[int], Callable]] = {}
        self._array_types = {np.ndarray}                 # types _arrays accepted as one array
        self._check_optimizer()
        default = self._grads_impl.model_devices(model)
        self.devices = resolve_devices(devices, default[0]) if devices is not None else list(default)
        self.strategy = resolve_strategy(strategy, self._be.name)
        self._replicas = self._be.module("replicas").Replicas(model, self.devices, self.strategy)
        self.rank, self.world_size = 0, 1
        self._dist = self._join(distributed)
        cw = getattr(loss_fn, "weight", None)
        if (len(self.devices) > 1 and self.strategy != "data_parallel" and cw is not None
                and not isinstance(cw, (int, float)) and self.loss_reduction in (None, "mean")):
            warnings.warn(f"{type(loss_fn).__name__} has class weights: its mean divides by the sum of "
                          f"the weights, not the sample count, so per-device pieces weighted by sample "
                          f"count ({self.strategy!r}) are not exactly the full-batch loss; use "
                          f"strategy='data_parallel' for the exact gradient", UserWarning, stacklevel=2)
        self.global_step = 0               # optimizer steps taken
        self._micro = 0                    # micro-batches in the current accumulation window
        self._samples = 0                  # samples in the current window
        self.skipped_steps: List[Dict[str, Any]] = []
        self._warned_stale: set = set()

    # ---- across processes ------------------------------------------------------------------------
    def _join(self, distributed: Optional[bool]) -> Any:
        """The cross-process reducer (None in one process); broadcasts rank 0's initial model."""
        from . import distributed as ddist
        from . import config
        from .distributed.env import launched_backend
        if distributed is not None and not isinstance(distributed, bool):
            raise TypeError(f"distributed must be True, False or None, got {distributed!r}")
        if distributed is False:
            return None
        if not ddist.is_initialized():
            world = (config.get("WORLD_SIZE") or "1").strip() or "1"
            launched = launched_backend() or config.get("DMLC_ROLE") or world != "1"
            if distributed or launched:
                raise RuntimeError("this process is part of a multi-process job (or distributed=True) "
                                   "but dl.distributed.init() was not called: call it before creating "
                                   "the Trainer, or pass distributed=False to train each process alone")
            return None
        if not ddist.is_distributed():
            return None
        if ddist.backend() != self._be.name:
            raise ValueError(f"dl.distributed was initialised for {ddist.backend()!r} but the model is "
                             f"on the {self._be.name!r} backend")
        reducer = self._be.module("reducer").DistReducer(self.model, self._named)
        reducer.broadcast_model(self.model)
        self._buffers_impl.sync_buffers(self.model, self._buffer_cache)
        self.rank, self.world_size = reducer.rank, reducer.world
        return reducer

    # ---- checks --------------------------------------------------------------------------------
    def _check_optimizer(self) -> None:
        groups = getattr(self.optimizer, "param_groups", None)
        if groups is None or not hasattr(self.optimizer, "step"):
            raise TypeError(f"optimizer must be a dl.optim optimizer (param_groups, step), got "
                            f"{type(self.optimizer).__name__}")
        mine = {id(p) for p in self._params}
        foreign = sum(1 for g in groups for p in g["params"] if id(p) not in mine)
        if foreign:
            raise ValueError(f"the optimizer holds {foreign} parameter(s) that are not trainable "
                             f"parameters of this model; build it from model.parameters()")

    def _arrays(self, v: Any, what: str) -> Tuple[Any, ...]:
        if type(v) in self._array_types:          # one numpy array or tensor of a type seen before
            return (v,)
        out = []
        for a in _as_tuple(v):
            if isinstance(a, np.ndarray):
                out.append(a)
                continue
            if isinstance(a, (list, float, int)):
                out.append(np.asarray(a))
                continue
            try:
                be = backend_for(a)
            except TypeError:
                raise TypeError(f"{what} must be numpy arrays or {self._be.name} tensors, got "
                                f"{type(a).__name__}") from None
            if be is not self._be:
                raise TypeError(f"{what} is a {be.name} tensor but the model is on the "
                                f"{self._be.name} backend; pass numpy arrays or {self._be.name} tensors")
            self._array_types.add(type(a))
            out.append(a)
        return tuple(out)

    @staticmethod
    def _axis(a: Any, axis: int) -> int:
        nd = len(a.shape)
        if nd == 1:
            return 0
        return axis + nd if axis < 0 else axis

    def _plan(self, xs, ys) -> Tuple[int, List[int], List[int], List[int], Callable]:
        """``(B, sizes, x_axes, y_axes, objective)`` of a batch: its checked sample count, its
        split over the devices, each array's batch axis and the loss scaling. They depend only on
        the arrays' shapes and the Trainer's settings, so they are kept per shape signature (the
        checks cost 7 us a step on torch's benchmark MLP); a batch that fails a check is not kept
        and fails again."""
        key = (tuple(map(_shape, xs)), tuple(map(_shape, ys)), self.batch_axis,
               self.target_batch_axis, self.accumulate_steps, len(self.devices))
        plan = self._plans.get(key)
        if plan is None:
            B = self._batch(xs, ys)
            plan = (B, split_sizes(B, len(self.devices)), [self._axis(a, self.batch_axis) for a in xs],
                    [self._axis(a, self.target_batch_axis) for a in ys], self._objective(B))
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _batch(self, xs, ys) -> int:
        if not xs:
            raise ValueError("train_step needs an input batch x, got None/empty")
        B = batch_size_of(tuple(xs[0].shape), self.batch_axis, "input x")
        for i, a in enumerate(xs):
            b = batch_size_of(tuple(a.shape), self._axis(a, self.batch_axis), f"input x[{i}]")
            if b != B:
                raise ValueError(f"input x[{i}] has {b} samples on its batch axis but x[0] has {B}")
        for i, a in enumerate(ys):
            b = batch_size_of(tuple(a.shape), self._axis(a, self.target_batch_axis), f"target y[{i}]")
            if b != B:
                raise ValueError(f"target y[{i}] has {b} samples on axis {self._axis(a, self.target_batch_axis)} "
                                 f"but the input has {B} on axis {self.batch_axis} (set target_batch_axis=?)")
        if B == 0:
            raise ValueError("empty batch: the input has 0 samples on its batch axis")
        return B

    # ---- the objective ----------------------------------------------------------------------------
    def _reduction(self, L: Any) -> str:
        if self.loss_reduction is not None:
            return self.loss_reduction
        self._inferred = "mean" if int(np.prod(backend_for(L).shape(L))) == 1 else "none"
        return self._inferred

    def _objective(self, B: int) -> Callable:
        """``objective(L, b) -> (backpropagated, reported)`` for a piece of ``b`` of ``B`` samples.
        With accumulation, or across processes, the backpropagated value is the piece's *sum*
        (divided by the total sample count, once known, before the step)."""
        summed = self.accumulate_steps > 1 or self._dist is not None
        # a weak reference: the Trainer keeps its objectives (batch plans), and a cycle through
        # them would keep the Trainer and its model alive until the garbage collector runs
        me = weakref.ref(self)

        def scale(t, w):
            return t if w == 1.0 else t * w

        def objective(L, b):
            tr = me()
            red = tr._reduction(L)
            if red == "mean" and b == B and not summed:
                return L, L                     # one piece of a mean: nothing to scale (no calls)
            if red == "sum":
                return L, L
            if red == "none":
                n = int(np.prod(backend_for(L).shape(L)))
                S = scale(L.sum(), b / n if n != b else 1.0)    # sum over samples of per-sample means
                return scale(S, 1.0 if summed else 1.0 / B), scale(S, 1.0 / B)
            return scale(L, float(b) if summed else b / B), scale(L, b / B)
        return objective

    # ---- public API -------------------------------------------------------------------------------
    def train_step(self, x: Any, y: Any = None) -> float:
        """Forward, loss, backward of one (micro-)batch, and an optimizer step once
        ``accumulate_steps`` micro-batches are in. Returns the batch's loss (a mean for mean-reduced
        losses; across processes, the loss of the global batch, the same on every rank). On any
        error the model, optimizer and the step counter are unchanged."""
        xs, ys = self._arrays(x, "x"), self._arrays(y, "y")
        plan = self._plan(xs, ys)
        grads = self._grads_impl
        # one backward per step (no accumulation): it writes the gradients, and the parameters
        # accumulate again after the step (torch's rule for any backward outside the Trainer)
        if self.accumulate_steps == 1:
            grads.overwrite_next_backward(self._params, self._zero_cache)
            self._written = True
        elif self._micro == 0:
            grads.zero_grad(self._params, self._zero_cache)
        try:
            return self._step(xs, ys, plan)
        finally:
            self._accumulate_again()

    def _accumulate_again(self) -> None:
        """Once the step's backward has run (queued, on MXNet): the gradients add up again at the
        next backward (torch's rule, for any backward outside the Trainer). Once per step."""
        if self._written:
            self._written = False
            self._grads_impl.accumulate_again(self._params, self._zero_cache)

    def _step(self, xs, ys, plan) -> float:
        """:meth:`train_step` once the gradients are cleared (or marked to be written)."""
        B, sizes, x_axes, y_axes, objective = plan
        if self.seed is not None:
            r = 7919 * self.rank if self._dist is not None else 0
            self._be.seed((int(self.seed) * 1000003 + self.global_step * 1009 + self._micro + r) % 2 ** 32,
                          False)
        snap = self._buffers_impl.snapshot_buffers(self.model, self._buffer_cache)
        # a step that needs nothing but the finite check takes the loss unread: the adapter checks
        # the loss with the gradients (MXNet: the step is queued behind that check), read after
        defer = (self._dist is None and self._micro + 1 >= self.accumulate_steps
                 and self.clip_grad_norm is None and self.clip_grad_value is None)
        try:
            loss = self._replicas.run(xs, x_axes, ys, y_axes, self.output_batch_axis, sizes,
                                      self.loss_fn, objective, read=not defer)
        except BaseException:
            self._discard(snap)
            raise
        if self._dist is not None:
            return self._dist_step(snap, loss, B)
        if not defer and not math.isfinite(loss):
            return self._nonfinite(snap, loss, "loss")
        self._micro += 1
        self._samples += B
        if defer:                                 # the last micro-batch: this call steps
            bad = self._apply(loss)
            value = self._replicas.loss_value(loss)
        else:
            bad = self._apply() if self._micro >= self.accumulate_steps else None
            value = loss
        if not math.isfinite(value):              # deferred: the adapter checked it, and did not step
            return self._nonfinite(snap, value, "loss")
        if bad is not None:
            self._rejected(snap, bad)
        return value

    def _dist_step(self, snap, value: float, b: int) -> float:
        """The step contract across processes. Every rank backpropagated the *sum* over its
        samples; one SUM all-reduce per optimizer step carries the gradients, rank 0's buffers
        and ``[samples, loss sum]``; the sum of gradients is then divided by the global sample
        count: the gradient of one process given the whole global batch. A micro-batch that
        does not end the accumulation window agrees on its loss with a small all-reduce."""
        red = self._reduction_for_scale()
        local = [float(b), value if red == "sum" else value * b]
        last = self._micro + 1 >= self.accumulate_steps
        if last:
            self._grads_impl.allreduce_grads(self._params)           # this process's devices first
            n, total = self._dist.allreduce(local)
        else:
            n, total = self._dist.sum_scalars(local)
        value = total if red == "sum" else total / n
        if not math.isfinite(value):
            return self._nonfinite(snap, value, "loss")
        self._micro += 1
        self._samples += int(round(n))
        if last:
            bad = self._apply()
            if bad is not None:
                self._rejected(snap, bad)
        return value

    def _rejected(self, snap, bad: Tuple[str, Optional[float]]) -> None:
        """:meth:`_nonfinite` for the gradient check's ``(what, value)``, the largest ``|g|`` found now
        where the check left it to the caller."""
        what, value = bad
        self._nonfinite(snap, _optim.grad_max_abs(self._params) if value is None else value, what)

    def _nonfinite(self, snap, value: float, what: str) -> float:
        """Drop the step (and the accumulation window); raise or warn as ``nonfinite`` says."""
        self._discard(snap)
        self.skipped_steps.append({"step": self.global_step, _SKIP_KEYS[what]: value})
        msg = (f"non-finite {what} {value} at step {self.global_step}: the step was not applied "
               f"(model and optimizer unchanged; the accumulation window was dropped)")
        if self.nonfinite == "raise":
            raise NonFiniteLossError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        return value

    def step(self, *args: Any, **kwargs: Any) -> None:
        """Not Gluon's ``trainer.step(batch_size)``: say so instead of failing obscurely."""
        raise TypeError("dl.Trainer has no step(): train_step(x, y) runs forward, loss, backward and the "
                        "optimizer step (the division by the batch size that Gluon's "
                        "trainer.step(batch_size) does is part of the step contract); the number of "
                        "steps taken is trainer.global_step")

    def _discard(self, snap) -> None:
        self._buffers_impl.restore_buffers(self.model, snap)
        self._grads_impl.zero_grad(self._params, self._zero_cache)
        self._micro = self._samples = 0

    def _apply(self, loss: Any = None) -> Optional[Tuple[str, Optional[float]]]:
        """All-reduce, scale, check, clip and step. Returns ``(what, value)`` instead of stepping
        when a gradient is non-finite: the largest ``|g|`` (found by one fused check and one host
        read; every rank sees the same summed gradients, so all ranks decide alike; ``None``: the
        caller computes it, once it knows the loss was finite), or the norm when ``clip_grad_norm``
        computes it anyway (without value clipping before it, which would turn an inf into a
        finite value). ``loss``: the unread loss of a deferred step (:meth:`_step`), which gates
        the step as the gradients do."""
        grads = self._grads_impl
        if self._dist is None:
            grads.allreduce_grads(self._params)
        summed = self.accumulate_steps > 1 or self._dist is not None
        if summed and self._reduction_for_scale() != "sum":
            grads.scale_grads(self._params, 1.0 / self._samples)
        stale = grads.stale(self._named)
        if stale:
            key = tuple(stale)
            if key not in self._warned_stale:
                self._warned_stale.add(key)
                warnings.warn(f"no gradient reached {len(stale)} parameter(s) at step {self.global_step}: "
                              f"{', '.join(stale[:8])}{' ...' if len(stale) > 8 else ''}; they are "
                              f"not updated (torch skips grad=None; Gluon would raise)",
                              StaleGradientWarning, stacklevel=3)
        if self.clip_grad_norm is None and self.clip_grad_value is None:
            # the adapter's checked step (MXNet: queued behind its check, undone if it fails)
            if not self._optim_impl.step_if_finite(self.optimizer, self._params, self._check_cache, loss):
                return "gradient (largest |g|)", None
            return self._stepped()
        if self.clip_grad_value is not None:           # the raw gradients: clipping makes inf finite
            if not self._optim_impl.grads_finite(self._params, self._check_cache):
                return "gradient (largest |g|)", _optim.grad_max_abs(self._params)
            _optim.clip_grad_value_(self._params, self.clip_grad_value)
        if self.clip_grad_norm is not None:
            norm = float(_optim.clip_grad_norm_(self._params, self.clip_grad_norm))
            if not math.isfinite(norm):
                return "gradient norm", norm
        self.optimizer.step()
        return self._stepped()

    def _stepped(self) -> None:
        """After an applied optimizer step: buffers to every context, scheduler, counters."""
        self._buffers_impl.sync_buffers(self.model, self._buffer_cache)
        if self.scheduler is not None:
            self.scheduler.step()
        self.global_step += 1
        self._micro = self._samples = 0
        return None

    def _reduction_for_scale(self) -> str:
        # reduction is known from the loss object, or was inferred on the first call
        return self.loss_reduction or getattr(self, "_inferred", "mean")

    def eval_step(self, x: Any, y: Any = None) -> Tuple[Optional[float], Any]:
        """``(loss, outputs)`` in eval mode (restored afterwards), without recording gradients; the
        outputs of all devices are gathered on the first one. ``loss`` is None without ``y``."""
        xs, ys = self._arrays(x, "x"), self._arrays(y, "y")
        B, sizes, x_axes, _, objective = self._plan(xs, ys)
        was_training = bool(getattr(self.model, "training", True))
        toggle = callable(getattr(self.model, "eval", None))     # native Gluon Blocks have no eval()
        if toggle:
            self.model.eval()
        try:
            return self._replicas.evaluate(xs, x_axes, ys if ys else None, self.output_batch_axis,
                                           sizes, self.loss_fn, objective)
        finally:
            if toggle and was_training:
                self.model.train()

    # ---- checkpoints --------------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to resume bit-for-bit: model (numpy), optimizer, scheduler, step
        counter, and the RNG states of Python, numpy and the backend (MXNet's cannot be read; use
        ``seed=``). Only between optimizer steps (not inside an accumulation window)."""
        if self._micro:
            raise TrainerStateError(f"state_dict() inside an accumulation window ({self._micro} of "
                                    f"{self.accumulate_steps} micro-batches done); call it after a step")
        from .state import state_dict as _sd
        from .tensor import to_numpy
        return {
            "format": _FORMAT,
            "backend": self._be.name,
            "model": {k: to_numpy(v) for k, v in _sd(self.model).items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "optimizer_type": optimizer_name(self.optimizer),
            "scheduler": copy.deepcopy(self.scheduler.state_dict()) if self.scheduler is not None else None,
            "step": self.global_step,
            "skipped_steps": copy.deepcopy(self.skipped_steps),
            "rng": {"python": _pyrandom.getstate(), "numpy": np.random.get_state(),
                    "backend": self._be.module("rng").rng_state()},
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output; on any error nothing is changed."""
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise TrainerStateError(f"not a dualdl Trainer state dict (expected format {_FORMAT!r})")
        if state.get("backend") != self._be.name:
            raise TrainerStateError(f"this state was saved on the {state.get('backend')!r} backend and "
                                    f"this Trainer runs on {self._be.name!r}; load the model weights "
                                    f"with dl.load_state_dict(model, state['model']) instead")
        if (state.get("scheduler") is None) != (self.scheduler is None):
            raise TrainerStateError("the state and this Trainer disagree on having an lr scheduler")
        try:
            check_optimizer_state(state.get("optimizer"), state.get("optimizer_type"), self.optimizer,
                                  [[_known_shape(p) for p in g["params"]] for g in self.optimizer.param_groups])
        except ValueError as e:
            raise TrainerStateError(f"{e} (nothing was changed)") from None
        from .state import load_state_dict as _load, state_dict as _sd
        from .tensor import to_numpy
        old_model = {k: to_numpy(v) for k, v in _sd(self.model).items()}
        old_opt = copy.deepcopy(self.optimizer.state_dict())
        old_sched = copy.deepcopy(self.scheduler.state_dict()) if self.scheduler is not None else None
        try:
            _load(self.model, state["model"])
            self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
            if self.scheduler is not None:
                self.scheduler.load_state_dict(copy.deepcopy(state["scheduler"]))
            rng = state["rng"]
            _pyrandom.setstate(rng["python"])
            np.random.set_state(rng["numpy"])
            self._be.module("rng").set_rng_state(rng.get("backend") or {})
        except Exception as e:
            _load(self.model, old_model)
            self.optimizer.load_state_dict(old_opt)
            if old_sched is not None:
                self.scheduler.load_state_dict(old_sched)
            if isinstance(e, TrainerStateError):
                raise
            raise TrainerStateError(f"cannot load the Trainer state (nothing was changed): {e}") from e
        self._buffers_impl.sync_buffers(self.model, self._buffer_cache)
        self.global_step = int(state["step"])
        self.skipped_steps = list(state.get("skipped_steps", []))
        self._micro = self._samples = 0
        self._grads_impl.zero_grad(self._params, self._zero_cache)

    def save(self, path: "os.PathLike[str] | str") -> bool:
        """Write :meth:`state_dict` to ``path`` (an ``.npz`` read without unpickling), atomically.
        In a multi-process run every rank must call it: rank 0 writes, the others wait for the
        file (``dl.distributed.save_on_main``). Returns whether this process wrote it."""
        from . import trainer_io
        state = self.state_dict()
        if self._dist is not None:
            from .distributed import save_on_main
            return save_on_main(lambda tmp: trainer_io.write(state, tmp), path)
        from .atomic import atomic_write
        atomic_write(path, lambda tmp: trainer_io.write(state, tmp))
        return True

    def load(self, path: "os.PathLike[str] | str") -> None:
        """Resume from a file written by :meth:`save`, on any number of processes (every rank
        reads the same file, so all hold the same state); on any error nothing is changed."""
        from . import trainer_io
        self.load_state_dict(trainer_io.read(path))

    def __repr__(self) -> str:
        return (f"Trainer(backend={self._be.name!r}, devices={self.devices}, strategy={self.strategy!r}, "
                f"step={self.global_step}, accumulate_steps={self.accumulate_steps})")
