"""dualdl losses on MXNet NDArrays with PyTorch's meanings, and Gluon's own per-sample losses.

Differences hidden here (measured in docs/losses.md and the reference notes, section 1):
- reductions: Gluon losses return per-sample (N,) means (L2 with a 0.5 factor); the torch-named
  losses here reduce like PyTorch ('mean' over every element, class-weighted mean for NLL/CE,
  per-target-length mean for CTC). MXNet has no 0-d arrays: a reduced loss has shape (1,);
- class axis 1 for (N, C, d1, ...) inputs (Gluon's default is the last axis);
- ``ignore_index``, class ``weight`` and ``label_smoothing`` (Gluon has none of them);
- out-of-range class indices raise IndexError (``pick`` clips them silently);
- CTC: any ``blank`` (the op only knows 'first'/'last'), log-probs input (T, N, C), padded or
  concatenated targets, inf for infeasible alignments unless ``zero_infinity`` (MXNet gives 0).
CTC and the Gluon losses here accept NDArrays only (their checks need values); a Symbol
(hybridized forward) gets a TypeError. Cross-entropy and NLL also run on Symbols (class-index
targets). The losses of ``losses_symbolic`` (BCE, margin ranking, cosine embedding, triplet,
Poisson and Gaussian NLL), ``losses_elementwise`` (MSE, L1, smooth L1, Huber, BCE with logits,
KL divergence) and ``losses_margin`` (multi-class/multi-label/soft margin, hinge embedding,
linear cross-entropy) are written once for NDArrays and Symbols and re-exported here.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

from dualdl.losses import _checks as ck

from .fast import compiled
from .fast.host import host_array
from .ops import _log_softmax_formula, log_softmax_kernel
from .losses_symbolic import (binary_cross_entropy, cosine_embedding_loss, gaussian_nll_loss,  # noqa: F401
                              margin_ranking_loss, poisson_nll_loss, triplet_margin_loss)
from .losses_elementwise import (binary_cross_entropy_with_logits, huber_loss, kl_div, l1_loss,  # noqa: F401
                                 mse_loss, smooth_l1_loss)

__all__ = [
    "reduce", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits",
    "kl_div", "nll_loss", "cross_entropy", "ctc_loss", "binary_cross_entropy", "margin_ranking_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
    "gluon_l2_loss", "gluon_l1_loss", "gluon_huber_loss", "gluon_sigmoid_bce_loss",
    "gluon_softmax_ce_loss", "gluon_ctc_loss", "multi_margin_loss", "multilabel_margin_loss", "soft_margin_loss",
    "multilabel_soft_margin_loss", "hinge_embedding_loss", "linear_cross_entropy", "loss_modules",
]


# ---- conversions --------------------------------------------------------------------------------
def _require_nd(name: str, x: Any) -> nd.NDArray:
    if isinstance(x, mx.sym.Symbol):
        raise TypeError(f"{name}: dualdl losses on MXNet need NDArrays (they check shapes and label "
                        f"values); got a Symbol: compute the loss outside the hybridized block")
    if not isinstance(x, nd.NDArray):
        raise TypeError(f"{name}: expected an mxnet NDArray input, got {type(x).__name__}")
    return x


def _host(x: Any) -> np.ndarray:
    if isinstance(x, nd.NDArray):
        return x.asnumpy()
    if hasattr(x, "detach"):                          # a torch tensor
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _native(x: Any, like: nd.NDArray) -> Optional[nd.NDArray]:
    """``x`` as an NDArray in ``like``'s context and dtype (an NDArray keeps its autograd history)."""
    if x is None:
        return None
    if isinstance(x, nd.NDArray):
        if x.context != like.context:
            x = x.as_in_context(like.context)
        return x if x.dtype == like.dtype else x.astype(like.dtype)
    a = np.array(_host(x), dtype=like.dtype, ndmin=1)     # MXNet 1.x has no 0-d arrays
    return host_array(a, like.context, like.dtype)


def _const(a: np.ndarray, like: nd.NDArray, dtype=None) -> nd.NDArray:
    return host_array(a, like.context, dtype or like.dtype)


def _bcast(w: nd.NDArray, ndim: int) -> nd.NDArray:
    """Right-align ``w``'s axes with an ndim-D array (numpy broadcasting; MXNet wants equal ndim)."""
    return w.reshape((1,) * (ndim - w.ndim) + w.shape) if w.ndim < ndim else w


def reduce(loss: nd.NDArray, reduction: str) -> nd.NDArray:
    """PyTorch's reduction: 'mean' over all elements, 'sum', or 'none' (unchanged)."""
    ck.check_reduction("reduce", reduction)
    if reduction == "mean":
        return nd.mean(loss)
    if reduction == "sum":
        return nd.sum(loss)
    return loss


# ---- classification -----------------------------------------------------------------------------
def _class_setup(name, input, target, weight, ignore_index, allow_prob=True):
    _require_nd(name, input)
    ishape = input.shape
    tshape = tuple(target.shape) if hasattr(target, "shape") else np.shape(target)
    kind = ck.class_target_kind(name, ishape, tshape, allow_prob, ignore_index)
    C = ishape[0 if len(ishape) == 1 else 1]
    if weight is not None:
        weight = _native(weight, input)
        ck.check_class_weight(name, weight.shape, C)
    if kind == "prob":
        return kind, input, _native(target, input), weight, C
    x = input.reshape((1, C)) if len(ishape) == 1 else input
    t = ck.check_class_indices(name, _host(target), C, ignore_index)
    t = t.reshape((1,)) if len(ishape) == 1 else t
    return kind, x, _Targets(t, target, tshape, ignore_index, input), weight, C


class _Targets:
    """Host-checked class indices, plus the device array to pick with: the caller's target
    NDArray itself when it is on the input's context and nothing is ignored (no copy back to the
    device each call), else the checked indices with ignored entries set to 0."""

    def __init__(self, t: np.ndarray, target: Any, tshape: Tuple[int, ...], ignore_index: int,
                 like: nd.NDArray):
        self.host = t
        self.valid = t != ignore_index
        self.all_valid = bool(self.valid.all())
        if self.all_valid and isinstance(target, nd.NDArray) and target.context == like.context \
                and target.stype == "default" and target.dtype != np.bool_:     # pick refuses bool
            self.index = target.reshape(t.shape) if tshape != t.shape else target
        else:
            self.index = _const(np.where(self.valid, t, 0).astype(np.int32), like, "int32")

    def mask(self, like: nd.NDArray) -> Optional[nd.NDArray]:
        """1 where the target counts, 0 where it is ``ignore_index``; None when all count."""
        return None if self.all_valid else _const(self.valid.astype(np.float32), like)


def _class_loss_formula(F, x, index=None, prob=None, mask=None, weight=None, *, from_logits: bool,
                        reduction: str, smoothing: float, wshape: Tuple[int, ...], count: int,
                        kernel: bool = False, leaf: bool = False):
    """PyTorch's ``cross_entropy`` / ``nll_loss`` (aten LossNLL.cpp), term by term, class axis 1
    (``x`` is at least 2-D). Written once for ``F`` = nd or sym; run compiled (one call).
    ``kernel``/``leaf``: how the log-softmax runs (:func:`dualdl_mx.ops.log_softmax_kernel`).
    ``wshape[1] == -1``: the number of classes is unknown (Symbols), smoothing averages over axis 1."""
    # log-softmax from its formula (dualdl.ops.log_softmax's): MXNet's op is biased (see there)
    logp = _log_softmax_formula(F, x, dim=1, kernel=kernel, leaf=leaf) if from_logits else x
    C = wshape[1]
    wb = None if weight is None else F.reshape(weight, shape=wshape)
    if prob is not None:
        t = prob * (1 - smoothing) + smoothing / C if smoothing > 0 else prob
        prod = logp * t if wb is None else F.broadcast_mul(logp * t, wb)
        if reduction == "none":
            return -F.sum(prod, axis=1)
        total = -F.sum(prod)
        return total if reduction == "sum" else total / count
    # per-element weights w[t] (0 where ignored); None when every weight is 1
    w = mask
    if weight is not None:
        wt = F.take(weight, index)
        w = wt if w is None else w * wt
    picked = F.pick(logp, index, axis=1)
    el = -picked if w is None else -picked * w
    nll = _reduce_weighted(F, el, w, reduction, count)
    if smoothing <= 0:
        return nll
    wlogp = logp if wb is None else F.broadcast_mul(logp, wb)
    smooth = -F.sum(wlogp, axis=1) if C > 0 else -F.mean(wlogp, axis=1)
    if mask is not None:
        smooth = smooth * mask
    smooth = _reduce_weighted(F, smooth, w, reduction, count)
    return (1 - smoothing) * nll + smooth * (smoothing / C if C > 0 else smoothing)


def _reduce_weighted(F, el, w, reduction: str, count: int):
    """'none' / 'sum' / torch's weighted 'mean': ``sum(el) / sum(w)``, or ``/ count`` for unit weights."""
    if reduction == "none":
        return el
    if reduction == "sum":
        return F.sum(el)
    if w is None:
        return F.sum(el) / count
    # torch: NaN when every weight is 0 (all targets ignored), with zero gradients (0/0 would give
    # NaN gradients): divide by 1 there and add a NaN that carries no gradient
    total = F.sum(w)
    none_kept = total == 0
    safe = F.where(none_kept, F.ones_like(total), total)
    nan = F.BlockGrad(F.where(none_kept, F.ones_like(total) * float("nan"), F.zeros_like(total)))
    return F.broadcast_div(F.sum(el), safe) + nan


def _class_loss_symbol(name: str, x, target, weight, ignore_index, reduction, smoothing, from_logits):
    """The same formula on Symbols (inside a hybridized block), for class-index targets of an
    (N, C, d1, ...) input: shapes and values are unknown there, so the targets are not checked
    (out-of-range indices are clipped by ``pick``, as in Gluon) and probability targets are not
    recognised. The input is viewed as (N, C, D), ignored targets are masked in the graph."""
    for what, v in (("target", target), ("weight", weight)):
        if v is not None and not isinstance(v, mx.sym.Symbol):
            raise TypeError(f"{name}: inside a hybridized block every tensor argument must be a Symbol; "
                            f"{what} is a {type(v).__name__}")
    F = mx.sym
    x3 = F.reshape(x, shape=(0, 0, -1))
    t2 = F.reshape(target, shape=(0, -1))
    kept = t2 != ignore_index
    index = F.where(kept, t2, F.zeros_like(t2))
    ones = F.ones_like(F.pick(x3, index, axis=1))          # in the input's dtype
    mask = F.where(kept, ones, F.zeros_like(ones))
    out = _class_loss_formula(F, x3, index=index, mask=mask, weight=weight, from_logits=from_logits,
                              reduction=reduction, smoothing=float(smoothing), wshape=(1, -1, 1), count=0)
    return F.reshape_like(out, target) if reduction == "none" else out


def _class_loss(name: str, input, target, weight, ignore_index, reduction, smoothing, from_logits):
    ck.check_reduction(name, reduction)
    if isinstance(input, mx.sym.Symbol):
        return _class_loss_symbol(name, input, target, weight, ignore_index, reduction, smoothing, from_logits)
    kind, x, t, weight, C = _class_setup(name, input, target, weight, ignore_index, allow_prob=from_logits)
    if len(x.shape) == 1:                # one sample's probabilities (indices were reshaped already)
        x, t = x.reshape((1, C)), t.reshape((1, C))
    shape = x.shape
    wshape = (1, C) + (1,) * (len(shape) - 2)
    inputs = dict(x=x, weight=weight)
    if kind == "prob":
        inputs["prob"] = t
    else:
        inputs.update(index=t.index, mask=t.mask(x))
    return compiled.run(_class_loss_formula, inputs, static_alloc=True, from_logits=from_logits,
                        reduction=reduction, smoothing=float(smoothing), wshape=wshape,
                        count=int(np.prod(shape)) // C if reduction == "mean" else 0,
                        **(log_softmax_kernel(x) if from_logits else {}))


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    return _class_loss("NLLLoss", input, target, weight, ignore_index, reduction, 0.0, from_logits=False)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """PyTorch's ``cross_entropy`` on NDArrays: log-softmax from its formula, then the NLL terms."""
    return _class_loss("CrossEntropyLoss", input, target, weight, ignore_index, reduction,
                       label_smoothing, from_logits=True)


# ---- CTC --------------------------------------------------------------------------------------------
def _check_log_probs(name: str, lp: nd.NDArray, input_lengths: np.ndarray) -> None:
    """MXNet's CTC op applies softmax to its input; on log-probabilities that is the identity, so
    values and gradients equal PyTorch's. Unnormalised inputs would differ: reject them (both)."""
    with autograd.pause():
        x = lp.astype("float32") if lp.dtype == np.float16 else lp
        m = nd.max(x, axis=2, keepdims=True)
        lse = nd.log(nd.sum(nd.exp(nd.broadcast_sub(x, m)), axis=2)) + m.reshape(m.shape[:2])   # (T, N)
        mask = np.arange(lp.shape[0])[:, None] < input_lengths[None, :]
        dev = nd.where(_const(mask.astype(np.float32), lse), nd.abs(lse), nd.zeros_like(lse))
        worst = float(dev.max().asscalar()) if lse.size else 0.0
    ck.check_log_probs_deviation(name, worst, lp.dtype == np.float16)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False, check_log_probs=True):
    name = "CTCLoss"
    _require_nd(name, log_probs)
    ck.check_reduction(name, reduction)
    plan = ck.plan_ctc(name, log_probs.shape, _host(targets), _host(input_lengths),
                       _host(target_lengths), blank)
    lp = log_probs if plan.batched else log_probs.expand_dims(1)
    if check_log_probs:
        _check_log_probs(name, lp, plan.input_lengths)
    T, N, C = lp.shape
    labels, tl, feas = plan.labels, plan.target_lengths.copy(), plan.feasible
    # MXNet's op knows blank 'first' (0) or 'last' (C-1): move any other blank to the front.
    if blank in (0, C - 1):
        data, mode = lp, ("first" if blank == 0 else "last")
    else:
        perm = np.array([blank] + [c for c in range(C) if c != blank])
        data, mode = nd.take(lp, _const(perm, lp, "int32"), axis=2), "first"
        labels = np.where(labels < blank, labels + 1, labels)
    if lp.dtype == np.float64:          # MXNet's op runs in float32 only: the recursion, in float64
        from .losses_ctc import ctc_float64
        return ctc_float64(lp, plan.labels, plan.input_lengths, tl, plan.target_lengths, feas, blank, reduction,
                           bool(zero_infinity))
    # infeasible samples (PyTorch: inf; MXNet: 0, or an error when the label is longer than T) are
    # computed with an empty label, multiplied by 0 (zero gradient) and set to inf or 0 afterwards.
    tl[~feas] = 0
    width = max(1, int(tl.max(initial=0)))
    lab = np.where(np.arange(labels.shape[1])[None, :] < tl[:, None], labels, 0)[:, :width]
    # MXNet's CTC op computes in float32 only (float64 fails): cast there and back (grads flow)
    data = data if data.dtype == np.float32 else data.astype("float32")
    # every host-made array in one (copied to the device once), sliced inside the compiled graph
    aux = np.concatenate([lab.astype(np.float32).ravel(), plan.input_lengths.astype(np.float32),
                          tl.astype(np.float32), feas.astype(np.float32),
                          np.where(feas, 0.0, np.inf).astype(np.float32),
                          np.maximum(plan.target_lengths, 1).astype(np.float32)])
    per = compiled.run(_ctc_formula, dict(data=data, aux=_const(aux, data, "float32")), static_alloc=True,
                       n=N, width=width, mode=mode, masked=not bool(feas.all()), zero_infinity=bool(zero_infinity),
                       reduction=reduction if lp.dtype == np.float32 else "none")
    if lp.dtype == np.float32:
        return per
    per = per.astype(lp.dtype)
    if reduction == "none":
        return per
    if reduction == "sum":
        return nd.sum(per)
    return nd.mean(per / _const(np.maximum(plan.target_lengths, 1).astype(np.float32), per))


def _ctc_formula(F, data, aux, *, n: int, width: int, mode: str, masked: bool, zero_infinity: bool,
                 reduction: str):
    """MXNet's CTC op on (T, N, C) log-probabilities, infeasible samples masked to 0 (and inf unless
    ``zero_infinity``), torch's reduction ('mean': each loss / its target length, then the mean).
    ``aux`` holds, flattened: labels (N, width), then (N,) each: input lengths, target lengths,
    feasible (0/1), the inf to add, the mean's divisors."""
    def part(i):
        begin = n * width + n * i
        return F.slice_axis(aux, axis=0, begin=begin, end=begin + n)
    labels = F.reshape(F.slice_axis(aux, axis=0, begin=0, end=n * width), shape=(n, width))
    per = F.CTCLoss(data, labels, part(0), part(1), use_data_lengths=True, use_label_lengths=True,
                    blank_label=mode)
    if masked:
        per = per * part(2)
        if not zero_infinity:
            per = per + part(3)
    if reduction == "none":
        return per
    if reduction == "sum":
        return F.sum(per)
    return F.mean(per / part(4))


# ---- Gluon's per-sample losses: the real gluon.loss classes, after dualdl's checks -------------
def _gluon_label(name, pred, label):
    _require_nd(name, pred)
    label = _native(label, pred)
    ck.check_same_size(name, pred.shape, label.shape)
    return label


def _opt(x, like):
    return None if x is None else _native(x, like)


def _sample_weight(name, sample_weight, like, loss_shape):
    """Gluon broadcasts ``sample_weight`` against the unreduced loss (asynchronous error if it
    cannot): check it here, and right-align its axes (Gluon's broadcast_mul needs equal ndim)."""
    if sample_weight is None:
        return None
    sw = _native(sample_weight, like)
    ck.check_broadcast(name, "sample_weight", sw.shape, tuple(loss_shape))
    return _bcast(sw, len(loss_shape))


def gluon_l2_loss(pred, label, sample_weight=None, weight=1.0, batch_axis=0):
    label = _gluon_label("GluonL2Loss", pred, label)
    sw = _sample_weight("GluonL2Loss", sample_weight, pred, pred.shape)
    return gluon.loss.L2Loss(weight=weight, batch_axis=batch_axis)(pred, label, sw)


def gluon_l1_loss(pred, label, sample_weight=None, weight=None, batch_axis=0):
    label = _gluon_label("GluonL1Loss", pred, label)
    sw = _sample_weight("GluonL1Loss", sample_weight, pred, pred.shape)
    return gluon.loss.L1Loss(weight=weight, batch_axis=batch_axis)(pred, label, sw)


def gluon_huber_loss(pred, label, sample_weight=None, rho=1.0, weight=None, batch_axis=0):
    label = _gluon_label("GluonHuberLoss", pred, label)
    sw = _sample_weight("GluonHuberLoss", sample_weight, pred, pred.shape)
    return gluon.loss.HuberLoss(rho=rho, weight=weight, batch_axis=batch_axis)(pred, label, sw)


def gluon_sigmoid_bce_loss(pred, label, sample_weight=None, pos_weight=None, from_sigmoid=False,
                           weight=None, batch_axis=0):
    label = _gluon_label("GluonSigmoidBCELoss", pred, label)
    pw = _opt(pos_weight, pred)
    if pw is not None:
        ck.check_broadcast("GluonSigmoidBCELoss", "pos_weight", pw.shape, pred.shape)
        pw = _bcast(pw, pred.ndim)
    return gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=from_sigmoid, weight=weight,
                                                    batch_axis=batch_axis)(
        pred, label, _sample_weight("GluonSigmoidBCELoss", sample_weight, pred, pred.shape), pw)


def gluon_softmax_ce_loss(pred, label, sample_weight=None, axis=-1, sparse_label=True, from_logits=False,
                          weight=None, batch_axis=0):
    name = "GluonSoftmaxCrossEntropyLoss"
    _require_nd(name, pred)
    ax = axis % pred.ndim
    if sparse_label:
        want = tuple(s for d, s in enumerate(pred.shape) if d != ax)
        keep = tuple(1 if d == ax else s for d, s in enumerate(pred.shape))
        lshape = tuple(label.shape) if hasattr(label, "shape") else np.shape(label)
        if lshape not in (want, keep):
            raise ValueError(f"{name}: sparse labels for pred of shape {pred.shape} (axis={axis}) "
                             f"must have shape {want}; got {lshape}")
        t = ck.check_class_indices(name, _host(label), pred.shape[ax])
        label = _const(t.reshape(want).astype(np.float32), pred, "float32")
    else:
        label = _gluon_label(name, pred, label)
    loss_shape = tuple(1 if d == ax else n for d, n in enumerate(pred.shape))     # keepdims on axis
    sw = _sample_weight(name, sample_weight, pred, loss_shape)
    return gluon.loss.SoftmaxCrossEntropyLoss(axis=axis, sparse_label=sparse_label, from_logits=from_logits,
                                              weight=weight, batch_axis=batch_axis)(pred, label, sw)


def gluon_ctc_loss(pred, label, pred_lengths=None, label_lengths=None, sample_weight=None, layout="NTC",
                   label_layout="NT", weight=None):
    """``gluon.loss.CTCLoss``'s numbers, except that infeasible samples get a zero gradient: Gluon's
    op returns 0 for them but leaves their gradient uninitialised (garbage up to 1e15 measured)."""
    name = "GluonCTCLoss"
    _require_nd(name, pred)
    lab = _host(label)
    x = nd.swapaxes(pred, 0, 1) if layout == "NTC" else pred           # (T, N, C)
    T, _, C = x.shape
    labels, pl, ll = ck.gluon_ctc_lengths(name, lab.T if label_layout == "TN" else lab,
                                          None if label_lengths is None else _host(label_lengths),
                                          None if pred_lengths is None else _host(pred_lengths), T, C)
    feas = ck.ctc_feasible(labels, pl, ll)
    ll = np.where(feas, ll, 0)
    width = max(1, int(ll.max(initial=0)))
    out_dtype = x.dtype
    x = x if x.dtype == np.float32 else x.astype("float32")        # the op is float32-only
    loss = nd.CTCLoss(x, _const(labels[:, :width].astype(np.float32), x),
                      _const(pl.astype(np.float32), x), _const(ll.astype(np.float32), x),
                      use_data_lengths=True, use_label_lengths=True, blank_label="last")
    if loss.dtype != out_dtype:
        loss = loss.astype(out_dtype)
    if not feas.all():
        loss = loss * _const(feas.astype(np.float32), loss)
    if sample_weight is not None:
        loss = loss * _sample_weight(name, sample_weight, loss, loss.shape)
    if weight is not None:
        loss = loss * weight
    return loss


def loss_modules() -> dict:
    """Name -> this adapter's loss module class (Gluon blocks: ``dl.nn.CrossEntropyLoss``)."""
    from .losses_nn import MODULES
    return MODULES


from .losses_margin import (hinge_embedding_loss, linear_cross_entropy, multi_margin_loss,  # noqa: E402,F401
                            multilabel_margin_loss, multilabel_soft_margin_loss, soft_margin_loss)
