"""TransformerDecoderLayer / TransformerDecoder / Transformer beyond the parity table: dualdl's errors
(one wording on both backends), hybridized MXNet with masks, a query whose keys are all masked, the
decoder copies' weights, and gluonnlp 0.10's TransformerDecoder (full sequence and its one-step
incremental decoder) rebuilt from dualdl layers on both backends."""
import numpy as np
import pytest

import dualdl as dl

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")
from mxnet import nd  # noqa: E402
from test_parity_transformer import _randomise_gluon  # noqa: E402  (gluonnlp parameters, randomised)

D, H, FF, N, T, S = 8, 2, 16, 3, 5, 4
BACKENDS = ["torch", "mxnet"]


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _t(a, be):
    return dl.from_numpy(a, backend=be)


def _pair(batch_first=False, num_layers=1, **kw):
    """The same decoder on both backends (torch's init copied to MXNet)."""
    layers = {be: dl.nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=batch_first, backend=be, **kw)
              for be in BACKENDS}
    dec = {be: dl.nn.TransformerDecoder(layers[be], num_layers, backend=be) for be in BACKENDS}
    dl.load_state_dict(dec["mxnet"], dl.state_dict(dec["torch"]))
    return dec


@pytest.mark.parametrize("be", BACKENDS)
def test_bad_inputs_get_the_same_dualdl_error_on_both_backends(be):
    layer = dl.nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, backend=be)
    tgt, mem = _t(_x((T, N, D)), be), _t(_x((S, N, D)), be)
    cases = [
        ((_t(_x((T, N, D + 1)), be), mem), {}, r"expected tgt of shape \(T, N, 8\)"),
        ((tgt, _t(_x((S, N + 1, D)), be)), {}, "tgt and memory must have the same batch size N"),
        ((tgt, mem), dict(tgt_mask=_t(_x((T, S)), be)), r"expected tgt_mask of shape \(L, S\) = \(5, 5\)"),
        ((tgt, mem), dict(memory_mask=_t(_x((T, T)), be)), r"expected memory_mask of shape \(L, S\) = \(5, 4\)"),
        ((tgt, mem), dict(tgt_key_padding_mask=_t(np.zeros((T, N), bool), be)),
         r"tgt_key_padding_mask of shape \(N, T\) = \(3, 5\).*other layout"),
        ((tgt, mem), dict(memory_key_padding_mask=_t(np.zeros((N, T), bool), be)),
         r"memory_key_padding_mask of shape \(N, T\) = \(3, 4\)"),
        ((tgt, mem), dict(tgt_is_causal=True), "tgt_is_causal=True needs tgt_mask"),
    ]
    for args, kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            layer(*args, **kw)
    with pytest.raises(TypeError, match="attention mask must be bool .* or float"):
        layer(tgt, mem, tgt_mask=_t(np.zeros((T, T), np.int64), be))
    if be == "mxnet":                     # torch.nn takes any module as the layer, and so does dualdl on torch
        with pytest.raises(TypeError, match="decoder_layer must be a dl.nn.TransformerDecoderLayer"):
            dl.nn.TransformerDecoder(dl.nn.TransformerEncoderLayer(D, H, backend=be), 2, backend=be)
    with pytest.raises(ValueError, match="num_layers must be >= 1"):
        dl.nn.TransformerDecoder(layer, 0, backend=be)
    with pytest.raises(AssertionError, match="^embed_dim must be divisible by num_heads$"):   # torch's
        dl.nn.Transformer(D, 3, backend=be)
    model = dl.nn.Transformer(D, H, 1, 1, FF, dropout=0.0, backend=be)
    with pytest.raises(ValueError, match=r"Transformer\(d_model=8.*expected src of shape"):
        model(_t(_x((S, N, D + 1)), be), tgt)
    with pytest.raises(ValueError, match="tgt and memory must have the same batch size"):
        model(_t(_x((S, N + 1, D)), be), tgt)


def test_decoder_with_masks_eager_hybridized_and_torch_agree():
    """Causal tgt_mask (float -inf, from generate_square_subsequent_mask), key padding on tgt and memory,
    2 layers: MXNet eager and hybridized against torch, outputs and input gradients."""
    dec = _pair(batch_first=True, num_layers=2, norm_first=True)
    tgt, mem = _x((N, T, D), 1), _x((N, S, D), 2)
    tpad = np.arange(T)[None] >= np.array([5, 3, 1])[:, None]
    mpad = np.arange(S)[None] >= np.array([4, 2, 1])[:, None]
    g = _x((N, T, D), 3)
    outs = {}
    for name, be, hyb in (("torch", "torch", False), ("mxnet", "mxnet", False), ("hybridized", "mxnet", True)):
        m = dec[be]
        if hyb:
            m.hybridize()
        causal = dl.nn.Transformer.generate_square_subsequent_mask(T, backend=be)
        xt, xm = _t(tgt, be), _t(mem, be)
        if be == "torch":
            xt.requires_grad_(True)
            out = m(xt, xm, tgt_mask=causal, tgt_key_padding_mask=_t(tpad, be), memory_key_padding_mask=_t(mpad, be))
            out.backward(torch.from_numpy(g))
            outs[name] = (out.detach().numpy(), xt.grad.numpy())
        else:
            xt.attach_grad()
            with mx.autograd.record():
                out = m(xt, xm, tgt_mask=causal, tgt_key_padding_mask=_t(tpad, be),
                        memory_key_padding_mask=_t(mpad, be))
            out.backward(nd.array(g))
            outs[name] = (out.asnumpy(), xt.grad.asnumpy())
    ref = outs["torch"]
    for name in ("mxnet", "hybridized"):
        d_out, d_grad = (float(np.abs(a - b).max()) for a, b in zip(outs[name], ref))
        print(f"[decoder 2 layers, causal + padding masks] {name} vs torch: out {d_out:.1e}, dtgt {d_grad:.1e}")
        assert d_out <= 1e-5 and d_grad <= 1e-5
    assert np.array_equal(outs["mxnet"][0], outs["hybridized"][0])


@pytest.mark.parametrize("be", BACKENDS)
def test_a_query_with_every_key_masked_is_finite(be):
    """dualdl masks with -1e18: a query whose memory keys are all masked attends uniformly (finite
    output and gradients) on both backends; torch 2.13's own layer returns 0 attention there (its
    SDPA path; NaN on its need_weights path)."""
    dec = _pair()[be]
    mpad = np.zeros((N, S), bool)
    mpad[1] = True                                              # sample 1: every memory key padded
    out = dl.to_numpy(dec(_t(_x((T, N, D)), be), _t(_x((S, N, D)), be), memory_key_padding_mask=_t(mpad, be)))
    assert np.isfinite(out).all()


def test_decoder_copies_start_with_the_template_weights_and_are_independent():
    for be in BACKENDS:
        layer = dl.nn.TransformerDecoderLayer(D, H, FF, backend=be)
        dec = dl.nn.TransformerDecoder(layer, 2, norm=dl.nn.LayerNorm(D, backend=be), backend=be)
        sd = {k: dl.to_numpy(v) for k, v in dl.state_dict(dec).items()}
        assert len(sd) == 2 * 18 + 2 and "norm.weight" in sd
        for k, v in dl.state_dict(layer).items():
            assert np.array_equal(sd[f"layers.0.{k}"], dl.to_numpy(v)) and np.array_equal(sd[f"layers.1.{k}"], dl.to_numpy(v))
        p0 = dict(dec.named_parameters())["layers.0.linear1.bias"]
        p1 = dict(dec.named_parameters())["layers.1.linear1.bias"]
        assert p0 is not p1


# ---- gluonnlp 0.10's TransformerDecoder, rebuilt ------------------------------------------------
def _gluonnlp_decoder_cell_state(P, prefix):
    """gluonnlp TransformerDecoderCell parameters -> dualdl TransformerDecoderLayer state dict
    (attention_cell_in/inter = multiheadattentioncell0/1, proj_in/inter, layernorm0/1, ffn)."""
    z = np.zeros(D, np.float32)

    def attn(cell, proj):
        c = f"{prefix}multiheadattentioncell{cell}_"
        return {"in_proj_weight": np.concatenate([P[c + n + "_weight"] for n in ("query", "key", "value")]),
                "in_proj_bias": np.zeros(3 * D, np.float32), "out_proj.weight": P[f"{prefix}{proj}_weight"],
                "out_proj.bias": z}
    sd = {f"self_attn.{k}": v for k, v in attn(0, "proj_in").items()}
    sd.update({f"multihead_attn.{k}": v for k, v in attn(1, "proj_inter").items()})
    f = prefix + "positionwiseffn0_"
    sd.update({"linear1.weight": P[f + "ffn_1_weight"], "linear1.bias": P[f + "ffn_1_bias"],
               "linear2.weight": P[f + "ffn_2_weight"], "linear2.bias": P[f + "ffn_2_bias"],
               "norm1.weight": P[prefix + "layernorm0_gamma"], "norm1.bias": P[prefix + "layernorm0_beta"],
               "norm2.weight": P[prefix + "layernorm1_gamma"], "norm2.bias": P[prefix + "layernorm1_beta"],
               "norm3.weight": P[f + "layernorm0_gamma"], "norm3.bias": P[f + "layernorm0_beta"]})
    return sd


def _gluonnlp_decoders(maxlen):
    from gluonnlp.model.transformer import TransformerDecoder, TransformerOneStepDecoder
    kw = dict(num_layers=2, units=D, hidden_size=FF, num_heads=H, dropout=0.0, max_length=maxlen, prefix="dec_")
    full = TransformerDecoder(**kw)
    full.initialize(mx.init.Normal(0.3))
    mem = nd.array(_x((N, S, D), 5))
    full(nd.array(_x((N, T, D), 6)), full.init_state_from_encoder(mem, None))     # finish deferred init
    P = _randomise_gluon(full)
    return full, TransformerOneStepDecoder(params=full.collect_params(), **kw), P


def _dualdl_gluonnlp_decoder(P, be, maxlen):
    """gluonnlp's decoder = x*sqrt(units) + its PE, input LayerNorm, post-LN cells: dualdl layers."""
    pe = dl.nn.PositionalEncoding(D, max_len=maxlen, style="gluonnlp", scale=True, batch_first=True, backend=be)
    assert np.abs(dl.to_numpy(dl.state_dict(pe)["pe"]) - P["dec_const"]).max() <= 1e-6
    ln = dl.nn.LayerNorm(D, backend=be)
    dl.load_state_dict(ln, {"weight": P["dec_layernorm0_gamma"], "bias": P["dec_layernorm0_beta"]})
    dec = dl.nn.TransformerDecoder(dl.nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True,
                                                                 backend=be), 2, backend=be)
    sd = {}
    for i in range(2):
        sd.update({f"layers.{i}.{k}": v for k, v in _gluonnlp_decoder_cell_state(P, f"dec_transformer{i}_").items()})
    dl.load_state_dict(dec, sd)
    return lambda x, mem, **kw: dec(ln(pe(x)), mem, **kw)


def test_gluonnlp_decoder_and_its_incremental_decoding_rebuilt_on_both_backends():
    maxlen = 16
    full, step, P = _gluonnlp_decoders(maxlen)
    x, mem = _x((N, T, D), 7), _x((N, S, D), 8)
    tvl, mvl = np.array([5, 3, 1]), np.array([4, 2, 1])
    ref = full(nd.array(x), full.init_state_from_encoder(nd.array(mem), nd.array(mvl)), nd.array(tvl))[0].asnumpy()
    states = step.init_state_from_encoder(nd.array(mem), nd.array(mvl))
    inc = []
    for t in range(T):                       # states: [all previous step inputs, mem_value, mem_masks]
        out, states, _ = step(nd.array(x[:, t]), states)
        inc.append(out.asnumpy())
    assert states[0].shape == (N, T, D)      # the prefix is re-decoded every step (no key/value cache)
    inc = np.stack(inc, 1)
    valid = np.arange(T)[None] < tvl[:, None]
    mpad = np.arange(S)[None] >= mvl[:, None]
    for be in BACKENDS:
        dec = _dualdl_gluonnlp_decoder(P, be, maxlen)
        causal = dl.nn.Transformer.generate_square_subsequent_mask(T, backend=be)
        got = dl.to_numpy(dec(_t(x, be), _t(mem, be), tgt_mask=causal, memory_key_padding_mask=_t(mpad, be)))
        d_full = float(np.abs(got[valid] - ref[valid]).max())
        d_inc = float(np.abs(got - inc).max())
        print(f"[gluonnlp TransformerDecoder rebuilt on {be}] full (valid rows) {d_full:.1e}, one-step decoder "
              f"{d_inc:.1e} (|out| max {np.abs(ref).max():.2f})")
        assert d_full <= 1e-5 and d_inc <= 1e-5 and np.abs(ref).max() > 0.5
    assert (ref[~valid] == 0).all()          # gluonnlp zeroes padded target steps; torch's decoder does not


@pytest.mark.parametrize("be", BACKENDS)
def test_transformer_without_memory_mask_gives_torchs_numbers(be):
    """src_key_padding_mask without memory_key_padding_mask: the decoder attends to the padded memory
    positions, whose values are torch's (dualdl used to zero them: up to 2.09 off torch.nn.Transformer),
    so the output is torch.nn.Transformer's, and no warning is needed."""
    import warnings
    torch.manual_seed(0)
    ref = torch.nn.Transformer(D, H, 1, 1, FF, dropout=0.0)
    model = dl.nn.Transformer(D, H, 1, 1, FF, dropout=0.0, backend=be)
    dl.load_state_dict(model, {k: v.detach().numpy() for k, v in ref.state_dict().items()})
    src, tgt = _x((S, N, D), 1), _x((T, N, D), 2)
    spad = np.arange(S)[None] >= np.array([4, 2, 1])[:, None]
    want = ref(torch.from_numpy(src), torch.from_numpy(tgt), src_key_padding_mask=torch.from_numpy(spad))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = dl.to_numpy(model(_t(src, be), _t(tgt, be), src_key_padding_mask=_t(spad, be)))
    d = float(np.abs(got - want.detach().numpy()).max())
    assert (d == 0.0) if be == "torch" else d <= 1e-5, d


@pytest.mark.parametrize("name", ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"])
def test_signatures_are_torchs_on_both_backends(name):
    """Constructor and forward: torch 2.13's parameter names, order and defaults on both adapters
    (activation's default is the string "relu" for torch's F.relu; ``layout`` is dualdl's extra, and
    the layers' ``batch_first=None`` means "not given", so that ``layout=`` may say it: False, as torch)."""
    import inspect
    import dualdl_mx.nn as mx_nn
    import dualdl_torch.nn as torch_nn

    def default(p):
        if p.name == "activation":
            return "relu"
        return False if (p.name, p.default) == ("batch_first", None) else p.default

    def params(fn):
        return [(p.name, default(p)) for p in inspect.signature(fn).parameters.values()
                if p.name not in ("self", "layout")]
    want = getattr(torch.nn, name)
    for impl in (getattr(torch_nn, name), getattr(mx_nn, name)):
        assert params(impl.__init__) == params(want.__init__), impl
        assert params(impl.forward) == params(want.forward), impl


@pytest.mark.parametrize("be", BACKENDS)
def test_dropout_follows_train_and_eval_and_p1_is_finite(be):
    """Dropout 0.5 changes the output in train mode and not in eval mode; p = 1 gives finite outputs
    (torch's guard, which the MXNet build shares through dualdl's Dropout)."""
    x, mem = _t(_x((T, N, D), 1), be), _t(_x((S, N, D), 2), be)
    layer = dl.nn.TransformerDecoderLayer(D, H, FF, dropout=0.5, backend=be)
    layer.train()
    with dl.autograd.record(layer):
        a, b = dl.to_numpy(layer(x, mem)), dl.to_numpy(layer(x, mem))
    assert np.abs(a - b).max() > 1e-3
    layer.eval()
    assert np.array_equal(dl.to_numpy(layer(x, mem)), dl.to_numpy(layer(x, mem)))
    full = dl.nn.TransformerDecoderLayer(D, H, FF, dropout=1.0, backend=be)
    full.train()
    with dl.autograd.record(full):
        assert np.isfinite(dl.to_numpy(full(x, mem))).all()
