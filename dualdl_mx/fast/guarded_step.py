"""dl.Trainer's optimizer step on MXNet, applied only if every gradient element is finite,
without waiting for the check before the step is queued.

MXNet difference hidden here: every host read waits for MXNet's engine. Reading the check first
(:func:`grad_check.grads_finite`) leaves the engine idle while Python queues the update, 0.1-0.2
of the benchmark MLP's step (benchmarks/findings.md). Where dualdl's compiled kernels are loaded
and the step is SGD's prepared multi-tensor plan on one CPU context, the step is instead one
``dl_guarded_sgd_mom`` operator (dualdl_mx/fast/kernels/finite_guard.cc): it tests every element of
the gradients and of the step's loss (which the Trainer reads only after the step is queued), and
then runs ``multi_sgd_mom_update``'s arithmetic on every parameter, bit for bit, or writes
nothing. A bad step therefore leaves the model and the optimizer as they were, with no copy and no
rollback; only the plan's learning rate is not advanced. Everything else takes the check-then-step
path.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from mxnet import autograd, gluon, nd

from . import enabled, kernels
from ..grad_check import grads_finite
from .grad_state import fresh_params
from .invoke import PreparedCall, kept

__all__ = ["prepared_step", "step_if_finite"]

_SLOTS = itertools.count(1)
_WAIT_MS = 2000


class _GuardedStep:
    """The prepared ``dl_guarded_sgd_mom`` call over the runs' plans (every weight, gradient and
    momentum), with input slots after them for the step's loss arrays (set at each call)."""

    def __init__(self, runs: list, losses: List[nd.NDArray]) -> None:
        self.slot = slot = next(_SLOTS)
        self.waiter = kernels.guard_waiter()
        triples = [plan.triples() for plan, *_ in runs]
        arrays = [a for t in triples for a in t]
        self.sizes = [len(t) // 3 for t in triples]            # weights per run
        self.first_loss = len(arrays)
        self.key: Optional[Tuple] = None
        self.call = PreparedCall("dl_guarded_sgd_mom", arrays + losses, [nd.empty((1,), ctx=arrays[0].context)],
                                 num_weights=sum(self.sizes), num_checked=len(losses), slot=slot)

    def __call__(self, runs: list, losses: List[nd.NDArray]) -> nd.NDArray:
        """Queue the step of ``runs`` (``(plan, lr, momentum, wd, rescale)`` each, as
        ``plan.run`` takes them) behind the check of the gradients and ``losses``; returns its
        flag (1.0: applied)."""
        key = tuple((lr, mu, wd, rs, plan.lr) for plan, lr, mu, wd, rs in runs)
        if key != self.key:
            # one value per weight: str() of the Python float plan.run gives multi_sgd_mom_update,
            # which the operator parses as MXNet does (formatted once per group: a scheduler may
            # change the lr at every step)
            per: Dict[str, List[str]] = {"lrs": [], "wds": [], "momenta": [], "rescales": []}
            for n, (lr, mu, wd, rs, old) in zip(self.sizes, key):
                for name, v in zip(per, (lr, wd, mu * lr / old, rs)):
                    per[name] += [str(v)] * n
            self.call.set_attrs(**{name: f"({', '.join(vs)})" for name, vs in per.items()})
            self.key = key
        for i, a in enumerate(losses):
            self.call.set_input(self.first_loss + i, a)
        if self.waiter is not None:
            self.waiter[0](self.slot)
        return self.call()[0]

    def passed(self, flag: nd.NDArray) -> bool:
        """Whether the step queued last was applied, known as soon as its check has run
        (:func:`kernels.guard_waiter`), while the update itself still runs. Reading ``flag``
        through MXNet would wait on the engine's one CPU worker behind operators queued after the
        step, and the Trainer's remaining Python could not overlap them (0.03-0.05 of the
        hybridized CRNN's ``dl.Trainer`` step, benchmarks/findings.md). A check that has not run
        within _WAIT_MS (a slow step, or an operator before it failed) is read through MXNet,
        which also raises that operator's error."""
        if self.waiter is not None:
            result = self.waiter[1](self.slot, _WAIT_MS)
            if result >= 0:
                return result == 1
        return flag.asnumpy()[0] == 1.0


def _guarded(ps: List[gluon.Parameter], runs: list, losses: List[nd.NDArray],
             cache: Optional[Dict[str, Any]]) -> Optional[_GuardedStep]:
    """The guarded step over the plans of ``runs`` and ``losses``; None where it does not apply
    (several contexts, another device, a sparse array, a non-float loss, or plans that do not
    update exactly the parameters ``ps``)."""
    arrays = [a for plan, *_ in runs for a in plan.triples()]

    def build():
        if any(plan.copies for plan, *_ in runs) or not arrays \
                or sorted(id(p) for plan, *_ in runs for p in plan.params) != sorted(map(id, ps)) \
                or any(a.context.device_type != "cpu" or a.stype != "default" for a in arrays + losses) \
                or any(np.dtype(a.dtype).name != "float32" for a in arrays) \
                or any(np.dtype(a.dtype).name not in ("float32", "float64") for a in losses):
            return None, arrays
        return _GuardedStep(runs, losses), arrays
    # the losses are new arrays each step: the plan is keyed by their count, dtype and context
    key = tuple(map(id, arrays)) + tuple(map(id, ps)) + tuple((np.dtype(a.dtype).name, a.context) for a in losses)
    return kept(cache, "finite_guard", key, build)


def prepared_step(optimizer: Any) -> Callable[[], Any]:
    """``optimizer.step`` with its Python work (finding fresh parameters, checking the cached
    multi-tensor plans) done now, so that only the prepared operator calls remain after the
    check's host read, while the engine still runs the backward pass. ``optimizer.step`` itself
    where no prepared form applies (other optimizers, a first step, a changed parameter set) or
    with ``DUALDL_MX_FAST=0``."""
    prep = getattr(optimizer, "_prepared_step", None)
    fast = prep() if prep is not None and enabled() else None
    return fast or optimizer.step


def step_if_finite(optimizer: Any, params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]] = None,
                   losses: Optional[List[nd.NDArray]] = None) -> bool:
    """One ``optimizer.step()`` if every gradient element of ``params``, and every element of
    ``losses`` (the step's loss arrays, not read yet), is finite; returns whether it was applied
    (where not, the model and optimizer are unchanged). The precise form reads the check, then
    steps; the fast form (SGD with momentum on one CPU context, the kernels loaded) queues the
    step behind its own check in one operator."""
    losses = list(losses or ())
    runs_of = getattr(optimizer, "_prepared_runs", None)
    runs = runs_of() if runs_of is not None and kernels.available() else None
    ps = fresh_params(params)
    guarded = _guarded(ps, runs, losses, cache) if runs and ps else None
    if guarded is None:
        step = prepared_step(optimizer)
        if not all(np.isfinite(a.asnumpy()).all() for a in losses) or not grads_finite(params, cache):
            return False
        step()
        return True
    with autograd.pause():
        flag = guarded(runs, losses)
    if not guarded.passed(flag):
        return False
    for plan, lr, *_ in runs:
        plan.set_lr(lr)
    return True
