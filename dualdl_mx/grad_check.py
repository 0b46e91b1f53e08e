"""The gradient checks on MXNet: the largest ``|g|`` (exact), the fast "all finite" test the
Trainer runs before every optimizer step, and the global norm that ``clip_grad_norm_`` takes.

Hides: MXNet's own fused checks are slow or inexact on CPU (``multi_all_finite`` tests every tensor
at each element of the largest; ``multi_sum_sq`` and ``norm`` sum naively), and every host read
waits for the engine; see each function for what was measured.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional

import numpy as np
from mxnet import gluon, nd

from .fast import compiled
from .fast.grad_state import fresh_params
from .fast.invoke import MULTI_MAX, PreparedCall, kept

__all__ = ["grad_maxima", "grads_finite"]


def _norm_terms_formula(F, *, p: float, **grads):
    """Per gradient ``g<i>``: max |g| (p = inf), sum g^2 (p = 2) or sum |g|^p, as one (n,) array."""
    terms = []
    for i in range(len(grads)):
        g = grads[f"g{i}"]
        if math.isinf(p):
            t = F.max(F.abs(g))
        else:
            t = F.sum(F.square(g) if p == 2 else F.abs(g) ** p)
        terms.append(F.reshape(t, shape=(1,)))
    return terms[0] if len(terms) == 1 else F.concat(*terms, dim=0)


def _global_norm(grads: List[nd.NDArray], norm_type: float) -> float:
    """The norm of all ``grads`` together. Each gradient's term is MXNet's own reduction (a
    pairwise sum: 1e-8 relative here, where ``multi_sum_sq`` and ``norm`` sum naively and were
    5e-5..1e-4 off); the terms of each context come from one compiled graph and one
    device-to-host read, where a read per parameter made the demo CRNN's step wait 30 times."""
    by_ctx: Dict[Any, List[nd.NDArray]] = {}
    for g in grads:
        by_ctx.setdefault(g.context, []).append(g)
    vals: List[float] = []
    for gs in by_ctx.values():
        terms = compiled.run(_norm_terms_formula, {f"g{i}": g for i, g in enumerate(gs)}, p=float(norm_type))
        vals.extend(float(v) for v in terms.asnumpy())
    return max(vals) if math.isinf(norm_type) else math.fsum(vals) ** (1.0 / norm_type)


def _max_abs_formula(F, **grads):
    """max |g| over every ``g<i>``, as one (1,) array (MXNet's max propagates NaN)."""
    terms = _norm_terms_formula(F, p=math.inf, **grads)
    return terms if len(grads) == 1 else F.max(terms, keepdims=True)


def grad_maxima(params: Iterable[gluon.Parameter]) -> List[float]:
    """The largest ``|g|`` of the first-context gradients (those the optimizer reads), per
    context: NaN if any element is NaN, inf if any is infinite; no sum, so finite gradients never
    overflow. One compiled graph and one device-to-host read per context (one usually)."""
    by_ctx: Dict[Any, List[nd.NDArray]] = {}
    for p in fresh_params(params):
        g = p.list_grad()[0]
        by_ctx.setdefault(g.context, []).append(g)
    return [float(compiled.run(_max_abs_formula, {f"g{i}": g for i, g in enumerate(gs)}).asnumpy()[0])
            for gs in by_ctx.values()]


def grads_finite(params: Iterable[gluon.Parameter], cache: Optional[Dict[str, Any]] = None) -> bool:
    """Whether every first-context gradient element is finite. Fast path: ``multi_sum_sq`` (one
    op per 60 dense gradients of a context and dtype; 47 us on the benchmark MLP, where one compiled
    max-|g| graph took 260 us and ``multi_all_finite``, which tests every tensor at each element
    of the largest, 550 us). A sum of squares is also inf for huge finite gradients (|g| > 1.8e19
    in float32), so only a non-finite sum asks the exact max-|g| graph (:func:`grad_maxima`).
    ``cache``: a dict the caller keeps (the Trainer's), holding the grouping, whose ctypes reads
    (context, dtype, storage type of each gradient) cost 30-45 us a step, until the arrays change."""
    ps = fresh_params(params)
    key = tuple(id(p._grad) for p in ps)
    chunks = kept(cache, "finite_plan", key, lambda: (_finite_plan(ps), [p._grad for p in ps]))
    if chunks is not None:
        sums = [c()[0] for c in chunks]                  # every call queued before the first read
        if all(np.isfinite(s.asnumpy()).all() for s in sums):
            return True
    # a sparse gradient, or a sum that is not finite (also for huge finite gradients): exact check
    return all(math.isfinite(v) for v in grad_maxima(ps))


def _finite_plan(ps: List[gluon.Parameter]) -> Optional[List[PreparedCall]]:
    """One prepared ``multi_sum_sq`` per chunk of first-context gradients (same context and dtype,
    at most 60 each), each writing its own output array; None when a gradient is sparse."""
    groups: Dict[Any, List[nd.NDArray]] = {}
    for p in ps:
        g = p.list_grad()[0]
        if g.stype != "default":
            return None
        groups.setdefault((g.context, g.dtype), []).append(g)
    chunks = [gs[i:i + MULTI_MAX] for gs in groups.values() for i in range(0, len(gs), MULTI_MAX)]
    # multi_sum_sq's output is float32 whatever the gradients' dtype (measured: float16/32/64)
    return [PreparedCall("multi_sum_sq", c, [nd.empty((len(c),), ctx=c[0].context, dtype="float32")],
                         num_arrays=len(c)) for c in chunks]


