"""dualdl.losses against Gluon and MXNet: the Gluon variants (``dualdl.losses.gluon``) against the
real ``gluon.loss`` classes on MXNet (the torch version must give the same numbers), a Gluon
training curve reproduced on torch, a loss inside a hybridized block, and the class losses run as
one compiled MXNet graph. The torch.nn references are in tests/test_losses.py.

Measured max abs diffs are printed at the end of the module (``-s``).
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

from _loss_helpers import _record, compare, print_measured, run_mx, run_torch  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print_measured()


# ---- Gluon variants: the real gluon.loss on MXNet; the torch version must give the same numbers ----
def _gluon_vs_ours(key, gluon_block, ours, x, *rest, gtol=2e-6, **kw):
    """gluon_block(...) on MXNet is the reference for ours(...) on MXNet and on torch."""
    import inspect
    names = list(inspect.signature(gluon_block.hybrid_forward).parameters)[1 + 1 + len(rest):]   # F, pred, rest
    extra = [kw.get(n) for n in names]                   # Block.__call__ takes positional arguments only
    ref = run_mx(lambda a, *r: gluon_block(a, *r, *extra), x, *rest)
    compare(key + " [mxnet]", ref, run_mx(lambda a, *r: ours(a, *r, **kw), x, *rest), gtol=gtol)
    tkw = {k: (torch.tensor(v.asnumpy()) if isinstance(v, nd.NDArray) else v) for k, v in kw.items()}
    got = run_torch(lambda a, *r: ours(a, *r, **tkw), x, *rest)
    compare(key + " [torch]", ref, got, gtol=gtol)
    assert got[0].shape == ref[0].shape, (key, got[0].shape, ref[0].shape)


def test_gluon_l2_l1_huber(rng):
    x = rng.standard_normal((5, 3, 2)).astype(np.float32)
    y = rng.standard_normal((5, 3, 2)).astype(np.float32)
    sw = rng.uniform(0.5, 2, (5, 1, 1)).astype(np.float32)
    for w in (1.0, 0.3):
        _gluon_vs_ours(f"GluonL2Loss weight={w}", gluon.loss.L2Loss(weight=w), G.GluonL2Loss(weight=w), x, y)
    _gluon_vs_ours("GluonL2Loss sample_weight", gluon.loss.L2Loss(), G.GluonL2Loss(), x, y, sample_weight=nd.array(sw))
    _gluon_vs_ours("GluonL2Loss batch_axis=1", gluon.loss.L2Loss(batch_axis=1), G.GluonL2Loss(batch_axis=1), x, y)
    _gluon_vs_ours("GluonL1Loss", gluon.loss.L1Loss(), G.GluonL1Loss(), x, y)
    _gluon_vs_ours("GluonL1Loss weight", gluon.loss.L1Loss(weight=2.0), G.GluonL1Loss(weight=2.0), x, y,
                   sample_weight=nd.array(sw))
    _gluon_vs_ours("GluonHuberLoss rho=0.5", gluon.loss.HuberLoss(rho=0.5), G.GluonHuberLoss(rho=0.5), x, y)
    # Gluon's (N,1) vs (N,) rule: the label is reshaped (no N x N broadcast), same on both
    p, lab = x[:, :1, 0], y[:, 0, 0]
    _gluon_vs_ours("GluonL2Loss (N,1) pred, (N,) label", gluon.loss.L2Loss(), G.GluonL2Loss(), p, lab)
    # L2 = MSE/2 per sample: the factor a naive port loses
    ours = G.GluonL2Loss()(torch.tensor(x), torch.tensor(y)).mean().item()
    mse = torch.nn.MSELoss()(torch.tensor(x), torch.tensor(y)).item()
    assert abs(mse / ours - 2.0) < 1e-5


def test_gluon_sigmoid_bce(rng):
    x = (3 * rng.standard_normal((6, 4))).astype(np.float32)
    y = rng.uniform(0, 1, (6, 4)).astype(np.float32)
    pw = rng.uniform(0.5, 3, (1, 4)).astype(np.float32)
    sw = rng.uniform(0.5, 2, (6, 1)).astype(np.float32)
    blk = gluon.loss.SigmoidBCELoss()
    _gluon_vs_ours("GluonSigmoidBCELoss", blk, G.GluonSigmoidBCELoss(), x, y)
    _gluon_vs_ours("GluonSigmoidBCELoss pos_weight+sample_weight", blk, G.GluonSigmoidBCELoss(), x, y,
                   sample_weight=nd.array(sw), pos_weight=nd.array(pw))
    p = (1 / (1 + np.exp(-x))).astype(np.float32)
    blk = gluon.loss.SigmoidBCELoss(from_sigmoid=True, weight=0.5)
    _gluon_vs_ours("GluonSigmoidBCELoss from_sigmoid", blk, G.GluonSigmoidBCELoss(from_sigmoid=True, weight=0.5),
                   p, y, gtol=1e-5)
    _gluon_vs_ours("GluonSigmoidBCELoss from_sigmoid pos_weight", blk,
                   G.GluonSigmoidBCELoss(from_sigmoid=True, weight=0.5), p, y, pos_weight=nd.array(pw), gtol=1e-5)


def test_gluon_softmax_ce(rng):
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)             # (N, T, C), classes last
    t = rng.integers(0, 5, (4, 3)).astype(np.float32)
    _gluon_vs_ours("GluonSoftmaxCE (N,T,C) sparse", gluon.loss.SoftmaxCrossEntropyLoss(),
                   G.GluonSoftmaxCrossEntropyLoss(), x, t)
    sw = rng.uniform(0.5, 2, (4, 3, 1)).astype(np.float32)
    _gluon_vs_ours("GluonSoftmaxCE weight+sample_weight", gluon.loss.SoftmaxCrossEntropyLoss(weight=0.7),
                   G.GluonSoftmaxCrossEntropyLoss(weight=0.7), x, t, sample_weight=nd.array(sw))
    p = rng.dirichlet(np.ones(5), (4, 3)).astype(np.float32)
    _gluon_vs_ours("GluonSoftmaxCE dense", gluon.loss.SoftmaxCrossEntropyLoss(sparse_label=False),
                   G.GluonSoftmaxCrossEntropyLoss(sparse_label=False), x, p)
    lp = torch.log_softmax(torch.tensor(x), -1).numpy()
    _gluon_vs_ours("GluonSoftmaxCE from_logits", gluon.loss.SoftmaxCrossEntropyLoss(from_logits=True),
                   G.GluonSoftmaxCrossEntropyLoss(from_logits=True), lp, t)
    xc = np.ascontiguousarray(x.transpose(0, 2, 1))                     # (N, C, T) with axis=1
    _gluon_vs_ours("GluonSoftmaxCE axis=1", gluon.loss.SoftmaxCrossEntropyLoss(axis=1),
                   G.GluonSoftmaxCrossEntropyLoss(axis=1), xc, t)
    x2 = x[:, 0]
    _gluon_vs_ours("GluonSoftmaxCE (N,C)", gluon.loss.SoftmaxCrossEntropyLoss(),
                   G.GluonSoftmaxCrossEntropyLoss(), x2, t[:, 0])
    # gluon's per-sample numbers equal torch's unreduced CrossEntropyLoss averaged over T
    ce = torch.nn.CrossEntropyLoss(reduction="none")(torch.tensor(xc), torch.tensor(t).long()).mean(1)
    ours = G.GluonSoftmaxCrossEntropyLoss()(torch.tensor(x), torch.tensor(t))
    assert float((ce - ours).abs().max()) < 1e-6


@pytest.mark.parametrize("layout", ["NTC", "TNC"])
def test_gluon_ctc(layout, rng):
    N, T, C = 3, 10, 5
    acts = rng.standard_normal((N, T, C)).astype(np.float32)
    if layout == "TNC":
        acts = np.ascontiguousarray(acts.transpose(1, 0, 2))
    lab = np.array([[1, 0, -1, -1], [2, 1, 1, -1], [0, 1, 0, 2]], np.float32)
    blk, ours = gluon.loss.CTCLoss(layout=layout), G.GluonCTCLoss(layout=layout)
    _gluon_vs_ours(f"GluonCTCLoss {layout}", blk, ours, acts, lab, gtol=5e-6)
    _gluon_vs_ours(f"GluonCTCLoss {layout} lengths", blk, ours, acts, lab, pred_lengths=nd.array([10, 8, 9]),
                   label_lengths=nd.array([2, 3, 4]), gtol=5e-6)
    # infeasible: [2,1,1] needs 4 frames, has 3; [0,1,0,2] has 2. Gluon: loss 0, but the gradient
    # of those samples is uninitialised memory; dualdl gives 0 on both backends.
    kw = dict(pred_lengths=nd.array([10, 3, 2]), sample_weight=nd.array([1.0, 2.0, 0.5]))
    ax = 0 if layout == "NTC" else 1
    gv, gg = run_mx(lambda a, b: blk(a, b, kw["pred_lengths"], None, kw["sample_weight"]), acts, lab)
    tkw = {k: torch.tensor(v.asnumpy()) for k, v in kw.items()}
    for key, (v, g) in {"mxnet": run_mx(lambda a, b: ours(a, b, **kw), acts, lab),
                        "torch": run_torch(lambda a, b: ours(a, b, **tkw), acts, lab)}.items():
        assert v[1] == 0 and v[2] == 0 and gv[1] == 0 and gv[2] == 0
        assert np.all(np.take(g, [1, 2], axis=ax) == 0), key
        compare(f"GluonCTCLoss {layout} infeasible [{key}]", (gv, np.take(gg, [0], axis=ax)),
                (v, np.take(g, [0], axis=ax)), gtol=5e-6)
    _gluon_vs_ours(f"GluonCTCLoss {layout} label_layout=TN", gluon.loss.CTCLoss(layout=layout, label_layout="TN"),
                   G.GluonCTCLoss(layout=layout, label_layout="TN"), acts, np.ascontiguousarray(lab.T), gtol=5e-6)


def test_gluon_ctc_errors(rng):
    acts = rng.standard_normal((2, 3, 4)).astype(np.float32)
    for mk in (torch.tensor, nd.array):
        with pytest.raises(ValueError, match="exceeds the sequence length"):
            G.GluonCTCLoss()(mk(acts), mk(np.array([[0, 1, 2, 0], [1, -1, -1, -1]], np.float32)))
        with pytest.raises(IndexError, match="blank is the last class"):
            G.GluonCTCLoss()(mk(acts), mk(np.array([[0, 3, -1], [1, -1, -1]], np.float32)))


# ---- Gluon and MXNet in training and in a hybridized block ------------------------------------
def test_hybridized_forward_gets_a_clear_error():
    """Symbols carry no values to check: a Gluon-contract loss inside a hybridized block says so (torch's
    losses run on Symbols: tests/test_losses_nn.py)."""
    class Net(dl.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = dl.nn.Linear(3, 2)
            self.l2 = G.GluonL2Loss()

        def forward(self, x, y):
            return self.l2(self.fc(x), y)

    net = Net(backend="mxnet")
    assert net(nd.ones((2, 3)), nd.ones((2, 2))).shape == (2,)             # per sample, as Gluon's L2Loss
    net.hybridize()
    with pytest.raises(TypeError, match="GluonL2Loss.*Symbol.*outside the hybridized block"):
        net(nd.ones((2, 3)), nd.ones((2, 2)))


def test_gluon_l2_training_curve_reproduced_on_torch(rng):
    """The step contract: Gluon's per-sample L2Loss + backward (a sum) + Trainer.step(N) equals
    GluonL2Loss on torch + reduce(..., 'mean') + SGD.step(), over several steps."""
    X = rng.standard_normal((8, 5)).astype(np.float32)
    Y = rng.standard_normal((8, 2)).astype(np.float32)
    nt, nm = dl.nn.Linear(5, 2, backend="torch"), dl.nn.Linear(5, 2, backend="mxnet")
    dl.load_state_dict(nm, dl.state_dict(nt))
    opt = torch.optim.SGD(nt.parameters(), lr=0.1)
    trainer = gluon.Trainer(nm.collect_params(), "sgd", {"learning_rate": 0.1})
    lt_curve, lm_curve = [], []
    for _ in range(4):
        opt.zero_grad()
        lt = L.reduce(G.GluonL2Loss()(nt(torch.tensor(X)), torch.tensor(Y)), "mean")
        lt.backward()
        opt.step()
        nm.zero_grad()                    # dualdl modules accumulate gradients (grad_req='add'), as torch does
        with autograd.record():
            lm = gluon.loss.L2Loss()(nm(nd.array(X)), nd.array(Y))
        lm.backward()
        trainer.step(X.shape[0])
        lt_curve.append(lt.item())
        lm_curve.append(float(lm.mean().asscalar()))
    np.testing.assert_allclose(lt_curve, lm_curve, rtol=1e-6)
    wt, wm = nt.weight.detach().numpy(), dict(nm.named_parameters())["weight"].data().asnumpy()
    _record("GluonL2Loss 4 SGD steps (torch vs gluon weights)", np.abs(np.array(lt_curve) - lm_curve).max(),
            np.abs(wt - wm).max())
    np.testing.assert_allclose(wt, wm, atol=1e-6)
    assert lt_curve[-1] < lt_curve[0]


# ---- MXNet: the class losses run as one compiled graph (dualdl_mx.fast.compiled) ---------------------
@pytest.mark.parametrize("kw", [{}, dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.2),
                                dict(ignore_index=1), dict(weight=[0.5, 1.0, 2.0, 0.1]),
                                dict(weight=[0.5, 1.0, 2.0, 0.1], ignore_index=2, label_smoothing=0.1)])
def test_mxnet_compiled_class_loss_equals_its_eager_formula_bit_for_bit(kw):
    """The same formula run op by op on NDArrays (MXNet's eager mode) and as one CachedOp: the
    values and gradients are identical, also with two forward passes before one backward."""
    from mxnet import autograd, nd
    from dualdl_mx import losses as ml
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(6, 4, 3)).astype(np.float32) * 3
    t_np = rng.integers(0, 4, (6, 3))
    w = None if "weight" not in kw else nd.array(kw["weight"])
    ignore, red, ls = kw.get("ignore_index", -100), kw.get("reduction", "mean"), kw.get("label_smoothing", 0.0)

    def eager(x):
        _, xx, t, ww, C = ml._class_setup("CrossEntropyLoss", x, nd.array(t_np), w, ignore)
        return ml._class_loss_formula(nd, xx, index=t.index, mask=t.mask(xx), weight=ww, from_logits=True,
                                      reduction=red, smoothing=ls, wshape=(1, C, 1),
                                      count=x.size // C if red == "mean" else 0, **ml.log_softmax_kernel(xx))

    def compiled(x):
        return dl.losses.CrossEntropyLoss(weight=w, **{k: v for k, v in kw.items() if k != "weight"})(
            x, nd.array(t_np))

    res = []
    for fn in (eager, compiled):
        x = nd.array(x_np)
        x.attach_grad()
        with autograd.record():
            a = fn(x)
            b = fn(x * 2)                               # second graph before the first backward
            total = (a.sum() + b.sum()) if red == "none" else a + b
        total.backward()
        res.append((a.asnumpy(), b.asnumpy(), x.grad.asnumpy()))
    for u, v in zip(*res):
        np.testing.assert_array_equal(u, v)


def test_mxnet_compiled_loss_handles_new_batch_sizes_and_threads():
    import threading
    import torch
    from mxnet import nd
    rng = np.random.default_rng(1)
    errors = []

    def check(n):
        try:
            for _ in range(20):
                x = rng.normal(size=(n, 5)).astype(np.float32)
                t = rng.integers(0, 5, n)
                got = float(dl.losses.CrossEntropyLoss()(nd.array(x), nd.array(t)).asscalar())
                want = float(torch.nn.functional.cross_entropy(torch.from_numpy(x), torch.from_numpy(t)))
                assert abs(got - want) <= 2e-6 * max(1.0, abs(want)), (n, got, want)
        except Exception as e:          # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=check, args=(n,)) for n in (3, 8, 17)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
