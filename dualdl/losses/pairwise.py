"""Losses on pairs and triplets of embeddings, with PyTorch's signatures (``torch.nn``'s classes):
the formulas are in :mod:`dualdl.losses.functional`; Gluon's ``CosineEmbeddingLoss`` and
``TripletLoss`` differ (docs/losses.md)."""
from __future__ import annotations

from typing import Any

from . import functional as _f
from .base import Loss
from . import _checks as _ck

__all__ = ["MarginRankingLoss", "CosineEmbeddingLoss", "TripletMarginLoss"]


class _MarginPairLoss(Loss):
    """A loss of (input1, input2, target) with a ``margin`` (torch's two share this signature)."""

    _fn = staticmethod(_f.margin_ranking_loss)

    def __init__(self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)
        self.margin = float(margin)

    def __call__(self, input1: Any, input2: Any, target: Any) -> Any:
        return self._fn(input1, input2, target, self.margin, reduction=self.reduction)


class MarginRankingLoss(_MarginPairLoss):
    """``max(0, -target * (input1 - input2) + margin)``; input1, input2 and target (1 or -1) of one shape."""


class CosineEmbeddingLoss(_MarginPairLoss):
    """``1 - cos(x1, x2)`` for target 1, ``max(0, cos(x1, x2) - margin)`` for target -1; inputs
    (N, D) with target (N,), or (D,) with target (). Gluon's ``CosineEmbeddingLoss`` divides by
    ``max(|x1| |x2|, 1e-12)`` (torch: ``sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12))``) and returns
    per-sample losses, unreduced."""

    _fn = staticmethod(_f.cosine_embedding_loss)


class TripletMarginLoss(Loss):
    """``max(0, margin + ||a - p + eps||_p - ||a - n + eps||_p)`` along the last axis, ``swap``
    as torch (Gluon's ``TripletLoss`` uses squared L2 distances without eps)."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-06, swap: bool = False,
                 size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)
        _ck.check_margin("TripletMarginLoss", margin)
        _ck.check_positive("TripletMarginLoss", "p", p)
        self.margin, self.p, self.eps, self.swap = float(margin), float(p), float(eps), bool(swap)

    def __call__(self, anchor: Any, positive: Any, negative: Any) -> Any:
        return _f.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                      reduction=self.reduction)
