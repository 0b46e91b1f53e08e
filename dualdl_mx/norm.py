"""``BatchNorm1d``/``2d``/``3d`` (with the numerics that give torch's results on MXNet) and
``LayerNorm`` over any number of trailing axes; ``GroupNorm`` and ``InstanceNorm1d``/``2d`` are in
norm_grouped.py, the statistics formulas in norm_stats.py, the fast form of batch statistics in
fast/batch_norm.py."""
from __future__ import annotations

import warnings
from typing import Any, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from dualdl.nn.checks import IntOrTuple
from dualdl import config
from .fast import batch_norm as fast_bn, compiled
from .activation import relu as _relu
from .base import is_ndarray, train_mode_follows_module, graph_writes_state, state_in_graph, write_state_after_call

from .norm_stats import (_CheckedCall, _aux_scratch, _batchnorm_op_formula, _batchnorm_running_formula,
                         _bessel, _gemm_batchnorm, _norm_params, _stats_dtype, _stats_repr, _write_running)

# an eval-mode graph does not read the float64 operator's scratch statistics (_BatchNorm._scratch)
# nor the count of batches of momentum=None (_BatchNorm._count)
warnings.filterwarnings("ignore", message=r"Parameter \S*dl_scratch_(mean|var|count)(, \S*dl_scratch_(mean|var|count))* "
                                          r"is not used")


class _BatchNorm(_CheckedCall):
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

    ``momentum=None`` is torch's cumulative average: the weight of the new value is 1 / (the
    number of train-mode calls that updated the running statistics, this one included), counted
    from construction in a (1,) float64 array of the block outside its registered parameters
    (:meth:`_count`: in no state dict, as dualdl's state dicts leave torch's
    ``num_batches_tracked`` out), eager and in a dualdl graph (an output copied in after each
    call); not under a native hybridized Gluon parent (refused there), and without the fast
    form (the float64 operator gives the same numbers).
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps = int(num_features), float(eps)
        self.momentum = None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        _norm_params(self, self.num_features, affine, bias, track_running_stats)

    def _dl_check_call(self, x, *args) -> None:
        """Rank, channels, no empty batch, more than one value per channel in train mode: on the
        NDArray input, eager and hybridized (one message in every mode)."""
        C.check_batchnorm_input(self._dl_layer, self.num_features, x.shape, self.training)

    def _fused(self, F, x, weight, bias, running_mean, running_var, use_global_stats: bool):
        momentum = 0.9 if self.momentum is None else 1.0 - self.momentum        # unused with global stats
        return F.BatchNorm(x, weight if weight is not None else F.ones_like(running_var),   # the buffers'
                           bias if bias is not None else F.zeros_like(running_mean), running_mean, running_var,  # dtype
                           eps=self.eps, momentum=momentum, fix_gamma=False,
                           use_global_stats=use_global_stats, axis=1)

    def _count(self, ref) -> Any:
        """The (1,) float64 count of batches for ``momentum=None`` (torch's ``num_batches_tracked``
        of the updates that used it): a Gluon parameter of this block outside its registered ones,
        as :meth:`_scratch`, created on first use on the block's contexts, kept float64 by
        :meth:`cast`."""
        q = self.__dict__.get("_dl_count")
        if q is None:
            q = self.params.get("dl_scratch_count", shape=(1,), dtype="float64", grad_req="null",
                                init=mx.init.Zero(), differentiable=False)
            q.initialize(ctx=ref.list_ctx())
            object.__setattr__(self, "_dl_count", q)
        return q

    def cast(self, dtype: Any) -> None:
        super().cast(dtype)
        q = self.__dict__.get("_dl_count")
        if q is not None:
            q.cast("float64")

    def _imperative(self, x, weight, bias, running_mean, running_var, relu: bool = False,
                    pool: Optional[Tuple[int, int]] = None):
        """NDArray mode, torch's exact semantics: batch statistics in train mode (``train()``/
        ``eval()`` decide, not ``record()``), running statistics updated in forward with the
        unbiased variance. Batch statistics are MXNet's fused ``BatchNorm`` operator in float64
        (:func:`~dualdl_mx.norm_stats._batchnorm_op_formula`; the fast form, float32 data on
        CPU, is dualdl's compiled kernel, :mod:`dualdl_mx.fast.batch_norm`: float32 in and out,
        float64 sums, the same numbers; CRNN step 1.25x native against 1.47x): in float32 the operator (MKLDNN) is 10x less precise than
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
        if config.mx_fused_batchnorm() and self.track_running_stats and not self.training:
            return mx.nd.BatchNorm(x, *self._affine(weight, bias, x.context), running_mean, running_var,
                                   eps=self.eps, fix_gamma=False, use_global_stats=True, axis=1), False
        track = self.training and self.track_running_stats
        fused = False
        if self.training or not self.track_running_stats:
            n = x.size // self.num_features
            stats = dict(running_mean=running_mean if track else None, running_var=running_var if track else None)
            cumulative = track and self.momentum is None
            if cumulative:
                stats["count"] = self._count(self.running_mean).data(x.context)
            if cumulative or not fast_bn.applies(dtype, compute, weight if weight is not None else x, [x.context]):
                aux_mean, aux_var = _aux_scratch(self.num_features, x.context, compute)
                with autograd.train_mode():                 # batch statistics whatever record() says
                    out = compiled.run(_batchnorm_op_formula, dict(x=x, weight=weight, bias=bias, aux_mean=aux_mean,
                                                                   aux_var=aux_var, **stats),
                                       eps=self.eps, momentum=self.momentum, bessel=n / (n - 1), dtype=dtype,
                                       compute=compute)
                if cumulative:
                    *out, new_count = out
                    with autograd.pause():
                        new_count.copyto(stats["count"])
            else:                                           # the fast form: the same numbers, one pass
                fused = relu
                out = compiled.run(fast_bn.kernel_formula, dict(x=x, weight=weight, bias=bias, **stats),
                                   eps=self.eps, momentum=self.momentum, channels=self.num_features,
                                   leaf=x.grad is not None, relu=relu, pool=pool)
            if not track:
                return out, fused
            y, new_mean, new_var = out
            _write_running(new_mean, new_var, running_mean, running_var)
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
        if is_ndarray(x):                   # the input itself is checked at the call (_dl_check_call)
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
        mode (which runs the graph with MXNet's ``is_train`` on): as eager, MXNet's operator in
        float64 or its fast form (:mod:`dualdl_mx.fast.batch_norm`)
        (in the input's dtype, MKLDNN's float32 kernel,
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
        cumulative = track and self.momentum is None
        if cumulative and not writes:
            raise NotImplementedError(
                f"{self._dl_layer}(momentum=None) inside a hybridized native Gluon block: torch's cumulative "
                f"average needs the count of batches, which only a dualdl graph (or an eager call) keeps; "
                f"pass a float momentum, or hybridize a dualdl module around the layer")
        if self.training and train_mode_follows_module() and ref is not None and (writes or self._update_has_backward()):
            dtype = np.dtype(ref.dtype).name
            compute = _stats_dtype(dtype)                        # read when the graph is built
            stats = (running_mean if track else None, running_var if track else None)
            fused = False
            if cumulative or not fast_bn.applies(dtype, compute, ref, ref.list_ctx()):
                s_mean, s_var = (q.var() for q in self._scratch(ref, compute))
                c = float(self.num_features)
                count = None
                if cumulative:
                    count = state_in_graph(self._count(ref), self._count(ref).var())

                def bessel(F, xc):         # from the float64 copy (plain layout): shape_array on an
                    n_ = F.cast(F.prod(F.shape_array(xc)), dtype=compute) / c     # MKLDNN array reorders it
                    return _bessel(F, n_)
                out = _batchnorm_op_formula(F, x, s_mean, s_var, weight, bias, *stats, count, eps=self.eps,
                                            momentum=self.momentum, bessel=bessel, dtype=dtype, compute=compute)
                if cumulative:
                    *out, new_count = out
                    write_state_after_call(self._count(ref), new_count)
            else:                                           # the fast form: the same numbers, one pass
                fused = relu
                out = fast_bn.kernel_formula(F, x, weight, bias, *stats, eps=self.eps, momentum=self.momentum,
                                             channels=self.num_features, leaf=x.get_children() is None, relu=relu,
                                             pool=pool)
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
            if m is None:                   # torch's cumulative average: 1 / batches tracked
                q = self._count(self.running_mean)
                new_count = F.BlockGrad(state_in_graph(q, q.var()) + 1.0)
                write_state_after_call(q, new_count)
                m = F.cast(1.0 / new_count, dtype=np.dtype(self.running_mean.dtype).name)
                new_mean = F.broadcast_mul(1 - m, running_mean) + F.broadcast_mul(m, F.reshape(mean, shape=flat))
                new_var = F.broadcast_mul(1 - m, running_var) + F.broadcast_mul(m, F.reshape(unbiased, shape=flat))
            else:
                new_mean = (1 - m) * running_mean + m * F.reshape(mean, shape=flat)
                new_var = (1 - m) * running_var + m * F.reshape(unbiased, shape=flat)
            write_state_after_call(self.running_mean, F.BlockGrad(new_mean))
            write_state_after_call(self.running_var, F.BlockGrad(new_var))
            return None
        return self._gemm_form(F, x, weight, bias, update=update if track else None)[0], False

    def _update_has_backward(self) -> bool:
        """MXNet's fused op updates its moving statistics in its backward, which runs only if one
        of its inputs needs a gradient: in the float64 graph, the weight or bias (its data input
        comes from the main op's statistics, which carry no gradient). Without both (affine=False,
        or both frozen when the graph is built) the GEMM form is used, whose tie carries one."""
        return (self.weight is not None and self.bias is not None
                and (self.weight.grad_req != "null" or self.bias.grad_req != "null"))

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


class BatchNorm1d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm1d`` ((N, C) or (N, C, L))")


class BatchNorm2d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm2d`` ((N, C, H, W))")


class BatchNorm3d(_BatchNorm):
    __doc__ = _BatchNorm.__doc__.replace("torch's BatchNorm", "``torch.nn.BatchNorm3d`` ((N, C, D, H, W))")


class LayerNorm(_CheckedCall):
    """``torch.nn.LayerNorm`` over the last ``len(normalized_shape)`` axes (Gluon's LayerNorm takes
    one axis and calls its parameters gamma/beta). One axis with a weight, float32/float16: MXNet's
    fused ``LayerNorm`` op (as the Transformer layers use it); otherwise, float64 included, the
    two-pass formula (mean, then the mean square of the centred values): MXNet's fused op in
    float64 is 1.6e-8 off torch (it keeps float32 precision there), the formula <= 1.2e-15."""

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

    def _dl_check_call(self, x, *args) -> None:
        C.check_layernorm_input(self.normalized_shape, x.shape)

    def hybrid_forward(self, F, x, weight=None, bias=None):
        k = len(self.normalized_shape)
        if k == 1 and weight is not None and np.dtype(self.weight.dtype) != np.float64:  # the fused op
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


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
