"""``mx.metric`` evaluation metrics as plain torch code, with MXNet 1.9.1's API (``update(labels,
preds)``, ``get() -> (name, value)``, ``reset``, ``reset_local``, ``get_global``) and its
accounting, which differs from torchmetrics: MAE/MSE/RMSE average *per batch* (the mean of
batch means, not of samples), RMSE is the mean of per-batch RMSEs, ``Loss`` divides the summed
loss by the number of elements, ``F1(average='macro')`` averages per-``update`` F1 scores, and
``CrossEntropy`` adds ``eps`` to the picked probability. Values are computed in the inputs'
dtype as MXNet does (numpy on float32 arrays)."""
from __future__ import annotations

import math
from typing import Any, List, Sequence, Tuple

import torch


def _as_list(x: Any) -> List[torch.Tensor]:
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    return [t if isinstance(t, torch.Tensor) else torch.as_tensor(t) for t in items]


def _pairs(labels: Any, preds: Any) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    labels, preds = _as_list(labels), _as_list(preds)
    if len(labels) != len(preds):
        raise ValueError(f"Shape of labels {len(labels)} does not match shape of predictions "
                         f"{len(preds)}")
    return [(a.detach().cpu(), b.detach().cpu()) for a, b in zip(labels, preds)]


def _as_column(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape[0], 1) if x.dim() == 1 else x


class EvalMetric:
    """Base class: ``sum_metric / num_inst`` (and the same for the global counters)."""

    def __init__(self, name: str):
        self.name = str(name)
        self.reset()

    def update(self, labels: Any, preds: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def reset(self) -> None:
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self) -> None:
        self.num_inst = 0
        self.sum_metric = 0.0

    def _add(self, value: float, count: int) -> None:
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count

    def get(self) -> Tuple[str, float]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self) -> Tuple[str, float]:
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.global_sum_metric / self.global_num_inst)

    def get_name_value(self) -> List[Tuple[str, float]]:
        name, value = self.get()
        if not isinstance(name, list):
            name, value = [name], [value]
        return list(zip(name, value))

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"


class CompositeEvalMetric(EvalMetric):
    """``mx.metric.CompositeEvalMetric``: ``get()`` returns ``([names], [values])``."""

    def __init__(self, metrics: Sequence[EvalMetric] = (), name: str = "composite"):
        self.metrics = list(metrics)
        super().__init__(name)

    def add(self, metric: EvalMetric) -> None:
        self.metrics.append(metric)

    def update(self, labels: Any, preds: Any) -> None:
        for m in self.metrics:
            m.update(labels, preds)

    def reset(self) -> None:
        for m in getattr(self, "metrics", []):
            m.reset()

    def reset_local(self) -> None:
        for m in self.metrics:
            m.reset_local()

    def _collect(self, use_global: bool) -> Tuple[List[str], List[float]]:
        names: List[str] = []
        values: List[float] = []
        for m in self.metrics:
            name, value = m.get_global() if use_global else m.get()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values

    def get(self) -> Tuple[List[str], List[float]]:
        return self._collect(False)

    def get_global(self) -> Tuple[List[str], List[float]]:
        return self._collect(True)


class Accuracy(EvalMetric):
    """``mx.metric.Accuracy``: argmax over ``axis`` when the prediction's shape differs from the
    label's; both are then cast to int32 (truncated) and compared element by element."""

    def __init__(self, axis: int = 1, name: str = "accuracy"):
        self.axis = axis
        super().__init__(name)

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs(labels, preds):
            if pred.shape != label.shape:
                pred = pred.argmax(dim=self.axis)
            pred = pred.to(torch.int32).flatten()
            label = label.to(torch.int32).flatten()
            if pred.numel() != label.numel():
                raise ValueError(f"Shape of labels {label.numel()} does not match shape of "
                                 f"predictions {pred.numel()}")
            self._add(int((pred == label).sum()), pred.numel())


class TopKAccuracy(EvalMetric):
    """``mx.metric.TopKAccuracy``: a sample counts when its label is among the ``top_k`` largest
    scores (``min(top_k, classes)``); the name gets ``_<k>`` appended."""

    def __init__(self, top_k: int = 1, name: str = "top_k_accuracy"):
        if top_k <= 1:
            raise ValueError("Please use Accuracy if top_k is no more than 1")
        self.top_k = top_k
        super().__init__(f"{name}_{top_k}")

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs(labels, preds):
            if pred.dim() != 2:
                raise ValueError(f"TopKAccuracy takes (batch, classes) scores, got shape "
                                 f"{tuple(pred.shape)}")
            k = min(pred.shape[1], self.top_k)
            top = pred.to(torch.float32).topk(k, dim=1).indices
            hit = (top == label.to(torch.int32).reshape(-1, 1).to(top.dtype)).sum()
            self._add(int(hit), pred.shape[0])


class _Binary:
    """True/false positive/negative counts of ``mx.metric``'s binary classification metrics."""

    def __init__(self) -> None:
        self.reset_stats()

    def update_binary_stats(self, label: torch.Tensor, pred: torch.Tensor) -> None:
        label = label.to(torch.int32).flatten()
        pred_label = pred.argmax(dim=1)
        if pred_label.numel() != label.numel():
            raise ValueError(f"Shape of labels {label.numel()} does not match shape of "
                             f"predictions {pred_label.numel()}")
        if torch.unique(label).numel() > 2:
            raise ValueError("F1 currently only supports binary classification.")
        pt, lt = pred_label == 1, label == 1
        counts = dict(tp=int((pt & lt).sum()), fp=int((pt & ~lt).sum()),
                      fn=int((~pt & lt).sum()), tn=int((~pt & ~lt).sum()))
        for k, v in counts.items():
            setattr(self, k, getattr(self, k) + v)
            setattr(self, "global_" + k, getattr(self, "global_" + k) + v)

    @staticmethod
    def _f(tp: int, fp: int, fn: int) -> float:
        precision = float(tp) / (tp + fp) if tp + fp > 0 else 0.0
        recall = float(tp) / (tp + fn) if tp + fn > 0 else 0.0
        if precision + recall > 0:
            return 2 * precision * recall / (precision + recall)
        return 0.0

    @property
    def fscore(self) -> float:
        return self._f(self.tp, self.fp, self.fn)

    @property
    def global_fscore(self) -> float:
        return self._f(self.global_tp, self.global_fp, self.global_fn)

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def global_total(self) -> int:
        return self.global_tp + self.global_fp + self.global_fn + self.global_tn

    def local_reset_stats(self) -> None:
        self.tp = self.fp = self.fn = self.tn = 0

    def reset_stats(self) -> None:
        self.local_reset_stats()
        self.global_tp = self.global_fp = self.global_fn = self.global_tn = 0


class F1(EvalMetric):
    """``mx.metric.F1`` (binary; class 1 is positive). ``average='macro'`` averages the F1 of each
    ``update`` call; ``'micro'`` computes one F1 over all samples."""

    def __init__(self, name: str = "f1", average: str = "macro"):
        self.average = average
        self.metrics = _Binary()
        super().__init__(name)

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs(labels, preds):
            self.metrics.update_binary_stats(label, pred)
        m = self.metrics
        if self.average == "macro":
            self.sum_metric += m.fscore
            self.global_sum_metric += m.global_fscore
            self.num_inst += 1
            self.global_num_inst += 1
            m.reset_stats()
        else:
            self.sum_metric = m.fscore * m.total
            self.global_sum_metric = m.global_fscore * m.global_total
            self.num_inst = m.total
            self.global_num_inst = m.global_total

    def reset(self) -> None:
        super().reset()
        if hasattr(self, "metrics"):
            self.metrics.reset_stats()

    def reset_local(self) -> None:
        super().reset_local()
        self.metrics.local_reset_stats()


class MAE(EvalMetric):
    """``mx.metric.MAE``: the mean over ``update`` batches of each batch's mean absolute error."""

    def __init__(self, name: str = "mae"):
        super().__init__(name)

    def _batch(self, label: torch.Tensor, pred: torch.Tensor) -> float:
        return float((_as_column(label) - _as_column(pred)).abs().mean())

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs(labels, preds):
            self._add(self._batch(label, pred), 1)


class MSE(MAE):
    """``mx.metric.MSE``: the mean over batches of each batch's mean squared error."""

    def __init__(self, name: str = "mse"):
        super().__init__(name)

    def _batch(self, label, pred):
        return float(((_as_column(label) - _as_column(pred)) ** 2.0).mean())


class RMSE(MAE):
    """``mx.metric.RMSE``: the mean over batches of each batch's RMSE (not the RMSE of all)."""

    def __init__(self, name: str = "rmse"):
        super().__init__(name)

    def _batch(self, label, pred):
        return float(((_as_column(label) - _as_column(pred)) ** 2.0).mean().sqrt())


class CrossEntropy(EvalMetric):
    """``mx.metric.CrossEntropy``: ``-log(p[label] + eps)`` summed over samples, divided by their
    number. Takes probabilities (after softmax), not logits."""

    def __init__(self, eps: float = 1e-12, name: str = "cross-entropy"):
        self.eps = eps
        super().__init__(name)

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs(labels, preds):
            label = label.flatten()
            if label.shape[0] != pred.shape[0]:
                raise ValueError(f"{label.shape[0]} labels for {pred.shape[0]} predictions")
            prob = pred[torch.arange(label.shape[0]), label.to(torch.int64)]
            self._add(float((-torch.log(prob + self.eps)).sum()), label.shape[0])


class NegativeLogLikelihood(CrossEntropy):
    """``mx.metric.NegativeLogLikelihood`` (same accounting as CrossEntropy)."""

    def __init__(self, eps: float = 1e-12, name: str = "nll-loss"):
        super().__init__(eps, name)


class Perplexity(EvalMetric):
    """``mx.metric.Perplexity``: ``exp`` of the mean ``-log(max(1e-10, p[label]))`` over the
    positions whose label is not ``ignore_label``."""

    def __init__(self, ignore_label: Any, axis: int = -1, name: str = "perplexity"):
        self.ignore_label = ignore_label
        self.axis = axis
        super().__init__(name)

    def update(self, labels: Any, preds: Any) -> None:
        loss, num = 0.0, 0
        for label, pred in _pairs(labels, preds):
            label = label.reshape(-1).to(pred.dtype)
            index = label.to(torch.int64)
            moved = pred.movedim(self.axis, -1)
            picked = moved.reshape(-1, moved.shape[-1]).gather(1, index.reshape(-1, 1)).reshape(-1)
            if self.ignore_label is not None:
                ignore = (label == self.ignore_label).to(picked.dtype)
                num -= int(ignore.sum())
                picked = picked * (1 - ignore) + ignore
            loss -= float(torch.log(torch.clamp(picked, min=1e-10)).sum())
            num += picked.numel()
        self._add(loss, num)

    def get(self) -> Tuple[str, float]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self) -> Tuple[str, float]:
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


class Loss(EvalMetric):
    """``mx.metric.Loss``: the sum of the given loss values divided by their number of elements
    (labels are ignored)."""

    def __init__(self, name: str = "loss"):
        super().__init__(name)

    def update(self, _: Any, preds: Any) -> None:
        for pred in _as_list(preds):
            pred = pred.detach().cpu()
            self._add(float(pred.sum()), pred.numel())
