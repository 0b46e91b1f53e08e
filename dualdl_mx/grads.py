"""Gradients on MXNet/Gluon: the trainable parameters, the model's contexts, zeroing, summing
over context copies, scaling and the stale-gradient check.

Hides:
- A Gluon ``Trainer`` with ``kvstore=None`` over two contexts updates each copy with its own
  gradient and the copies diverge silently. dualdl sums the gradients of all context copies into
  every copy before the optimizer reads copy 0 (``allreduce_grads``), and dualdl optimizers write
  the result to all.
- Gluon keeps a zero gradient array and a freshness flag where torch has ``grad = None``:
  ``zero_grad`` clears the flag and ``stale`` reads it.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import mxnet as mx
from mxnet import gluon, nd
from mxnet.base import _LIB, NDArrayHandle, check_call

from dualdl.devices import Device

from .fast.grad_state import is_fresh, read_flags, set_flags, stale_names
from .fast.invoke import PreparedCall, kept

__all__ = ["model_devices", "trainable", "zero_grad", "allreduce_grads", "scale_grads", "stale",
           "grad_arrays", "overwrite_next_backward", "accumulate_again"]


# ---- model inspection ------------------------------------------------------------------------
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


# ---- gradients -------------------------------------------------------------------------------
def _ready(p: gluon.Parameter) -> bool:
    """False for a Gluon parameter whose deferred initialisation has not run yet."""
    return p._data is not None


def zero_grad(params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]] = None) -> None:
    """Zero every context's gradient and mark it not fresh (torch's ``grad = None``): one
    ``reset_arrays`` per context (Gluon's ``Parameter.zero_grad`` runs a ``zeros_like`` per array),
    prepared once per plan (``invoke.PreparedCall``).
    ``cache``: a dict the caller keeps (an optimizer's), holding the grouping by context until a
    parameter's arrays change."""
    dense, sparse, datas = _zero_plan(params, cache)
    for reset in dense:
        reset()
    for g in sparse:
        nd.zeros_like(g, out=g)
    set_flags(datas, False)


def _cached(cache: Optional[Dict[str, Any]], name: str, params: Sequence[gluon.Parameter],
            build: Callable[[Sequence[gluon.Parameter]], Any]) -> Any:
    """``build(params)``, kept in ``cache[name]`` while every parameter has the same gradient and
    data lists and grad_req (:func:`invoke.kept`)."""
    key = tuple((id(p._grad), id(p._data), p.grad_req) for p in params)
    return kept(cache, name, key, lambda: (build(params), [(p._grad, p._data) for p in params]))


def _zero_plan(params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]]):
    """(dense gradients grouped by context, sparse gradients, data arrays) of ``params``."""
    return _cached(cache, "zero_plan", params, _build_zero_plan)


def _build_zero_plan(params: Sequence[gluon.Parameter]):
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
    return ([PreparedCall("reset_arrays", gs, [], num_arrays=len(gs)) for gs in by_ctx.values()],
            sparse, datas)


class _Marking:
    """``MXAutogradMarkVariables`` over every dense (data, gradient) pair of the parameters, with
    its C arguments built once (``autograd.mark_variables`` rebuilds them per call)."""

    def __init__(self, pairs: List[Tuple[nd.NDArray, nd.NDArray]]) -> None:
        self.datas = [d for d, _ in pairs]
        self.keep = pairs
        n = len(pairs)
        self.n = ctypes.c_uint(n)
        self.vars = (NDArrayHandle * n)(*[d.handle for d, _ in pairs])
        self.grads = (NDArrayHandle * n)(*[g.handle for _, g in pairs])
        self.reqs = {req: (ctypes.c_uint * n)(*([code] * n)) for req, code in (("write", 1), ("add", 3))}

    def __call__(self, req: str) -> None:
        check_call(_LIB.MXAutogradMarkVariables(self.n, self.vars, self.reqs[req], self.grads))


def _marking(params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]]) -> Optional[_Marking]:
    """The marking of every copy of every parameter with ``grad_req='add'`` and dense gradients;
    None if some parameter has another grad_req or a sparse gradient (then zero_grad is used)."""
    return _cached(cache, "marking", params, _build_marking)


def _build_marking(params: Sequence[gluon.Parameter]) -> Optional[_Marking]:
    pairs = []
    for p in params:
        if not _ready(p) or p._grad is None:
            continue
        if p.grad_req != "add" or any(g.stype != "default" for g in p._grad):
            return None
        pairs.extend(zip(p._data, p._grad))
    return _Marking(pairs) if pairs else None


def overwrite_next_backward(params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]] = None) -> None:
    """For a step with exactly one backward per parameter copy (dl.Trainer without accumulation),
    in place of :func:`zero_grad`: every copy's gradient is marked to be *written* by the next
    backward (Gluon's ``grad_req='write'``; one C call, no engine operator), so no
    ``reset_arrays`` runs and backward writes instead of adding. Measured on the benchmark MLP:
    a step 0.04-0.08 of native faster (benchmarks/findings.md). Marking also clears every
    fresh-gradient flag, as zero_grad does. A parameter the backward does not reach keeps its
    previous gradient values (not fresh, so no optimizer or check reads it). Falls back to
    :func:`zero_grad` for other grad_reqs and sparse gradients."""
    marking = _marking(params, cache)
    if marking is None:
        zero_grad(params, cache)
        return
    marking("write")


def accumulate_again(params: Sequence[gluon.Parameter], cache: Optional[Dict[str, Any]] = None) -> None:
    """After :func:`overwrite_next_backward`'s backward: marked ``grad_req='add'`` again (torch's
    rule, so a later backward adds), with each copy's fresh-gradient flag as it was."""
    marking = _marking(params, cache)
    if marking is None:
        return
    fresh = read_flags(marking.datas)
    marking("add")
    set_flags([d for d, f in zip(marking.datas, fresh) if f], True)


def allreduce_grads(params: Sequence[gluon.Parameter]) -> None:
    """Sum the gradients of all context copies into every copy (what a kvstore does)."""
    for p in params:
        if p._grad is None or len(p._grad) < 2 or not is_fresh(p):    # one context: nothing to sum
            continue
        grads = p.list_grad()
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
    return stale_names(named)


def grad_arrays(params: Sequence[gluon.Parameter]) -> List[Optional[np.ndarray]]:
    return [p.list_grad()[0].asnumpy() if is_fresh(p) else None for p in params]
