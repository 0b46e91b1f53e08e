"""Function forms of dualdl's losses, with ``torch.nn.functional``'s names and signatures.

``F.cross_entropy(logits, target, ...)`` works on torch tensors and MXNet NDArrays alike, with the
meanings documented in :mod:`dualdl.losses` (checks included). The classes call these.
"""
from __future__ import annotations

from typing import Any

from ..backend import backend_for
from . import _checks as _ck
from . import _margin_checks as _mc

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits",
           "kl_div", "nll_loss", "cross_entropy", "ctc_loss", "binary_cross_entropy", "margin_ranking_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "multi_margin_loss", "multilabel_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
           "hinge_embedding_loss", "linear_cross_entropy"]


def _impl(x: Any):
    return backend_for(x).module("losses")


_no_legacy = _ck.check_no_legacy


def mse_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean",
             weight: Any = None) -> Any:
    """``weight`` (torch 2.13): one weight per element; 'mean' is ``sum(w * l) / sum(w)``."""
    _no_legacy("mse_loss", size_average, reduce)
    return _impl(input).mse_loss(input, target, reduction, weight)


def l1_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean",
            weight: Any = None) -> Any:
    """``weight`` (torch 2.13): one weight per element; 'mean' is ``sum(w * l) / sum(w)``."""
    _no_legacy("l1_loss", size_average, reduce)
    return _impl(input).l1_loss(input, target, reduction, weight)


def smooth_l1_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Any:
    _no_legacy("smooth_l1_loss", size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    return _impl(input).smooth_l1_loss(input, target, reduction, float(beta))


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0, weight: Any = None) -> Any:
    """``weight`` (torch 2.13): one weight per element; unlike mse/l1, torch's weighted 'mean' here
    is ``mean(w * l)`` (over the elements, not divided by ``sum(w)``): mirrored."""
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    return _impl(input).huber_loss(input, target, reduction, float(delta), weight)


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None, size_average=None,
                                     reduce=None, reduction: str = "mean", pos_weight: Any = None) -> Any:
    _no_legacy("binary_cross_entropy_with_logits", size_average, reduce)
    return _impl(input).binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)


def kl_div(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Any:
    _no_legacy("kl_div", size_average, reduce)
    return _impl(input).kl_div(input, target, reduction, bool(log_target))


def nll_loss(input: Any, target: Any, weight: Any = None, size_average=None, ignore_index: int = -100,
             reduce=None, reduction: str = "mean") -> Any:
    _no_legacy("nll_loss", size_average, reduce)
    return _impl(input).nll_loss(input, target, weight, int(ignore_index), reduction)


def cross_entropy(input: Any, target: Any, weight: Any = None, size_average=None, ignore_index: int = -100,
                  reduce=None, reduction: str = "mean", label_smoothing: float = 0.0) -> Any:
    _no_legacy("cross_entropy", size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    return _impl(input).cross_entropy(input, target, weight, int(ignore_index), reduction,
                                      float(label_smoothing))


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False, check_log_probs: bool = True) -> Any:
    """See :class:`dualdl.losses.CTCLoss` (``check_log_probs=False`` skips the normalisation check)."""
    return _impl(log_probs).ctc_loss(log_probs, targets, input_lengths, target_lengths, int(blank),
                                     reduction, bool(zero_infinity), bool(check_log_probs))



def binary_cross_entropy(input: Any, target: Any, weight: Any = None, size_average=None, reduce=None,
                         reduction: str = "mean") -> Any:
    """``-w (t log x + (1 - t) log(1 - x))`` on probabilities ``x`` with each log clamped at -100
    (torch's; Gluon's ``from_sigmoid=True`` uses ``log(x + 1e-12)``), and torch's gradient
    ``w (x - t) / max(x (1 - x), 1e-12)``. ``weight`` broadcasts to the input."""
    _no_legacy("binary_cross_entropy", size_average, reduce)
    return _impl(input).binary_cross_entropy(input, target, weight, reduction)


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Any:
    """``max(0, -target * (input1 - input2) + margin)``; all three of one shape."""
    _no_legacy("margin_ranking_loss", size_average, reduce)
    return _impl(input1).margin_ranking_loss(input1, input2, target, float(margin), reduction)


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Any:
    """``1 - cos`` where target is 1, ``max(0, cos - margin)`` where -1 (0 for other values, as
    torch), with torch's cosine ``x.y / sqrt((|x|^2 + 1e-12)(|y|^2 + 1e-12))`` along axis 1."""
    _no_legacy("cosine_embedding_loss", size_average, reduce)
    return _impl(input1).cosine_embedding_loss(input1, input2, target, float(margin), reduction)


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-06, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Any:
    """``max(0, margin + d(a, p) - d(a, n))`` with torch's ``d(x, y) = ||x - y + eps||_p`` along the
    last axis; ``swap``: ``d(a, n)`` becomes ``min(d(a, n), d(p, n))``."""
    _no_legacy("triplet_margin_loss", size_average, reduce)
    _ck.check_margin("triplet_margin_loss", margin)
    _ck.check_positive("triplet_margin_loss", "p", p)
    return _impl(anchor).triplet_margin_loss(anchor, positive, negative, float(margin), float(p), float(eps),
                                             bool(swap), reduction)


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-08, reduce=None, reduction: str = "mean") -> Any:
    """``exp(x) - t x`` (``log_input``) or ``x - t log(x + eps)``; ``full`` adds Stirling's
    ``t log t - t + 0.5 log(2 pi t)`` where ``t > 1``."""
    _no_legacy("poisson_nll_loss", size_average, reduce)
    return _impl(input).poisson_nll_loss(input, target, bool(log_input), bool(full), float(eps), reduction)


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False, eps: float = 1e-06,
                      reduction: str = "mean") -> Any:
    """``0.5 (log max(var, eps) + (x - t)^2 / max(var, eps))`` (+ ``0.5 log(2 pi)`` with ``full``);
    the clamp passes var's gradient through unchanged (torch clamps under no_grad). ``var``: a
    float, the input's shape, the input's shape without its last axis, or one axis of size 1."""
    return _impl(input).gaussian_nll_loss(input, target, var, bool(full), float(eps), reduction)


# ---- margin losses (issue 34) ---------------------------------------------------------------------
def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0, weight: Any = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Any:
    """``sum_{j != y} max(0, margin - x[y] + x[j])**p * w[y] / C`` per sample; input (N, C), (C,) or
    0-d, class indices (N,) or (); ``p`` 1 or 2."""
    _no_legacy("multi_margin_loss", size_average, reduce)
    _mc.check_p("multi_margin_loss", p)
    return _impl(input).multi_margin_loss(input, target, int(p), float(margin), weight, reduction)


def multilabel_margin_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean") -> Any:
    """``sum_{j listed} sum_{i not listed} max(0, 1 - x[j] + x[i]) / C`` per sample; each target row
    lists class indices up to its first negative entry."""
    _no_legacy("multilabel_margin_loss", size_average, reduce)
    return _impl(input).multilabel_margin_loss(input, target, reduction)


def soft_margin_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean") -> Any:
    """``log(1 + exp(-target * input))`` elementwise, as torch computes it."""
    _no_legacy("soft_margin_loss", size_average, reduce)
    return _impl(input).soft_margin_loss(input, target, reduction)


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None, size_average=None, reduce=None,
                                reduction: str = "mean") -> Any:
    """``-mean_c w_c (t_c log sigmoid(x_c) + (1 - t_c) log sigmoid(-x_c))`` over the last axis."""
    _no_legacy("multilabel_soft_margin_loss", size_average, reduce)
    return _impl(input).multilabel_soft_margin_loss(input, target, weight, reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Any:
    """``where(t != -1, x, 0) + where(t != 1, max(0, margin - x), 0)``."""
    _no_legacy("hinge_embedding_loss", size_average, reduce)
    return _impl(input).hinge_embedding_loss(input, target, float(margin), reduction)


def linear_cross_entropy(input: Any, linear_weight: Any, target: Any, *, linear_bias: Any = None, weight: Any = None,
                         reduction: str = "mean", ignore_index: Any = None, label_smoothing: float = 0.0,
                         options: Any = None) -> Any:
    """``cross_entropy(linear(input, W, b).reshape(N, C, *out_features), target)`` with
    ``linear_weight`` (C, *out_features, in_features); ``ignore_index`` None means -100 for class
    indices. ``options`` (torch's chunking strategy) is used on torch; MXNet computes the logits
    whole (same numbers)."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"linear_cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    return _impl(input).linear_cross_entropy(input, linear_weight, target, linear_bias, weight, reduction,
                                             ignore_index, float(label_smoothing), options)
