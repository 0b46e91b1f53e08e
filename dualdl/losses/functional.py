"""Function forms of dualdl's losses, with ``torch.nn.functional``'s names and signatures.

``F.cross_entropy(logits, target, ...)`` works on torch tensors and MXNet NDArrays alike, with the
meanings documented in :mod:`dualdl.losses` (checks included). The classes call these.
"""
from __future__ import annotations

from typing import Any, Optional

from ..backend import backend_for

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits",
           "kl_div", "nll_loss", "cross_entropy", "ctc_loss"]


def _impl(x: Any):
    return backend_for(x).module("losses")


def _no_legacy(name: str, size_average: Any, reduce: Any) -> None:
    if size_average is not None or reduce is not None:
        raise ValueError(f"{name}: size_average and reduce are deprecated in PyTorch and not supported; "
                         f"use reduction='mean'|'sum'|'none'")


def mse_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean") -> Any:
    _no_legacy("mse_loss", size_average, reduce)
    return _impl(input).mse_loss(input, target, reduction)


def l1_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean") -> Any:
    _no_legacy("l1_loss", size_average, reduce)
    return _impl(input).l1_loss(input, target, reduction)


def smooth_l1_loss(input: Any, target: Any, size_average=None, reduce=None, reduction: str = "mean",
                   beta: float = 1.0) -> Any:
    _no_legacy("smooth_l1_loss", size_average, reduce)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    return _impl(input).smooth_l1_loss(input, target, reduction, float(beta))


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0) -> Any:
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    return _impl(input).huber_loss(input, target, reduction, float(delta))


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

