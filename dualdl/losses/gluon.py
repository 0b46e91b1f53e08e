"""Gluon's losses, bit for bit, on both backends: for code ported from ``mxnet.gluon.loss``.

Each returns per-sample (N,) losses, as Gluon does: the loss is averaged over every axis except
``batch_axis`` (PyTorch's losses reduce to a scalar instead), the label is reshaped to the
prediction's shape (sizes must match), ``weight`` is Gluon's global scalar and ``sample_weight``
broadcasts against the unreduced loss. On MXNet they run the real ``gluon.loss`` classes; on
PyTorch the same formulas, so a ported model reproduces its Gluon training curve. Only
difference from Gluon (both backends): out-of-range class indices raise IndexError instead of
being clipped to 0 / C-1.

Step contract: ``loss.backward()`` on MXNet backpropagates the *sum* over the batch and
``Trainer.step(N)`` divides by N; on PyTorch use ``dualdl.losses.reduce(loss, "mean").backward()``
with a plain ``optimizer.step()`` for the same update.
"""
from __future__ import annotations

from typing import Any, Optional

from ..backend import backend_for

__all__ = ["GluonL2Loss", "GluonL1Loss", "GluonHuberLoss", "GluonSigmoidBCELoss",
           "GluonSoftmaxCrossEntropyLoss", "GluonCTCLoss"]


def _impl(x: Any):
    return backend_for(x).module("losses")


class _GluonLoss:
    def __init__(self, weight: Optional[float], batch_axis: int) -> None:
        if weight is not None and not isinstance(weight, (int, float)):
            raise TypeError(f"{type(self).__name__}: weight is Gluon's global scalar weight (a number); "
                            f"got {type(weight).__name__} (use sample_weight= for per-sample weights)")
        self.weight, self.batch_axis = weight, int(batch_axis)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class GluonL2Loss(_GluonLoss):
    """``gluon.loss.L2Loss``: ``0.5 * weight * (label - pred)**2`` averaged per sample (PyTorch's
    MSELoss has no 0.5 and a global mean: 2x the gradient)."""

    def __init__(self, weight: float = 1.0, batch_axis: int = 0) -> None:
        super().__init__(weight, batch_axis)

    def __call__(self, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        return _impl(pred).gluon_l2_loss(pred, label, sample_weight, self.weight, self.batch_axis)


class GluonL1Loss(_GluonLoss):
    """``gluon.loss.L1Loss``: ``|label - pred|`` averaged per sample."""

    def __init__(self, weight: Optional[float] = None, batch_axis: int = 0) -> None:
        super().__init__(weight, batch_axis)

    def __call__(self, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        return _impl(pred).gluon_l1_loss(pred, label, sample_weight, self.weight, self.batch_axis)


class GluonHuberLoss(_GluonLoss):
    """``gluon.loss.HuberLoss(rho)``: PyTorch's ``SmoothL1Loss(beta=rho)``, averaged per sample."""

    def __init__(self, rho: float = 1.0, weight: Optional[float] = None, batch_axis: int = 0) -> None:
        super().__init__(weight, batch_axis)
        self.rho = float(rho)

    def __call__(self, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        return _impl(pred).gluon_huber_loss(pred, label, sample_weight, self.rho, self.weight, self.batch_axis)


class GluonSigmoidBCELoss(_GluonLoss):
    """``gluon.loss.SigmoidBinaryCrossEntropyLoss``: per-sample mean; ``from_sigmoid=True`` uses
    Gluon's ``log(p + 1e-12)`` (PyTorch's BCELoss clamps the log at -100 instead)."""

    def __init__(self, from_sigmoid: bool = False, weight: Optional[float] = None, batch_axis: int = 0) -> None:
        super().__init__(weight, batch_axis)
        self.from_sigmoid = bool(from_sigmoid)

    def __call__(self, pred: Any, label: Any, sample_weight: Any = None, pos_weight: Any = None) -> Any:
        return _impl(pred).gluon_sigmoid_bce_loss(pred, label, sample_weight, pos_weight, self.from_sigmoid,
                                                  self.weight, self.batch_axis)


class GluonSoftmaxCrossEntropyLoss(_GluonLoss):
    """``gluon.loss.SoftmaxCrossEntropyLoss``: classes on ``axis`` (default last), per-sample mean
    over the other non-batch axes; ``sparse_label=False`` takes probabilities; ``from_logits=True``
    means the input already *is* log-probabilities (not raw logits)."""

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: Optional[float] = None, batch_axis: int = 0) -> None:
        super().__init__(weight, batch_axis)
        self.axis, self.sparse_label, self.from_logits = int(axis), bool(sparse_label), bool(from_logits)

    def __call__(self, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        return _impl(pred).gluon_softmax_ce_loss(pred, label, sample_weight, self.axis, self.sparse_label,
                                                 self.from_logits, self.weight, self.batch_axis)


class GluonCTCLoss(_GluonLoss):
    """``gluon.loss.CTCLoss``: raw activations (softmax applied inside) in ``layout`` 'NTC' or 'TNC',
    blank = the last class, labels padded with -1, per-sample sums (no division by label length),
    0 for infeasible alignments."""

    def __init__(self, layout: str = "NTC", label_layout: str = "NT", weight: Optional[float] = None) -> None:
        if layout not in ("NTC", "TNC"):
            raise ValueError(f"GluonCTCLoss: layout must be 'NTC' or 'TNC', got {layout!r}")
        if label_layout not in ("NT", "TN"):
            raise ValueError(f"GluonCTCLoss: label_layout must be 'NT' or 'TN', got {label_layout!r}")
        super().__init__(weight, label_layout.find("N"))
        self.layout, self.label_layout = layout, label_layout

    def __call__(self, pred: Any, label: Any, pred_lengths: Any = None, label_lengths: Any = None,
                 sample_weight: Any = None) -> Any:
        return _impl(pred).gluon_ctc_loss(pred, label, pred_lengths, label_lengths, sample_weight,
                                          self.layout, self.label_layout, self.weight)
