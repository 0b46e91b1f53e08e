"""``dl.nn.<Loss>`` on PyTorch: subclasses of the ``torch.nn`` losses (so ``isinstance(criterion,
torch.nn.CrossEntropyLoss)`` holds, ``weight`` is a buffer in the state dict, ``.to()`` moves it)
whose ``forward`` runs dualdl's checked functions (``dualdl_torch.losses``: torch's own
``torch.nn.functional`` after the checks both backends share). Built through
:mod:`dualdl.losses.modules`, which validates the arguments once for both backends."""
from __future__ import annotations

from typing import Any, Dict

import torch.nn as nn

from . import losses as L
from .losses_margin import lce_missing

__all__ = ["MODULES"]


def _declared_losses():
    from dualdl.losses.modules import LOSSES
    return LOSSES


class _DL:
    """Marks a dualdl loss module: ``_dl_loss`` is the name ``isinstance(m, dl.nn.<Loss>)`` reads."""
    _dl_loss = ""


class L1Loss(_DL, nn.L1Loss):
    def forward(self, input, target):
        return L.l1_loss(input, target, self.reduction)


class MSELoss(_DL, nn.MSELoss):
    def forward(self, input, target):
        return L.mse_loss(input, target, self.reduction)


class SmoothL1Loss(_DL, nn.SmoothL1Loss):
    def forward(self, input, target):
        return L.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_DL, nn.HuberLoss):
    def forward(self, input, target):
        return L.huber_loss(input, target, self.reduction, self.delta)


class KLDivLoss(_DL, nn.KLDivLoss):
    def forward(self, input, target):
        return L.kl_div(input, target, self.reduction, self.log_target)


class BCELoss(_DL, nn.BCELoss):
    def forward(self, input, target):
        return L.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_DL, nn.BCEWithLogitsLoss):
    def forward(self, input, target):
        return L.binary_cross_entropy_with_logits(input, target, self.weight, self.pos_weight, self.reduction)


class NLLLoss(_DL, nn.NLLLoss):
    def forward(self, input, target):
        return L.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_DL, nn.CrossEntropyLoss):
    def forward(self, input, target):
        return L.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)


class CTCLoss(_DL, nn.CTCLoss):
    """``check_log_probs`` (dualdl's): see :class:`dualdl.losses.CTCLoss`."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False,
                 check_log_probs: bool = True) -> None:
        super().__init__(blank, reduction, zero_infinity)
        self.check_log_probs = bool(check_log_probs)

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return L.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity, self.check_log_probs)


class PoissonNLLLoss(_DL, nn.PoissonNLLLoss):
    def forward(self, log_input, target):
        return L.poisson_nll_loss(log_input, target, self.log_input, self.full, self.eps, self.reduction)


class GaussianNLLLoss(_DL, nn.GaussianNLLLoss):
    def forward(self, input, target, var):
        return L.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class MarginRankingLoss(_DL, nn.MarginRankingLoss):
    def forward(self, input1, input2, target):
        return L.margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class CosineEmbeddingLoss(_DL, nn.CosineEmbeddingLoss):
    def forward(self, input1, input2, target):
        return L.cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


class TripletMarginLoss(_DL, nn.TripletMarginLoss):
    def forward(self, anchor, positive, negative):
        return L.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                     self.reduction)


class HingeEmbeddingLoss(_DL, nn.HingeEmbeddingLoss):
    def forward(self, input, target):
        return L.hinge_embedding_loss(input, target, self.margin, self.reduction)


class SoftMarginLoss(_DL, nn.SoftMarginLoss):
    def forward(self, input, target):
        return L.soft_margin_loss(input, target, self.reduction)


class MultiMarginLoss(_DL, nn.MultiMarginLoss):
    def forward(self, input, target):
        return L.multi_margin_loss(input, target, self.p, self.margin, self.weight, self.reduction)


class MultiLabelMarginLoss(_DL, nn.MultiLabelMarginLoss):
    def forward(self, input, target):
        return L.multilabel_margin_loss(input, target, self.reduction)


class MultiLabelSoftMarginLoss(_DL, nn.MultiLabelSoftMarginLoss):
    def forward(self, input, target):
        return L.multilabel_soft_margin_loss(input, target, self.weight, self.reduction)


if hasattr(nn, "LinearCrossEntropyLoss"):
    class LinearCrossEntropyLoss(_DL, nn.LinearCrossEntropyLoss):
        """torch's module (its ``linear`` child holds the (C * prod(out_features), in_features) weight);
        ``forward`` checks the target as every class-index loss, then runs torch's own function."""

        def forward(self, input, target):
            w = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
            b = None if self.linear.bias is None else self.linear.bias.reshape((self.num_classes, *self.out_features))
            return L.linear_cross_entropy(input, w, target, b, self.weight, self.reduction, self.ignore_index,
                                          self.label_smoothing, self.options)
else:
    class LinearCrossEntropyLoss(_DL, nn.Module):
        """torch < 2.13 has no ``LinearCrossEntropyLoss``: building one says so (the other losses work)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            lce_missing()


# one class of each loss dualdl.nn declares (dualdl/losses/modules.py), found by its name
MODULES: Dict[str, Any] = {_name: globals()[_name] for _name in _declared_losses()}
for _name, _cls in MODULES.items():
    _cls._dl_loss = _name
