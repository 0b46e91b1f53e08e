"""The precise statistics formulas of dualdl's MXNet norm layers (``F`` = ``mx.nd`` or ``mx.sym``)
and the parameter helpers they share: BatchNorm by MXNet's fused operator in float64 or as GEMMs,
group and instance norm over a (N, G, -1) view in float64, torch's running-statistics update.

MXNet differences hidden: MXNet's float32 BatchNorm sums in float32 (7.6-18x torch's error), its
reductions are 4-10x slower than a GEMV on CPU, its GroupNorm has one gamma per group, and its
fused operator updates moving statistics with the biased variance in backward (torch: unbiased,
in forward). The fast form of batch statistics is dualdl_mx/fast/batch_norm.py.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd

from dualdl import config
from .base import Layer, _positional, is_ndarray


class _CheckedCall(Layer):
    """A layer whose NDArray inputs are checked at the call, before MXNet runs anything: also
    hybridized, where ``hybrid_forward`` sees Symbols without shapes (MXNet would otherwise raise
    its own shape-inference error, or reshape a wrong input silently). The check sees the input
    as given (an unbatched input before the batch axis is added). A layer called inside a
    hybridized parent gets Symbols: the parent's input is not this layer's, nothing to check."""

    def _dl_check_call(self, *args: Any) -> None:
        raise NotImplementedError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = _positional(self, args, kwargs)
        if args and is_ndarray(args[0]):
            self._dl_check_call(*args)
        return super().__call__(*args)


def _norm_params(layer: Layer, c: int, affine: bool, bias: bool, track_running_stats: bool) -> None:
    """torch's norm parameters in torch's order: weight (ones), bias (zeros), then the buffers
    running_mean (zeros), running_var (ones), each (c,); absent ones are None."""
    shape = (c,)
    layer.weight = layer._dl_new_param("weight", shape, init=mx.init.One()) if affine else None
    layer.bias = layer._dl_new_param("bias", shape, init=mx.init.Zero()) if affine and bias else None
    if track_running_stats:
        layer.running_mean = layer._dl_new_param("running_mean", shape, init=mx.init.Zero(), buffer=True)
        layer.running_var = layer._dl_new_param("running_var", shape, init=mx.init.One(), buffer=True)
    else:
        layer.running_mean = layer.running_var = None


def _stats_repr(m: Layer) -> str:
    return (f"{m.num_features}, eps={m.eps}, momentum={m.momentum}, affine={m.affine}, "
            f"track_running_stats={m.track_running_stats}")


def _write_running(new_mean, new_var, running_mean, running_var) -> None:
    """Copy an eager train-mode call's new running statistics in (torch updates them in forward;
    outside autograd, as torch's buffers are)."""
    with autograd.pause():
        new_mean.copyto(running_mean)
        new_var.copyto(running_var)


def _gemm_batchnorm(F, x, weight, bias, eps: float, mean=None, var=None, update=None):
    """BatchNorm on the (C, n) view of x (``F`` = nd or sym) with every per-channel reduction and
    broadcast written as a GEMM with a ones row: MXNet's reductions (and the backward of its
    broadcast ops, which reduces) are 4-10x slower than a GEMV on CPU, even over a contiguous
    axis. Batch statistics (two-pass: mean, then the mean square of the centred data) unless
    ``mean``/``var`` (C, 1) are given; ``update(F, mean, var, n)`` may return a (C, 1) zero that
    ties a running-statistics op into the graph (or None). Returns (y, mean, biased var)."""
    moved = F.swapaxes(x, 0, 1)
    flat = F.reshape(moved, shape=(0, -1))                              # (C, n)
    ones = F.ones_like(F.slice_axis(flat, axis=0, begin=0, end=1))    # (1, n)
    if mean is None:
        n_ = F.reshape(F.sum(ones), shape=(1, 1))
        mean = F.broadcast_div(F.dot(flat, ones, transpose_b=True), n_)
        xc = flat - F.dot(mean, ones)
        var = F.broadcast_div(F.dot(F.square(xc), ones, transpose_b=True), n_)
    else:
        xc = flat - F.dot(mean, ones)
    scale = F.rsqrt(var + eps)
    if weight is not None:
        scale = scale * F.reshape(weight, shape=(-1, 1))
    tie = update(F, mean, var, n_) if update is not None else None
    if tie is not None:
        scale = scale + tie
    y = xc * F.dot(scale, ones)
    if bias is not None:
        y = y + F.dot(F.reshape(bias, shape=(-1, 1)), ones)
    return F.swapaxes(F.reshape_like(y, moved), 0, 1), mean, var


def _batchnorm_running_formula(F, x, running_mean, running_var, weight=None, bias=None, *, eps: float):
    """Eager BatchNorm with the running statistics (eval mode) as one compiled graph: the GEMM
    form, which keeps gradients precise when an eval-mode BatchNorm is fine-tuned through."""
    c = (-1, 1)
    return _gemm_batchnorm(F, x, weight, bias, eps, F.reshape(running_mean, shape=c),
                           F.reshape(running_var, shape=c))[0]


def _bessel(F, n_):
    """n/(n-1) of a graph's per-channel count ``n_``; 1 when n == 1, not inf."""
    return n_ / (F.relu(n_ - 2.0) + 1.0)


# scratch arrays by (size, context, dtype): an instance norm's size is N*C, so a new batch size is
# a new key; the least recently used go beyond _SCRATCH_MAX (MXNet frees them once no queued
# operator holds them)
_SCRATCH_MAX = 64
_AUX_SCRATCH: "OrderedDict[tuple, Tuple[Any, Any]]" = OrderedDict()


def _kept_scratch(cache: "OrderedDict[tuple, Tuple[Any, Any]]", key: tuple, make) -> Tuple[Any, Any]:
    """``cache[key]``, made by ``make()`` on first use; least recently used out beyond _SCRATCH_MAX."""
    pair = cache.get(key)
    if pair is None:
        pair = cache[key] = make()
        while len(cache) > _SCRATCH_MAX:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return pair


def _aux_scratch(c: int, ctx, dtype: str) -> Tuple[Any, Any]:
    """(C,) arrays for the operator's moving statistics, which it updates in train mode: dualdl
    keeps torch's running statistics itself, so these only absorb the writes."""
    return _kept_scratch(_AUX_SCRATCH, (c, ctx, dtype),
                         lambda: (mx.nd.zeros((c,), ctx=ctx, dtype=dtype), mx.nd.ones((c,), ctx=ctx, dtype=dtype)))


def _batchnorm_op_formula(F, x, aux_mean, aux_var, weight=None, bias=None, running_mean=None,
                          running_var=None, count=None, *, eps: float, momentum: Optional[float], bessel: Any,
                          dtype: str, compute: str):
    """BatchNorm with batch statistics: MXNet's fused operator in the ``compute`` dtype (float64:
    exact to float32 rounding; run under train_mode, moving statistics into the scratch ``aux_*``),
    cast back to ``dtype``. Given the running statistics, also returns torch's update of them
    (momentum-weighted, unbiased variance ``var * bessel``, computed in ``compute``; torch computes
    it in float64 on CPU) for the caller to copy in. ``bessel``: n/(n-1) as a float, or a function
    ``(F, x in compute dtype) -> (1,) symbol`` (a graph, where n is not known when it is built).
    ``momentum`` None: torch's cumulative average, the weight of the new value ``1 / (count + 1)``
    from ``count`` ((1,) float64, the batches tracked before this one; torch's ``1.0 /
    num_batches_tracked`` after its increment, the same float64 division), and the new count is
    returned last."""
    def cast(t, to):
        return t if to == dtype and compute == dtype else F.cast(t, dtype=to)
    w = cast(weight, compute) if weight is not None else F.ones_like(aux_var)
    b = cast(bias, compute) if bias is not None else F.zeros_like(aux_mean)
    xc = cast(x, compute)
    y, mean, inv_std = F.BatchNorm(xc, w, b, aux_mean, aux_var, eps=eps, fix_gamma=False,
                                   use_global_stats=False, output_mean_var=True, axis=1)
    y = cast(y, dtype)
    if running_mean is None:
        return y
    var = 1.0 / F.square(inv_std) - eps                                  # the biased batch variance
    unbiased = var * bessel if isinstance(bessel, float) else F.broadcast_mul(var, bessel(F, xc))
    if momentum is not None:
        m = momentum
        new_mean = (1 - m) * cast(running_mean, compute) + m * mean
        new_var = (1 - m) * cast(running_var, compute) + m * unbiased
        extra = []
    else:                                   # torch: f * new + (1 - f) * old, f = 1 / batches tracked
        new_count = F.BlockGrad(count + 1.0)
        f = 1.0 / F.cast(new_count, dtype=compute)
        new_mean = F.broadcast_mul(1 - f, cast(running_mean, compute)) + F.broadcast_mul(f, mean)
        new_var = F.broadcast_mul(1 - f, cast(running_var, compute)) + F.broadcast_mul(f, unbiased)
        extra = [new_count]
    return [y, F.BlockGrad(cast(F.reshape(new_mean, shape=(-1,)), dtype)),
            F.BlockGrad(cast(F.reshape(new_var, shape=(-1,)), dtype))] + extra


def _stats_dtype(dtype: str) -> str:
    """The dtype batch statistics are computed in: float64 (torch's precision), or the input's
    with ``DUALDL_MX_FUSED_BATCHNORM=1`` (MXNet's float32 operator; float16 stays float64)."""
    return dtype if config.mx_fused_batchnorm() and dtype != "float16" else "float64"


_AFFINE_STATS: "OrderedDict[tuple, Tuple[Any, Any]]" = OrderedDict()


def _affine_stats(c: int, ctx) -> Tuple[Any, Any]:
    """(C,) float64 zeros and ones: the moving statistics of the BatchNorm op that applies the
    affine in :func:`_channel_affine` (read only, with ``use_global_stats``)."""
    return _kept_scratch(_AFFINE_STATS, (c, ctx),
                         lambda: tuple(f((c,), ctx=ctx, dtype="float64") for f in (mx.nd.zeros, mx.nd.ones)))


def _grouped_norm_formula(F, x, weight=None, bias=None, running_mean=None, running_var=None,
                          op_0=None, op_1=None, affine_0=None, affine_1=None, *, channels: int,
                          groups: int, eps: float, stats: str = "input", momentum: float = 0.1,
                          dtype: str = "float32"):
    """torch's group/instance norm (``F`` = nd or sym): x viewed (N, groups, -1) and normalised
    over the last axis by its mean and biased variance (two-pass), then the per-channel affine.
    Computed in float64 and cast back to ``dtype``, as dualdl's BatchNorm: exact to float32
    rounding (3.1e-8 from float64 at mean 1000 / std 0.1; MXNet's float32 LayerNorm op, applied
    to (N, G, M), is 1.4e-3 off there, torch's float32 kernels 2e-4).
    Callers give (C,) zeros/ones ``affine_0``/``affine_1`` (eager: cached arrays; hybridized:
    the block's scratch parameters): the affine is then MXNet's BatchNorm op with
    ``use_global_stats`` (:func:`_channel_affine`). Eager callers also give (N*G,) scratch moving
    statistics ``op_0``/``op_1`` (written, never read) and run it in train mode: the statistics
    are then MXNet's BatchNorm op on the (1, N*G, M) view. Both ops together are 2-2.5x faster
    than the GEMM forms (:func:`_gemm_batchnorm`, :func:`_gemm_affine`). A hybridized graph keeps
    the GEMM statistics: the op's aux states would need N*G graph variables, and the caller, not
    the graph, decides train mode there (MXNet's LayerNorm op in float64 needs neither, but its
    backward costs 3.5 ms on 1M elements).
    ``groups``/``channels`` 0 (reshape code 0): the input's own channel count (instance norm: one
    group per channel, whatever num_features says where no weight or statistics need it).
    ``stats``: ``input``; ``running`` (eval mode with running statistics: (C,) mean/var);
    ``update`` (also return torch's new running statistics, the instance means and unbiased
    variances averaged over N, momentum-weighted, for an eager caller to copy in); ``tie``
    (hybridized: MXNet's fused BatchNorm op updates them in backward, as BatchNorm's)."""
    def to64(t):
        return t if dtype == "float64" else F.cast(t, dtype="float64")

    def back(t):
        return t if dtype == "float64" else F.cast(t, dtype=dtype)
    x64 = to64(x)
    if stats == "running":
        v = F.reshape(x64, shape=(0, channels, -1))
        mean = F.reshape(to64(running_mean), shape=(1, -1, 1))
        inv = F.rsqrt(F.reshape(to64(running_var), shape=(1, -1, 1)) + eps)
        y = F.broadcast_mul(F.broadcast_sub(v, mean), inv)                   # (N, C, M)
    else:
        v = F.reshape(x64, shape=(0, groups, -1))                             # (N, G, M)
        rows = F.reshape(F.expand_dims(v, axis=0), shape=(0, -3, 0))          # (1, N*G, M)
        if op_0 is None:
            y, mean, var = _gemm_batchnorm(F, rows, None, None, eps)          # mean, var: (N*G, 1)
        else:
            y, mean, inv_std = F.BatchNorm(rows, F.ones_like(op_1), F.zeros_like(op_0), op_0, op_1,
                                           eps=eps, fix_gamma=False, use_global_stats=False,
                                           output_mean_var=True, axis=1)
            var = 1.0 / F.square(inv_std) - eps                               # (N*G,), biased
        y = F.reshape(F.reshape_like(y, v), shape=(0, channels, -1))          # (N, C, M)
    if weight is not None or bias is not None:
        y = _channel_affine(F, y, to64(weight) if weight is not None else None,
                            to64(bias) if bias is not None else None, affine_0, affine_1)
    if stats in ("update", "tie"):
        m_ = F.sum(F.ones_like(F.slice_axis(F.slice_axis(v, axis=0, begin=0, end=1), axis=1, begin=0, end=1)))
        bessel = F.broadcast_div(m_, m_ - 1.0)
        per_sample = F.reshape_like(F.reshape(mean, shape=(-1,)), F.slice_axis(v, axis=2, begin=0, end=1))
        batch_mean = F.mean(F.reshape(per_sample, shape=(0, -1)), axis=0)                   # (C,)
        per_sample = F.reshape_like(F.reshape(var, shape=(-1,)), F.slice_axis(v, axis=2, begin=0, end=1))
        batch_var = F.broadcast_mul(F.mean(F.reshape(per_sample, shape=(0, -1)), axis=0), bessel)
        if stats == "tie":
            tie = _running_update_tie(F, back(batch_mean), back(batch_var),
                                      running_mean, running_var, momentum)
            y = F.broadcast_add(y, to64(tie))
        else:
            new_mean = (1 - momentum) * to64(running_mean) + momentum * batch_mean
            new_var = (1 - momentum) * to64(running_var) + momentum * batch_var
            return [back(F.reshape_like(y, x64)),
                    F.BlockGrad(back(new_mean)), F.BlockGrad(back(new_var))]
    return back(F.reshape_like(y, x64))


def _channel_affine(F, y, weight=None, bias=None, zeros=None, ones=None):
    """``y * weight + bias`` per channel on (N, C, M) in float64. Given (C,) ``zeros``/``ones``
    (graph variables: an op's aux states must be), as MXNet's BatchNorm op with
    ``use_global_stats``, mean 0 and variance 1: ``weight * sqrt(1 + eps)`` cancels its
    ``1 / sqrt(1 + eps)`` to 1 ulp of float64, and its backward is 2-3x faster than the GEMM
    form's. Else :func:`_gemm_affine`."""
    if zeros is None:
        return _gemm_affine(F, y, weight, bias)
    eps = 1e-5
    gamma = (weight if weight is not None else F.ones_like(ones)) * float(np.sqrt(1.0 + eps))
    beta = bias if bias is not None else F.zeros_like(zeros)
    return F.BatchNorm(y, gamma, beta, zeros, ones, eps=eps, fix_gamma=False, use_global_stats=True, axis=1)


def _gemm_affine(F, y, weight=None, bias=None):
    """``y * weight + bias`` per channel on (N, C, M), on the (C, N*M) view with the broadcasts
    written as GEMMs with a ones row (as :func:`_gemm_batchnorm`): the backward of MXNet's
    broadcast ops reduces, and its reductions cost 4x the normalisation itself on CPU."""
    moved = F.swapaxes(y, 0, 1)                                               # (C, N, M)
    flat = F.reshape(moved, shape=(0, -1))
    ones = F.ones_like(F.slice_axis(flat, axis=0, begin=0, end=1))
    if weight is not None:
        flat = flat * F.dot(F.reshape(weight, shape=(-1, 1)), ones)
    if bias is not None:
        flat = flat + F.dot(F.reshape(bias, shape=(-1, 1)), ones)
    return F.swapaxes(F.reshape_like(flat, moved), 0, 1)


def _running_update_tie(F, mean, var, running_mean, running_var, momentum: float):
    """A zero (1, 1, 1) that ties MXNet's fused BatchNorm op into a graph so that it updates
    ``running_*`` to torch's ``(1 - m) * running + m * (mean, var)`` (``var`` unbiased): those new
    values are computed in the graph and the op is fed the 2 rows ``new_mean -/+ sqrt(new_var)``,
    whose mean and biased variance they are, with momentum 0 (it assigns them) when backward runs
    inside ``autograd.record()``. The op's own momentum would be a float32 (float64 statistics
    3.5e-8 off torch's, torch's module_db)."""
    m = float(momentum)
    new_mean = (1 - m) * running_mean + m * mean
    std = F.sqrt((1 - m) * running_var + m * var)
    rows = F.stack(new_mean - std, new_mean + std, axis=0)                    # (2, C)
    row = F.slice_axis(rows, axis=0, begin=0, end=1)
    fused = F.BatchNorm(rows, F.ones_like(F.reshape(row, shape=(-1,))), F.zeros_like(F.reshape(row, shape=(-1,))),
                        running_mean, running_var, momentum=0.0, fix_gamma=False,
                        use_global_stats=False, axis=1)
    return F.reshape(F.sum(fused), shape=(1, 1, 1)) * 0.0
