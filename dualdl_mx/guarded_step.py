"""dl.Trainer's optimizer step on MXNet, applied only if every gradient element is finite,
without waiting for the check before the step is queued.

MXNet difference hidden here: every host read waits for MXNet's engine. Reading the check first
(:func:`grad_check.grads_finite`) leaves the engine idle while Python queues the update, 0.1-0.2
of the benchmark MLP's step (benchmarks/findings.md). Where dualdl's compiled kernels are loaded
and the step is SGD's prepared multi-tensor plan on one CPU context, the step is instead queued
behind ``dl_finite_guard`` (dualdl_mx/kernels/finite_guard.cc), which tests every gradient
element exactly, and the step's loss, which the Trainer reads only after the step is queued.
Only when an element is not finite does it keep a copy of the arrays the update writes (weights
and momenta) before the update runs; the check is read after. A bad step is then undone
exactly: ``dl_finite_restore`` copies the arrays back and the plan's learning rate is reset, so
the model and the optimizer are as before the step, bit for bit. A finite step costs no copy.
Everything else takes the check-then-step path.
"""
from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
from mxnet import autograd, gluon, nd

from . import kernels
from .grad_check import checked_params, grads_finite
from .invoke import PreparedCall, kept

__all__ = ["step_if_finite"]

_SLOTS = itertools.count(1)
_WAIT_MS = 2000


class _Guard:
    """The prepared guard and restore calls over one set of gradients and written arrays, with
    input slots after the gradients for the step's loss arrays (set at each call)."""

    def __init__(self, grads: List[nd.NDArray], written: List[nd.NDArray], losses: List[nd.NDArray]) -> None:
        self.slot = slot = next(_SLOTS)
        self.waiter = kernels.guard_waiter()
        ctx = written[0].context
        self.first_loss = len(grads)
        self.guard = PreparedCall("dl_finite_guard", grads + losses + written, [nd.empty((1,), ctx=ctx)],
                                  num_grads=len(grads) + len(losses), num_states=len(written), slot=slot)
        self.restore = PreparedCall("dl_finite_restore", written, [nd.empty((1,), ctx=ctx)],
                                    num_states=len(written), slot=slot)

    def check(self, losses: List[nd.NDArray]) -> nd.NDArray:
        """Queue the guard over the gradients and ``losses``; returns its flag (1.0: all finite)."""
        for i, a in enumerate(losses):
            self.guard.set_input(self.first_loss + i, a)
        if self.waiter is not None:
            self.waiter[0](self.slot)
        return self.guard()[0]

    def passed(self, flag: nd.NDArray) -> bool:
        """Whether the guard queued last found every element finite, known as soon as it has run
        (:func:`kernels.guard_waiter`). Reading ``flag`` through MXNet would also wait for the
        update queued after the guard, on the engine's one CPU worker: that was 0.03-0.05 of the
        hybridized CRNN's ``dl.Trainer`` step (benchmarks/findings.md). A guard that has not run
        within _WAIT_MS (a slow step, or an operator before it failed) is read through MXNet,
        which also raises that operator's error."""
        if self.waiter is not None:
            result = self.waiter[1](self.slot, _WAIT_MS)
            if result >= 0:
                return result == 1
        return flag.asnumpy()[0] == 1.0


def _guard(ps: List[gluon.Parameter], runs: list, losses: List[nd.NDArray],
           cache: Optional[Dict[str, Any]]) -> Optional[_Guard]:
    """The guard over the gradients of ``ps``, ``losses`` and the arrays the ``runs`` write; None
    where it does not apply (several contexts, another device, a sparse or non-float gradient or
    loss)."""
    grads = [p._grad[0] for p in ps]
    written = [a for plan, *_ in runs for a in plan.written()]
    arrays = grads + written

    def build():
        if any(plan.copies for plan, *_ in runs) or not written \
                or any(a.context.device_type != "cpu" or a.stype != "default" for a in arrays + losses) \
                or any(np.dtype(g.dtype).name not in ("float32", "float64") for g in grads + losses):
            return None, arrays
        return _Guard(grads, written, losses), arrays
    # the losses are new arrays each step: the plan is keyed by their count, dtype and context
    key = tuple(map(id, arrays)) + tuple((np.dtype(a.dtype).name, a.context) for a in losses)
    return kept(cache, "finite_guard", key, build)


def step_if_finite(optimizer: Any, params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]] = None,
                   losses: Optional[List[nd.NDArray]] = None) -> bool:
    """One ``optimizer.step()`` if every gradient element of ``params``, and every element of
    ``losses`` (the step's loss arrays, not read yet), is finite; returns whether it was applied
    (where not, the model and optimizer are unchanged)."""
    from .optim import prepared_step
    losses = list(losses or ())
    runs_of = getattr(optimizer, "_prepared_runs", None)
    runs = runs_of() if runs_of is not None and kernels.available() else None
    ps = checked_params(params)
    guard = _guard(ps, runs, losses, cache) if runs and ps else None
    if guard is None:
        step = prepared_step(optimizer)
        if not all(np.isfinite(a.asnumpy()).all() for a in losses) or not grads_finite(params, cache):
            return False
        step()
        return True
    lrs = [(plan, plan.lr) for plan, *_ in runs]
    with autograd.pause():
        flag = guard.check(losses)
        for plan, lr, mu, wd, rs in runs:
            plan.run(lr, mu, wd, rs)
    if guard.passed(flag):
        return True
    with autograd.pause():
        restored = guard.restore()[0]
    for plan, lr in lrs:
        plan.set_lr(lr)
    if restored.asnumpy()[0] != 1.0:           # the guard saved nothing: cannot happen, say so
        raise RuntimeError("dualdl: a non-finite step could not be undone (dl_finite_restore found no "
                           "saved copy); the model and optimizer state are not reliable now")
    return False
