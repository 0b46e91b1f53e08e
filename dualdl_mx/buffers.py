"""Buffers (BatchNorm running statistics) on MXNet/Gluon: snapshot/restore around a skipped
step and the copy of context 0's buffers to the other contexts.

Hides: running statistics are per context, each copy updated by its own piece of the batch.
dualdl keeps context 0's (as torch DataParallel keeps replica 0's) and copies them to the other
contexts after each step, so the copies never drift.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from mxnet import gluon, nd

from .grads import _all_params, _ready

__all__ = ["snapshot_buffers", "restore_buffers", "sync_buffers"]


def _buffers(model: gluon.Block) -> List[gluon.Parameter]:
    return [p for _, p in _all_params(model) if p.grad_req == "null" or getattr(p, "_dl_buffer", False)]


def _plan(model: gluon.Block, cache: Optional[Dict[str, Any]]) -> Tuple[List[gluon.Parameter], list]:
    """The initialised buffers and ``[(arrays, flat views)]`` per context and dtype, kept in
    ``cache`` (the Trainer's) while the same arrays back them: walking the model's parameters
    cost 45 us a step on the demo CRNN, and one copy per buffer array 25 us each."""
    params = cache.get("params") if cache is not None else None
    if params is None:
        params = _buffers(model)
        if cache is not None:
            cache["params"] = params
    key = tuple(id(d) for p in params if _ready(p) for d in p._data)
    hit = cache.get("plan") if cache is not None else None
    if hit is not None and hit[0] == key:
        return hit[1]
    ready = [p for p in params if _ready(p)]
    groups: Dict[Any, list] = {}
    for p in ready:
        for i, d in enumerate(p.list_data()):
            groups.setdefault((i, d.dtype), []).append(d)
    plan = (ready, [(ds, [d.reshape((-1,)) for d in ds]) for ds in groups.values()])
    if cache is not None:           # the entry holds the arrays, so their ids cannot be reused
        cache["plan"] = (key, plan)
    return plan


def snapshot_buffers(model: gluon.Block, cache: Optional[Dict[str, Any]] = None):
    """A copy of every buffer array: one ``concat`` per context and dtype (one operator, where a
    copy per array cost 585 us a step on the demo CRNN's 20 arrays)."""
    return [(ds, nd.concat(*flats, dim=0) if len(flats) > 1 else flats[0].copy())
            for ds, flats in _plan(model, cache)[1]]


def restore_buffers(model: gluon.Block, snap) -> None:
    for ds, flat in snap:
        at = 0
        for d in ds:
            n = d.size
            flat[at:at + n].reshape(d.shape).copyto(d)
            at += n


def sync_buffers(model: gluon.Block, cache: Optional[Dict[str, Any]] = None) -> None:
    """Copy context 0's buffers (running statistics) to the other contexts."""
    for p in _plan(model, cache)[0]:
        data = p._data
        for d in data[1:]:
            data[0].copyto(d)
