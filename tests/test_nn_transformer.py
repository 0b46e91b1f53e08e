"""dualdl's Transformer encoder layers on each backend: torch's parameter names/shapes/init,
the documented defaults (dropout 0.1, TNC layout), masking semantics, PositionalEncoding tables,
and errors for bad input. Cross-backend numbers are in test_parity_transformer.py."""
import math

import numpy as np
import pytest

import dualdl as dl

D, H, FF = 16, 2, 32


def t(a, dtype=None):
    return dl.from_numpy(np.asarray(a), dtype=dtype)


def run(m, x, **kw):
    return dl.to_numpy(m(t(x), **{k: t(v) for k, v in kw.items()}))


def test_names_shapes_match_torch(backend):
    import torch
    ref = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, FF), 2, enable_nested_tensor=False)
    enc = dl.nn.TransformerEncoder(dl.nn.TransformerEncoderLayer(D, H, FF), 2)
    ours = {k: tuple(v.shape) for k, v in dl.state_dict(enc).items()}
    assert ours == {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert list(ours) == list(ref.state_dict())                    # same order too
    assert isinstance(enc, dl.nn.TransformerEncoder) and isinstance(enc.layers[0], dl.nn.TransformerEncoderLayer)
    nb = dl.nn.TransformerEncoderLayer(D, H, FF, bias=False)
    assert not any(k.endswith("bias") for k in dl.state_dict(nb))


def test_init_follows_torch(backend):
    layer = dl.nn.TransformerEncoderLayer(64, 4, 128)
    sd = {k: dl.to_numpy(v) for k, v in dl.state_dict(layer).items()}
    w = sd["self_attn.in_proj_weight"]
    bound = math.sqrt(6.0 / (64 + 3 * 64))                          # xavier_uniform_ on (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    assert (sd["self_attn.in_proj_bias"] == 0).all() and (sd["self_attn.out_proj.bias"] == 0).all()
    assert (sd["norm1.weight"] == 1).all() and (sd["norm2.bias"] == 0).all()
    b1 = 1 / math.sqrt(64)                                          # Linear: U(+-1/sqrt(fan_in))
    assert b1 * 0.9 < np.abs(sd["linear1.weight"]).max() <= b1
    # TransformerEncoder copies the layer (torch's deepcopy): every layer starts with its weights
    enc = dl.nn.TransformerEncoder(layer, 3)
    esd = {k: dl.to_numpy(v) for k, v in dl.state_dict(enc).items()}
    for i in range(3):
        assert np.array_equal(esd[f"layers.{i}.self_attn.in_proj_weight"], w)
    assert all(not k.startswith("layers.3") for k in esd)


def test_dropout_default_is_torch_0_1(backend):
    layer = dl.nn.TransformerEncoderLayer(D, H, FF)
    assert layer.dropout.p == 0.1 and layer.dropout1.p == 0.1 and layer.self_attn.dropout == 0.1
    x = np.random.default_rng(0).standard_normal((5, 3, D)).astype(np.float32)
    layer.train()
    assert np.abs(run(layer, x) - run(layer, x)).max() > 1e-3        # dropout active in train()
    layer.eval()
    assert np.array_equal(run(layer, x), run(layer, x))              # and off in eval()


def test_default_layout_is_tnc_and_layout_keyword(backend):
    x = np.random.default_rng(1).standard_normal((5, 3, D)).astype(np.float32)   # (T, N, E)
    a = dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0)
    b = dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, layout="NTC")
    dl.load_state_dict(b, dl.state_dict(a))
    a.eval(), b.eval()
    ya = run(a, x)
    yb = run(b, x.transpose(1, 0, 2)).transpose(1, 0, 2)
    assert np.abs(ya - yb).max() < 1e-6
    assert b.batch_first and not a.batch_first


def _layer_and_data(backend, batch_first=True, seed=0):
    layer = dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=batch_first)
    layer.eval()
    x = np.random.default_rng(seed).standard_normal((3, 6, D)).astype(np.float32)
    return layer, x


def test_padding_conventions_agree(backend):
    """Valid positions agree whatever the padding convention; padded positions are 0 with Gluon's
    valid_length and keep torch's reference-path values with torch's key padding mask."""
    layer, x = _layer_and_data(backend)
    vl = np.array([6, 4, 1])
    pad = np.arange(6)[None] >= vl[:, None]
    y_vl = run(layer, x, valid_length=vl)
    y_bool = run(layer, x, src_key_padding_mask=pad)
    y_int = run(layer, x, src_key_padding_mask=pad.astype(np.int32))
    y_inf = run(layer, x, src_key_padding_mask=np.where(pad, -np.inf, 0).astype(np.float32))
    y_flt = run(layer, x, valid_length=vl.astype(np.float32))
    assert np.array_equal(y_flt, y_vl)
    for y in (y_int, y_inf):
        assert np.array_equal(y, y_bool)
    assert np.array_equal(y_bool[~pad], y_vl[~pad])
    assert (y_vl[pad] == 0).all() and (np.abs(y_vl[~pad]).min() >= 0) and np.abs(y_vl[~pad]).max() > 0.5
    assert (y_bool[pad] != 0).all()                                  # torch's values there, not zeros
    # padded content cannot leak into valid positions
    x2 = x.copy()
    x2[pad] = 100.0
    assert np.abs(run(layer, x2, valid_length=vl)[~pad] - y_vl[~pad]).max() < 1e-5
    # each sample equals that sample run alone, unpadded
    for i, n in enumerate(vl):
        alone = run(layer, x[i:i + 1, :n])
        assert np.abs(alone[0] - y_vl[i, :n]).max() < 1e-5


def test_causal_mask_bool_equals_float(backend):
    layer, x = _layer_and_data(backend, seed=1)
    T_ = x.shape[1]
    blocked = np.triu(np.ones((T_, T_), bool), 1)
    yb = run(layer, x, src_mask=blocked)
    yf = run(layer, x, src_mask=np.where(blocked, -np.inf, 0).astype(np.float32))
    assert np.array_equal(yb, yf)
    x2 = x.copy()
    x2[:, 3:] += 5.0                                                 # changing the future ...
    y2 = run(layer, x2, src_mask=blocked)
    assert np.abs(y2[:, :3] - yb[:, :3]).max() < 1e-5                # ... leaves the past unchanged
    assert np.abs(y2[:, 3:] - yb[:, 3:]).max() > 1e-2


def test_encoder_keyword_calls_and_is_causal(backend):
    enc = dl.nn.TransformerEncoder(dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0), 2)
    enc.eval()
    x = np.random.default_rng(2).standard_normal((4, 2, D)).astype(np.float32)    # TNC
    m = np.triu(np.ones((4, 4), bool), 1)
    y1 = run(enc, x, mask=m)
    y2 = dl.to_numpy(enc(t(x), t(m), None, True))                    # positional + is_causal hint
    assert np.abs(y1 - y2).max() < 1e-6
    with pytest.raises(ValueError, match="is_causal"):
        enc(t(x), is_causal=True)


def test_mha_weights(backend):
    mha = dl.nn.MultiheadAttention(D, H, batch_first=True)
    mha.eval()
    rng = np.random.default_rng(3)
    q = t(rng.standard_normal((2, 3, D)).astype(np.float32))
    kv = t(rng.standard_normal((2, 5, D)).astype(np.float32))
    kpm = np.zeros((2, 5), bool)
    kpm[0, 3:] = True
    out, w = mha(q, kv, kv, key_padding_mask=t(kpm))
    w = dl.to_numpy(w)
    assert tuple(out.shape) == (2, 3, D) and w.shape == (2, 3, 5)
    assert np.allclose(w.sum(-1), 1, atol=1e-6) and (w[0, :, 3:] == 0).all()
    out2, none = mha(q, kv, kv, need_weights=False)
    assert none is None and tuple(out2.shape) == (2, 3, D)


def test_positional_encoding_tables(backend):
    pos = np.arange(50)[:, None]
    j = np.arange(D)[None, :]
    gl = pos / np.power(10000, (2.0 / D) * j)                       # gluonnlp: j = column index
    gl[:, 0::2], gl[:, 1::2] = np.sin(gl[:, 0::2]), np.cos(gl[:, 1::2])
    div = np.exp(np.arange(0, D, 2) * (-math.log(10000.0) / D))    # PyTorch tutorial / Vaswani
    va = np.zeros((50, D))
    va[:, 0::2], va[:, 1::2] = np.sin(pos * div), np.cos(pos * div)
    pg = dl.nn.PositionalEncoding(D, max_len=50, style="gluonnlp", batch_first=True)
    pv = dl.nn.PositionalEncoding(D, max_len=50, batch_first=True)
    assert np.abs(dl.to_numpy(dl.state_dict(pg)["pe"]) - gl).max() < 1e-6
    assert np.abs(dl.to_numpy(dl.state_dict(pv)["pe"]) - va).max() < 1e-6
    assert np.abs(gl - va).max() > 1.5                              # the two are really different
    x = np.random.default_rng(4).standard_normal((2, 7, D)).astype(np.float32)
    assert np.abs(run(pv, x) - (x + va[:7])).max() < 1e-6
    ps = dl.nn.PositionalEncoding(D, max_len=50, style="gluonnlp", scale=True)                  # TNC
    xt = x.transpose(1, 0, 2)
    assert np.abs(run(ps, xt) - (xt * math.sqrt(D) + gl[:7, None])).max() < 1e-5
    with pytest.raises(ValueError, match="max_len=50"):
        pv(t(np.zeros((2, 51, D), np.float32)))
    with pytest.raises(ValueError, match="style"):
        dl.nn.PositionalEncoding(D, style="bert")


def test_mxnet_hybridized_layer_and_pe():
    import mxnet as mx
    with dl.use("mxnet"):
        layer, x = _layer_and_data("mxnet", seed=5)
        pe = dl.nn.PositionalEncoding(D, max_len=10, batch_first=True)
        vl = np.array([6, 2, 3])
        ref = run(layer, run(pe, x), valid_length=vl)
        layer.hybridize()
        pe.hybridize()
        assert np.abs(run(layer, run(pe, x), valid_length=vl) - ref).max() < 1e-6
        # switching from valid_length to no padding rebuilds the cached graph
        y_hyb = run(layer, x)
        layer.hybridize(active=False)
        y_plain = run(layer, x)
        assert np.abs(y_hyb - y_plain).max() < 1e-6 and not (y_plain[1, 2:] == 0).all()
        # symbol export works (a hybridized layer is a graph)
        sym = layer(mx.sym.var("data"))
        assert "data" in sym.list_arguments()


# ------------------------------------------------------------------------------------ bad input
def _msg(excinfo):
    return str(excinfo.value)


def test_bad_rank_and_width(backend):
    layer = dl.nn.TransformerEncoderLayer(D, H, FF, batch_first=True)
    with pytest.raises(ValueError) as e:
        layer(t(np.zeros((1, 2, 6, D), np.float32)))
    assert "TransformerEncoderLayer" in _msg(e) and f"(N, T, {D}) or unbatched (T, {D})" in _msg(e)
    assert "(1, 2, 6, 16)" in _msg(e) and "NTC" in _msg(e)
    with pytest.raises(ValueError) as e:
        layer(t(np.zeros((6, D + 1), np.float32)))
    assert "(6, 17)" in _msg(e)
    with pytest.raises(ValueError) as e:
        layer(t(np.zeros((2, 6, 8), np.float32)))
    assert "(2, 6, 8)" in _msg(e)
    enc = dl.nn.TransformerEncoder(dl.nn.TransformerEncoderLayer(D, H, FF), 1)
    with pytest.raises(ValueError) as e:
        enc(t(np.zeros((4, 2, 3, D), np.float32)))
    assert "TransformerEncoder(" in _msg(e) and f"(T, N, {D})" in _msg(e) and "TNC" in _msg(e)


def test_bad_masks(backend):
    layer = dl.nn.TransformerEncoderLayer(D, H, FF)                 # TNC
    x = t(np.zeros((6, 3, D), np.float32))
    with pytest.raises(ValueError) as e:                            # (T, N) given: layout hint
        layer(x, src_key_padding_mask=t(np.zeros((6, 3), bool)))
    assert "(N, T) = (3, 6)" in _msg(e) and "got (6, 3)" in _msg(e) and "batch_first=True" in _msg(e)
    with pytest.raises(ValueError) as e:
        layer(x, src_key_padding_mask=t(np.zeros((3, 5), bool)))
    assert "got (3, 5)" in _msg(e)
    with pytest.raises(ValueError) as e:
        layer(x, valid_length=t(np.array([1, 2, 3, 4, 5, 6])))
    assert "valid_length" in _msg(e) and "swapped" in _msg(e)
    with pytest.raises(ValueError, match="not both"):
        layer(x, src_key_padding_mask=t(np.zeros((3, 6), bool)), valid_length=t(np.array([1, 2, 3])))
    with pytest.raises(ValueError) as e:
        layer(x, src_mask=t(np.zeros((6, 5), bool)))
    assert "(L, S) = (6, 6)" in _msg(e) and "(N*nhead, L, S) = (6, 6, 6)" in _msg(e)


def test_bad_construction(backend):
    with pytest.raises(AssertionError, match="^embed_dim must be divisible by num_heads$"):    # torch's
        dl.nn.TransformerEncoderLayer(10, 3)
    with pytest.raises(ValueError, match="layout"):
        dl.nn.TransformerEncoderLayer(D, H, layout="NCT")
    with pytest.raises(ValueError, match="contradicts"):
        dl.nn.TransformerEncoderLayer(D, H, batch_first=False, layout="NTC")
    with pytest.raises(RuntimeError, match="^activation should be relu/gelu, not swish$"):   # torch's
        dl.nn.TransformerEncoderLayer(D, H, activation="swish")
    if backend == "mxnet":                                      # torch.nn takes any module (as dualdl on torch)
        with pytest.raises(TypeError, match="TransformerEncoderLayer"):
            dl.nn.TransformerEncoder(dl.nn.Linear(D, D), 2)
    with pytest.raises(TypeError, match="TransformerEncoderLayer"):
        dl.nn.TransformerEncoder("layer", 2)


def test_torch_padded_positions_match_the_reference_path():
    """Plain torch gives different padded rows on its two paths: the nested-tensor fast path (eval,
    no grad) zeroes them, the reference path (training, or any gradient) leaves values there. With
    torch's key padding mask dualdl gives the reference path's numbers everywhere, padded rows too;
    with Gluon's valid_length it zeroes padded rows, as the fast path and gluonnlp."""
    import warnings
    import torch
    with dl.use("torch"):
        ours = dl.nn.TransformerEncoder(dl.nn.TransformerEncoderLayer(D, H, FF, batch_first=True), 2)
    ours.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, FF, batch_first=True), 2,
                                           enable_nested_tensor=True)
        slow = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, FF, batch_first=True), 2,
                                           enable_nested_tensor=False)
    fast.load_state_dict(ours.state_dict())
    slow.load_state_dict(ours.state_dict())
    fast.eval(), slow.eval()
    x = torch.randn(3, 6, D, generator=torch.Generator().manual_seed(0))
    vl = torch.tensor([6, 4, 2])
    pad = torch.arange(6)[None] >= vl[:, None]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")                   # "nested tensors are in prototype stage"
        y, yf = ours(x, src_key_padding_mask=pad), fast(x, src_key_padding_mask=pad)
        y_vl = ours(x, valid_length=vl)
    ys = slow(x.requires_grad_(), src_key_padding_mask=pad)                     # the reference path
    assert (yf[pad] == 0).all() and not (ys[pad] == 0).any()
    assert torch.equal(y, ys.detach()) and (y_vl[pad] == 0).all()
    assert (y - yf)[~pad].abs().max() < 1e-5 and torch.equal(y_vl[~pad], y[~pad])


def test_mxnet_inside_hybridized_parent():
    """Inside a hybridized write-once model the layer sees Symbols: padding given as a -inf/0 float
    mask or as valid_length, and a float attention mask, still give the imperative numbers."""
    with dl.use("mxnet"):
        class Net(dl.nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = dl.nn.TransformerEncoder(
                    dl.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True), 2)

            def forward(self, x, pad, vl, causal):
                return self.enc(x, mask=causal, src_key_padding_mask=pad), self.enc(x, valid_length=vl)

        net = Net()
        net.eval()
        x = np.random.default_rng(6).standard_normal((3, 6, D)).astype(np.float32)
        vl = np.array([6, 3, 1], np.float32)
        pad = np.where(np.arange(6)[None] >= vl[:, None], -np.inf, 0).astype(np.float32)
        causal = np.where(np.triu(np.ones((6, 6), bool), 1), -np.inf, 0).astype(np.float32)
        args = [t(a) for a in (x, pad, vl, causal)]
        ref = [dl.to_numpy(o) for o in net(*args)]
        net.hybridize()
        hyb = [dl.to_numpy(o) for o in net(*args)]
        for r, h in zip(ref, hyb):
            assert np.isfinite(r).all() and np.abs(h - r).max() < 1e-6
        assert (ref[1][np.isinf(pad)] == 0).all() and (ref[0][np.isinf(pad)] != 0).all()


def test_enable_nested_tensor_true_is_ignored_with_warning(backend):
    with pytest.warns(UserWarning, match="enable_nested_tensor=True is ignored"):
        enc = dl.nn.TransformerEncoder(dl.nn.TransformerEncoderLayer(D, H, FF), 1, enable_nested_tensor=True)
    assert enc.enable_nested_tensor is False


def _layer_norm(x, eps=1e-5):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


def test_dropout_one_drops_everything_without_nan(backend):
    """dropout=1.0 in train mode: torch zeroes every dropped tensor; MXNet's Dropout op would scale
    by 1/(1-p) and give NaN. With the attention and feed-forward blocks dropped to 0 the layer is
    norm2(norm1(x)) (LayerNorm at init: weight 1, bias 0) on both backends, also hybridized."""
    x = np.random.default_rng(3).standard_normal((5, 3, D)).astype(np.float32)
    want = _layer_norm(_layer_norm(x.astype(np.float64)))
    layer = dl.nn.TransformerEncoderLayer(D, H, FF, dropout=1.0).train()
    got = run(layer, x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=2e-5)
    mha = dl.nn.MultiheadAttention(D, H, dropout=1.0).train()
    out, w = mha(t(x), t(x), t(x))
    assert (dl.to_numpy(w) == 0).all()                    # dropped attention weights, not NaN
    np.testing.assert_array_equal(dl.to_numpy(out), np.zeros_like(x))     # out_proj bias is 0 at init
    if backend == "mxnet":
        layer.hybridize()
        np.testing.assert_allclose(run(layer, x), want, atol=2e-5)
