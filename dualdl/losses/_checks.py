"""Framework-free argument checks shared by both loss adapters, so both raise the same errors.

Targets and lengths are checked on host copies (numpy): they are small integer arrays, and a
host check is the only way to turn MXNet's silent index clipping (and its asynchronous errors)
into the same synchronous exception PyTorch users expect.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from ..nn.checks import check_not_empty

__all__ = [
    "REDUCTIONS", "check_reduction", "check_same_shape", "check_broadcast", "check_same_size", "class_target_kind",
    "check_class_indices", "check_class_weight", "CTCPlan", "plan_ctc", "ctc_feasible", "gluon_ctc_lengths",
    "check_no_legacy", "check_elementwise_weight", "check_probabilities", "check_same_shapes",
    "check_cosine_shapes", "check_margin", "check_positive", "gaussian_var_shape", "check_var_nonnegative",
]

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(name: str, reduction: str, allowed: Sequence[str] = REDUCTIONS) -> str:
    if reduction not in allowed:
        raise ValueError(f"{name}: reduction must be one of {', '.join(map(repr, allowed))}, "
                         f"got {reduction!r}")
    return reduction


def check_same_shape(name: str, input_shape: Tuple[int, ...], target_shape: Tuple[int, ...]) -> None:
    """Reject mismatched shapes instead of broadcasting (PyTorch broadcasts a (N,1) prediction
    against a (N,) target to N x N with only a warning; Gluon reshapes the label)."""
    if tuple(input_shape) != tuple(target_shape):
        hint = ""
        if len(input_shape) == len(target_shape) + 1 and input_shape[-1] == 1 \
                and tuple(input_shape[:-1]) == tuple(target_shape):
            hint = " (squeeze the prediction's last axis, e.g. input.reshape(-1))"
        elif len(target_shape) == len(input_shape) + 1 and target_shape[-1] == 1 \
                and tuple(target_shape[:-1]) == tuple(input_shape):
            hint = " (squeeze the target's last axis)"
        raise ValueError(f"{name}: input shape {tuple(input_shape)} and target shape "
                         f"{tuple(target_shape)} differ; dualdl requires identical shapes and never "
                         f"broadcasts a loss{hint}")


def check_broadcast(name: str, what: str, shape: Tuple[int, ...], to: Tuple[int, ...]) -> None:
    """``shape`` must broadcast (numpy rules) to exactly ``to``: checked here because MXNet reports
    a bad broadcast asynchronously, and a weight must never enlarge the loss."""
    try:
        ok = np.broadcast_shapes(tuple(shape), tuple(to)) == tuple(to)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: {what} of shape {tuple(shape)} does not broadcast to the loss's shape "
                         f"{tuple(to)}")


def check_same_size(name: str, pred_shape: Tuple[int, ...], label_shape: Tuple[int, ...]) -> None:
    """Gluon's rule: the label is reshaped to the prediction's shape, so the sizes must match."""
    if int(np.prod(pred_shape, dtype=np.int64)) != int(np.prod(label_shape, dtype=np.int64)):
        raise ValueError(f"{name}: label shape {tuple(label_shape)} has a different number of elements "
                         f"than pred shape {tuple(pred_shape)}; Gluon reshapes the label to the "
                         f"prediction's shape, so their sizes must be equal")


def class_target_kind(name: str, input_shape: Tuple[int, ...], target_shape: Tuple[int, ...],
                      allow_prob: bool = True, ignore_index: int = -100) -> str:
    """'prob' (target has the input's shape) or 'index' (the input's shape without the class axis 1,
    or () / (1,) for an unbatched (C,) input). Anything else is an error, and so is a probability
    target with an ``ignore_index`` other than -100 (torch 2.13 raises a RuntimeError there)."""
    ishape, tshape = tuple(input_shape), tuple(target_shape)
    if len(ishape) == 0:
        raise ValueError(f"{name}: input must have a class axis: (C,), (N, C) or (N, C, d1, ...); got ()")
    check_not_empty(name, ishape)
    if allow_prob and tshape == ishape:
        if ignore_index != -100:
            raise ValueError(f"{name}: ignore_index={ignore_index} is not supported for class-probability "
                             f"targets (target of the input's shape {ishape}); torch refuses it too")
        return "prob"
    expected = ((), (1,)) if len(ishape) == 1 else ((ishape[0],) + ishape[2:],)
    if tshape in expected:
        return "index"
    what = "class indices of shape " + " or ".join(str(e) for e in expected)
    if allow_prob:
        what += f", or class probabilities of shape {ishape}"
    raise ValueError(f"{name}: input of shape {ishape} (class axis {0 if len(ishape) == 1 else 1}) "
                     f"expects {what}; got target of shape {tshape}")


def check_class_indices(name: str, target: np.ndarray, num_classes: int,
                        ignore_index: Optional[int] = None) -> np.ndarray:
    """Class indices must be integers in [0, C) (or ``ignore_index``). MXNet's ``pick`` clips an
    out-of-range label to 0 or C-1 silently, PyTorch raises: dualdl raises IndexError on both."""
    t = np.asarray(target)
    if t.dtype.kind == "f":
        nonint = np.isfinite(t) & (t != np.floor(t)) | ~np.isfinite(t)
        if nonint.any():
            raise ValueError(f"{name}: class-index targets must be integers; found "
                             f"{t[nonint].ravel()[0]!r}")
    elif t.dtype.kind not in "iub":
        raise TypeError(f"{name}: class-index targets must be an integer (or integral float) tensor, "
                        f"got dtype {t.dtype}")
    ti = t.astype(np.int64)
    bad = (ti < 0) | (ti >= num_classes)
    if ignore_index is not None:
        bad &= ti != ignore_index
    if bad.any():
        vals = np.unique(ti[bad])[:5].tolist()
        ign = f" or ignore_index={ignore_index}" if ignore_index is not None else ""
        raise IndexError(f"{name}: target class indices must lie in [0, {num_classes}){ign}; found "
                         f"{vals} ({int(bad.sum())} bad entries). MXNet would silently clip them")
    return ti


def check_class_weight(name: str, shape: Tuple[int, ...], num_classes: int, what: str = "weight") -> None:
    if tuple(shape) != (num_classes,):
        raise ValueError(f"{name}: {what} must have shape ({num_classes},) (one entry per class), "
                         f"got {tuple(shape)}")


def check_no_legacy(name: str, size_average: object, reduce: object) -> None:
    if size_average is not None or reduce is not None:
        raise ValueError(f"{name}: size_average and reduce are deprecated in PyTorch and not supported; "
                         f"use reduction='mean'|'sum'|'none'")


def check_elementwise_weight(name: str, weight_shape: Tuple[int, ...], input_shape: Tuple[int, ...]) -> None:
    """torch 2.13's ``weight=`` of mse/l1/huber_loss: one weight per element, no broadcasting."""
    if tuple(weight_shape) != tuple(input_shape):
        raise ValueError(f"{name}: weight must have the input's shape {tuple(input_shape)} (one weight per "
                         f"element, as torch requires), got {tuple(weight_shape)}")


def check_probabilities(name: str, lo: float, hi: float) -> None:
    """BCELoss's input must be probabilities: torch raises a RuntimeError from its kernel, MXNet
    would return NaN; dualdl raises ValueError on both (``lo``/``hi``: the input's min and max)."""
    if not (lo >= 0.0 and hi <= 1.0):
        raise ValueError(f"{name}: all elements of input must be probabilities in [0, 1] (apply sigmoid "
                         f"first, or use BCEWithLogitsLoss); found values in [{lo:.4g}, {hi:.4g}]")


def check_same_shapes(name: str, what: Sequence[str], shapes: Sequence[Tuple[int, ...]],
                      min_ndim: int = 0) -> None:
    """Every tensor of a pairwise/triplet loss has the same shape (torch broadcasts tensors of equal
    ndim; dualdl never broadcasts a loss)."""
    shapes = [tuple(s) for s in shapes]
    for s in shapes:
        check_not_empty(name, s)
    if len(set(shapes)) != 1:
        got = ", ".join(f"{w} {s}" for w, s in zip(what, shapes))
        raise ValueError(f"{name}: {', '.join(what)} must have identical shapes (dualdl never broadcasts "
                         f"a loss); got {got}")
    if len(shapes[0]) < min_ndim:
        raise ValueError(f"{name}: inputs need at least {min_ndim} dimension(s), got shape {shapes[0]}")


def check_cosine_shapes(name: str, s1: Tuple[int, ...], s2: Tuple[int, ...], st: Tuple[int, ...]) -> None:
    """CosineEmbeddingLoss: inputs (N, D) with target (N,), or unbatched (D,) with target ()
    (MXNet has no 0-d arrays: (1,) too)."""
    s1, s2, st = tuple(s1), tuple(s2), tuple(st)
    if len(s1) not in (1, 2):
        raise ValueError(f"{name}: inputs must be (N, D) or unbatched (D,), got {s1}")
    check_same_shapes(name, ("input1", "input2"), (s1, s2))
    expected = ((), (1,)) if len(s1) == 1 else ((s1[0],),)
    if st not in expected:
        raise ValueError(f"{name}: inputs of shape {s1} expect a target of shape "
                         f"{' or '.join(map(str, expected))} (1 or -1 per pair), got {st}")


def check_margin(name: str, margin: float) -> None:
    if not margin > 0:
        raise ValueError(f"{name}: margin must be greater than 0, got {margin}")


def check_positive(name: str, what: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name}: {what} must be > 0, got {value}")


def gaussian_var_shape(name: str, input_shape: Tuple[int, ...], var_shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """torch's ``gaussian_nll_loss`` rules for ``var``: the input's shape (heteroscedastic); the
    input's shape without its last axis (unsqueezed there); or the input's ndim with exactly one
    axis of size 1 where the input's differs (homoscedastic). Returns the shape to use."""
    ishape, vshape = tuple(input_shape), tuple(var_shape)
    if vshape == ishape:
        return vshape
    if ishape[:-1] == vshape:
        return vshape + (1,)
    if len(ishape) == len(vshape) and sum(v for i, v in zip(ishape, vshape) if i != v) == 1:
        return vshape
    raise ValueError(f"{name}: var of shape {vshape} does not fit the input's shape {ishape}: expected "
                     f"{ishape}, {ishape[:-1]}, or {ishape} with one axis of size 1")


def check_var_nonnegative(name: str, lowest: float) -> None:
    if not lowest >= 0:
        raise ValueError(f"{name}: var has negative entry/entries (smallest {lowest:.4g})")


# ---- CTC --------------------------------------------------------------------------------------
class CTCPlan:
    """Validated CTC inputs on host: padded labels (N, L), lengths, and which samples are feasible."""

    def __init__(self, labels: np.ndarray, input_lengths: np.ndarray, target_lengths: np.ndarray,
                 feasible: np.ndarray, batched: bool):
        self.labels, self.input_lengths, self.target_lengths = labels, input_lengths, target_lengths
        self.feasible, self.batched = feasible, batched


def _as_lengths(name: str, what: str, x: np.ndarray, n: int) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind == "f":
        if not np.all(a == np.floor(a)):
            raise ValueError(f"{name}: {what} must be integers, got {a.tolist()}")
    elif a.dtype.kind not in "iu":
        raise TypeError(f"{name}: {what} must be integers, got dtype {a.dtype}")
    a = a.astype(np.int64).reshape(-1)
    if a.shape != (n,):
        raise ValueError(f"{name}: {what} must hold one length per sample ({n}), got shape {a.shape}")
    if (a < 0).any():
        raise ValueError(f"{name}: {what} must be >= 0, got {a.tolist()}")
    return a


def plan_ctc(name: str, lp_shape: Tuple[int, ...], targets: np.ndarray, input_lengths: np.ndarray,
             target_lengths: np.ndarray, blank: int) -> CTCPlan:
    """PyTorch's CTC conventions: log_probs (T, N, C) or unbatched (T, C); targets padded (N, S)
    or concatenated 1-D (sum(target_lengths)); labels in [0, C) and never ``blank``.

    A sample is infeasible when ``input_length < target_length + repeats`` (each repeated label
    needs a blank between): PyTorch gives inf there, MXNet 0."""
    if len(lp_shape) not in (2, 3):
        raise ValueError(f"{name}: log_probs must be (T, N, C) or unbatched (T, C), got {tuple(lp_shape)}")
    batched = len(lp_shape) == 3
    T, C = lp_shape[0], lp_shape[-1]
    N = lp_shape[1] if batched else 1
    if not 0 <= blank < C:
        raise ValueError(f"{name}: blank={blank} must lie in [0, C={C})")
    il = _as_lengths(name, "input_lengths", input_lengths, N)
    tl = _as_lengths(name, "target_lengths", target_lengths, N)
    if (il > T).any():
        raise ValueError(f"{name}: input_lengths {il.tolist()} exceed the number of frames T={T}")
    tg = np.asarray(targets)
    if tg.dtype.kind == "f":
        if not np.all(np.isfinite(tg) & (tg == np.floor(tg))):
            raise ValueError(f"{name}: targets must be integer class labels")
    elif tg.dtype.kind not in "iu":
        raise TypeError(f"{name}: targets must be integers, got dtype {tg.dtype}")
    tg = tg.astype(np.int64)
    if not batched:
        tg = tg.reshape(1, -1)
    L = int(tl.max()) if N else 0
    labels = np.zeros((N, max(L, 1)), np.int64)
    if tg.ndim == 2 and (tg.shape[0] == N or not batched):
        if tl.max(initial=0) > tg.shape[1]:
            raise ValueError(f"{name}: target_lengths {tl.tolist()} exceed the padded targets' width "
                             f"{tg.shape[1]}")
        for i in range(N):
            labels[i, :tl[i]] = tg[i, :tl[i]]
    elif tg.ndim == 1 and batched:
        if tg.shape[0] != int(tl.sum()):
            raise ValueError(f"{name}: concatenated 1-D targets must have sum(target_lengths)="
                             f"{int(tl.sum())} entries, got {tg.shape[0]}")
        off = np.concatenate([[0], np.cumsum(tl)])
        for i in range(N):
            labels[i, :tl[i]] = tg[off[i]:off[i + 1]]
    else:
        raise ValueError(f"{name}: targets must be padded (N={N}, S) or concatenated 1-D; got shape "
                         f"{tuple(np.asarray(targets).shape)}")
    valid = np.arange(labels.shape[1])[None, :] < tl[:, None]
    bad = valid & ((labels < 0) | (labels >= C) | (labels == blank))
    if bad.any():
        raise IndexError(f"{name}: target labels must lie in [0, {C}) and differ from blank={blank}; "
                         f"found {np.unique(labels[bad])[:5].tolist()}")
    return CTCPlan(labels, il, tl, ctc_feasible(labels, il, tl), batched)


def ctc_feasible(labels: np.ndarray, input_lengths: np.ndarray, target_lengths: np.ndarray) -> np.ndarray:
    """Whether each sample has an alignment: ``input_length >= target_length + repeats`` (a blank
    must separate repeated labels). PyTorch gives inf otherwise; MXNet's op gives 0 and leaves the
    gradient of that sample uninitialised (measured up to 1e15), so dualdl masks it on both."""
    labels = np.asarray(labels)
    valid = np.arange(labels.shape[1])[None, :] < target_lengths[:, None]
    repeats = (valid[:, 1:] & (labels[:, 1:] == labels[:, :-1])).sum(1) if labels.shape[1] > 1 \
        else np.zeros(len(target_lengths), np.int64)
    return input_lengths >= target_lengths + repeats


def gluon_ctc_lengths(name: str, label: np.ndarray, label_lengths: Optional[np.ndarray],
                      pred_lengths: Optional[np.ndarray], T: int,
                      C: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gluon's CTCLoss conventions (blank = C-1, labels padded with -1, a label's length is the
    position of its first -1 unless ``label_lengths`` is given). Returns (labels, pred_len, label_len)."""
    lab = np.asarray(label)
    if lab.ndim != 2:
        raise ValueError(f"{name}: label must be 2-D (N, S) (after label_layout), got shape {lab.shape}")
    N, S = lab.shape
    if S > T:
        raise ValueError(f"{name}: padded label width {S} exceeds the sequence length T={T} "
                         f"(MXNet's CTCLoss rejects this)")
    if label_lengths is None:
        pad = lab == -1
        ll = np.where(pad.any(1), pad.argmax(1), S).astype(np.int64)
    else:
        ll = _as_lengths(name, "label_lengths", label_lengths, N)
        if (ll > S).any():
            raise ValueError(f"{name}: label_lengths {ll.tolist()} exceed the label width {S}")
    pl = np.full(N, T, np.int64) if pred_lengths is None else _as_lengths(name, "pred_lengths", pred_lengths, N)
    if (pl > T).any():
        raise ValueError(f"{name}: pred_lengths {pl.tolist()} exceed the sequence length T={T}")
    valid = np.arange(S)[None, :] < ll[:, None]
    if lab.dtype.kind == "f" and not np.all(lab[valid] == np.floor(lab[valid])):
        raise ValueError(f"{name}: labels must be integers")
    li = lab.astype(np.int64)
    bad = valid & ((li < 0) | (li >= C - 1))
    if bad.any():
        raise IndexError(f"{name}: labels must lie in [0, {C - 1}) (blank is the last class, {C - 1}); "
                         f"found {np.unique(li[bad])[:5].tolist()}")
    return np.where(valid, li, 0), pl, ll


def check_log_probs_deviation(name: str, worst: float, half: bool) -> None:
    """CTC inputs must be log-probabilities (MXNet's op applies softmax itself, torch's does not,
    so raw scores would silently give different numbers): ``worst`` is the largest |logsumexp|
    over the valid frames."""
    tol = 1e-2 if half else 1e-3
    if not worst <= tol:
        raise ValueError(f"{name}: log_probs must be log-probabilities over the class axis (apply "
                         f"log_softmax(dim=-1) first); logsumexp deviates from 0 by {worst:.3g}")
