"""CTC in float64 on MXNet: the forward (alpha) recursion in log space, written with MXNet's
operators and differentiated by autograd, for the float64 inputs that MXNet's ``CTCLoss``
operator cannot compute (it runs in float32 only: cast there, its float64 results would be
float32's, 2e-7 relative in values and 8e-5 in gradients on torch's module tests).

torch's CTC gradient with respect to ``log_probs`` is ``exp(lp) - posterior`` (its kernel assumes a
log-softmax before it, and so does MXNet's operator, which applies softmax itself); autograd of the
recursion gives ``-posterior``: the ``exp(lp)`` term is added with a zero-valued term
``(lp - BlockGrad(lp)) * BlockGrad(exp(lp))`` over each sample's frames.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
from mxnet import nd

from .fast import compiled
from .fast.host import host_array

__all__ = ["ctc_float64"]

_NEG = -np.inf


def _plan(labels: np.ndarray, il: np.ndarray, tl: np.ndarray, T: int, C: int,
          blank: int) -> Tuple[np.ndarray, ...]:
    """Host-made constants: the flat gather index of each extended label (T, N, S), the
    transition masks (0 / -inf) of the skip (s-2 -> s) and of states beyond a sample's 2 tl + 1,
    the start and end states, and the frames within each input length."""
    N = labels.shape[0]
    S = 2 * max(int(tl.max(initial=0)), 0) + 1
    ext = np.full((N, S), blank, np.int64)
    ext[:, 1::2] = labels[:, :(S - 1) // 2] if S > 1 else ext[:, 1::2]
    s = np.arange(S)[None, :]
    valid = s < (2 * tl[:, None] + 1)
    skip = np.zeros((N, S), bool)
    if S > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    start = valid & (s < 2)
    end = valid & (s >= 2 * tl[:, None] - 1)
    index = (np.arange(T)[:, None, None] * N * C + np.arange(N)[None, :, None] * C + ext[None]).astype(np.float64)
    frames = np.arange(T)[:, None] < il[None, :]
    log = lambda m: np.where(m, 0.0, _NEG)            # noqa: E731
    return index, log(valid), log(skip), log(start), log(end), frames.astype(np.float64)


def _lse(F, *xs):
    """log(sum(exp(x))) elementwise over equal-shape arrays, -inf where all are -inf with a zero
    (not NaN) gradient there."""
    m = xs[0]
    for x in xs[1:]:
        m = F.maximum(m, x)
    finite = m > _NEG
    m0 = F.BlockGrad(F.where(finite, m, F.zeros_like(m)))      # lse does not depend on it
    total = F.zeros_like(m)
    for x in xs:
        total = total + F.exp(x - m0)
    safe = F.where(finite, total, F.ones_like(total))
    return F.where(finite, m0 + F.log(safe), m)


def _shift(F, a, k: int):
    """``a`` (N, S) moved k states right, -inf coming in."""
    pad = F.zeros_like(F.slice_axis(a, axis=1, begin=0, end=k)) + _NEG
    return F.concat(pad, F.slice_axis(a, axis=1, begin=0, end=-k), dim=1)


def _ctc64_formula(F, lp, index, valid, skip, start, end, frames, scale, *, T: int, S: int, reduction: str):
    lpe = F.reshape(F.take(F.reshape(lp, shape=(-1,)), index), shape=(T, -1, S))     # (T, N, S)
    at = lambda t: F.reshape(F.slice_axis(lpe, axis=0, begin=t, end=t + 1), shape=(-1, S))   # noqa: E731
    ft = lambda t: F.reshape(F.slice_axis(frames, axis=0, begin=t, end=t + 1), shape=(-1, 1))  # noqa: E731
    alpha = at(0) + start
    for t in range(1, T):
        terms = [alpha] + ([_shift(F, alpha, 1)] if S > 1 else []) + ([_shift(F, alpha, 2) + skip] if S > 2 else [])
        new = at(t) + _lse(F, *terms) + valid
        alpha = F.where(F.broadcast_like(ft(t), new) > 0, new, alpha)
    ll = _lse(F, *[F.slice_axis(alpha + end, axis=1, begin=s, end=s + 1) for s in range(S)])
    nll = -F.reshape(ll, shape=(-1,))
    # torch's (and MXNet's op's) exp(lp) term of the gradient, over each sample's frames
    bg = F.BlockGrad
    extra = F.sum(F.broadcast_mul((lp - bg(lp)) * bg(F.exp(lp)), F.expand_dims(frames, 2)), axis=(0, 2))
    row = lambda i: F.reshape(F.slice_axis(scale, axis=0, begin=i, end=i + 1), shape=(-1,))   # noqa: E731
    per = (nll + extra) * row(0) + row(1)            # infeasible: x 0, then + inf (or 0: zero_infinity)
    if reduction == "none":
        return per
    if reduction == "sum":
        return F.sum(per)
    return F.mean(per / row(2))


def ctc_float64(lp: nd.NDArray, labels: np.ndarray, il: np.ndarray, tl: np.ndarray, target_lengths: np.ndarray,
                feasible: np.ndarray, blank: int, reduction: str, zero_infinity: bool) -> nd.NDArray:
    """Per-sample or reduced CTC of float64 log-probs (T, N, C) with torch's conventions;
    infeasible samples (computed with an empty label) are masked to inf, or 0 with ``zero_infinity``."""
    T, N, C = lp.shape
    tl = np.where(feasible, tl, 0)
    index, valid, skip, start, end, frames = _plan(labels, il, tl, T, C, blank)
    scale = np.stack([feasible.astype(np.float64), np.where(feasible | zero_infinity, 0.0, np.inf),
                      np.maximum(target_lengths, 1).astype(np.float64)])
    const = lambda a: host_array(np.ascontiguousarray(a, np.float64), lp.context, np.float64)   # noqa: E731
    inputs = dict(lp=lp, index=const(index), valid=const(valid), skip=const(skip), start=const(start),
                  end=const(end), frames=const(frames), scale=const(scale))
    return compiled.run(_ctc64_formula, inputs, T=int(T), S=int(index.shape[2]), reduction=reduction)
