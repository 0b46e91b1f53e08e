"""Negative log-likelihood losses with PyTorch's signatures (``torch.nn``'s classes): BCE on
probabilities, Poisson and Gaussian NLL. Formulas in :mod:`dualdl.losses.functional`."""
from __future__ import annotations

from typing import Any

from . import functional as _f
from .base import Loss

__all__ = ["BCELoss", "PoissonNLLLoss", "GaussianNLLLoss"]


class BCELoss(Loss):
    """Binary cross-entropy on probabilities, each log clamped at -100 as torch (Gluon's
    ``SigmoidBCELoss(from_sigmoid=True)`` uses ``log(p + 1e-12)``); ``weight`` broadcasts."""

    def __init__(self, weight: Any = None, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)
        self.weight = weight

    def __call__(self, input: Any, target: Any) -> Any:
        return _f.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class PoissonNLLLoss(Loss):
    """``exp(x) - t x`` (``log_input=True``) or ``x - t log(x + eps)``, plus Stirling's term where
    ``t > 1`` with ``full`` (Gluon's ``PoissonNLLLoss`` always returns the global mean, and its
    ``compute_full`` multiplies Stirling's term by ``t > 1``, which is NaN at ``t = 0``)."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-08,
                 reduce=None, reduction: str = "mean") -> None:
        super().__init__(reduction, size_average, reduce)
        self.log_input, self.full, self.eps = bool(log_input), bool(full), float(eps)

    def __call__(self, log_input: Any, target: Any) -> Any:
        return _f.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                   reduction=self.reduction)


class GaussianNLLLoss(Loss):
    """``0.5 (log var + (x - t)^2 / var)`` with var clamped at ``eps`` (gradient passed through, as
    torch); ``var`` per element, per sample (last axis dropped) or with one axis of size 1."""

    def __init__(self, *, full: bool = False, eps: float = 1e-06, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.full, self.eps = bool(full), float(eps)

    def __call__(self, input: Any, target: Any, var: Any) -> Any:
        return _f.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)
