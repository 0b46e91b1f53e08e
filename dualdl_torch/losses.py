"""dualdl losses on PyTorch: ``torch.nn.functional`` with dualdl's checks, and Gluon's per-sample losses.

The torch-named losses call ``torch.nn.functional`` (their semantics are the contract), after
checks that both adapters share (``dualdl.losses._checks``): no broadcasting of mismatched
shapes, class indices in range (integral float indices are accepted, as MXNet labels are float),
CTC log-probs normalised. The ``gluon_*`` functions reproduce ``mxnet.gluon.loss`` exactly:
per-sample (N,) losses, 0.5 in L2, label reshaped to the prediction's shape, CTC blank = last.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from dualdl.losses import _checks as ck

__all__ = [
    "reduce", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits",
    "kl_div", "nll_loss", "cross_entropy", "ctc_loss", "binary_cross_entropy", "margin_ranking_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
    "gluon_l2_loss", "gluon_l1_loss", "gluon_huber_loss", "gluon_sigmoid_bce_loss",
    "gluon_softmax_ce_loss", "gluon_ctc_loss", "multi_margin_loss", "multilabel_margin_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "hinge_embedding_loss", "linear_cross_entropy", "loss_modules",
]


from .losses_common import (_check_class_indices, _host, _index_target, _native, _pair,  # noqa: F401
                            _shape, reduce)



def _elementwise_weight(name, input, weight):
    if weight is None:
        return None
    weight = _native(weight, input)
    ck.check_elementwise_weight(name, tuple(weight.shape), tuple(input.shape))
    return weight


def mse_loss(input, target, reduction="mean", weight=None):
    target = _pair("MSELoss", input, target, reduction)
    return F.mse_loss(input, target, reduction=reduction, weight=_elementwise_weight("MSELoss", input, weight))


def l1_loss(input, target, reduction="mean", weight=None):
    target = _pair("L1Loss", input, target, reduction)
    return F.l1_loss(input, target, reduction=reduction, weight=_elementwise_weight("L1Loss", input, weight))


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    target = _pair("SmoothL1Loss", input, target, reduction)
    return F.smooth_l1_loss(input, target, reduction=reduction, beta=beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    target = _pair("HuberLoss", input, target, reduction)
    return F.huber_loss(input, target, reduction=reduction, delta=delta,
                        weight=_elementwise_weight("HuberLoss", input, weight))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction="mean"):
    name = "BCEWithLogitsLoss"
    target = _pair(name, input, target, reduction)
    weight, pos_weight = _native(weight, input), _native(pos_weight, input)
    for what, w in (("weight", weight), ("pos_weight", pos_weight)):
        if w is not None:
            ck.check_broadcast(name, what, tuple(w.shape), tuple(input.shape))
    return F.binary_cross_entropy_with_logits(input, target, weight=weight, pos_weight=pos_weight,
                                              reduction=reduction)


def kl_div(input, target, reduction="mean", log_target=False):
    name = "KLDivLoss"
    ck.check_reduction(name, reduction, ck.REDUCTIONS + ("batchmean",))
    target = _native(target, input)
    ck.check_same_shape(name, tuple(input.shape), tuple(target.shape))
    # computed unreduced then reduced here: F.kl_div(reduction='mean') only adds a warning
    el = F.kl_div(input, target, reduction="none", log_target=log_target)
    if reduction == "batchmean":
        return el.sum() / input.shape[0] if input.dim() else el.sum()
    return reduce(el, reduction)


def _min_max(x: torch.Tensor):
    lo, hi = torch.aminmax(x.detach())
    return tuple(torch.stack((lo, hi)).tolist())


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    name = "BCELoss"
    target = _pair(name, input, target, reduction)
    ck.check_not_empty(name, tuple(input.shape))
    ck.check_probabilities(name, *_min_max(input))
    weight = _native(weight, input)
    if weight is not None:
        ck.check_broadcast(name, "weight", tuple(weight.shape), tuple(input.shape))
    return F.binary_cross_entropy(input, target, weight=weight, reduction=reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    name = "MarginRankingLoss"
    ck.check_reduction(name, reduction)
    input2, target = _native(input2, input1), _native(target, input1)
    ck.check_same_shapes(name, ("input1", "input2", "target"),
                         (tuple(input1.shape), tuple(input2.shape), tuple(target.shape)))
    return F.margin_ranking_loss(input1, input2, target, margin=margin, reduction=reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    name = "CosineEmbeddingLoss"
    ck.check_reduction(name, reduction)
    input2, target = _native(input2, input1), _native(target, input1)
    ck.check_cosine_shapes(name, tuple(input1.shape), tuple(input2.shape), tuple(target.shape))
    if input1.dim() == 1:
        target = target.reshape(())
    return F.cosine_embedding_loss(input1, input2, target, margin=margin, reduction=reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean"):
    name = "TripletMarginLoss"
    ck.check_reduction(name, reduction)
    positive, negative = _native(positive, anchor), _native(negative, anchor)
    ck.check_same_shapes(name, ("anchor", "positive", "negative"),
                         (tuple(anchor.shape), tuple(positive.shape), tuple(negative.shape)), min_ndim=1)
    return F.triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps, swap=swap,
                                 reduction=reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    target = _pair("PoissonNLLLoss", input, target, reduction)
    ck.check_not_empty("PoissonNLLLoss", tuple(input.shape))
    return F.poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps, reduction=reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    name = "GaussianNLLLoss"
    target = _pair(name, input, target, reduction)
    ck.check_not_empty(name, tuple(input.shape))
    if isinstance(var, (int, float)):
        ck.check_var_nonnegative(name, float(var))
        var = float(var)
    else:
        var = _native(var, input)
        ck.gaussian_var_shape(name, tuple(input.shape), tuple(var.shape))
        ck.check_var_nonnegative(name, _min_max(var)[0])
    return F.gaussian_nll_loss(input, target, var, full=full, eps=eps, reduction=reduction)


# ---- classification -----------------------------------------------------------------------------
def _class_setup(name, input, target, weight, ignore_index, allow_prob=True):
    """(kind, target to pass to torch, weight, C, checked). ``checked`` is False when torch's own
    CPU kernel will range-check the indices (int64 CPU targets): it raises IndexError
    synchronously there, and :func:`_index_loss` rewords it as the shared error, saving the
    separate ``aminmax`` pass. CUDA kernels would assert on the device instead, so CUDA targets
    are checked first."""
    kind = ck.class_target_kind(name, tuple(input.shape), tuple(_shape(target)), allow_prob, ignore_index)
    C = input.shape[0 if input.dim() == 1 else 1]
    if weight is not None:
        weight = _native(weight, input)
        ck.check_class_weight(name, tuple(weight.shape), C)
    if kind == "prob":
        return kind, _native(target, input), weight, C, True
    checked = not (isinstance(target, torch.Tensor) and target.dtype == torch.int64
                   and target.device.type == "cpu" and input.device.type == "cpu")
    if checked:
        _check_class_indices(name, target, C, ignore_index)
    t = _index_target(target, input.device)
    if input.dim() == 1:
        t = t.reshape(())
    return kind, t, weight, C, checked




# (input shape, target shape, allow_prob) of unweighted index targets whose shape checks passed:
# for int64 CPU targets the checks depend on nothing else (torch's kernel range-checks the
# values), so a shape seen before skips them (9 us of a 23 us cross-entropy call on the benchmark MLP)
_INDEX_SHAPES: set = set()
_MAX_INDEX_SHAPES = 256


def _seen_index_target(input: torch.Tensor, target: Any, weight: Any, allow_prob: bool) -> bool:
    """Whether ``target`` is an int64 CPU tensor of index shape already checked against
    ``input``'s (and there is no weight): then it goes to torch's kernel as it is."""
    return (weight is None and type(target) is torch.Tensor and target.dtype is torch.int64
            and target.is_cpu and input.is_cpu and input.dim() > 1
            and (input.shape, target.shape, allow_prob) in _INDEX_SHAPES)


def _remember_index_target(input: torch.Tensor, target: Any, weight: Any, allow_prob: bool, kind: str,
                           checked: bool) -> None:
    if kind == "index" and not checked and weight is None and type(target) is torch.Tensor and input.dim() > 1:
        if len(_INDEX_SHAPES) >= _MAX_INDEX_SHAPES:
            _INDEX_SHAPES.clear()
        _INDEX_SHAPES.add((input.shape, target.shape, allow_prob))


def _index_loss(name, fn, input, target, weight, ignore_index, reduction, allow_prob, *extra):
    """``fn(input, target, weight, ignore_index=, reduction=, *extra)`` (``F.nll_loss``, or
    ``F.cross_entropy`` with ``extra = (label_smoothing,)``; both take size_average and reduce in
    between, passed as None) after :func:`_class_setup`'s checks. An int64 CPU index target of a
    shape checked before (:func:`_seen_index_target`: the usual training call) goes to torch's
    kernel with no other work on the way (the setup, its tuple and a closure cost the benchmark
    MLP's step 0.015-0.02). Where torch's CPU kernel range-checks the indices (``checked``
    False), its IndexError becomes the shared error."""
    if reduction in ck.REDUCTIONS and _seen_index_target(input, target, weight, allow_prob):
        t, C, checked = target, None, False
    else:
        ck.check_reduction(name, reduction)
        kind, t, weight, C, checked = _class_setup(name, input, target, weight, ignore_index, allow_prob=allow_prob)
        _remember_index_target(input, target, weight, allow_prob, kind, checked)
    try:
        return fn(input, t, weight, None, ignore_index, None, reduction, *extra)
    except IndexError:
        if not checked:                     # raises the shared IndexError
            _check_class_indices(name, target, input.shape[1] if C is None else C, ignore_index)
        raise


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    return _index_loss("NLLLoss", F.nll_loss, input, target, weight, ignore_index, reduction, False)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    return _index_loss("CrossEntropyLoss", F.cross_entropy, input, target, weight, ignore_index, reduction, True,
                       label_smoothing)


# ---- CTC --------------------------------------------------------------------------------------------
def _check_log_probs(name: str, lp: torch.Tensor, input_lengths: np.ndarray) -> None:
    """Both backends require normalised log-probs: MXNet's op re-normalises (softmax) internally,
    PyTorch does not, so unnormalised inputs would give different numbers."""
    with torch.no_grad():
        lse = torch.logsumexp(lp.float() if lp.dtype == torch.float16 else lp, dim=-1)   # (T, N)
        T = lp.shape[0]
        lengths = torch.as_tensor(input_lengths, device=lp.device)
        mask = torch.arange(T, device=lp.device)[:, None] < lengths[None, :]
        worst = float(lse.abs().masked_fill(~mask, 0).max()) if lse.numel() else 0.0
    ck.check_log_probs_deviation(name, worst, lp.dtype == torch.float16)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False, check_log_probs=True):
    name = "CTCLoss"
    ck.check_reduction(name, reduction)
    plan = ck.plan_ctc(name, tuple(log_probs.shape), _host(targets), _host(input_lengths),
                       _host(target_lengths), blank)
    if check_log_probs:
        _check_log_probs(name, log_probs if plan.batched else log_probs[:, None], plan.input_lengths)
    dev = log_probs.device
    lp = log_probs if plan.batched else log_probs[:, None]
    out = F.ctc_loss(lp, torch.as_tensor(plan.labels, device=dev),
                     torch.as_tensor(plan.input_lengths, device=dev),
                     torch.as_tensor(plan.target_lengths, device=dev),
                     blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    return out if plan.batched or reduction != "none" else out.reshape(())


# ---- Gluon's per-sample losses -------------------------------------------------------------------
def _apply_weighting(loss, weight, sample_weight, name="Gluon loss"):
    if sample_weight is not None:
        sample_weight = _native(sample_weight, loss)
        ck.check_broadcast(name, "sample_weight", tuple(sample_weight.shape), tuple(loss.shape))
        loss = loss * sample_weight
    if weight is not None:
        loss = loss * weight
    return loss


def _mean_except(loss: torch.Tensor, batch_axis: int) -> torch.Tensor:
    """``F.mean(loss, axis=batch_axis, exclude=True)``: per-sample mean over every other axis."""
    ba = batch_axis % loss.dim()
    dims = [d for d in range(loss.dim()) if d != ba]
    return loss.mean(dim=dims) if dims else loss


def _label_like(name, pred, label):
    ck.check_same_size(name, tuple(pred.shape), _shape(label))
    return _native(label, pred).reshape(pred.shape)


def gluon_l2_loss(pred, label, sample_weight=None, weight=1.0, batch_axis=0):
    label = _label_like("GluonL2Loss", pred, label)
    loss = _apply_weighting(torch.square(label - pred), weight / 2, sample_weight, "GluonL2Loss")
    return _mean_except(loss, batch_axis)


def gluon_l1_loss(pred, label, sample_weight=None, weight=None, batch_axis=0):
    label = _label_like("GluonL1Loss", pred, label)
    loss = _apply_weighting(torch.abs(label - pred), weight, sample_weight, "GluonL1Loss")
    return _mean_except(loss, batch_axis)


def gluon_huber_loss(pred, label, sample_weight=None, rho=1.0, weight=None, batch_axis=0):
    label = _label_like("GluonHuberLoss", pred, label)
    d = torch.abs(label - pred)
    loss = torch.where(d > rho, d - 0.5 * rho, (0.5 / rho) * torch.square(d))
    return _mean_except(_apply_weighting(loss, weight, sample_weight, "GluonHuberLoss"), batch_axis)


def gluon_sigmoid_bce_loss(pred, label, sample_weight=None, pos_weight=None, from_sigmoid=False,
                           weight=None, batch_axis=0):
    label = _label_like("GluonSigmoidBCELoss", pred, label)
    pw = _native(pos_weight, pred)
    if pw is not None:
        ck.check_broadcast("GluonSigmoidBCELoss", "pos_weight", tuple(pw.shape), tuple(pred.shape))
    if not from_sigmoid:
        if pw is None:
            loss = F.relu(pred) - pred * label + F.softplus(-torch.abs(pred))
        else:
            log_weight = 1 + (pw - 1) * label
            loss = pred - pred * label + log_weight * (F.softplus(-torch.abs(pred)) + F.relu(-pred))
    else:
        eps = 1e-12       # Gluon's log(p + 1e-12), not torch BCELoss's clamp at -100
        if pw is None:
            loss = -(torch.log(pred + eps) * label + torch.log(1. - pred + eps) * (1. - label))
        else:
            loss = -(torch.log(pred + eps) * label * pw + torch.log(1. - pred + eps) * (1. - label))
    return _mean_except(_apply_weighting(loss, weight, sample_weight, "GluonSigmoidBCELoss"), batch_axis)


def gluon_softmax_ce_loss(pred, label, sample_weight=None, axis=-1, sparse_label=True, from_logits=False,
                          weight=None, batch_axis=0):
    name = "GluonSoftmaxCrossEntropyLoss"
    ax = axis % pred.dim()
    logp = pred if from_logits else F.log_softmax(pred, dim=ax)
    if sparse_label:
        want = tuple(s for d, s in enumerate(pred.shape) if d != ax)
        keep = tuple(1 if d == ax else s for d, s in enumerate(pred.shape))
        if _shape(label) not in (want, keep):
            raise ValueError(f"{name}: sparse labels for pred of shape {tuple(pred.shape)} (axis={axis}) "
                             f"must have shape {want}; got {_shape(label)}")
        _check_class_indices(name, label, pred.shape[ax])
        idx = _index_target(label, pred.device).reshape(keep)
        loss = -torch.gather(logp, ax, idx)
    else:
        lab = _label_like(name, pred, label)
        loss = -(logp * lab).sum(dim=ax, keepdim=True)
    return _mean_except(_apply_weighting(loss, weight, sample_weight, name), batch_axis)


def gluon_ctc_loss(pred, label, pred_lengths=None, label_lengths=None, sample_weight=None, layout="NTC",
                   label_layout="NT", weight=None):
    name = "GluonCTCLoss"
    x = pred.transpose(0, 1) if layout == "NTC" else pred          # (T, N, C)
    lab = _host(label)
    if label_layout == "TN":
        lab = lab.T
    T, _, C = x.shape
    labels, pl, ll = ck.gluon_ctc_lengths(
        name, lab, None if label_lengths is None else _host(label_lengths),
        None if pred_lengths is None else _host(pred_lengths), T, C)
    dev = pred.device
    # MXNet applies softmax inside its CTC op and returns 0 (with zero gradient) for infeasible samples
    loss = F.ctc_loss(F.log_softmax(x, dim=-1), torch.as_tensor(labels, device=dev),
                      torch.as_tensor(pl, device=dev), torch.as_tensor(ll, device=dev),
                      blank=C - 1, reduction="none", zero_infinity=True)
    return _apply_weighting(loss, weight, sample_weight, name)


def loss_modules() -> dict:
    """Name -> this adapter's loss module class (``torch.nn`` subclasses: ``dl.nn.CrossEntropyLoss``)."""
    from .losses_nn import MODULES
    return MODULES


from .losses_margin import (hinge_embedding_loss, linear_cross_entropy, multi_margin_loss,  # noqa: E402
                            multilabel_margin_loss, multilabel_soft_margin_loss, soft_margin_loss)
