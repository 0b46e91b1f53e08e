"""The margin losses and ``linear_cross_entropy`` on PyTorch: ``torch.nn.functional`` after the
checks both adapters share (``dualdl.losses._margin_checks``): no broadcasting of mismatched
shapes, class indices in range (IndexError; torch raises a RuntimeError from its kernel),
integral float indices accepted (MXNet labels are float), empty inputs refused."""
from __future__ import annotations

import torch.nn.functional as F

from dualdl.losses import _checks as ck
from dualdl.losses import _margin_checks as mc

from .losses_common import _check_class_indices, _host, _index_target, _native, _pair, _shape

__all__ = ["multi_margin_loss", "multilabel_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "hinge_embedding_loss", "linear_cross_entropy"]


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, reduction="mean"):
    name = "MultiMarginLoss"
    ck.check_reduction(name, reduction)
    mc.check_p(name, p)
    weight = _native(weight, input)
    C = mc.multi_margin_shapes(name, tuple(input.shape), _shape(target),
                               None if weight is None else tuple(weight.shape))
    _check_class_indices(name, target, C)
    return F.multi_margin_loss(input, _index_target(target, input.device), p=p, margin=margin, weight=weight,
                               reduction=reduction)


def multilabel_margin_loss(input, target, reduction="mean"):
    name = "MultiLabelMarginLoss"
    ck.check_reduction(name, reduction)
    C = mc.multilabel_margin_shapes(name, tuple(input.shape), _shape(target))
    mc.multilabel_counts(name, _host(target), C)
    return F.multilabel_margin_loss(input, _index_target(target, input.device), reduction=reduction)


def soft_margin_loss(input, target, reduction="mean"):
    target = _pair("SoftMarginLoss", input, target, reduction)
    ck.check_not_empty("SoftMarginLoss", tuple(input.shape))
    return F.soft_margin_loss(input, target, reduction=reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    target = _pair("HingeEmbeddingLoss", input, target, reduction)
    ck.check_not_empty("HingeEmbeddingLoss", tuple(input.shape))
    return F.hinge_embedding_loss(input, target, margin=margin, reduction=reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean"):
    name = "MultiLabelSoftMarginLoss"
    ck.check_reduction(name, reduction)
    target = _native(target, input)
    mc.multilabel_soft_margin_shape(name, tuple(input.shape), tuple(target.shape))
    weight = _native(weight, input)
    if weight is not None:
        ck.check_broadcast(name, "weight", tuple(weight.shape), tuple(input.shape))
    return F.multilabel_soft_margin_loss(input, target, weight=weight, reduction=reduction)


def lce_missing() -> None:
    """torch < 2.13 has neither ``nn.LinearCrossEntropyLoss`` nor ``F.linear_cross_entropy``."""
    import torch
    raise NotImplementedError(
        f"LinearCrossEntropyLoss needs torch 2.13 or newer (installed: torch {torch.__version__}); upgrade torch, "
        f"or compute nn.Linear then CrossEntropyLoss (the same numbers, without torch's chunking)")


def linear_cross_entropy(input, linear_weight, target, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """torch's own ``F.linear_cross_entropy`` (its chunked path with ``options``) after the shared checks."""
    if not hasattr(F, "linear_cross_entropy"):
        lce_missing()
    name = "LinearCrossEntropyLoss"
    ck.check_reduction(name, reduction)
    C, out_features, in_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1]), linear_weight.shape[-1]
    kind, _ = mc.linear_ce_shapes(name, tuple(input.shape), in_features, C, out_features, _shape(target),
                                  ignore_index)
    weight = _native(weight, input)
    if weight is not None:
        ck.check_class_weight(name, tuple(weight.shape), C)
    if kind == "index":
        _check_class_indices(name, target, C, -100 if ignore_index is None else ignore_index)
        target = _index_target(target, input.device)
        if input.dim() == 1:
            target = target.reshape(())
    else:
        target = _native(target, input)
    return F.linear_cross_entropy(input, linear_weight, target, linear_bias=linear_bias, weight=weight,
                                  reduction=reduction, ignore_index=ignore_index, label_smoothing=label_smoothing,
                                  options=options)
