"""dualdl.losses on both backends: values for every reduction and input gradients, with PyTorch's
own ``torch.nn`` losses as the reference; shape traps and out-of-range labels raise the same
errors on both. The Gluon variants and MXNet-only behaviour are in tests/test_losses_gluon.py.

Measured max abs diffs are collected in MEASURED and printed at the end of the module (``-s``).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
from mxnet import autograd, gluon, nd  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl import losses as L  # noqa: E402
from dualdl.losses import gluon as G  # noqa: E402

from _loss_helpers import _record, check_both, print_measured  # noqa: E402

REDUCTIONS = ("mean", "sum", "none")


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print_measured()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- elementwise: MSE/L1/SmoothL1/Huber against torch.nn, every reduction, are parity-table rows
# (tests/parity_table/losses.py)
def test_mse_against_numpy(backend, rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = rng.standard_normal((6, 4)).astype(np.float32)
    got = dl.to_numpy(L.MSELoss()(dl.from_numpy(x), dl.from_numpy(y)))
    np.testing.assert_allclose(got.reshape(()), ((x - y) ** 2).mean(), rtol=1e-6)
    got = dl.to_numpy(L.L1Loss(reduction="sum")(dl.from_numpy(x), dl.from_numpy(y)))
    np.testing.assert_allclose(got.reshape(()), np.abs(x - y).sum(), rtol=1e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits(reduction, rng):
    x = (3 * rng.standard_normal((6, 4))).astype(np.float32)
    y = rng.uniform(0, 1, (6, 4)).astype(np.float32)              # soft targets
    yh = (y > 0.5).astype(np.float32)
    pw = rng.uniform(0.5, 3, 4).astype(np.float32)
    w = rng.uniform(0.5, 2, (6, 1)).astype(np.float32)
    for tag, kw in [("plain", {}), ("pos_weight", {"pos_weight": pw}), ("weight+pos_weight", {"pos_weight": pw, "weight": w})]:
        tkw = {k: torch.tensor(v) for k, v in kw.items()}
        for tgt in (y, yh):
            check_both(f"BCEWithLogitsLoss {tag} {reduction}", L.BCEWithLogitsLoss(reduction=reduction, **kw),
                       torch.nn.BCEWithLogitsLoss(reduction=reduction, **tkw), x, tgt)


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target, rng):
    x = torch.log_softmax(torch.tensor(rng.standard_normal((4, 5)), dtype=torch.float32), 1).numpy()
    p = rng.dirichlet(np.ones(5), 4).astype(np.float32)
    p[0, 1] = 0.0                                                  # 0 log 0 = 0
    p[0] /= p[0].sum()
    t = np.log(p + 1e-12).astype(np.float32) if log_target else p
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                           # torch warns for reduction='mean'
        check_both(f"KLDivLoss log_target={log_target} {reduction}",
                   L.KLDivLoss(reduction=reduction, log_target=log_target),
                   torch.nn.KLDivLoss(reduction=reduction, log_target=log_target), x, t)


# ---- classification -----------------------------------------------------------------------------
CE_CASES = {
    "plain": {},
    "weight": {"weight": True},
    "ignore_index": {"ignore": True},
    "label_smoothing": {"label_smoothing": 0.1},
    "weight+ignore+smoothing": {"weight": True, "ignore": True, "label_smoothing": 0.2},
    "ignore_index=3": {"ignore_index": 3},
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", list(CE_CASES))
@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4)], ids=["NC", "NCd"])
def test_cross_entropy_and_nll(case, reduction, shape, rng):
    spec = CE_CASES[case]
    C = shape[1]
    x = rng.standard_normal(shape).astype(np.float32)
    tshape = (shape[0],) + shape[2:]
    t = rng.integers(0, C, tshape)
    ignore_index = spec.get("ignore_index", -100)
    if spec.get("ignore"):
        t.reshape(-1)[[0, 2]] = -100
    kw = {"reduction": reduction, "ignore_index": ignore_index}
    if spec.get("weight"):
        kw["weight"] = rng.uniform(0.3, 2.0, C).astype(np.float32)
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    ls = spec.get("label_smoothing", 0.0)
    check_both(f"CrossEntropyLoss {case} {reduction}", L.CrossEntropyLoss(label_smoothing=ls, **kw),
               torch.nn.CrossEntropyLoss(label_smoothing=ls, **tkw), x, t)
    lp = torch.log_softmax(torch.tensor(x), 1).numpy()
    check_both(f"NLLLoss {case} {reduction}", L.NLLLoss(**kw), torch.nn.NLLLoss(**tkw), lp, t)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.15])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probability_targets(reduction, smoothing, weighted, rng):
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    p = rng.dirichlet(np.ones(5), (4, 3)).transpose(0, 2, 1).astype(np.float32)   # (N, C, d)
    w = rng.uniform(0.3, 2.0, 5).astype(np.float32) if weighted else None
    check_both(f"CrossEntropyLoss soft targets smoothing={smoothing} weighted={weighted} {reduction}",
               L.CrossEntropyLoss(weight=w, reduction=reduction, label_smoothing=smoothing),
               torch.nn.CrossEntropyLoss(weight=None if w is None else torch.tensor(w), reduction=reduction,
                                         label_smoothing=smoothing), x, p)


def test_cross_entropy_float_labels_and_unbatched(rng):
    """MXNet labels are float32: integral float indices mean the same as int64 ones on both."""
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = rng.integers(0, 4, 6)
    ref = torch.nn.CrossEntropyLoss()(torch.tensor(x), torch.tensor(t)).item()
    for be in ("torch", "mxnet"):
        got = dl.item(L.CrossEntropyLoss()(dl.from_numpy(x, backend=be), dl.from_numpy(t.astype(np.float32), backend=be)))
        assert abs(got - ref) <= 1e-5 * abs(ref), (be, got, ref)
    ref1 = torch.nn.CrossEntropyLoss()(torch.tensor(x[0]), torch.tensor(t[0])).item()
    got_t = L.CrossEntropyLoss()(torch.tensor(x[0]), torch.tensor(t[0]))
    got_m = L.CrossEntropyLoss()(nd.array(x[0]), nd.array([t[0]]))
    assert got_t.shape == () and got_m.shape == (1,)
    assert abs(got_t.item() - ref1) < 1e-5 * abs(ref1) and abs(got_m.asscalar() - ref1) < 1e-5 * abs(ref1)


def test_float64(rng):
    """float64 stays float64 on both; MXNet's CTC op is float32-only, so dualdl computes it there."""
    x = rng.standard_normal((4, 5))
    t = rng.integers(0, 5, 4)
    ref = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(torch.tensor(x), torch.tensor(t)).item()
    for mk in (torch.tensor, lambda a: nd.array(a, dtype=a.dtype)):
        out = L.CrossEntropyLoss(label_smoothing=0.1)(mk(x), mk(t))
        assert dl.to_numpy(out).dtype == np.float64 and abs(dl.item(out) - ref) < 1e-12
    lp = torch.log_softmax(torch.tensor(rng.standard_normal((6, 2, 4))), -1)
    tg, il, tl = np.array([[1, 2], [3, 3]]), [6, 5], [2, 2]
    ref = torch.nn.CTCLoss(reduction="none")(lp, torch.tensor(tg), torch.tensor(il), torch.tensor(tl)).numpy()
    got = L.CTCLoss(reduction="none")(nd.array(lp.numpy(), dtype="float64"), nd.array(tg), il, tl).asnumpy()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_cross_entropy_all_ignored_is_nan_on_both(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = np.full(3, -100)
    assert np.isnan(torch.nn.CrossEntropyLoss()(torch.tensor(x), torch.tensor(t)).item())
    assert np.isnan(L.CrossEntropyLoss()(torch.tensor(x), torch.tensor(t)).item())
    assert np.isnan(L.CrossEntropyLoss()(nd.array(x), nd.array(t)).asscalar())


# ---- CTC --------------------------------------------------------------------------------------------
def _ctc_data(rng, T=9, N=4, C=6):
    logits = rng.standard_normal((T, N, C)).astype(np.float32)
    il = np.array([9, 7, 8, 9])
    tl = np.array([3, 2, 4, 0])
    tg = np.array([[1, 2, 2, 0, 0], [3, 4, 0, 0, 0], [5, 1, 1, 2, 0], [0, 0, 0, 0, 0]])
    return logits, tg, il, tl


def _no_blank(tg, blank, C):
    return np.where(tg == blank, (blank + 1) % C, tg)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("blank", [0, 3, 5])
@pytest.mark.parametrize("concatenated", [False, True], ids=["padded", "concat"])
def test_ctc(reduction, blank, concatenated, rng):
    logits, tg, il, tl = _ctc_data(rng)
    C = logits.shape[2]
    tg = _no_blank(tg, blank, C)
    if concatenated:
        tg = np.concatenate([row[:n] for row, n in zip(tg, tl)])
    ilt, tlt = torch.tensor(il), torch.tensor(tl)
    ref_loss = torch.nn.CTCLoss(blank=blank, reduction=reduction)
    ours = L.CTCLoss(blank=blank, reduction=reduction)
    # gradient w.r.t. the logits, through log_softmax (how models use it)...
    check_both(f"CTCLoss blank={blank} {reduction} (grad wrt logits)",
               lambda x, t: ours(x.log_softmax(-1) if isinstance(x, torch.Tensor) else nd.log_softmax(x, axis=-1),
                                 t, il, tl),
               lambda x, t: ref_loss(x.log_softmax(-1), t, ilt, tlt), logits, tg, gtol=5e-6)
    # ... and w.r.t. the log-probabilities themselves
    lp = torch.log_softmax(torch.tensor(logits), -1).numpy()
    check_both(f"CTCLoss blank={blank} {reduction} (grad wrt log_probs)",
               lambda x, t: ours(x, t, il, tl), lambda x, t: ref_loss(x, t, ilt, tlt), lp, tg, gtol=5e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ctc_infeasible_alignments(reduction, rng):
    """Sample 1 needs 7 frames for [1,1,1,1] (blanks between repeats) but has 5; sample 2's label
    is longer than T. PyTorch: inf (0 with zero_infinity); MXNet's op: 0 or an error."""
    T, N, C = 6, 3, 4
    lp = torch.log_softmax(torch.tensor(rng.standard_normal((T, N, C)), dtype=torch.float32), -1).numpy()
    tg = np.array([[1, 2, 0, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0], [1, 2, 3, 1, 2, 3, 1]])
    il, tl = np.array([6, 5, 6]), np.array([2, 4, 7])
    for zi in (False, True):
        ref = lambda x, t: torch.nn.CTCLoss(reduction=reduction, zero_infinity=zi)(x, t, torch.tensor(il), torch.tensor(tl))
        ours = lambda x, t: L.CTCLoss(reduction=reduction, zero_infinity=zi)(x, t, il, tl)
        if zi:
            check_both(f"CTCLoss infeasible zero_infinity {reduction}", ours, ref, lp, tg, gtol=5e-6)
        else:
            rv = ref(torch.tensor(lp), torch.tensor(tg)).numpy()
            for x in (torch.tensor(lp), nd.array(lp)):
                got = dl.to_numpy(ours(x, torch.tensor(tg) if isinstance(x, torch.Tensor) else nd.array(tg)))
                assert np.isinf(rv).any()
                np.testing.assert_allclose(got.reshape(rv.shape), rv, rtol=1e-6)


def test_ctc_padding_frames_are_not_checked(rng):
    """Frames past input_lengths may hold anything (zeros, NaN): only valid frames must be log-probs."""
    logits, tg, il, tl = _ctc_data(rng)
    lp = torch.log_softmax(torch.tensor(logits), -1).numpy()
    lp[7:, 1] = 0.0                    # sample 1 has 7 frames
    lp[8:, 2] = np.nan                 # sample 2 has 8
    ref = torch.nn.CTCLoss(reduction="none")(torch.tensor(lp), torch.tensor(tg), torch.tensor(il), torch.tensor(tl))
    for mk in (torch.tensor, nd.array):
        got = dl.to_numpy(L.CTCLoss(reduction="none")(mk(lp), mk(tg), il, tl))
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5)


def test_ctc_errors(rng):
    T, N, C = 5, 2, 4
    raw = rng.standard_normal((T, N, C)).astype(np.float32)
    lp = torch.log_softmax(torch.tensor(raw), -1).numpy()
    for mk in (torch.tensor, nd.array):
        with pytest.raises(ValueError, match="log_softmax"):
            L.CTCLoss()(mk(raw), mk(np.array([[1, 2], [3, 1]])), [5, 5], [2, 2])
        with pytest.raises(IndexError, match="blank=0"):
            L.CTCLoss()(mk(lp), mk(np.array([[1, 0], [3, 1]])), [5, 5], [2, 2])
        with pytest.raises(IndexError, match=r"\[0, 4\)"):
            L.CTCLoss(blank=3)(mk(lp), mk(np.array([[1, 4], [2, 1]])), [5, 5], [2, 2])
        with pytest.raises(ValueError, match="input_lengths"):
            L.CTCLoss()(mk(lp), mk(np.array([[1, 2], [3, 1]])), [6, 5], [2, 2])
        with pytest.raises(ValueError, match="sum\\(target_lengths\\)"):
            L.CTCLoss()(mk(lp), mk(np.array([1, 2, 3])), [5, 5], [2, 2])


def test_ctc_check_log_probs_false_skips_only_the_normalisation_check(rng):
    """Unnormalised scores: rejected by default on both backends; with check_log_probs=False the
    call goes through (the caller vouches for log_softmax), and on real log-probabilities the
    numbers are those of the checked call."""
    T, N, C = 5, 2, 4
    raw = rng.standard_normal((T, N, C)).astype(np.float32)
    lp = torch.log_softmax(torch.tensor(raw), -1).numpy()
    tg, il, tl = np.array([[1, 2], [3, 1]]), [5, 5], [2, 2]
    for mk in (torch.tensor, nd.array):
        with pytest.raises(ValueError, match="log_softmax"):
            L.CTCLoss()(mk(raw), mk(tg), il, tl)
        assert np.all(np.isfinite(dl.to_numpy(L.CTCLoss(check_log_probs=False)(mk(raw), mk(tg), il, tl))))
        a = dl.to_numpy(L.CTCLoss(reduction="none")(mk(lp), mk(tg), il, tl))
        b = dl.to_numpy(L.CTCLoss(reduction="none", check_log_probs=False)(mk(lp), mk(tg), il, tl))
        np.testing.assert_array_equal(a, b)
        c = dl.to_numpy(dl.losses.functional.ctc_loss(mk(lp), mk(tg), il, tl, reduction="none",
                                                      check_log_probs=False))
        np.testing.assert_array_equal(a, c)


# ---- errors: shape traps and out-of-range labels, identical on both -----------------------------
@pytest.mark.parametrize("make", [L.MSELoss, L.L1Loss, L.BCEWithLogitsLoss, L.SmoothL1Loss, L.HuberLoss, L.KLDivLoss],
                         ids=lambda c: c.__name__)
def test_shape_trap_is_an_error(make, backend, rng):
    p = dl.from_numpy(rng.standard_normal((8, 1)).astype(np.float32))
    y = dl.from_numpy(rng.uniform(0, 1, 8).astype(np.float32))
    with pytest.raises(ValueError, match=r"\(8, 1\).*\(8,\).*never broadcasts.*squeeze"):
        make()(p, y)
    # after the suggested reshape, both backends give the same numbers
    assert np.isfinite(dl.item(make()(dl.reshape(p, (8,)), y)))


def test_shape_trap_values_match_after_reshape(rng):
    p = rng.standard_normal((8, 1)).astype(np.float32)
    y = rng.standard_normal(8).astype(np.float32)
    vt = L.MSELoss()(torch.tensor(p).reshape(8), torch.tensor(y)).item()
    vm = L.MSELoss()(nd.array(p).reshape((8,)), nd.array(y)).asscalar()
    gl = gluon.loss.L2Loss()(nd.array(p), nd.array(y)).mean().asscalar()
    assert abs(vt - vm) < 1e-6 and abs(vt / 2 - gl) < 1e-6


def test_out_of_range_labels_raise(backend, rng):
    x = dl.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    for bad in ([0, 1, 5, 2], [0, -1, 2, 3], [0, -100, 2, 7]):
        t = dl.from_numpy(np.array(bad))
        with pytest.raises(IndexError, match=r"\[0, 5\) or ignore_index=-100"):
            L.CrossEntropyLoss()(x, t)
        with pytest.raises(IndexError, match=r"\[0, 5\)"):
            L.NLLLoss()(x, t)
    with pytest.raises(ValueError, match="integers"):
        L.CrossEntropyLoss()(x, dl.from_numpy(np.array([0.5, 1, 2, 3], np.float32)))
    with pytest.raises(IndexError, match=r"\[0, 5\)"):
        G.GluonSoftmaxCrossEntropyLoss()(x, dl.from_numpy(np.array([0, 1, 5, 2], np.float32)))
    with pytest.raises(ValueError, match="expects class indices of shape"):
        L.CrossEntropyLoss()(x, dl.from_numpy(np.zeros((4, 2), np.int64)))
    with pytest.raises(ValueError, match=r"weight must have shape \(5,\)"):
        L.CrossEntropyLoss(weight=np.ones(4, np.float32))(x, dl.from_numpy(np.zeros(4, np.int64)))


def test_label_checks_after_a_good_batch_of_the_same_shape(backend, rng):
    """A shape checked once is not checked again (torch: int64 CPU targets go straight to the
    kernel), but values out of range, float targets and other shapes still get dualdl's errors,
    and the losses stay torch's."""
    x_np = rng.standard_normal((4, 5)).astype(np.float32)
    x = dl.from_numpy(x_np)
    good = np.array([0, 4, 2, 1])
    for _ in range(2):
        got = [float(dl.item(L.CrossEntropyLoss()(x, dl.from_numpy(good)))),
               float(dl.item(L.NLLLoss()(x, dl.from_numpy(good))))]
        want = [torch.nn.functional.cross_entropy(torch.tensor(x_np), torch.tensor(good)).item(),
                torch.nn.functional.nll_loss(torch.tensor(x_np), torch.tensor(good)).item()]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(IndexError, match=r"\[0, 5\) or ignore_index=-100"):
        L.CrossEntropyLoss()(x, dl.from_numpy(np.array([0, 1, 5, 2])))
    with pytest.raises(IndexError, match=r"\[0, 5\)"):
        L.NLLLoss()(x, dl.from_numpy(np.array([0, -1, 2, 3])))
    with pytest.raises(ValueError, match="integers"):
        L.CrossEntropyLoss()(x, dl.from_numpy(np.array([0.5, 1, 2, 3], np.float32)))
    with pytest.raises(ValueError, match="expects class indices of shape"):
        L.CrossEntropyLoss()(x, dl.from_numpy(np.zeros((4, 2), np.int64)))
    with pytest.raises(ValueError, match="expects class indices of shape"):
        L.NLLLoss()(dl.from_numpy(x_np[:3]), dl.from_numpy(good))


def test_weights_that_do_not_broadcast_raise(backend, rng):
    x = dl.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))
    y = dl.from_numpy(rng.uniform(0, 1, (4, 3)).astype(np.float32))
    with pytest.raises(ValueError, match=r"pos_weight of shape \(4,\) does not broadcast"):
        L.BCEWithLogitsLoss(pos_weight=np.ones(4, np.float32))(x, y)
    with pytest.raises(ValueError, match=r"weight of shape \(4, 3, 1\) does not broadcast"):
        L.BCEWithLogitsLoss(weight=np.ones((4, 3, 1), np.float32))(x, y)   # would enlarge the loss
    with pytest.raises(ValueError, match=r"GluonL2Loss: sample_weight of shape \(3, 1\)"):
        G.GluonL2Loss()(x, y, dl.from_numpy(np.ones((3, 1), np.float32)))
    with pytest.raises(ValueError, match="GluonSoftmaxCrossEntropyLoss: sample_weight"):
        G.GluonSoftmaxCrossEntropyLoss()(x, dl.from_numpy(np.zeros(4, np.float32)),
                                         dl.from_numpy(np.ones((4, 3), np.float32)))


def test_constructor_and_reduce_errors():
    with pytest.raises(ValueError, match="reduction must be one of"):
        L.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="deprecated"):
        L.CrossEntropyLoss(size_average=True)
    with pytest.raises(ValueError, match="label_smoothing"):
        L.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match="batchmean"):
        L.MSELoss(reduction="batchmean")
    with pytest.raises(TypeError, match="global scalar weight"):
        G.GluonL2Loss(weight=np.ones(3))
    with pytest.raises(TypeError, match="Symbol"):         # MSELoss & co. run on Symbols (test_losses_nn.py)
        L.MultiLabelMarginLoss()(mx.sym.var("a"), mx.sym.var("b"))
    with pytest.raises(ValueError, match="reduction must be one of"):
        L.reduce(torch.ones(3), "avg")


def test_reduce(backend, rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = dl.from_numpy(a)
    assert abs(dl.item(L.reduce(t, "mean")) - a.mean()) < 1e-6
    assert abs(dl.item(L.reduce(t, "sum")) - a.sum()) < 1e-5
    assert L.reduce(t, "none") is t
    # reduce(loss 'none') == loss 'mean', the step contract
    x, y = dl.from_numpy(a), dl.from_numpy(a[::-1].copy())
    assert abs(dl.item(L.reduce(L.MSELoss(reduction="none")(x, y), "mean")) - dl.item(L.MSELoss()(x, y))) < 1e-6


# ---- inside a model's forward, under autograd ------------------------------------------------------
def test_loss_inside_model_forward_matches_across_backends(rng):
    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = dl.nn.Linear(6, 4)
            self.ce = L.CrossEntropyLoss(label_smoothing=0.1)

        def forward(self, x, y):
            return self.ce(self.fc(x), y)

    x = rng.standard_normal((5, 6)).astype(np.float32)
    y = rng.integers(0, 4, 5)
    nt = Net(backend="torch")
    nm = Net(backend="mxnet")
    dl.load_state_dict(nm, dl.state_dict(nt))
    lt = nt(torch.tensor(x), torch.tensor(y))
    lt.backward()
    with autograd.record():
        lm = nm(nd.array(x), nd.array(y.astype(np.float32)))
    lm.backward()
    assert abs(lt.item() - lm.asscalar()) < 1e-5 * abs(lt.item())
    gt = nt.fc.weight.grad.numpy()
    gm = dict(nm.named_parameters())["fc.weight"].grad().asnumpy()
    _record("CrossEntropyLoss in model forward (grad wrt weight)", abs(lt.item() - lm.asscalar()), np.abs(gt - gm).max())
    np.testing.assert_allclose(gm, gt, atol=1e-6)


def test_four_d_cross_entropy(rng):
    x = rng.standard_normal((2, 4, 3, 2)).astype(np.float32)
    t = rng.integers(0, 4, (2, 3, 2))
    t[0, 0, 0] = -100
    w = rng.uniform(0.5, 2, 4).astype(np.float32)
    check_both("CrossEntropyLoss (N,C,H,W) weight+ignore+smoothing mean",
               L.CrossEntropyLoss(weight=w, label_smoothing=0.1),
               torch.nn.CrossEntropyLoss(weight=torch.tensor(w), label_smoothing=0.1), x, t)


def test_functional_forms_match_classes(backend, rng):
    from dualdl.losses import functional as LF
    x = dl.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    y = dl.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    t = dl.from_numpy(rng.integers(0, 5, 4))
    w = rng.uniform(0.5, 2, 5).astype(np.float32)
    pairs = [
        (LF.cross_entropy(x, t, weight=w, label_smoothing=0.1), L.CrossEntropyLoss(weight=w, label_smoothing=0.1)(x, t)),
        (LF.nll_loss(x, t, reduction="sum"), L.NLLLoss(reduction="sum")(x, t)),
        (LF.mse_loss(x, y), L.MSELoss()(x, y)),
        (LF.smooth_l1_loss(x, y, beta=0.3), L.SmoothL1Loss(beta=0.3)(x, y)),
        (LF.huber_loss(x, y, delta=0.3), L.HuberLoss(delta=0.3)(x, y)),
        (LF.binary_cross_entropy_with_logits(x, y, pos_weight=w), L.BCEWithLogitsLoss(pos_weight=w)(x, y)),
        (LF.kl_div(x, y, reduction="batchmean", log_target=True), L.KLDivLoss(reduction="batchmean", log_target=True)(x, y)),
    ]
    for a, b in pairs:
        assert dl.item(a) == dl.item(b)
    ref = torch.nn.functional.cross_entropy(torch.tensor(dl.to_numpy(x)), torch.tensor(dl.to_numpy(t)),
                                            weight=torch.tensor(w), label_smoothing=0.1).item()
    assert abs(dl.item(pairs[0][0]) - ref) < 1e-5 * abs(ref)
    with pytest.raises(ValueError, match="deprecated"):
        LF.cross_entropy(x, t, size_average=False)
