"""The losses of issue 14 against torch 2.13's own ``torch.nn.functional`` on both backends: BCE,
cross-entropy (weight x ignore_index x label_smoothing, index and probability targets), margin
ranking, cosine embedding, triplet margin, Poisson and Gaussian NLL, and mse/l1/huber's
``weight=``: values and input gradients for every reduction in float32 and float64, the same
errors on both backends, and the MXNet formulas on Symbols inside a hybridized block.

Max abs/rel diffs are collected in MEASURED and printed at the end (``pytest -s``).
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as TF  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402

from dualdl import losses as L  # noqa: E402
from dualdl.losses import functional as DF  # noqa: E402

REDUCTIONS = ("mean", "sum", "none")
DTYPES = (np.float32, np.float64)
TOL = {np.float32: (2e-5, 1e-5), np.float64: (1e-12, 1e-10)}     # (rtol, atol)
MEASURED: dict = {}


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    rows = sorted(MEASURED.items())
    if not rows:
        return
    print("\nmax |diff| vs torch.nn.functional (value abs, value rel, grad abs, grad rel):")
    pad = max(len(k) for k, _ in rows)
    print("\n".join(f"  {k.ljust(pad)}  " + "  ".join(f"{x:.1e}" for x in v) for k, v in rows))


def _diff(a, b):
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    fin = np.isfinite(b)
    assert np.array_equal(np.isfinite(a), fin), (a, b)
    d = np.abs(a[fin] - b[fin]) if fin.any() else np.zeros(1)
    return float(d.max(initial=0)), float((d / np.maximum(np.abs(b[fin]), 1e-30)).max(initial=0))


def _record(key, dv, dg):
    old = MEASURED.get(key, (0.0,) * 4)
    MEASURED[key] = tuple(max(o, n) for o, n in zip(old, dv + dg))


def _close(got, want, dtype, what):
    rtol, atol = TOL[dtype]
    got = np.asarray(got).reshape(np.shape(want)) if np.size(got) == np.size(want) else got
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


# ---- runners: value and d(sum(out * cot))/d(each float input) -----------------------------------
def _torch(fn, args, grads, kwargs):
    ts = [torch.tensor(a, requires_grad=(i in grads)) if isinstance(a, np.ndarray) else a
          for i, a in enumerate(args)]
    out = fn(*ts, **kwargs)
    cot = torch.tensor(np.random.default_rng(1).uniform(0.5, 1.5, tuple(out.shape))).to(out.dtype)
    gs = torch.autograd.grad(out, [ts[i] for i in grads], cot) if grads else ()
    return out.detach().numpy(), [g.numpy() for g in gs]


def _mx(fn, args, grads, kwargs):
    ms = [nd.array(a.reshape(-1) if a.ndim == 0 else a, dtype=a.dtype) if isinstance(a, np.ndarray) else a
          for a in args]        # MXNet 1.x has no 0-d arrays: () -> (1,)
    for i in grads:
        ms[i].attach_grad()
    with autograd.record():
        out = fn(*ms, **kwargs)
    shape = tuple(out.shape)
    tshape = () if shape == (1,) and kwargs.get("reduction", "mean") != "none" else shape
    cot = np.random.default_rng(1).uniform(0.5, 1.5, tshape).astype(out.dtype).reshape(shape)
    out.backward(nd.array(cot, dtype=out.dtype))
    return out.asnumpy(), [ms[i].grad.asnumpy() for i in grads]


def check(key, fn, ref, args, grads=(0,), dtype=np.float32, **kwargs):
    """dualdl's ``fn`` on torch equals ``ref`` (torch's own) exactly; on MXNet within TOL."""
    want, want_g = _torch(ref, args, grads, kwargs)
    got, got_g = _torch(fn, args, grads, kwargs)
    assert np.array_equal(got, want, equal_nan=True) and all(np.array_equal(a, b) for a, b in zip(got_g, want_g))
    got, got_g = _mx(fn, args, grads, kwargs)
    _close(got, want, dtype, f"{key} value")
    for a, b in zip(got_g, want_g):
        _close(a, b, dtype, f"{key} grad")
    dg = max((_diff(a, b) for a, b in zip(got_g, want_g)), default=(0.0, 0.0))
    _record(f"{key} {np.dtype(dtype).name}", _diff(got, want), dg)


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- signatures: torch 2.13's, exactly -----------------------------------------------------------
@pytest.mark.parametrize("name", ["binary_cross_entropy", "margin_ranking_loss", "cosine_embedding_loss",
                                  "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
                                  "mse_loss", "l1_loss", "huber_loss", "cross_entropy"])
def test_functional_signature_is_torchs(name):
    ours, theirs = inspect.signature(getattr(DF, name)), inspect.signature(getattr(TF, name))
    assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == \
        [(p.name, p.default, p.kind) for p in theirs.parameters.values()]


@pytest.mark.parametrize("name", ["BCELoss", "MarginRankingLoss", "CosineEmbeddingLoss", "TripletMarginLoss",
                                  "PoissonNLLLoss", "GaussianNLLLoss", "CrossEntropyLoss"])
def test_class_signature_is_torchs(name):
    for meth in ("__init__", "forward"):
        ours = inspect.signature(getattr(getattr(L, name), "__call__" if meth == "forward" else meth))
        theirs = inspect.signature(getattr(getattr(tnn, name), meth))
        assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == \
            [(p.name, p.default, p.kind) for p in theirs.parameters.values()]


# ---- BCE ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce(dtype, reduction):
    r = _rng()
    x = r.uniform(0.02, 0.98, (3, 5)).astype(dtype)
    x[0, :3] = [0.0, 1.0, 1e-30]                      # torch's clamp at -100 and its 1e-12 gradient floor
    t = r.uniform(0, 1, (3, 5)).astype(dtype)
    t[0, :2] = [1.0, 0.0]
    check("BCE", DF.binary_cross_entropy, TF.binary_cross_entropy, [x, t], (0,), dtype, reduction=reduction)
    # the target's gradient too, away from x in {0, 1} (there torch's is +-inf, dualdl's MXNet one
    # the derivative of the clamped logs, finite: an inf gradient cannot pass a 0 * g forward term)
    check("BCE target grad", DF.binary_cross_entropy, TF.binary_cross_entropy, [x[1:].copy(), t[1:].copy()],
          (0, 1), dtype, reduction=reduction)
    for w in (r.uniform(0.5, 2, (5,)).astype(dtype), r.uniform(0.5, 2, (3, 5)).astype(dtype)):
        check("BCE weight", DF.binary_cross_entropy, TF.binary_cross_entropy, [x, t, w], (0,), dtype,
              reduction=reduction)
    check("BCE class", lambda a, b: L.BCELoss(reduction=reduction)(a, b),
          lambda a, b: tnn.BCELoss(reduction=reduction)(a, b), [x[:, :1].copy(), t[:, :1].copy()], (0,), dtype)


# ---- CrossEntropy: every combination ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4, 2, 1), (1, 2, 3), (3,)])
@pytest.mark.parametrize("kind", ["index", "prob"])
def test_cross_entropy_all_combinations(dtype, shape, kind):
    r = _rng(3)
    axis = 0 if len(shape) == 1 else 1                # (C,): one unbatched sample
    C = shape[axis]
    x = r.normal(size=shape).astype(dtype)
    if kind == "index":
        t = r.integers(0, C, () if axis == 0 else (shape[0],) + shape[2:])
        t.reshape(-1)[0] = -100
        t.reshape(-1)[-1] = 1
    else:
        t = r.uniform(size=shape).astype(dtype)
        t /= t.sum(axis, keepdims=True)
    for weight in (None, r.uniform(0.5, 2, C).astype(dtype)):
        for ignore_index in ((-100, 1) if kind == "index" else (-100,)):
            if kind == "index" and t.size > 1:       # unbatched: t = 1, kept (-100) or ignored (1)
                t.reshape(-1)[0] = ignore_index
            for smoothing in (0.0, 0.2):
                for reduction in REDUCTIONS:
                    kw = dict(weight=None if weight is None else torch.tensor(weight), ignore_index=ignore_index,
                              label_smoothing=smoothing, reduction=reduction)
                    want, want_g = _torch(lambda a, b: TF.cross_entropy(a, b, **kw), [x, t], (0,), {})
                    kwm = dict(kw, weight=None if weight is None else nd.array(weight, dtype=dtype))
                    got, got_g = _mx(lambda a, b, reduction: DF.cross_entropy(a, b, **kwm), [x, t], (0,),
                                     {"reduction": reduction})
                    what = f"CE {kind} {shape} w={weight is not None} ii={ignore_index} ls={smoothing} {reduction}"
                    _close(got, want, dtype, what)
                    _close(got_g[0], want_g[0], dtype, what + " grad")
                    _record(f"CrossEntropy {kind} {np.dtype(dtype).name}", _diff(got, want),
                            _diff(got_g[0], want_g[0]))


def test_cross_entropy_bool_targets_as_torch():
    x = _rng(11).normal(size=(4, 2)).astype(np.float32)
    t = np.array([True, False, True, True])
    want = TF.cross_entropy(torch.tensor(x), torch.tensor(t).long()).item()
    assert DF.cross_entropy(torch.tensor(x), torch.tensor(t)).item() == want
    got = DF.cross_entropy(nd.array(x), nd.array(t, dtype=np.bool_)).asnumpy()
    assert abs(float(got[0]) - want) < 1e-6


def test_cross_entropy_weighted_mean_divides_by_weights_of_kept_targets():
    x = np.zeros((3, 2), np.float32)
    t = np.array([0, 1, -100])
    w = np.array([1.0, 3.0], np.float32)
    for mod, arr in ((torch, torch.tensor), (nd, nd.array)):
        out = DF.cross_entropy(arr(x), arr(t) if mod is torch else nd.array(t), weight=arr(w))
        # each kept target loses log 2; sum(w_t * log 2) / sum(w_t) = log 2 (not 4 log 2 / 3 samples)
        value = out.asnumpy() if mod is nd else out.numpy()
        assert abs(float(value.reshape(-1)[0]) - np.log(2)) < 1e-6


# ---- pairs and triplets -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking(dtype, reduction):
    r = _rng(4)
    a, b = r.normal(size=(7,)).astype(dtype), r.normal(size=(7,)).astype(dtype)
    b[0] = a[0]                                       # the tie: clamp_min passes the gradient at 0
    y = np.array([1, -1, 1, 1, -1, -1, 1], dtype)
    for margin in (0.0, 0.5):
        check("MarginRanking", DF.margin_ranking_loss, TF.margin_ranking_loss, [a, b, y], (0, 1), dtype,
              margin=margin, reduction=reduction)
    check("MarginRanking class", L.MarginRankingLoss(0.3, reduction=reduction),
          tnn.MarginRankingLoss(0.3, reduction=reduction), [a[:, None].copy(), b[:, None].copy(), y[:, None].copy()],
          (0, 1), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cosine_embedding(dtype, reduction):
    r = _rng(5)
    a, b = r.normal(size=(5, 3)).astype(dtype), r.normal(size=(5, 3)).astype(dtype)
    b[1] = 0                                          # a zero vector: torch's 1e-12 terms
    y = np.array([1, -1, 1, -1, -1], dtype)
    for margin in (0.0, -0.2, 0.4):
        check("CosineEmbedding", DF.cosine_embedding_loss, TF.cosine_embedding_loss, [a, b, y], (0, 1), dtype,
              margin=margin, reduction=reduction)
    check("CosineEmbedding unbatched", L.CosineEmbeddingLoss(reduction=reduction),
          tnn.CosineEmbeddingLoss(reduction=reduction), [a[0].copy(), b[0].copy(), np.array(-1, dtype)], (0,), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet_margin(dtype, reduction):
    r = _rng(6)
    a, p, n = (r.normal(size=(4, 3)).astype(dtype) for _ in range(3))
    for kw in (dict(), dict(p=1.0), dict(p=3.0, eps=1e-3), dict(swap=True), dict(margin=0.1, swap=True, p=1.5)):
        check(f"TripletMargin {kw}", DF.triplet_margin_loss, TF.triplet_margin_loss, [a, p, n], (0, 1, 2), dtype,
              reduction=reduction, **kw)
    check("TripletMargin unbatched", L.TripletMarginLoss(margin=2.0, reduction=reduction),
          tnn.TripletMarginLoss(margin=2.0, reduction=reduction), [a[0].copy(), p[0].copy(), n[0].copy()], (0,), dtype)


# ---- Poisson and Gaussian NLL -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_poisson_nll(dtype, reduction):
    r = _rng(7)
    t = r.poisson(2.0, (3, 4)).astype(dtype)
    t[0, :3] = [0, 1, 5]
    x_log = r.normal(size=(3, 4)).astype(dtype)
    x_rate = r.uniform(0.1, 3, (3, 4)).astype(dtype)
    x_rate[0, 0] = 0.0                                # log(0 + eps)
    for full in (False, True):
        check(f"PoissonNLL log_input full={full}", DF.poisson_nll_loss, TF.poisson_nll_loss, [x_log, t], (0,),
              dtype, full=full, reduction=reduction)
        check(f"PoissonNLL rate full={full}", DF.poisson_nll_loss, TF.poisson_nll_loss, [x_rate, t], (0,), dtype,
              log_input=False, full=full, eps=1e-3, reduction=reduction)
    check("PoissonNLL class", L.PoissonNLLLoss(log_input=False, reduction=reduction),
          tnn.PoissonNLLLoss(log_input=False, reduction=reduction), [x_rate, t], (0,), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gaussian_nll_var_shapes(dtype, reduction):
    r = _rng(8)
    x, t = r.normal(size=(2, 3, 4)).astype(dtype), r.normal(size=(2, 3, 4)).astype(dtype)
    for vshape in ((2, 3, 4), (2, 3), (2, 3, 1), (2, 1, 4), (1, 3, 4)):
        v = r.uniform(0.2, 2, vshape).astype(dtype)
        v.reshape(-1)[0] = 1e-9                       # clamped at eps; gradient passed through
        for full in (False, True):
            check(f"GaussianNLL var{vshape}", DF.gaussian_nll_loss, TF.gaussian_nll_loss, [x, t, v], (0, 1, 2),
                  dtype, full=full, eps=1e-6, reduction=reduction)
    check("GaussianNLL float var", L.GaussianNLLLoss(reduction=reduction), tnn.GaussianNLLLoss(reduction=reduction),
          [x, t, 0.5], (0, 1), dtype)


# ---- weight= of mse / l1 / huber (torch 2.13) -----------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_elementwise_weight(dtype, reduction, name):
    r = _rng(9)
    x, t = r.normal(size=(3, 5)).astype(dtype) * 2, r.normal(size=(3, 5)).astype(dtype)
    w = r.uniform(0.1, 3, (3, 5)).astype(dtype)
    check(f"{name} weight", getattr(DF, name), getattr(TF, name), [x, t], (0, 1), dtype, reduction=reduction,
          weight=None)
    check(f"{name} weight", lambda a, b, c: getattr(DF, name)(a, b, reduction=reduction, weight=c),
          lambda a, b, c: getattr(TF, name)(a, b, reduction=reduction, weight=c), [x, t, w], (0, 1), dtype)


# ---- odd shapes: size 1, 1-D, 3-D and more ------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1,), (1, 1), (2, 1, 3), (3, 2, 1, 2)])
def test_odd_shapes(shape):
    r = _rng(12)
    x, y = r.uniform(0.05, 0.95, shape), r.uniform(0.05, 0.95, shape)
    check(f"odd BCE {shape}", DF.binary_cross_entropy, TF.binary_cross_entropy, [x, y], (0, 1), np.float64)
    check(f"odd PoissonNLL {shape}", DF.poisson_nll_loss, TF.poisson_nll_loss, [x, np.round(y * 4)], (0,),
          np.float64, full=True, reduction="none")
    check(f"odd GaussianNLL {shape}", DF.gaussian_nll_loss, TF.gaussian_nll_loss, [x, y, y[..., :1].copy()],
          (0, 2), np.float64, reduction="sum")
    check(f"odd TripletMargin {shape}", DF.triplet_margin_loss, TF.triplet_margin_loss, [x, y, y[::-1].copy()],
          (0, 1, 2), np.float64, margin=0.5, reduction="none")
    sign = np.where(r.uniform(size=shape) > 0.5, 1.0, -1.0)
    check(f"odd MarginRanking {shape}", DF.margin_ranking_loss, TF.margin_ranking_loss, [x, y, sign], (0, 1),
          np.float64, margin=0.2)
    if len(shape) == 2:
        check(f"odd CosineEmbedding {shape}", DF.cosine_embedding_loss, TF.cosine_embedding_loss,
              [x, y, sign[:, 0].copy()], (0, 1), np.float64, reduction="none")


# ---- the same errors on both backends -----------------------------------------------------------------
def _errors(fn, *args, **kwargs):
    msgs = []
    for conv in (torch.tensor, lambda a: nd.array(a, dtype=a.dtype)):
        with pytest.raises((ValueError, IndexError)) as e:
            fn(*[conv(a) if isinstance(a, np.ndarray) else a for a in args], **kwargs)
        assert "MXNetError" not in repr(e.value)
        msgs.append((type(e.value), str(e.value)))
    assert msgs[0] == msgs[1], msgs
    return msgs[0][1]


def test_same_errors_on_both_backends():
    f = np.float32
    z = np.zeros
    assert "probabilities in [0, 1]" in _errors(DF.binary_cross_entropy, np.full((2,), 1.5, f), z(2, f))
    assert "differ" in _errors(DF.binary_cross_entropy, np.full((2, 1), 0.5, f), z(2, f))
    assert "does not broadcast" in _errors(DF.binary_cross_entropy, np.full((2, 3), 0.5, f), z((2, 3), f),
                                           weight=np.ones(2, f))
    assert "identical shapes" in _errors(DF.margin_ranking_loss, z((3, 1), f), z(3, f), np.ones(3, f))
    assert "expect a target of shape" in _errors(DF.cosine_embedding_loss, z((3, 2), f), z((3, 2), f), np.ones(2, f))
    assert "(N, D) or unbatched" in _errors(DF.cosine_embedding_loss, z((3, 2, 1), f), z((3, 2, 1), f),
                                            np.ones(3, f))
    assert "identical shapes" in _errors(DF.triplet_margin_loss, z((3, 2), f), z((3, 2), f), z((2, 2), f))
    assert "differ" in _errors(DF.poisson_nll_loss, z((3, 2), f), z((2, 3), f))
    assert "does not fit" in _errors(DF.gaussian_nll_loss, z((3, 2), f), z((3, 2), f), np.ones((2, 2), f))
    assert "negative" in _errors(DF.gaussian_nll_loss, z((3, 2), f), z((3, 2), f), -np.ones((3, 2), f))
    assert "weight must have the input's shape" in _errors(DF.mse_loss, z((3, 2), f), z((3, 2), f),
                                                           weight=np.ones(2, f))
    assert "not supported for class-probability" in _errors(DF.cross_entropy, z((2, 3), f), z((2, 3), f),
                                                            ignore_index=0)
    assert "lie in [0, 3)" in _errors(DF.cross_entropy, z((2, 3), f), np.array([0, 3]))
    for fn, n in ((DF.poisson_nll_loss, 2), (DF.gaussian_nll_loss, 3), (DF.binary_cross_entropy, 2),
                  (DF.triplet_margin_loss, 3)):
        assert "no elements" in _errors(fn, *[z((0, 3), f)] * n)
    with pytest.raises(TypeError, match="every tensor argument must be a Symbol"):
        DF.margin_ranking_loss(mx.sym.var("a"), nd.ones(2), nd.ones(2))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        L.TripletMarginLoss(margin=0)
    with pytest.raises(ValueError, match="deprecated"):
        L.BCELoss(size_average=True)


# ---- Symbols: the same formulas inside a hybridized block ------------------------------------------
class _LossBlock(gluon.HybridBlock):
    def __init__(self, fn, **kwargs):
        super().__init__()
        self.fn, self.kw = fn, kwargs

    def hybrid_forward(self, F, *xs):
        return self.fn(*xs, **self.kw)


@pytest.mark.parametrize("case", ["bce", "ranking", "cosine", "triplet", "poisson", "gaussian"])
def test_hybridized_block_equals_ndarray(case):
    r = _rng(10)
    x, y = r.uniform(0.1, 0.9, (4, 3)).astype(np.float32), r.uniform(0.1, 0.9, (4, 3)).astype(np.float32)
    sign = np.array([1, -1, 1, -1], np.float32)
    fn, args, kw = {
        "bce": (DF.binary_cross_entropy, [x, y, np.ones((1, 3), np.float32) * 0.7], {}),
        "ranking": (DF.margin_ranking_loss, [x[:, 0].copy(), y[:, 0].copy(), sign], dict(margin=0.1)),
        "cosine": (DF.cosine_embedding_loss, [x, y, sign], dict(margin=0.2, reduction="sum")),
        "triplet": (DF.triplet_margin_loss, [x, y, y[::-1].copy()], dict(swap=True, p=1.0)),
        "poisson": (DF.poisson_nll_loss, [x, np.round(y * 5)], dict(full=True, reduction="none")),
        "gaussian": (DF.gaussian_nll_loss, [x, y, np.full((4, 1), 0.3, np.float32)], dict(full=True)),
    }[case]
    block = _LossBlock(fn, **kw)
    block.hybridize()
    got = []
    for call in (block, lambda *xs: fn(*xs, **kw)):       # hybridized (Symbols), then eager NDArrays
        nds = [nd.array(a) for a in args]
        nds[0].attach_grad()
        with autograd.record():
            out = call(*nds)
        out.backward()
        got.append((out.asnumpy(), nds[0].grad.asnumpy()))
    (v_sym, g_sym), (v_nd, g_nd) = got
    np.testing.assert_allclose(v_sym, v_nd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g_sym, g_nd, rtol=1e-6, atol=1e-7)
    assert np.abs(g_nd).max() > 0


@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3)])
def test_hybridized_cross_entropy_and_nll(shape):
    """Class-index targets on Symbols: weight x ignore_index x label_smoothing x reduction."""
    r = _rng(13)
    x = r.normal(size=shape).astype(np.float32)
    t = r.integers(0, shape[1], (shape[0],) + shape[2:]).astype(np.float32)
    t.reshape(-1)[0] = 2
    w = r.uniform(0.5, 2, shape[1]).astype(np.float32)
    for weight in (None, w):
        for ignore_index, smoothing, reduction in ((-100, 0.0, "mean"), (2, 0.1, "mean"), (2, 0.3, "sum"),
                                                   (0, 0.2, "none")):
            kw = dict(ignore_index=ignore_index, label_smoothing=smoothing, reduction=reduction)
            fn = (lambda a, b, c=None, **k: DF.cross_entropy(a, b, weight=c, **k))
            block = _LossBlock(fn, **kw)
            block.hybridize()
            args = [x, t] if weight is None else [x, t, weight]
            nds = [nd.array(a) for a in args]
            nds[0].attach_grad()
            with autograd.record():
                out = block(*nds)
            out.backward()
            xt = torch.tensor(x, requires_grad=True)
            ref = TF.cross_entropy(xt, torch.tensor(t).long(), weight=None if weight is None else torch.tensor(w),
                                   **kw)
            ref.backward(torch.ones_like(ref))
            np.testing.assert_allclose(out.asnumpy().reshape(ref.shape), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(nds[0].grad.asnumpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    logp = torch.log_softmax(torch.tensor(x), 1).numpy()
    block = _LossBlock(lambda a, b: DF.nll_loss(a, b, ignore_index=1))
    block.hybridize()
    want = TF.nll_loss(torch.tensor(logp), torch.tensor(t).long(), ignore_index=1).item()
    assert abs(float(block(nd.array(logp), nd.array(t)).asnumpy()[0]) - want) < 1e-6


# ---- the margin losses of issue 34 ------------------------------------------------------------------
NEW_FUNCTIONAL = ["multi_margin_loss", "multilabel_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
                  "hinge_embedding_loss", "linear_cross_entropy"]
NEW_CLASSES = ["MultiMarginLoss", "MultiLabelMarginLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
               "HingeEmbeddingLoss"]


@pytest.mark.parametrize("name", NEW_FUNCTIONAL)
def test_new_functional_signature_is_torchs(name):
    test_functional_signature_is_torchs(name)


@pytest.mark.parametrize("name", NEW_CLASSES)
def test_new_class_signature_is_torchs(name):
    test_class_signature_is_torchs(name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin(dtype, reduction):
    r = _rng(20)
    x = r.normal(size=(6, 4)).astype(dtype)
    t = np.array([0, 3, 1, 1, 2, 0])
    x[1, 0] = x[1, 3] - 1.0                     # z = 0 exactly: torch counts z > 0 only (no gradient)
    w = r.uniform(0.5, 2, 4).astype(dtype)
    for p, margin in ((1, 1.0), (2, 1.0), (1, 0.3), (2, -0.5)):
        check(f"MultiMargin p={p}", DF.multi_margin_loss, TF.multi_margin_loss, [x, t], (0,), dtype, p=p,
              margin=margin, reduction=reduction)
        check(f"MultiMargin weight p={p}", lambda a, b, c: DF.multi_margin_loss(a, b, p, margin, c, reduction=reduction),
              lambda a, b, c: TF.multi_margin_loss(a, b, p, margin, c, reduction=reduction), [x, t, w], (0,), dtype)
    check("MultiMargin unbatched", L.MultiMarginLoss(reduction=reduction), tnn.MultiMarginLoss(reduction=reduction),
          [x[0].copy(), np.array(2)], (0,), dtype)
    check("MultiMargin float targets", DF.multi_margin_loss, lambda a, b, **k: TF.multi_margin_loss(a, b.long(), **k),
          [x, t.astype(dtype)], (0,), dtype, reduction=reduction)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin(dtype, reduction):
    r = _rng(21)
    x = r.normal(size=(4, 5)).astype(dtype)
    t = np.array([[3, 0, -1, 1, 2], [4, 4, 1, -1, -1], [0, 1, 2, 3, 4], [-1, 2, 3, 0, 0]])   # a class listed twice
    x[0, 4] = x[0, 3] - 1.0                     # z = 0 exactly
    check("MultiLabelMargin", DF.multilabel_margin_loss, TF.multilabel_margin_loss, [x, t], (0,), dtype,
          reduction=reduction)
    check("MultiLabelMargin unbatched", L.MultiLabelMarginLoss(reduction=reduction),
          tnn.MultiLabelMarginLoss(reduction=reduction), [x[1].copy(), t[1].copy()], (0,), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_hinge_and_multilabel_soft_margin(dtype, reduction):
    r = _rng(22)
    x = r.normal(size=(3, 4)).astype(dtype) * 3
    y = np.where(r.uniform(size=(3, 4)) > 0.5, 1.0, -1.0).astype(dtype)
    x[0, 0] = 0.0                               # log_sigmoid's gradient at 0: torch's kernel's 0.5
    check("SoftMargin", DF.soft_margin_loss, TF.soft_margin_loss, [x, y], (0,), dtype, reduction=reduction)
    h = y.copy()
    h[1, :2] = [0.0, 2.0]                       # a target other than +-1 gets both of torch's terms
    x2 = x.copy()
    x2[2, 0], h[2, 0] = 0.7, -1.0               # margin - x = 0 exactly: clamp_min passes the gradient
    for margin in (1.0, 0.7):
        check("HingeEmbedding", DF.hinge_embedding_loss, TF.hinge_embedding_loss, [x2, h], (0,), dtype,
              margin=margin, reduction=reduction)
    t = r.uniform(size=(3, 4)).astype(dtype)
    check("MultiLabelSoftMargin", DF.multilabel_soft_margin_loss, TF.multilabel_soft_margin_loss, [x, t], (0, 1),
          dtype, reduction=reduction)
    w = r.uniform(0.5, 2, (4,)).astype(dtype)
    x3, t3 = r.normal(size=(2, 3, 4)).astype(dtype), r.uniform(size=(2, 3, 4)).astype(dtype)
    check("MultiLabelSoftMargin weight 3-d", lambda a, b, c: DF.multilabel_soft_margin_loss(a, b, c, reduction=reduction),
          lambda a, b, c: TF.multilabel_soft_margin_loss(a, b, c, reduction=reduction), [x3, t3, w], (0,), dtype)


def test_soft_margin_overflows_as_torch():
    """torch computes log1p(exp(-y x)) literally: inf where exp overflows (not a stable softplus)."""
    x, y = np.array([-100.0, 2.0], np.float32), np.array([1.0, 1.0], np.float32)
    want = TF.soft_margin_loss(torch.tensor(x), torch.tensor(y), reduction="none").numpy()
    got = DF.soft_margin_loss(nd.array(x), nd.array(y), reduction="none").asnumpy()
    assert np.isinf(want[0]) and np.isinf(got[0]) and abs(got[1] - want[1]) < 1e-7


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_cross_entropy_function(dtype):
    r = _rng(23)
    x = r.normal(size=(6, 5)).astype(dtype)
    W, b = r.normal(size=(4, 3, 5)).astype(dtype), r.normal(size=(4, 3)).astype(dtype)
    t = r.integers(0, 4, (6, 3))
    t[0, 0] = 1
    for kw in (dict(), dict(ignore_index=1, label_smoothing=0.2), dict(reduction="none"), dict(reduction="sum")):
        check(f"linear_cross_entropy {kw}", lambda a, w, c, bb: DF.linear_cross_entropy(a, w, c, linear_bias=bb, **kw),
              lambda a, w, c, bb: TF.linear_cross_entropy(a, w, c, linear_bias=bb, **kw), [x, W, t, b], (0, 1, 3), dtype)
    prob = r.uniform(size=(6, 4, 3)).astype(dtype)
    check("linear_cross_entropy prob", lambda a, w, c: DF.linear_cross_entropy(a, w, c, label_smoothing=0.1),
          lambda a, w, c: TF.linear_cross_entropy(a, w, c, label_smoothing=0.1), [x, W, prob], (0, 1), dtype)
    W2 = W[:, 0].copy()
    check("linear_cross_entropy unbatched", lambda a, w, c: DF.linear_cross_entropy(a, w, c),
          lambda a, w, c: TF.linear_cross_entropy(a, w, c), [x[0].copy(), W2, np.array(3)], (0, 1), dtype)


def test_margin_losses_same_errors_on_both_backends():
    f = np.float32
    z = np.zeros
    assert "lie in [0, 3)" in _errors(DF.multi_margin_loss, z((2, 3), f), np.array([0, 3]))
    assert "class indices of shape (2,)" in _errors(DF.multi_margin_loss, z((2, 3), f), np.array([[0], [1]]))
    assert "weight must have shape (3,)" in _errors(DF.multi_margin_loss, z((2, 3), f), np.array([0, 1]),
                                                    weight=np.ones(2, f))
    assert "(N, C), unbatched (C,) or 0-d" in _errors(DF.multi_margin_loss, z((2, 3, 1), f), np.array([0, 1]))
    assert "lie in [0, 3)" in _errors(DF.multilabel_margin_loss, z((2, 3), f), np.array([[0, 3, -1], [1, -1, 0]]))
    assert "input's shape" in _errors(DF.multilabel_margin_loss, z((2, 3), f), np.array([0, 1]))
    assert "identical shapes" in _errors(DF.soft_margin_loss, z((3, 1), f), z(3, f))
    assert "identical shapes" in _errors(DF.hinge_embedding_loss, z((3, 1), f), z(3, f))
    assert "does not broadcast" in _errors(DF.multilabel_soft_margin_loss, z((2, 3), f), z((2, 3), f),
                                           weight=np.ones(2, f))
    assert "0-d input" in _errors(DF.multilabel_soft_margin_loss, np.array(1.0, f), np.array(1.0, f))
    assert "no elements" in _errors(DF.soft_margin_loss, z((0, 3), f), z((0, 3), f))
    assert "class probabilities" in _errors(DF.linear_cross_entropy, z((2, 3), f), z((4, 3), f), z((2, 4), f),
                                            ignore_index=0)
    assert "expected input of shape (3,) or (N, 3)" in _errors(DF.linear_cross_entropy, z((2, 5), f), z((4, 3), f),
                                                               np.array([0, 1]))
    for p in (0, 3):
        with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
            L.MultiMarginLoss(p=p)
    with pytest.raises(ValueError, match="expected weight to be None or 1D tensor, got 2D instead"):
        L.MultiMarginLoss(weight=np.ones((2, 2), f))
    with pytest.raises(TypeError, match="MultiLabelMarginLoss: on MXNet it needs NDArrays"):
        DF.multilabel_margin_loss(mx.sym.var("a"), mx.sym.var("b"))


# ---- CTC in float64 on MXNet (the recursion; MXNet's op is float32 only) ------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_float64_is_exact_on_mxnet(reduction, zero_infinity):
    r = _rng(30)
    T, N, C = 7, 5, 5
    lp = torch.log_softmax(torch.tensor(r.normal(size=(T, N, C))), -1).numpy()
    targets = np.array([[1, 2, 2], [3, 1, 0], [2, 2, 2], [4, 0, 0], [1, 0, 0]])   # repeats; an infeasible row
    il, tl = np.array([7, 6, 4, 1, 7]), np.array([3, 2, 3, 1, 0])                     # row 2: 3 + 2 repeats > 4
    for blank in (0, 2):
        t = np.where(targets == blank, (blank + 1) % C, targets)
        kw = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity)
        x = torch.tensor(lp, requires_grad=True)
        want = TF.ctc_loss(x, torch.tensor(t), torch.tensor(il), torch.tensor(tl), **kw)
        cot = np.random.default_rng(1).uniform(0.5, 1.5, tuple(want.shape))
        want.backward(torch.tensor(cot))
        m = nd.array(lp, dtype=np.float64)
        m.attach_grad()
        with autograd.record():
            got = DF.ctc_loss(m, nd.array(t), nd.array(il), nd.array(tl), **kw)
        got.backward(nd.array(cot.reshape(got.shape), dtype=np.float64))
        assert got.dtype == np.float64
        _close(got.asnumpy(), want.detach().numpy(), np.float64, f"CTC float64 blank={blank}")
        g, wg = m.grad.asnumpy(), x.grad.numpy()
        if not zero_infinity:                         # torch's gradient of an inf loss is not specified
            g, wg = np.delete(g, 2, axis=1), np.delete(wg, 2, axis=1)
        _close(g, wg, np.float64, f"CTC float64 grad blank={blank}")
        _record("CTC float64 (MXNet: the recursion)", _diff(got.asnumpy(), want.detach().numpy()), _diff(g, wg))
    un = DF.ctc_loss(nd.array(lp[:, 0], dtype=np.float64), nd.array(targets[0]), nd.array([7]), nd.array([3]))
    ref = TF.ctc_loss(torch.tensor(lp[:, 0]), torch.tensor(targets[0]), torch.tensor([7]), torch.tensor([3]))
    assert abs(float(un.asnumpy()[0]) - ref.item()) < 1e-12 * max(1, abs(ref.item()))
