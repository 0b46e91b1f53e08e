"""Buffers (BatchNorm running statistics) on MXNet/Gluon: snapshot/restore around a skipped
step and the copy of context 0's buffers to the other contexts.

Hides: running statistics are per context, each copy updated by its own piece of the batch.
dualdl keeps context 0's (as torch DataParallel keeps replica 0's) and copies them to the other
contexts after each step, so the copies never drift.
"""
from __future__ import annotations

from typing import List

from mxnet import gluon

from .grads import _all_params, _ready

__all__ = ["snapshot_buffers", "restore_buffers", "sync_buffers"]


def _buffers(model: gluon.Block) -> List[gluon.Parameter]:
    return [p for _, p in _all_params(model) if p.grad_req == "null" or getattr(p, "_dl_buffer", False)]


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
