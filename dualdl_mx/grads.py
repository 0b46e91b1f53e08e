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

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import mxnet as mx
from mxnet import gluon, nd

from dualdl.devices import Device

from .invoke import PreparedCall

__all__ = ["model_devices", "trainable", "zero_grad", "allreduce_grads", "scale_grads", "stale",
           "grad_arrays"]


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


def _fresh(p: gluon.Parameter) -> bool:
    return _ready(p) and bool(getattr(p.list_data()[0], "_fresh_grad", False))


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
    plan = ([PreparedCall("reset_arrays", gs, [], num_arrays=len(gs)) for gs in by_ctx.values()],
            sparse, datas)
    if cache is not None:     # the entry holds the keyed lists, so their ids cannot be reused
        cache["zero_plan"] = (key, plan, [(p._grad, p._data) for p in params])
    return plan


def allreduce_grads(params: Sequence[gluon.Parameter]) -> None:
    """Sum the gradients of all context copies into every copy (what a kvstore does)."""
    for p in params:
        if p._grad is None or len(p._grad) < 2 or not _fresh(p):      # one context: nothing to sum
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
    return [n for n, p in named if p._data is None or not p._data[0]._fresh_grad]   # _fresh, inlined:
    # list_data()'s checks cost 1 us a parameter, 30 us a step on the demo CRNN


def grad_arrays(params: Sequence[gluon.Parameter]) -> List[Optional[np.ndarray]]:
    return [p.list_grad()[0].asnumpy() if _fresh(p) else None for p in params]
