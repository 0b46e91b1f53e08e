"""Gradient reduction across processes on MXNet/Gluon (``dl.Trainer`` under ``dualdl launch``):
the ``dist_sync`` kvstore sums, dualdl's optimizer applies the update on every worker."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np
import mxnet as mx
from mxnet import gluon, nd

from .buffers import _buffers
from .fast.grad_state import is_fresh, set_flags
from .grads import _all_params, _ready

__all__ = ["DistReducer"]


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
                    g = p.list_grad()[0] if is_fresh(p) else nd.zeros(d.shape, ctx=d.context, dtype=d.dtype)
                    parts.append(g.reshape((-1,)).as_in_context(mx.cpu()))
                else:
                    src = d if self.rank == 0 else nd.zeros(d.shape, ctx=d.context, dtype=d.dtype)
                    parts.append(src.reshape((-1,)).as_in_context(mx.cpu()))
            tail = [1.0 if is_fresh(p) else 0.0 for p in grads] + (list(extra) if gi == self.extra_group else [])
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
                set_flags(p.list_data(), f > 0)
            if gi == self.extra_group:
                out = tail[len(grads):]
        nd.waitall()
        return out
