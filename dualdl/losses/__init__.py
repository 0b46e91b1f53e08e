"""Losses with PyTorch's names, signatures and meanings, on torch tensors and MXNet NDArrays alike.

Each loss is a plain callable (no parameters): ``CrossEntropyLoss()(logits, target)`` dispatches on
the type of its first argument (``backend_for``) to ``dualdl_torch.losses`` or ``dualdl_mx.losses``.
``reduction`` means what it means in PyTorch on both backends ('mean' over every element,
class-weighted for NLL/CrossEntropy, per-target-length for CTC; 'sum'; 'none').

Differences from the frameworks, identical on both backends (see docs/losses.md):
- mismatched shapes are a ValueError, never a broadcast (PyTorch turns a (N,1) prediction and a
  (N,) target into N x N with a warning);
- class indices out of range raise IndexError (MXNet clips silently); integral float indices are
  accepted (MXNet labels are float32);
- CTC log-probs must be normalised (checked), MXNet's 0 for infeasible alignments becomes inf
  unless ``zero_infinity=True``;
- on MXNet a reduced loss has shape (1,) (MXNet 1.x has no 0-d arrays); torch gives ().

BCE, margin ranking, cosine embedding, triplet margin, Poisson and Gaussian NLL live in
:mod:`dualdl.losses.likelihood` and :mod:`dualdl.losses.pairwise`, the multi-class / multi-label /
soft margin and hinge embedding losses in :mod:`dualdl.losses.margin` (re-exported here); on MXNet
they also run on Symbols inside hybridized blocks.

Every loss is also a module under :mod:`dualdl.nn` with torch's name (``dl.nn.CrossEntropyLoss``,
:mod:`dualdl.losses.modules`): a ``torch.nn`` loss on torch, a Gluon ``HybridBlock`` on MXNet.

Function forms with ``torch.nn.functional``'s names: :mod:`dualdl.losses.functional`.
Gluon's per-sample losses (``L2Loss``'s 0.5, ``axis=-1``, CTC blank = last...) live in
:mod:`dualdl.losses.gluon` for code ported from Gluon that must reproduce its training curves.
"""
from __future__ import annotations

from typing import Any

from . import _checks as _ck
from .base import Loss, _impl, reduce

__all__ = [
    "reduce", "Loss", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
    "BCEWithLogitsLoss", "KLDivLoss", "CTCLoss", "BCELoss", "MarginRankingLoss", "CosineEmbeddingLoss",
    "TripletMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
    "SoftMarginLoss", "MultiLabelSoftMarginLoss", "HingeEmbeddingLoss", "gluon", "functional",
]


class MSELoss(Loss):
    """``(input - target)**2``; input and target must have identical shapes."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).mse_loss(input, target, self.reduction)


class L1Loss(Loss):
    """``|input - target|``; input and target must have identical shapes."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).l1_loss(input, target, self.reduction)


class SmoothL1Loss(Loss):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (PyTorch's; MXNet's
    ``smooth_l1`` operator uses ``sigma`` with beta = 1/sigma**2)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction, size_average, reduce)
        if beta < 0:
            raise ValueError(f"SmoothL1Loss: beta must be >= 0, got {beta}")
        self.beta = float(beta)

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(Loss):
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (Gluon's HuberLoss is
    a per-sample mean of SmoothL1 with rho; this is PyTorch's)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        if delta <= 0:
            raise ValueError(f"HuberLoss: delta must be > 0, got {delta}")
        self.delta = float(delta)

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).huber_loss(input, target, self.reduction, self.delta)


class BCEWithLogitsLoss(Loss):
    """Sigmoid + binary cross-entropy on logits, with element ``weight`` (broadcast) and
    ``pos_weight`` (broadcast along the last, class axis). Targets may be soft (in [0, 1])."""

    def __init__(self, weight: Any = None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight: Any = None) -> None:
        super().__init__(reduction, size_average, reduce)
        self.weight, self.pos_weight = weight, pos_weight

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).binary_cross_entropy_with_logits(input, target, self.weight, self.pos_weight,
                                                             self.reduction)


class KLDivLoss(Loss):
    """``target * (log target - input)`` with ``input`` log-probabilities (``log_target``: target
    given as log-probabilities too). 'batchmean' = sum / batch size (the true KL divergence);
    'mean' averages over every element, as PyTorch does."""

    _reductions = _ck.REDUCTIONS + ("batchmean",)

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction, size_average, reduce)
        self.log_target = bool(log_target)

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).kl_div(input, target, self.reduction, self.log_target)


class _ClassLoss(Loss):
    def __init__(self, weight: Any, size_average, ignore_index: int, reduce, reduction: str) -> None:
        super().__init__(reduction, size_average, reduce)
        self.weight, self.ignore_index = weight, int(ignore_index)


class NLLLoss(_ClassLoss):
    """Negative log-likelihood of log-probabilities ``input`` (N, C, d1, ...) / (C,) at class
    indices ``target`` (N, d1, ...); class axis 1. 'mean' divides by the summed weights of the
    non-ignored targets (PyTorch's rule)."""

    def __init__(self, weight: Any = None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, ignore_index, reduce, reduction)

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_ClassLoss):
    """``log_softmax`` over axis 1 (Gluon uses the last axis) then NLL, or, when ``target`` has the
    input's shape, cross-entropy with class probabilities. ``weight``, ``ignore_index`` and
    ``label_smoothing`` follow PyTorch exactly (Gluon has none of them)."""

    def __init__(self, weight: Any = None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.label_smoothing = float(label_smoothing)

    def __call__(self, input: Any, target: Any) -> Any:
        return _impl(input).cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                                          self.label_smoothing)


class CTCLoss(Loss):
    """Connectionist temporal classification with PyTorch's conventions on both backends:
    ``log_probs`` (T, N, C) log-probabilities (checked), ``blank=0`` by default (any class may be
    the blank), targets padded (N, S) or concatenated 1-D, lengths per sample. 'mean' divides each
    loss by its target length, then averages. Infeasible alignments give inf, or 0 with
    ``zero_infinity=True`` (MXNet's op gives 0). For Gluon's convention see ``gluon.GluonCTCLoss``.

    The log-probability check exists because MXNet's CTC op applies softmax to its input: on
    log-probabilities that is the identity, on unnormalised scores it silently gives other values
    and gradients than PyTorch. It costs a logsumexp and a device-to-host sync per call (on the
    CPU demo CRNN, about a third of the loss's time); ``check_log_probs=False`` skips it when the
    input comes straight from ``log_softmax``."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False,
                 check_log_probs: bool = True) -> None:
        super().__init__(reduction)
        self.blank, self.zero_infinity = int(blank), bool(zero_infinity)
        self.check_log_probs = bool(check_log_probs)

    def __call__(self, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any) -> Any:
        return _impl(log_probs).ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                                         self.reduction, self.zero_infinity, self.check_log_probs)


from . import functional, gluon  # noqa: E402,F401  (framework-free)
from .pairwise import CosineEmbeddingLoss, MarginRankingLoss, TripletMarginLoss  # noqa: E402
from .likelihood import BCELoss, GaussianNLLLoss, PoissonNLLLoss  # noqa: E402
from .margin import (HingeEmbeddingLoss, MultiLabelMarginLoss, MultiLabelSoftMarginLoss,  # noqa: E402
                     MultiMarginLoss, SoftMarginLoss)
