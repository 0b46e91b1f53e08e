"""Function forms of dualdl's losses, with ``torch.nn.functional``'s names and signatures.

``F.cross_entropy(logits, target, ...)`` works on torch tensors and MXNet NDArrays alike, with the
meanings documented in :mod:`dualdl.losses` (checks included). The classes call these.
"""
from __future__ import annotations

from typing import Any

from ..backend import backend_for
from . import _checks as _ck

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits",
           "kl_div", "nll_loss", "cross_entropy", "ctc_loss", "binary_cross_entropy", "margin_ranking_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss"]


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
