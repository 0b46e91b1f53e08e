"""Run a multi-op NDArray formula as one MXNet ``CachedOp`` call (what ``hybridize()`` does for a
Block), so an eager step pays MXNet's per-op dispatch cost (~25 us on CPU) once, not per op.

MXNet difference hidden here: every eager NDArray op goes through Python, ctypes and the engine,
and its backward node is recorded op by op; torch's per-op cost is a few microseconds. A loss
written from its formula (e.g. log-softmax in 5 ops, for torch's precision) would cost 2-3x
Gluon's fused loss op in eager code. Compiled, it runs the same ops (the same numbers, bit for
bit) in one call forward and one backward.

A formula is ``f(F, **inputs, **static)`` written with ``F`` = ``mx.nd`` or ``mx.sym`` ops; inputs
are NDArrays (``None`` for an absent optional input), ``static`` are hashable settings baked into
the graph. One CachedOp is kept per (formula, static settings, input names, shapes, dtypes,
thread), least recently used first out beyond 512: CachedOp is not thread-safe, and one graph fed
alternating shapes (two BatchNorm layers) would re-plan its memory at every call.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Dict, Optional, Tuple

import mxnet as mx
from mxnet import nd

__all__ = ["run"]

_MAX_OPS = 512
_CACHE: "OrderedDict[Tuple, Tuple[Any, Tuple[str, ...]]]" = OrderedDict()
_LOCK = threading.Lock()
# ``static_alloc`` keeps a graph's memory plan and buffers between calls: 1-3% faster on the MLP
# and CRNN steps, but the buffers of every cached graph stay allocated (for a BatchNorm, float64
# copies of its input), so callers ask for it only for graphs with small intermediates (losses).
# Either way every call returns new output arrays and, while recording, keeps its own state
# until backward (tested).


def _build(formula: Callable, names: Tuple[str, ...], static: Dict[str, Any], static_alloc: bool):
    syms = {n: mx.sym.var(n) for n in names}
    out = formula(mx.sym, **syms, **static)
    if isinstance(out, (list, tuple)):
        out = mx.sym.Group(list(out))
    flags = [("static_alloc", "true")] if static_alloc else []
    return mx.ndarray.CachedOp(out, flags), tuple(out.list_inputs())


def run(formula: Callable, inputs: Dict[str, Optional[nd.NDArray]], *, static_alloc: bool = False,
        **static: Any):
    """``formula(mx.nd, **inputs, **static)``'s value, computed by one cached graph call
    (``static_alloc``: see above)."""
    present = {k: v for k, v in inputs.items() if v is not None}
    names = tuple(sorted(present))
    key = (formula, names, tuple((present[n].shape, present[n].dtype) for n in names),
           tuple(sorted(static.items())), static_alloc, threading.get_ident())
    entry = _CACHE.get(key)
    if entry is not None:
        try:
            _CACHE.move_to_end(key)
        except KeyError:                # evicted by another thread in between: still usable
            pass
    else:
        entry = _build(formula, names, static, static_alloc)
        with _LOCK:
            _CACHE[key] = entry
            while len(_CACHE) > _MAX_OPS:
                _CACHE.popitem(last=False)
    op, order = entry
    return op(*[present[n] for n in order])

