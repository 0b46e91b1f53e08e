"""Parity of dualdl's Transformer encoder layers between the torch and MXNet backends, and of the
MXNet build against a real gluonnlp 0.10 ``TransformerEncoderCell`` / ``TransformerEncoder``.

Every parameter (attention, FFN, LayerNorm scales and shifts, biases) is randomised on torch and
copied to MXNet with ``dl.state_dict`` / ``dl.load_state_dict``. Measured max abs differences are in
the assertion messages and in docs (``-s`` prints them).
"""

import numpy as np
import pytest

import dualdl as dl
from dualdl.testing.runners import run_step

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


def _run(backend, model, x, g, masks):
    keys = list(masks)
    r = run_step(backend, model, [x] + [masks[k] for k in keys], grad_outputs=[g], train=None,
                 grad_inputs=[True] + [False] * len(keys),
                 forward=lambda m, x, *ms: m(x, **dict(zip(keys, ms))))
    return r.outputs[0], r.input_grads[0]


def run_torch(model, x, g, **masks):
    return _run("torch", model, x, g, masks)


def run_mx(model, x, g, **masks):
    return _run("mxnet", model, x, g, masks)


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
            padded = pad if batch_first else pad.T
            if "valid_length" in masks:                    # Gluon's convention: padded outputs are 0
                assert (yt[padded] == 0).all() and (ym[padded] == 0).all()
                assert (gt[padded] == 0).all() and (gm[padded] == 0).all()
            elif masks:                                    # torch's: the reference path's values there
                assert (yt[padded] != 0).all() and (ym[padded] != 0).all()
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


# ---------------------------------------------------------------- attention masks, MHA, final norm
def causal(t):
    return np.triu(np.ones((t, t), dtype=bool), k=1)             # True = blocked (future)


@pytest.mark.parametrize("kind", ["bool", "float", "per-head"])
def test_encoder_attn_mask_parity(kind):
    tm, mm = make_pair(batch_first=True)
    x, g, vl, pad = inputs(True, seed=2)
    if kind == "bool":
        m = causal(TT)
    elif kind == "float":
        m = np.where(causal(TT), -np.inf, 0.0).astype(np.float32)   # generate_square_subsequent_mask
    else:
        rng = np.random.default_rng(3)
        m = (rng.standard_normal((N * H, TT, TT)) * 2).astype(np.float32)   # additive per-head bias
    tm.eval()
    mm.eval()
    yt, gt = run_torch(tm, x, g, mask=m, src_key_padding_mask=pad)
    ym, gm = run_mx(mm, x, g, mask=m, src_key_padding_mask=pad)
    mm.hybridize()
    yh, gh = run_mx(mm, x, g, mask=m, src_key_padding_mask=pad)
    d = (maxdiff(yt, ym), maxdiff(gt, gm), maxdiff(ym, yh), maxdiff(gm, gh))
    print(f"[attn mask {kind}] out {d[0]:.2e} grad {d[1]:.2e} hybrid-vs-imperative {d[2]:.2e}/{d[3]:.2e}")
    assert d[0] <= TOL and d[1] <= TOL * max(1.0, np.abs(gt).max()) and d[2] <= 1e-6 and d[3] <= 1e-6, d
    assert np.isfinite(yt).all() and np.isfinite(ym).all()


def test_fully_padded_sample_is_zero_and_finite():
    tm, mm = make_pair(batch_first=False)
    x, g, _, _ = inputs(False, seed=4)
    vl = np.array([TT, 0, 2], dtype=np.int64)                       # sample 1 has no valid step
    for m in (tm, mm):
        m.train()
    yt, gt = run_torch(tm, x, g, valid_length=vl)
    ym, gm = run_mx(mm, x, g, valid_length=vl)
    assert np.isfinite(yt).all() and np.isfinite(gt).all() and np.isfinite(ym).all() and np.isfinite(gm).all()
    assert (yt[:, 1] == 0).all() and (ym[:, 1] == 0).all()
    assert maxdiff(yt, ym) <= TOL and maxdiff(gt, gm) <= TOL * max(1.0, np.abs(gt).max())
    # torch parameter gradients stay finite too (plain torch gives NaN rows for an all-padded sample)
    assert all(torch.isfinite(p.grad).all() for p in tm.parameters() if p.grad is not None)


def test_final_norm_parity():
    if not hasattr(dl.nn, "LayerNorm"):
        pytest.skip("dl.nn.LayerNorm not available")
    tm, mm = make_pair(batch_first=True, norm=True)
    assert "norm.weight" in dl.state_dict(tm) and "norm.bias" in dl.state_dict(mm)
    x, g, vl, pad = inputs(True, seed=5)
    tm.eval()
    mm.eval()
    yt, gt = run_torch(tm, x, g, valid_length=vl)
    ym, gm = run_mx(mm, x, g, valid_length=vl)
    print(f"[final norm] out {maxdiff(yt, ym):.2e} grad {maxdiff(gt, gm):.2e}")
    assert maxdiff(yt, ym) <= TOL and maxdiff(gt, gm) <= TOL * max(1.0, np.abs(gt).max())
    assert (yt[pad] == 0).all() and (ym[pad] == 0).all()          # zeroed after the norm too


@pytest.mark.parametrize("batch_first", [True, False], ids=["NTC", "TNC"])
@pytest.mark.parametrize("average", [True, False])
def test_multihead_attention_parity(batch_first, average):
    E, L, S = D, 4, 6
    mods = {be: dl.nn.MultiheadAttention(E, H, batch_first=batch_first, backend=be) for be in ("torch", "mxnet")}
    randomise_torch(mods["torch"], seed=7)
    dl.load_state_dict(mods["mxnet"], dl.state_dict(mods["torch"]))
    rng = np.random.default_rng(8)
    shp = (lambda t: (N, t, E)) if batch_first else (lambda t: (t, N, E))
    q, k, v = (rng.standard_normal(shp(t)).astype(np.float32) for t in (L, S, S))
    kpm = np.zeros((N, S), dtype=bool)
    kpm[1, 4:] = True
    am = rng.standard_normal((L, S)).astype(np.float32)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ot, wt = mods["torch"](tq, tk, tv, key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(am),
                            average_attn_weights=average)
    ot.sum().backward()
    mq, mk, mv = (nd.array(a) for a in (q, k, v))
    for a in (mq, mk, mv):
        a.attach_grad()
    with autograd.record():
        om, wm = mods["mxnet"](mq, mk, mv, key_padding_mask=nd.array(kpm, dtype="bool"),
                               attn_mask=nd.array(am), average_attn_weights=average)
    om.backward(nd.ones_like(om))
    assert wt.shape == wm.shape == ((N, L, S) if average else (N, H, L, S))
    diffs = [maxdiff(ot.detach().numpy(), om.asnumpy()), maxdiff(wt.detach().numpy(), wm.asnumpy())]
    diffs += [maxdiff(t.grad.numpy(), m.grad.asnumpy()) for t, m in ((tq, mq), (tk, mk), (tv, mv))]
    print(f"[MHA {'NTC' if batch_first else 'TNC'} average={average}] out/weights/dq/dk/dv", [f"{d:.1e}" for d in diffs])
    assert max(diffs) <= TOL, diffs
    assert np.allclose(wm.asnumpy().sum(-1), 1, atol=1e-6)
    assert (wm.asnumpy()[1, ..., 4:] == 0).all()                    # padded keys get no weight


# ---------------------------------------------------------------- against real gluonnlp 0.10
def _gluonnlp_cell_state(P, prefix):
    """gluonnlp TransformerEncoderCell parameters -> dualdl TransformerEncoderLayer state dict."""
    def get(name, shape=None):
        key = prefix + name
        return P[key] if key in P else np.zeros(shape, np.float32)   # bias-free projections -> 0
    E = P[prefix + "multiheadattentioncell0_query_weight"].shape[0]
    q, k, v = (f"multiheadattentioncell0_{n}" for n in ("query", "key", "value"))
    return {
        "self_attn.in_proj_weight": np.concatenate([get(q + "_weight"), get(k + "_weight"), get(v + "_weight")]),
        "self_attn.in_proj_bias": np.concatenate([get(q + "_bias", (E,)), get(k + "_bias", (E,)), get(v + "_bias", (E,))]),
        "self_attn.out_proj.weight": get("proj_weight"), "self_attn.out_proj.bias": get("proj_bias", (E,)),
        "linear1.weight": get("positionwiseffn0_ffn_1_weight"), "linear1.bias": get("positionwiseffn0_ffn_1_bias"),
        "linear2.weight": get("positionwiseffn0_ffn_2_weight"), "linear2.bias": get("positionwiseffn0_ffn_2_bias"),
        "norm1.weight": get("layernorm0_gamma"), "norm1.bias": get("layernorm0_beta"),
        "norm2.weight": get("positionwiseffn0_layernorm0_gamma"), "norm2.bias": get("positionwiseffn0_layernorm0_beta"),
    }


def _randomise_gluon(block):
    mx.random.seed(11)
    for name, p in block.collect_params().items():
        if name.endswith("gamma"):
            p.set_data(nd.random.uniform(0.5, 1.5, p.shape))
        elif name.endswith(("beta", "bias")):
            p.set_data(nd.random.uniform(-0.5, 0.5, p.shape))
        elif name.endswith("weight"):
            p.set_data(nd.random.normal(0, 0.3, p.shape))
    return {k: v.data().asnumpy() for k, v in block.collect_params().items()}


@pytest.mark.parametrize("attn_bias", [False, True], ids=["gluonnlp-default-no-bias", "with-bias"])
def test_mx_layer_reproduces_gluonnlp_cell(attn_bias):
    from gluonnlp.model.transformer import TransformerEncoderCell
    cell = TransformerEncoderCell(units=D, hidden_size=FF, num_heads=H, dropout=0.0, attention_proj_use_bias=attn_bias,
                                  attention_use_bias=attn_bias, prefix="cell_")
    cell.initialize(mx.init.Normal(0.3))
    x, _, vl, pad = inputs(True, seed=9)
    cell(nd.array(x))                                               # finish gluon's deferred init
    P = _randomise_gluon(cell)
    mask = np.broadcast_to((~pad)[:, None, :], (N, TT, TT)).astype(np.float32)   # gluonnlp: 1 = attend
    ref = cell(nd.array(x), nd.array(mask))[0].asnumpy()
    layer = dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, backend="mxnet")
    dl.load_state_dict(layer, _gluonnlp_cell_state(P, "cell_"))
    layer.eval()
    out = layer(nd.array(x), src_key_padding_mask=nd.array(pad)).asnumpy()
    d = maxdiff(ref[~pad], out[~pad])
    print(f"[gluonnlp TransformerEncoderCell attn_bias={attn_bias}] valid rows max diff {d:.2e} (|out| max {np.abs(ref).max():.2f})")
    assert d <= TOL and np.abs(ref).max() > 0.5
    # gluonnlp's cell leaves padded rows, as torch's key padding mask; valid_length zeroes them, as its
    # encoder does (below)
    out_vl = layer(nd.array(x), valid_length=nd.array(vl)).asnumpy()
    assert (out_vl[pad] == 0).all() and maxdiff(out_vl[~pad], out[~pad]) == 0


def test_port_gluonnlp_encoder_on_both_backends():
    """gluonnlp's TransformerEncoder = x*sqrt(d) + gluonnlp PE, input LayerNorm, post-LN layers: rebuilt
    from dualdl layers (PositionalEncoding(style='gluonnlp', scale=True)) on torch and MXNet."""
    if not hasattr(dl.nn, "LayerNorm"):
        pytest.skip("dl.nn.LayerNorm not available")
    from gluonnlp.model.transformer import TransformerEncoder as GEncoder
    maxlen = 20
    genc = GEncoder(num_layers=2, units=D, hidden_size=FF, num_heads=H, dropout=0.0, max_length=maxlen, prefix="enc_")
    genc.initialize(mx.init.Normal(0.3))
    x, _, vl, pad = inputs(True, seed=10)
    genc(nd.array(x))
    P = _randomise_gluon(genc)
    ref = genc(nd.array(x), None, nd.array(vl))[0].asnumpy()
    sd = {}
    for i in range(2):
        sd.update({f"layers.{i}.{k}": v for k, v in _gluonnlp_cell_state(P, f"enc_transformer{i}_").items()})
    for be in ("torch", "mxnet"):
        pe = dl.nn.PositionalEncoding(D, max_len=maxlen, style="gluonnlp", scale=True, batch_first=True, backend=be)
        assert maxdiff(dl.to_numpy(dl.state_dict(pe)["pe"]), P["enc_const"]) <= 1e-6
        ln = dl.nn.LayerNorm(D, eps=1e-5, backend=be)
        dl.load_state_dict(ln, {"weight": P["enc_layernorm0_gamma"], "bias": P["enc_layernorm0_beta"]})
        enc = dl.nn.TransformerEncoder(dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True,
                                                                     backend=be), 2, backend=be)
        dl.load_state_dict(enc, sd)
        enc.eval()
        xt = dl.from_numpy(x, backend=be)
        out = dl.to_numpy(enc(ln(pe(xt)), valid_length=dl.from_numpy(vl, backend=be)))
        d = maxdiff(ref, out)
        print(f"[gluonnlp TransformerEncoder port on {be}] max diff {d:.2e} (|out| max {np.abs(ref).max():.2f})")
        assert d <= TOL and (ref[pad] == 0).all() and (out[pad] == 0).all()
