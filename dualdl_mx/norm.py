"""``BatchNorm1d``/``2d``/``3d`` (with the numerics that give torch's results on MXNet),
``LayerNorm`` over any number of trailing axes, ``GroupNorm`` and ``InstanceNorm1d``/``2d``."""
from __future__ import annotations

import os
import warnings
from typing import Any, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd

from dualdl.nn import checks as C
from dualdl.nn.checks import IntOrTuple
from .fast import compiled, kernels
from .activation import relu as _relu
from .base import Layer, is_ndarray, train_mode_follows_module, graph_writes_state, state_in_graph, write_state_after_call

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "InstanceNorm1d",
           "InstanceNorm2d"]

# opt-in: MXNet's fused BatchNorm operator in NDArray mode (faster, less precise; see _BatchNorm)
_FUSED_BATCHNORM = os.environ.get("DUALDL_MX_FUSED_BATCHNORM", "0") == "1"
# an eval-mode graph does not read the float64 operator's scratch statistics (_BatchNorm._scratch)
warnings.filterwarnings("ignore", message=r"Parameter \S*dl_scratch_(mean|var)(, \S*dl_scratch_(mean|var))* is not used")


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


class _BatchNorm(Layer):
    """torch's BatchNorm on MXNet.

    Non-hybridized (NDArray) it is exactly torch's: batch statistics in train mode, running
    statistics updated *in forward* with the unbiased batch variance and torch's momentum (weight
    of the new value); eval mode uses the running statistics. ``train()``/``eval()`` decide, not
    ``autograd.record()``.

    Hybridized (Symbol), outputs and gradients are the same (batch statistics in train mode,
    inside ``autograd.record()`` or not). A graph cannot assign to the running statistics: in a
    dualdl model's graph they are outputs that dualdl copies in after each call, so they are
    torch's, updated in forward, once per call in call order. Under a native hybridized Gluon
    parent MXNet's fused ``BatchNorm`` op (``momentum=1-m``) updates them, fed 2 rows (mean -/+
    std) whose biased variance is the unbiased one of the batch: torch's values, but only when
    backward runs inside ``autograd.record()`` (Gluon's rule), in reverse call order for a layer
    called several times before one backward. Eval mode uses the fused op on the running
    statistics.
    """
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        super().__init__()
        C.check_batchnorm_momentum(type(self).__name__, momentum)
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        _norm_params(self, self.num_features, affine, bias, track_running_stats)

    def _fused(self, F, x, weight, bias, running_mean, running_var, use_global_stats: bool):
        return F.BatchNorm(x, weight if weight is not None else F.ones_like(running_var),   # the buffers'
                           bias if bias is not None else F.zeros_like(running_mean), running_mean, running_var,  # dtype
                           eps=self.eps, momentum=1.0 - self.momentum, fix_gamma=False,
                           use_global_stats=use_global_stats, axis=1)

    def _imperative(self, x, weight, bias, running_mean, running_var, relu: bool = False,
                    pool: Optional[Tuple[int, int]] = None):
        """NDArray mode, torch's exact semantics: batch statistics in train mode (``train()``/
        ``eval()`` decide, not ``record()``), running statistics updated in forward with the
        unbiased variance. Batch statistics of float32 data on CPU run dualdl's compiled kernel
        (:func:`_batchnorm_kernel_formula`: float32 in and out, float64 sums; CRNN step 1.25x
        native against 1.47x for the float64 operator), else MXNet's fused ``BatchNorm``
        operator in float64 (:func:`_batchnorm_op_formula`): in float32 the operator (MKLDNN) is 10x less precise than
        torch (5e-7..1e-5 measured, torch 1e-7; its float32 sums), which makes long runs drift
        apart between backends; in float64 it is exact to float32 rounding (<= 6e-8 of the largest
        value, torch's <= 1.1e-7 on well-conditioned inputs and 1e-4 at mean/std = 1e4), and at
        1.0 ms against 0.82 ms float32 on (16, 16, 8, 32) costs 1.2x, where the GEMM form
        (:func:`_gemm_batchnorm`, kept for running statistics) cost 2.9x. The price is memory:
        backward keeps the float64 copy of the input (2x a float32 input's bytes; the GEMM form
        kept several float32 intermediates). An ``autograd.Function``
        with BN's closed-form backward hung MXNet's threaded engine (apache/mxnet#15844) and is
        not used. ``DUALDL_MX_FUSED_BATCHNORM=1`` runs the operator in the input's dtype instead
        (faster, less precise; eval mode then uses the operator with the running statistics)."""
        dtype = np.dtype(x.dtype).name
        compute = _stats_dtype(dtype)
        if _FUSED_BATCHNORM and self.track_running_stats and not self.training:
            return mx.nd.BatchNorm(x, *self._affine(weight, bias, x.context), running_mean, running_var,
                                   eps=self.eps, fix_gamma=False, use_global_stats=True, axis=1), False
        track = self.training and self.track_running_stats
        fused = False
        if self.training or not self.track_running_stats:
            n = x.size // self.num_features
            stats = dict(running_mean=running_mean if track else None, running_var=running_var if track else None)
            if _kernel_applies(dtype, compute, weight if weight is not None else x, [x.context]):
                fused = relu
                out = compiled.run(_batchnorm_kernel_formula, dict(x=x, weight=weight, bias=bias, **stats),
                                   eps=self.eps, momentum=self.momentum, channels=self.num_features,
                                   leaf=x.grad is not None, relu=relu, pool=pool)
            else:
                aux_mean, aux_var = _aux_scratch(self.num_features, x.context, compute)
                with autograd.train_mode():                 # batch statistics whatever record() says
                    out = compiled.run(_batchnorm_op_formula, dict(x=x, weight=weight, bias=bias, aux_mean=aux_mean,
                                                                   aux_var=aux_var, **stats),
                                       eps=self.eps, momentum=self.momentum, bessel=n / (n - 1), dtype=dtype,
                                       compute=compute)
            if not track:
                return out, fused
            y, new_mean, new_var = out
            with autograd.pause():
                new_mean.copyto(running_mean)
                new_var.copyto(running_var)
            return y, fused
        return compiled.run(_batchnorm_running_formula, dict(x=x, weight=weight, bias=bias,
                                                             running_mean=running_mean, running_var=running_var),
                            eps=self.eps), False

    def _affine(self, weight, bias, ctx):
        c = (self.num_features,)
        return (weight if weight is not None else mx.nd.ones(c, ctx=ctx),
                bias if bias is not None else mx.nd.zeros(c, ctx=ctx))

    _dl_relu_after = False
    """Set by :class:`~dualdl_mx.containers.Sequential` while it calls this layer in place of it
    and the ``ReLU`` that follows: the output is then ``relu(BatchNorm(x))``, inside the kernel
    where it runs (no relu pass, forward or backward), else by :func:`~dualdl_mx.activation.relu`."""

    _dl_pool_after = None
    """Set by :class:`~dualdl_mx.containers.Sequential` (with ``_dl_relu_after``) to the
    ``MaxPool2d`` after the ``ReLU`` while it calls this layer in place of all three (windows that
    do not overlap: :func:`~dualdl_mx.containers._absorbs_pool`): the output is then pooled inside
    the kernel where it runs (the full-size map is neither written nor read back), else by it."""

    def hybrid_forward(self, F, x, weight=None, bias=None, running_mean=None, running_var=None):
        fuse, pool = self._dl_relu_after, self._dl_pool_after
        window = pool.kernel_size if pool is not None else None
        if is_ndarray(x):
            C.check_batchnorm_input(self._dl_layer, self.num_features, x.shape, self.training)
            if pool is not None:
                pool._check(x)
            out, fused = self._imperative(x, weight, bias, running_mean, running_var, fuse, window)
        elif self.track_running_stats and not self.training:
            out, fused = self._fused(F, x, weight, bias, running_mean, running_var, True), False
        else:
            out, fused = self._symbolic(F, x, weight, bias, running_mean, running_var, fuse, window)
        if fused:
            return out
        if fuse:
            out = _relu(F, out)
        return pool(out) if pool is not None else out

    def _gemm_form(self, F, x, weight, bias, mean=None, var=None, update=None):
        return _gemm_batchnorm(F, x, weight, bias, self.eps, mean, var, update)

    def _symbolic(self, F, x, weight, bias, running_mean, running_var, relu: bool = False,
                  pool: Optional[Tuple[int, int]] = None):
        """Hybridized, batch statistics. In train mode, built inside a dualdl module call in train
        mode (which runs the graph with MXNet's ``is_train`` on): as eager, dualdl's kernel
        (:func:`_batchnorm_kernel_formula`) or MXNet's operator in float64
        (:func:`_batchnorm_op_formula`; in the input's dtype, MKLDNN's float32 kernel,
        if ``DUALDL_MX_FUSED_BATCHNORM=1`` when the graph is built); otherwise (a native Gluon parent, whose caller
        decides ``is_train``) the GEMM form (:meth:`_gemm_form`), which computes batch statistics
        whatever ``is_train`` says. Inside an outermost dualdl graph the new running statistics
        are outputs of the graph that dualdl copies in after each call
        (:func:`~dualdl_mx.base.write_state_after_call`): torch's update, in forward and in call
        order. Under a native Gluon parent, MXNet's fused op updates them, fed the 2 rows
        ``mean -/+ std`` whose biased variance is the batch's unbiased one, in its backward: only
        when backward runs inside ``record()``, and for a layer called k > 1 times before one
        backward in the reverse order of the calls (Gluon's rule; torch's differs)."""
        track = self.training and self.track_running_stats
        ref = self.weight if self.weight is not None else self.running_mean
        writes = graph_writes_state()
        if writes and track:          # called before in this graph: its running statistics by then
            running_mean = state_in_graph(self.running_mean, running_mean)
            running_var = state_in_graph(self.running_var, running_var)
        if self.training and train_mode_follows_module() and ref is not None and (writes or self._update_has_backward()):
            dtype = np.dtype(ref.dtype).name
            compute = _stats_dtype(dtype)                        # read when the graph is built
            stats = (running_mean if track else None, running_var if track else None)
            fused = False
            if _kernel_applies(dtype, compute, ref, ref.list_ctx()):
                fused = relu
                out = _batchnorm_kernel_formula(F, x, weight, bias, *stats, eps=self.eps, momentum=self.momentum,
                                                channels=self.num_features, leaf=x.get_children() is None, relu=relu,
                                                pool=pool)
            else:
                s_mean, s_var = (q.var() for q in self._scratch(ref, compute))
                c = float(self.num_features)

                def bessel(F, xc):         # from the float64 copy (plain layout): shape_array on an
                    n_ = F.cast(F.prod(F.shape_array(xc)), dtype=compute) / c     # MKLDNN array reorders it
                    return _bessel(F, n_)
                out = _batchnorm_op_formula(F, x, s_mean, s_var, weight, bias, *stats, eps=self.eps,
                                            momentum=self.momentum, bessel=bessel, dtype=dtype, compute=compute)
            if not track:
                return out, fused
            y, new_mean, new_var = out
            if writes:
                write_state_after_call(self.running_mean, new_mean)
                write_state_after_call(self.running_var, new_var)
                return y, fused
            tie = self._running_update(F, new_mean, new_var, None, weight, bias, running_mean, running_var)
            return F.reshape_like(y, tie, lhs_begin=1, lhs_end=2, rhs_begin=1, rhs_end=2), fused

        def update(F, mean, var, n_):
            if not writes:
                return self._running_update(F, mean, var, n_, weight, bias, running_mean, running_var, (-1, 1))
            m, flat = self.momentum, (-1,)
            unbiased = F.broadcast_mul(var, _bessel(F, n_))
            write_state_after_call(self.running_mean, F.BlockGrad((1 - m) * running_mean + m * F.reshape(mean, shape=flat)))
            write_state_after_call(self.running_var, F.BlockGrad((1 - m) * running_var + m * F.reshape(unbiased, shape=flat)))
            return None
        return self._gemm_form(F, x, weight, bias, update=update if track else None)[0], False

    def _running_update(self, F, mean, var, n_, weight, bias, running_mean, running_var, out_shape=None):
        """The fused op on the rows ``mean -/+ std`` (biased variance = the unbiased ``var * n/(n-1)``)
        updates the running statistics in torch's way in its backward; returns its (2, C) output
        reshaped. ``n_`` None: ``mean``/``var`` are torch's new running statistics already (the
        op is then given momentum 0, which only assigns)."""
        if n_ is None:
            rows_var, momentum = var, 1.0
        else:
            rows_var, momentum = F.broadcast_mul(var, _bessel(F, n_)), self.momentum
        std = F.sqrt(rows_var)
        rows = F.concat(F.reshape(mean - std, shape=(1, -1)), F.reshape(mean + std, shape=(1, -1)), dim=0)
        fused = F.BatchNorm(rows, weight if weight is not None else F.ones_like(running_var),
                            bias if bias is not None else F.zeros_like(running_mean), running_mean, running_var,
                            eps=self.eps, momentum=1.0 - momentum, fix_gamma=False, use_global_stats=False, axis=1)
        return fused if out_shape is None else F.reshape(F.sum(fused, axis=0), shape=out_shape) * 0.0

    def _scratch(self, ref, dtype: str = "float64") -> Tuple[Any, Any]:
        """(C,) arrays for the operator's moving statistics (it updates them with is_train on), in
        the operator's dtype (float64; the input's with ``DUALDL_MX_FUSED_BATCHNORM=1``): Gluon
        parameters of this block outside its registered ones, so they are in ``collect_params()``
        (graph inputs, ``reset_ctx``) but in no state dict, parameter list or checkpoint. Created
        on the first graph that needs them, on the block's contexts."""
        attr, prefix = ("_dl_scratch", "") if dtype == "float64" else (f"_dl_scratch_{dtype}", f"{dtype}_")
        pair = self.__dict__.get(attr)
        if pair is None:
            ctx = ref.list_ctx()
            pair = tuple(self.params.get(f"{prefix}dl_scratch_{k}", shape=(self.num_features,), dtype=dtype,
                                         grad_req="null", init=init, differentiable=False)
                         for k, init in (("mean", mx.init.Zero()), ("var", mx.init.One())))
            for q in pair:
                q.initialize(ctx=ctx)
            object.__setattr__(self, attr, pair)
        return pair

    def extra_repr(self) -> str:
        return _stats_repr(self)


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


_AUX_SCRATCH: dict = {}


def _aux_scratch(c: int, ctx, dtype: str) -> Tuple[Any, Any]:
    """(C,) arrays for the operator's moving statistics, which it updates in train mode: dualdl
    keeps torch's running statistics itself, so these only absorb the writes."""
    key = (c, ctx, dtype)
    pair = _AUX_SCRATCH.get(key)
    if pair is None:
        pair = _AUX_SCRATCH[key] = (mx.nd.zeros((c,), ctx=ctx, dtype=dtype),
                                    mx.nd.ones((c,), ctx=ctx, dtype=dtype))
    return pair


def _batchnorm_op_formula(F, x, aux_mean, aux_var, weight=None, bias=None, running_mean=None,
                          running_var=None, *, eps: float, momentum: float, bessel: Any, dtype: str,
                          compute: str):
    """BatchNorm with batch statistics: MXNet's fused operator in the ``compute`` dtype (float64:
    exact to float32 rounding; run under train_mode, moving statistics into the scratch ``aux_*``),
    cast back to ``dtype``. Given the running statistics, also returns torch's update of them
    (momentum-weighted, unbiased variance ``var * bessel``, computed in ``compute``; torch computes
    it in float64 on CPU) for the caller to copy in. ``bessel``: n/(n-1) as a float, or a function
    ``(F, x in compute dtype) -> (1,) symbol`` (a graph, where n is not known when it is built)."""
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
    m = momentum
    new_mean = (1 - m) * cast(running_mean, compute) + m * mean
    unbiased = var * bessel if isinstance(bessel, float) else F.broadcast_mul(var, bessel(F, xc))
    new_var = (1 - m) * cast(running_var, compute) + m * unbiased
    return [y, F.BlockGrad(cast(F.reshape(new_mean, shape=(-1,)), dtype)),
            F.BlockGrad(cast(F.reshape(new_var, shape=(-1,)), dtype))]


def _stats_dtype(dtype: str) -> str:
    """The dtype batch statistics are computed in: float64 (torch's precision), or the input's
    with ``DUALDL_MX_FUSED_BATCHNORM=1`` (MXNet's float32 operator; float16 stays float64)."""
    return dtype if _FUSED_BATCHNORM and dtype != "float16" else "float64"


def _kernel_applies(dtype: str, compute: str, param: Any, contexts) -> bool:
    """Whether batch statistics run dualdl's ``dl_batch_norm`` kernel (:mod:`dualdl_mx.fast.kernels`):
    where MXNet's operator would run in float64 for float32 data and parameters, on CPU contexts,
    with the kernel built and loaded."""
    return (compute == "float64" and dtype == "float32" and np.dtype(param.dtype).name == "float32"
            and all(c.device_type == "cpu" for c in contexts) and kernels.available())


def _batchnorm_kernel_formula(F, x, weight=None, bias=None, running_mean=None, running_var=None, *,
                              eps: float, momentum: float, channels: int, leaf: bool, relu: bool = False,
                              pool: Optional[Tuple[int, int]] = None):
    """BatchNorm with batch statistics by dualdl's ``dl_batch_norm`` kernel: float32 in and out,
    sums in float64 (exact to float32 rounding, as MXNet's operator in float64, without the float64
    copy of the input). A library operator writes its gradients whatever MXNet asks (add-to
    included), so weight and bias, and x where it is a leaf (``leaf``: an array with a gradient
    of its own or a graph input), reach it through an identity op, whose backward honours the
    request. Given the running statistics, the kernel also returns torch's update of them
    (computed in float64, rounded to float32) for the caller to copy in. ``relu``: the output is
    ``relu(BatchNorm(x))`` (NaN kept; backward passes the gradient where the output is not <= 0,
    torch's threshold_backward), in the same pass; ``pool`` (kh, kw), with ``relu``: that output
    max-pooled in (kh, kw) windows, stride the window, no padding (torch's window rule), also in
    the same pass."""
    w = F.identity(weight) if weight is not None else F.ones(shape=(channels,))
    b = F.identity(bias) if bias is not None else F.zeros(shape=(channels,))
    # a convolution's output is in MKLDNN's blocked layout, which MXNet's dispatcher of library
    # operators reorders to a new plain array at every call, forward and backward; a reshape to
    # the same shape (MKLDNN's reshape: one reorder) gives both calls the plain array
    x = F.identity(x) if leaf else F.reshape(x, shape=(-2,))
    fused = {"relu": 1} if relu else {}
    if pool is not None:
        fused["pool"] = "%d,%d" % tuple(pool)
    if running_mean is None:
        return F.dl_batch_norm(x, w, b, eps=eps, **fused)[0]
    out = F.dl_batch_norm(x, w, b, F.BlockGrad(running_mean), F.BlockGrad(running_var), eps=eps, momentum=momentum,
                          **fused)
    return [out[0], out[3], out[4]]


class BatchNorm1d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm1d`` ((N, C) or (N, C, L))")


class BatchNorm2d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm2d`` ((N, C, H, W))")


class BatchNorm3d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm3d`` ((N, C, D, H, W))")


class LayerNorm(Layer):
    """``torch.nn.LayerNorm`` over the last ``len(normalized_shape)`` axes (Gluon's LayerNorm takes
    one axis and calls its parameters gamma/beta)."""

    def __init__(self, normalized_shape: IntOrTuple, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps, self.elementwise_affine = float(eps), bool(elementwise_affine)
        shape = self.normalized_shape
        self.weight = self._dl_new_param("weight", shape, init=mx.init.One()) if elementwise_affine else None
        self.bias = (self._dl_new_param("bias", shape, init=mx.init.Zero())
                     if elementwise_affine and bias else None)

    def _dl_empty_who(self) -> str:
        return f"LayerNorm({self.normalized_shape})"

    def hybrid_forward(self, F, x, weight=None, bias=None):
        k = len(self.normalized_shape)
        if is_ndarray(x):
            C.check_layernorm_input(self.normalized_shape, x.shape)
        if k == 1 and weight is not None:       # MXNet's fused op (as the Transformer layers use it)
            return F.LayerNorm(x, weight, F.zeros_like(weight) if bias is None else bias, axis=-1, eps=self.eps)
        axes = tuple(range(-k, 0))
        xc = F.broadcast_sub(x, F.mean(x, axis=axes, keepdims=True))
        var = F.mean(F.square(xc), axis=axes, keepdims=True)
        y = F.broadcast_div(xc, F.sqrt(var + self.eps))
        if weight is not None:
            y = F.broadcast_mul(y, weight)
        if bias is not None:
            y = F.broadcast_add(y, bias)
        return y

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


# ---- GroupNorm / InstanceNorm: statistics over a (N, G, -1) view, in float64 ----------------------
class _DtypeAware(Layer):
    """Remembers the dtype ``cast()`` gave the layer: the float64 formula casts its result back to
    the input's dtype, which an NDArray has and a Symbol has not; hybridized, the output has the
    dtype of the layer's last ``cast()`` (float32 by default), as Gluon's parameters do."""
    _dl_dtype = "float32"

    def cast(self, dtype: Any) -> None:
        self._dl_dtype = np.dtype(dtype).name
        super().cast(dtype)
        for q in self.__dict__.get("_dl_scratch", ()):
            q.cast("float64")

    def _affine_scratch(self, weight: Any) -> Tuple[Any, Any]:
        """(C,) float64 zeros/ones for the affine operator's statistics in a hybridized graph
        (:func:`_channel_affine`; read only): Gluon parameters of this block outside its
        registered ones, as hybridized BatchNorm's scratch, in no state dict or checkpoint."""
        pair = self.__dict__.get("_dl_scratch")
        if pair is None:
            pair = tuple(self.params.get(f"dl_scratch_{k}", shape=weight.shape, dtype="float64",
                                         grad_req="null", init=init, differentiable=False)
                         for k, init in (("mean", mx.init.Zero()), ("var", mx.init.One())))
            for q in pair:
                q.initialize(ctx=weight.list_ctx())
            object.__setattr__(self, "_dl_scratch", pair)
        return pair

    def _dl_run(self, F, x, inputs: dict, **static: Any):
        if not is_ndarray(x):
            param = self.weight if self.weight is not None else self.bias
            if param is not None:
                zero, one = (q.var() for q in self._affine_scratch(param))
                inputs = dict(inputs, affine_0=zero, affine_1=one)
            return _grouped_norm_formula(F, x, **inputs, dtype=self._dl_dtype, **static)
        if static.get("stats") != "running":
            rows = x.shape[0] * static["groups"]
            inputs = dict(inputs, op=_aux_scratch(rows, x.context, "float64"))
        if inputs.get("weight") is not None or inputs.get("bias") is not None:
            inputs = dict(inputs, affine=_affine_stats(static["channels"], x.context))
        aux = {f"{k}_{i}": t for k in ("op", "affine") for i, t in enumerate(inputs.pop(k, ()))}
        with autograd.train_mode():          # the operator uses batch statistics in train mode only
            return compiled.run(_grouped_norm_formula, dict(x=x, **inputs, **aux),
                                dtype=np.dtype(x.dtype).name, **static)


_AFFINE_STATS: dict = {}


def _affine_stats(c: int, ctx) -> Tuple[Any, Any]:
    """(C,) float64 zeros and ones: the moving statistics of the BatchNorm op that applies the
    affine in :func:`_channel_affine` (read only, with ``use_global_stats``)."""
    if (c, ctx) not in _AFFINE_STATS:
        _AFFINE_STATS[c, ctx] = tuple(f((c,), ctx=ctx, dtype="float64") for f in (mx.nd.zeros, mx.nd.ones))
    return _AFFINE_STATS[c, ctx]


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
    ``running_*`` to torch's ``(1 - m) * running + m * (mean, var)`` (``var`` unbiased): the op
    is fed the 2 rows ``mean -/+ sqrt(var)``, whose mean and biased variance are these, and
    updates its moving statistics when backward runs inside ``autograd.record()``."""
    std = F.sqrt(var)
    rows = F.stack(mean - std, mean + std, axis=0)                            # (2, C)
    row = F.slice_axis(rows, axis=0, begin=0, end=1)
    fused = F.BatchNorm(rows, F.ones_like(F.reshape(row, shape=(-1,))), F.zeros_like(F.reshape(row, shape=(-1,))),
                        running_mean, running_var, momentum=1.0 - momentum, fix_gamma=False,
                        use_global_stats=False, axis=1)
    return F.reshape(F.sum(fused), shape=(1, 1, 1)) * 0.0


class GroupNorm(_DtypeAware):
    """``torch.nn.GroupNorm`` ((N, C, *)): per-channel weight/bias (C,). MXNet 1.x's GroupNorm op
    and Gluon's block have gamma/beta of shape (num_groups,) (one per group) and a float32 sum."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        C.check_groupnorm_args(int(num_groups), int(num_channels))
        self.num_groups, self.num_channels, self.eps = int(num_groups), int(num_channels), float(eps)
        self.affine = bool(affine)
        _norm_params(self, self.num_channels, affine, bias, False)

    def hybrid_forward(self, F, x, weight=None, bias=None):
        if is_ndarray(x):
            C.check_groupnorm_input(self.num_groups, self.num_channels, x.shape)
        return self._dl_run(F, x, dict(weight=weight, bias=bias), channels=self.num_channels,
                            groups=self.num_groups, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(_DtypeAware):
    """torch's InstanceNorm on MXNet: each (sample, channel) normalised by its own mean and biased
    variance (affine=False and no running statistics by default, as torch; Gluon's InstanceNorm
    has center/scale True, gamma/beta, and no running statistics). With
    ``track_running_stats=True`` train mode updates them as torch (instance means and unbiased
    variances averaged over the batch, momentum = weight of the new value): in forward when not
    hybridized; hybridized, by MXNet's fused op when backward runs inside ``autograd.record()``
    (as dualdl's hybridized BatchNorm under a native Gluon parent). Eval mode then normalises by
    them."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        super().__init__()
        if track_running_stats:
            C.check_batchnorm_momentum(type(self).__name__, momentum)
        self.num_features, self.eps = int(num_features), float(eps)
        self.momentum = None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        _norm_params(self, self.num_features, affine, bias, track_running_stats)

    def hybrid_forward(self, F, x, weight=None, bias=None, running_mean=None, running_var=None):
        use_input_stats = self.training or not self.track_running_stats
        eager = is_ndarray(x)
        if eager:
            C.check_instancenorm_input(self._dl_layer, self.num_features, x.shape, use_input_stats)
        inputs = dict(weight=weight, bias=bias)
        if not use_input_stats:
            stats = "running"
        elif self.track_running_stats:
            stats = "update" if eager else "tie"
        else:
            stats = "input"
        if stats != "input":
            inputs.update(running_mean=running_mean, running_var=running_var)
        static = dict(channels=self.num_features, groups=self.num_features, eps=self.eps, stats=stats)
        if stats in ("update", "tie"):
            static["momentum"] = self.momentum
        out = self._dl_run(F, x, inputs, **static)
        if stats != "update":
            return out
        y, new_mean, new_var = out
        with autograd.pause():
            new_mean.copyto(running_mean)
            new_var.copyto(running_var)
        return y

    def extra_repr(self) -> str:
        return _stats_repr(self)


class InstanceNorm1d(_InstanceNorm):
    __doc__ = _InstanceNorm.__doc__.replace("torch's InstanceNorm", "``torch.nn.InstanceNorm1d`` ((N, C, L))")


class InstanceNorm2d(_InstanceNorm):
    __doc__ = _InstanceNorm.__doc__.replace("torch's InstanceNorm", "``torch.nn.InstanceNorm2d`` ((N, C, H, W))")
