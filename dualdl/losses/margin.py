"""Margin losses with PyTorch's signatures (``torch.nn``'s classes): multi-class and multi-label
margin, soft margin, multi-label soft margin and hinge embedding. Formulas in
:mod:`dualdl.losses.functional`; Gluon has none of them (its ``HingeLoss``/``SquaredHingeLoss``
are the binary SVM losses ``max(0, margin - pred * label)``, per sample)."""
from __future__ import annotations

from typing import Any

from . import _margin_checks as _mc
from . import functional as _f
from .base import Loss

__all__ = ["MultiMarginLoss", "MultiLabelMarginLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
           "HingeEmbeddingLoss"]


class MultiMarginLoss(Loss):
    """``sum_{j != y} max(0, margin - x[y] + x[j])**p * w[y] / C`` per sample (multi-class hinge);
    input (N, C) or (C,), class indices (N,) or (); ``weight`` one entry per class."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Any = None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)
        _mc.check_p("MultiMarginLoss", p)
        _mc.check_weight_1d("MultiMarginLoss", weight)
        self.p, self.margin, self.weight = p, float(margin), weight

    def __call__(self, input: Any, target: Any) -> Any:
        return _f.multi_margin_loss(input, target, self.p, self.margin, self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(Loss):
    """``sum_{j listed} sum_{i not listed} max(0, 1 - x[j] + x[i]) / C`` per sample; the target
    (input's shape) lists class indices up to its first negative entry."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)

    def __call__(self, input: Any, target: Any) -> Any:
        return _f.multilabel_margin_loss(input, target, reduction=self.reduction)


class SoftMarginLoss(Loss):
    """``log(1 + exp(-y x))`` elementwise (torch's literal formula: inf where ``-y x`` overflows)."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)

    def __call__(self, input: Any, target: Any) -> Any:
        return _f.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(Loss):
    """``-mean_c w_c (y_c log sigmoid(x_c) + (1 - y_c) log sigmoid(-x_c))`` over the last (class)
    axis; ``weight`` broadcasts to the input."""

    def __init__(self, weight: Any = None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)
        self.weight = weight

    def __call__(self, input: Any, target: Any) -> Any:
        return _f.multilabel_soft_margin_loss(input, target, self.weight, reduction=self.reduction)


class HingeEmbeddingLoss(Loss):
    """``x`` where the target is not -1, plus ``max(0, margin - x)`` where it is not 1 (torch's
    terms: a target other than +-1 gets both)."""

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)
        self.margin = float(margin)

    def __call__(self, input: Any, target: Any) -> Any:
        return _f.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)
