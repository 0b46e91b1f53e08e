"""Framework-free checks of the margin losses (multi-class and multi-label margin, soft margin,
hinge embedding, multi-label soft margin) and of ``linear_cross_entropy``, shared by both adapters
so both raise the same errors (torch raises RuntimeErrors from its kernels, some of them only on
the CPU; MXNet would compute on garbage or raise asynchronously)."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..nn.checks import check_not_empty

__all__ = ["check_p", "check_weight_1d", "multi_margin_shapes", "multilabel_margin_shapes",
           "multilabel_counts", "multilabel_soft_margin_shape", "linear_ce_shapes"]

Shape = Tuple[int, ...]


def check_p(name: str, p: object) -> None:
    """torch's ``MultiMarginLoss``: ``ValueError("only p == 1 and p == 2 supported")``."""
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")


def check_weight_1d(name: str, weight: object) -> None:
    """torch's constructor check of ``MultiMarginLoss(weight=)``, the same ValueError."""
    shape = getattr(weight, "shape", None)
    if weight is not None and shape is not None and len(tuple(shape)) != 1:
        raise ValueError(f"{name}: expected weight to be None or 1D tensor, got {len(tuple(shape))}D instead")


def multi_margin_shapes(name: str, input_shape: Shape, target_shape: Shape,
                        weight_shape: Optional[Shape]) -> int:
    """``multi_margin_loss``: input (N, C), unbatched (C,) or 0-d (one class), target (N,), or () /
    (1,) unbatched. Returns C."""
    ishape, tshape = tuple(input_shape), tuple(target_shape)
    if len(ishape) > 2:
        raise ValueError(f"{name}: input must be (N, C), unbatched (C,) or 0-d; got {ishape}")
    check_not_empty(name, ishape)
    C = ishape[-1] if ishape else 1
    expected = ((ishape[0],),) if len(ishape) == 2 else ((), (1,))
    if tshape not in expected:
        raise ValueError(f"{name}: input of shape {ishape} expects class indices of shape "
                         f"{' or '.join(map(str, expected))}; got target of shape {tshape}")
    if weight_shape is not None and tuple(weight_shape) != (C,):
        raise ValueError(f"{name}: weight must have shape ({C},) (one entry per class), got {tuple(weight_shape)}")
    return C


def multilabel_margin_shapes(name: str, input_shape: Shape, target_shape: Shape) -> int:
    """``multilabel_margin_loss``: input (N, C), unbatched (C,) or 0-d; target of the input's shape."""
    ishape, tshape = tuple(input_shape), tuple(target_shape)
    if len(ishape) > 2:
        raise ValueError(f"{name}: input must be (N, C), unbatched (C,) or 0-d; got {ishape}")
    check_not_empty(name, ishape)
    if tshape != ishape:
        raise ValueError(f"{name}: target must have the input's shape {ishape} (class indices, each row "
                         f"ended by the first negative entry); got {tshape}")
    return ishape[-1] if ishape else 1


def multilabel_counts(name: str, target: np.ndarray, C: int) -> np.ndarray:
    """torch's multi-label targets: each row's class indices up to its first negative entry.
    Returns (rows, C) float counts, how often each class is listed (torch counts a class listed
    twice twice). Indices must be integers below C (IndexError: torch raises a RuntimeError)."""
    t = np.asarray(target)
    if t.dtype.kind == "f":
        if not np.all(np.isfinite(t) & (t == np.floor(t))):
            raise ValueError(f"{name}: targets must be integer class indices")
    elif t.dtype.kind not in "iub":
        raise TypeError(f"{name}: targets must be an integer (or integral float) tensor, got dtype {t.dtype}")
    t = t.astype(np.int64).reshape(-1, C)
    listed = np.cumprod(t >= 0, axis=1).astype(bool)         # before the row's first negative entry
    bad = listed & (t >= C)
    if bad.any():
        raise IndexError(f"{name}: target class indices must lie in [0, {C}) (a negative entry ends a row); "
                         f"found {np.unique(t[bad])[:5].tolist()}")
    counts = np.zeros(t.shape, np.float64)
    rows = np.nonzero(listed)
    np.add.at(counts, (rows[0], t[rows]), 1.0)
    return counts


def multilabel_soft_margin_shape(name: str, input_shape: Shape, target_shape: Shape) -> int:
    """``multilabel_soft_margin_loss``: the class axis is the last one (so a 0-d input is refused,
    torch raises an IndexError); target of the input's shape. Returns C."""
    ishape = tuple(input_shape)
    if not ishape:
        raise ValueError(f"{name}: input needs a class axis (its last one); got a 0-d input")
    check_not_empty(name, ishape)
    if tuple(target_shape) != ishape:
        raise ValueError(f"{name}: input shape {ishape} and target shape {tuple(target_shape)} differ; dualdl "
                         f"requires identical shapes and never broadcasts a loss")
    return ishape[-1]


def linear_ce_shapes(name: str, input_shape: Shape, in_features: int, num_classes: int,
                     out_features: Shape, target_shape: Shape, ignore_index: Optional[int]) -> Tuple[str, Shape]:
    """``linear_cross_entropy``'s rules: input (in_features,) or (N, in_features), K-dimensional
    ``out_features`` only batched; the target holds probabilities when it has the logits' shape
    (then ``ignore_index`` must be None), else class indices ((1,) too for an unbatched input).
    Returns (kind, logits shape)."""
    ishape, tshape = tuple(input_shape), tuple(target_shape)
    if len(ishape) not in (1, 2) or ishape[-1] != in_features:
        raise ValueError(f"{name}: expected input of shape ({in_features},) or (N, {in_features}), got {ishape}")
    check_not_empty(name, ishape)
    if out_features and len(ishape) == 1:
        raise ValueError(f"{name}: out_features={tuple(out_features)} (a K-dimensional loss) needs a batched "
                         f"input (N, {in_features}); got {ishape}")
    logits = ishape[:-1] + (num_classes,) + tuple(out_features)
    if tshape == logits:
        if ignore_index is not None:
            raise ValueError(f"{name}: ignore_index={ignore_index} cannot be specified when the target holds "
                             f"class probabilities (target of the logits' shape {logits})")
        return "prob", logits
    index = ishape[:-1] + tuple(out_features)
    if tshape != index and not (len(ishape) == 1 and tshape == (1,)):      # MXNet has no 0-d arrays
        raise ValueError(f"{name}: expected class indices of shape {index} or class probabilities of shape "
                         f"{logits}; got target of shape {tshape}")
    return "index", logits
