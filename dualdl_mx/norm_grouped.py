"""``GroupNorm`` and ``InstanceNorm1d``/``2d``/``3d`` on MXNet with torch's parameters and numbers:
statistics over a (N, G, -1) view in float64 (:func:`dualdl_mx.norm_stats._grouped_norm_formula`).
MXNet 1.9's GroupNorm has one gamma/beta per group and sums in float32; Gluon's InstanceNorm has
gamma/beta and no running statistics."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd

from dualdl.nn import checks as C
from dualdl.nn.registry import defined_in
from .base import graph_writes_state, is_ndarray, state_in_graph, write_state_after_call
from .fast import compiled
from .norm_stats import (_CheckedCall, _affine_stats, _aux_scratch, _grouped_norm_formula, _norm_params,
                         _stats_repr, _write_running)


class _DtypeAware(_CheckedCall):
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
            rows = x.shape[0] * (static["groups"] or x.shape[1])       # 0: one group per channel
            inputs = dict(inputs, op=_aux_scratch(rows, x.context, "float64"))
        if inputs.get("weight") is not None or inputs.get("bias") is not None:
            inputs = dict(inputs, affine=_affine_stats(static["channels"], x.context))
        aux = {f"{k}_{i}": t for k in ("op", "affine") for i, t in enumerate(inputs.pop(k, ()))}
        with autograd.train_mode():          # the operator uses batch statistics in train mode only
            return compiled.run(_grouped_norm_formula, dict(x=x, **inputs, **aux),
                                dtype=np.dtype(x.dtype).name, **static)


class GroupNorm(_DtypeAware):
    """``torch.nn.GroupNorm`` ((N, C, *)): per-channel weight/bias (C,). MXNet 1.x's GroupNorm op
    and Gluon's block have gamma/beta of shape (num_groups,) (one per group) and a float32 sum."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_groups, self.num_channels, self.eps = int(num_groups), int(num_channels), float(eps)
        self.affine = bool(affine)
        _norm_params(self, self.num_channels, affine, bias, False)

    def _dl_check_call(self, x, *args) -> None:
        C.check_groupnorm_input(self.num_groups, self.num_channels, x.shape)

    def hybrid_forward(self, F, x, weight=None, bias=None):
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
    them. ``momentum=None`` is torch's 0.0 there (torch's InstanceNorm has no batch count): the
    running statistics are kept.

    Input as torch takes it: batched, or unbatched (without N: run as a batch of one,
    ``_dl_unbatched_ndim``); without a weight and running statistics any channel count (torch's
    warning when it is not num_features), the statistics then over the input's own channels
    (reshape code 0: the cached graph never assumes num_features). Checked at the call, eager and
    hybridized (:class:`~dualdl_mx.norm_stats._CheckedCall`)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: Optional[float] = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features, self.eps = int(num_features), float(eps)
        self.momentum = None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        _norm_params(self, self.num_features, affine, bias, track_running_stats)

    def _dl_check_call(self, x, *args) -> None:
        C.check_instancenorm_input(self._dl_layer, self.num_features, x.shape,
                                   self.training or not self.track_running_stats, self.affine,
                                   self.track_running_stats, warn=True)

    def hybrid_forward(self, F, x, weight=None, bias=None, running_mean=None, running_var=None):
        use_input_stats = self.training or not self.track_running_stats
        eager = is_ndarray(x)
        inputs = dict(weight=weight, bias=bias)
        if not use_input_stats:
            stats = "running"
        elif self.track_running_stats:
            # an outermost dualdl graph outputs torch's update, copied in after each call (in forward,
            # in call order); under a native Gluon parent MXNet's fused op updates them in backward
            stats = "update" if eager or graph_writes_state() else "tie"
            if not eager and stats == "update":     # called before in this graph: its statistics by then
                running_mean = state_in_graph(self.running_mean, running_mean)
                running_var = state_in_graph(self.running_var, running_var)
        else:
            stats = "input"
        if stats != "input":
            inputs.update(running_mean=running_mean, running_var=running_var)
        # groups 0: one group per channel of the input (reshape code 0); channels 0 where no weight or
        # running statistics need the count to be num_features
        sized = stats != "input" or weight is not None or bias is not None
        static = dict(channels=self.num_features if sized else 0, groups=0, eps=self.eps, stats=stats)
        if stats in ("update", "tie"):
            static["momentum"] = 0.0 if self.momentum is None else self.momentum
        out = self._dl_run(F, x, inputs, **static)
        if stats != "update":
            return out
        y, new_mean, new_var = out
        if eager:
            _write_running(new_mean, new_var, running_mean, running_var)
        else:
            write_state_after_call(self.running_mean, new_mean)
            write_state_after_call(self.running_var, new_var)
        return y

    def extra_repr(self) -> str:
        return _stats_repr(self)


class InstanceNorm1d(_InstanceNorm):
    __doc__ = _InstanceNorm.__doc__.replace("torch's InstanceNorm", "``torch.nn.InstanceNorm1d`` ((N, C, L) or (C, L))")
    _dl_unbatched_ndim = 2


class InstanceNorm2d(_InstanceNorm):
    __doc__ = _InstanceNorm.__doc__.replace("torch's InstanceNorm",
                                            "``torch.nn.InstanceNorm2d`` ((N, C, H, W) or (C, H, W))")
    _dl_unbatched_ndim = 3


class InstanceNorm3d(_InstanceNorm):
    __doc__ = _InstanceNorm.__doc__.replace("torch's InstanceNorm",
                                            "``torch.nn.InstanceNorm3d`` ((N, C, D, H, W) or (C, D, H, W))")
    _dl_unbatched_ndim = 4


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
