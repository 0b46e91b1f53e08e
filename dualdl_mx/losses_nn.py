"""``dl.nn.<Loss>`` on MXNet: Gluon ``HybridBlock``s with torch's constructor and forward
signatures, so a criterion is a child of a write-once model as on torch (its ``weight`` /
``pos_weight`` are buffers under torch's state-dict keys; ``.to()``, ``cast``, ``train()/eval()``).

What it hides: Gluon's losses return per-sample losses with Gluon's own conventions
(docs/losses.md); these compute what ``dualdl.losses`` computes (torch's numbers and reductions).
On NDArrays a call runs the checked function of ``dualdl_mx.losses`` (shapes, indices and values
checked, then the formula as one compiled graph), also after ``hybridize()``, which has nothing to
add to a graph already compiled; on Symbols (the loss inside a hybridized model) the formula runs
in the model's graph, unchecked (where the function supports Symbols; CTC and multi-label margin
need NDArrays and say so). Keywords are bound to torch's forward names (``loss(input=x,
target=y)``). MXNet 1.x has no 0-d arrays: a 0-d ``weight`` is kept with shape (1,).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import numpy as np
import mxnet as mx
from mxnet import nd
from mxnet.gluon import HybridBlock

from . import losses as L
from .base import Module
from .linear import Linear

__all__ = ["MODULES"]


def _declared_losses():
    from dualdl.losses.modules import LOSSES
    return LOSSES


class _Loss(Module):
    """A loss block: ``_dl_args`` are torch's forward names, ``_dl_call(*args, **buffers)`` the
    function of ``dualdl_mx.losses`` with this loss's settings (NDArrays or Symbols)."""

    _dl_loss = ""
    _dl_args: Tuple[str, ...] = ("input", "target")

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def _dl_buffer(self, name: str, value: Any) -> None:
        if value is None:
            object.__setattr__(self, name, None)
            return
        arr = value.asnumpy() if isinstance(value, nd.NDArray) else np.asarray(value)
        self.register_buffer(name, arr.reshape(1) if arr.ndim == 0 else arr)

    def _dl_buffers(self, like: Any) -> Dict[str, nd.NDArray]:
        ctx = like.context if isinstance(like, nd.NDArray) else mx.current_context()
        return {k: p.data(ctx) for k, p in self._reg_params.items() if getattr(p, "_dl_buffer", False)}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) != len(self._dl_args):
            args = _bind(self, args, kwargs)
        return Module.__call__(self, *args)

    def forward(self, *args: Any) -> Any:
        if args and isinstance(args[0], mx.sym.Symbol):
            return HybridBlock.forward(self, *args)         # -> hybrid_forward(mx.sym, ...)
        return self._dl_call(*args, **self._dl_buffers(args[0] if args else None))

    def hybrid_forward(self, F, *args: Any, **params: Any) -> Any:
        return self._dl_call(*args, **params)

    def _dl_call(self, *args: Any, **buffers: Any) -> Any:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


def _bind(block: _Loss, args: tuple, kwargs: Dict[str, Any]) -> tuple:
    """A call's arguments as positions, bound by torch's forward names with Python's wording of
    a wrong call (``CTCLoss.forward() missing 2 required positional arguments: ...``)."""
    names, who = block._dl_args, f"{type(block).__name__}.forward()"
    if len(args) > len(names):
        raise TypeError(f"{who} takes {len(names) + 1} positional arguments but {len(args) + 1} were given")
    kwargs = dict(kwargs)
    out = list(args)
    for name in names[len(args):]:
        out.append(kwargs.pop(name, _MISSING))
    for bad in kwargs:
        why = "got multiple values for argument" if bad in names else "got an unexpected keyword argument"
        raise TypeError(f"{who} {why} {bad!r}")
    missing = [repr(n) for n, v in zip(names, out) if v is _MISSING]
    if missing:
        listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
        plural = "s" if len(missing) > 1 else ""
        raise TypeError(f"{who} missing {len(missing)} required positional argument{plural}: {listed}")
    return tuple(out)


_MISSING = object()


class L1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)

    def _dl_call(self, input, target):
        return L.l1_loss(input, target, self.reduction)


class MSELoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)

    def _dl_call(self, input, target):
        return L.mse_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = float(beta)

    def _dl_call(self, input, target):
        return L.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = float(delta)

    def _dl_call(self, input, target):
        return L.huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = bool(log_target)

    def _dl_call(self, input, target):
        return L.kl_div(input, target, self.reduction, self.log_target)


class BCELoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self._dl_buffer("weight", weight)

    def _dl_call(self, input, target, weight=None):
        return L.binary_cross_entropy(input, target, weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight=None) -> None:
        super().__init__(reduction)
        self._dl_buffer("weight", weight)
        self._dl_buffer("pos_weight", pos_weight)

    def _dl_call(self, input, target, weight=None, pos_weight=None):
        return L.binary_cross_entropy_with_logits(input, target, weight, pos_weight, self.reduction)


class NLLLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        self._dl_buffer("weight", weight)
        self.ignore_index = int(ignore_index)

    def _dl_call(self, input, target, weight=None):
        return L.nll_loss(input, target, weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        self._dl_buffer("weight", weight)
        self.ignore_index, self.label_smoothing = int(ignore_index), float(label_smoothing)

    def _dl_call(self, input, target, weight=None):
        return L.cross_entropy(input, target, weight, self.ignore_index, self.reduction, self.label_smoothing)


class CTCLoss(_Loss):
    _dl_args = ("log_probs", "targets", "input_lengths", "target_lengths")

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False,
                 check_log_probs: bool = True) -> None:
        super().__init__(reduction)
        self.blank, self.zero_infinity, self.check_log_probs = int(blank), bool(zero_infinity), bool(check_log_probs)

    def _dl_call(self, log_probs, targets, input_lengths, target_lengths):
        return L.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity, self.check_log_probs)


class PoissonNLLLoss(_Loss):
    _dl_args = ("log_input", "target")

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-08,
                 reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.log_input, self.full, self.eps = bool(log_input), bool(full), float(eps)

    def _dl_call(self, log_input, target):
        return L.poisson_nll_loss(log_input, target, self.log_input, self.full, self.eps, self.reduction)


class GaussianNLLLoss(_Loss):
    _dl_args = ("input", "target", "var")

    def __init__(self, *, full: bool = False, eps: float = 1e-06, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.full, self.eps = bool(full), float(eps)

    def _dl_call(self, input, target, var):
        return L.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class MarginRankingLoss(_Loss):
    _dl_args = ("input1", "input2", "target")

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = float(margin)

    def _dl_call(self, input1, input2, target):
        return L.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class CosineEmbeddingLoss(MarginRankingLoss):
    def _dl_call(self, input1, input2, target):
        return L.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class TripletMarginLoss(_Loss):
    _dl_args = ("anchor", "positive", "negative")

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-06, swap: bool = False,
                 size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin, self.p, self.eps, self.swap = float(margin), float(p), float(eps), bool(swap)

    def _dl_call(self, anchor, positive, negative):
        return L.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                     self.reduction)


class HingeEmbeddingLoss(_Loss):
    def __init__(self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = float(margin)

    def _dl_call(self, input, target):
        return L.hinge_embedding_loss(input, target, self.margin, self.reduction)


class SoftMarginLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)

    def _dl_call(self, input, target):
        return L.soft_margin_loss(input, target, self.reduction)


class MultiMarginLoss(_Loss):
    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.p, self.margin = int(p), float(margin)
        self._dl_buffer("weight", weight)

    def _dl_call(self, input, target, weight=None):
        return L.multi_margin_loss(input, target, self.p, self.margin, weight, self.reduction)


class MultiLabelMarginLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)

    def _dl_call(self, input, target):
        return L.multilabel_margin_loss(input, target, self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self._dl_buffer("weight", weight)

    def _dl_call(self, input, target, weight=None):
        return L.multilabel_soft_margin_loss(input, target, weight, self.reduction)


class LinearCrossEntropyLoss(_Loss):
    """torch's module: a ``linear`` child (``linear.weight`` (C * prod(out_features), in_features),
    ``linear.bias``) read as (C, *out_features, in_features), then cross-entropy (class axis 1).
    ``options`` (torch's chunking strategy) is kept and ignored: the logits are computed whole."""

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple = (), bias: bool = False,
                 device=None, dtype=None, reduction: str = "mean", weight=None, ignore_index=None,
                 label_smoothing: float = 0.0, options=None) -> None:
        super().__init__(reduction)
        self.num_classes, self.out_features = int(num_classes), tuple(int(d) for d in out_features)
        self.ignore_index, self.label_smoothing, self.options = ignore_index, float(label_smoothing), options
        self.linear = Linear(in_features, math.prod(self.out_features, start=self.num_classes), bias=bias)
        self._dl_buffer("weight", weight)

    def forward(self, *args: Any) -> Any:
        if args and isinstance(args[0], mx.sym.Symbol):
            return HybridBlock.forward(self, *args)
        ctx = args[0].context if isinstance(args[0], nd.NDArray) else mx.current_context()
        lin = {"linear_weight": self.linear.weight.data(ctx),
               "linear_bias": None if self.linear.bias is None else self.linear.bias.data(ctx)}
        return self._dl_call(*args, **lin, **self._dl_buffers(args[0]))

    def hybrid_forward(self, F, input, target, weight=None):
        bias = self.linear.bias
        return self._dl_call(input, target, self.linear.weight.var(), None if bias is None else bias.var(), weight)

    def _dl_call(self, input, target, linear_weight, linear_bias=None, weight=None):
        shape = (self.num_classes,) + self.out_features + (self.linear.in_features,)
        return L.linear_cross_entropy(input, linear_weight, target, linear_bias, weight, self.reduction,
                                      self.ignore_index, self.label_smoothing, self.options, weight_shape=shape)

    def extra_repr(self) -> str:
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, reduction={self.reduction!r}")


# one class of each loss dualdl.nn declares (dualdl/losses/modules.py), found by its name
MODULES: Dict[str, Any] = {_name: globals()[_name] for _name in _declared_losses()}
for _name, _cls in MODULES.items():
    _cls._dl_loss = _name
