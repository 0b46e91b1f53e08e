"""torch's inputs of issue 34 for the attention and Transformer layers: MultiheadAttention's kdim/vdim
(q/k/v_proj_weight), bias_k/bias_v and zero attention on MXNet (eager and hybridized) with torch.nn's
names, init and numbers; unbatched inputs on both backends; ``activation=`` functions; torch's own
layers in dualdl's TransformerEncoder/Decoder on torch; torch's keyword names for forward arguments."""
import math

import numpy as np
import pytest

import dualdl as dl

torch = pytest.importorskip("torch")
mx = pytest.importorskip("mxnet")

E, H = 6, 3


def _np(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else x.asnumpy()


def _mx(a, dtype=None):
    a = np.asarray(a)
    return mx.nd.array(a, dtype=dtype or a.dtype)


def _copy(ref, mine):
    dl.load_state_dict(mine, {k: v.detach().numpy() for k, v in ref.state_dict().items()})


def _mx_run(m, args, kwargs, gouts):
    """Outputs, input gradients and parameter gradients of one MXNet call."""
    xs = [_mx(a) if isinstance(a, np.ndarray) else a for a in args]
    for x, a in zip(xs, args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            x.attach_grad()
    kw = {k: (_mx(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    for p in m.parameters():
        p.zero_grad()
    with mx.autograd.record():
        out = m(*xs, **kw)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
    mx.autograd.backward(outs, [_mx(g) for g in gouts[:len(outs)]])
    return ([o.asnumpy() for o in outs], [x.grad.asnumpy() for x, a in zip(xs, args)
                                          if isinstance(a, np.ndarray) and a.dtype.kind == "f"],
            {k: p.grad().asnumpy() for k, p in m.named_parameters()})


def _torch_run(m, args, kwargs, gouts):
    xs = [torch.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in args]
    kw = {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    m.zero_grad()
    out = m(*xs, **kw)
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
    torch.autograd.backward(outs, [torch.from_numpy(g) for g in gouts[:len(outs)]])
    return ([o.detach().numpy() for o in outs], [x.grad.numpy() for x in xs if isinstance(x, torch.Tensor)
                                                 and x.requires_grad],
            {k: p.grad.numpy() for k, p in m.named_parameters()})


def _max_diff(a, b):
    d = [float(np.abs(x.astype(np.float64) - y).max()) for x, y in zip(a[0] + a[1], b[0] + b[1])]
    d += [float(np.abs(a[2][k].astype(np.float64) - b[2][k]).max()) for k in b[2]]
    assert len(a[0]) == len(b[0]) and set(a[2]) == set(b[2])
    return max(d)


def _agree_with_torch(ref, name, ctor, args, kwargs=None, dtype="float64", tol=1e-12):
    """dl.nn.<name>(*ctor) on MXNet, eager and hybridized, has torch.nn ``ref``'s outputs and gradients."""
    kwargs = kwargs or {}
    ref = ref.to(getattr(torch, dtype))
    with dl.use("mxnet"):
        mine = getattr(dl.nn, name)(**ctor, dtype=dtype)
    assert [n for n, _ in mine.named_parameters()] == [n for n, _ in ref.named_parameters()]
    _copy(ref, mine)
    rng = np.random.default_rng(1)
    outs = ref(*[torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args],
               **{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    shapes = [tuple(o.shape) for o in (outs if isinstance(outs, tuple) else (outs,)) if o is not None]
    gouts = [rng.standard_normal(s).astype(dtype) for s in shapes]
    want = _torch_run(ref, args, kwargs, gouts)
    got = _mx_run(mine, args, kwargs, gouts)
    d = _max_diff(got, want)
    assert d <= tol, (name, ctor, d)
    mine.hybridize()
    _mx_run(mine, args, kwargs, gouts)
    d_h = _max_diff(_mx_run(mine, args, kwargs, gouts), want)
    assert d_h <= tol, (name, ctor, "hybridized", d_h)
    return max(d, d_h)


def _x(*shape, seed=0, dtype="float64"):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(dtype)


# ---- MultiheadAttention: kdim/vdim, bias_k/bias_v, zero attention -----------------------------
@pytest.mark.parametrize("kw", [dict(kdim=4, vdim=2), dict(add_bias_kv=True), dict(add_zero_attn=True),
                                dict(add_bias_kv=True, add_zero_attn=True, kdim=4, vdim=2, bias=False)],
                         ids=["kdim vdim", "bias_kv", "zero_attn", "all, no bias"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_torch_options_on_mxnet(kw, batch_first):
    """What MXNet used to refuse ("no bias_k/bias_v rows" ...): torch's parameters and numbers, with
    a bool key padding mask, a 3-D float attention mask and per-head weights, eager and hybridized."""
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(E, H, batch_first=batch_first, **kw)
    kd, vd = kw.get("kdim", E), kw.get("vdim", E)
    L, S, N = 4, 5, 2
    lay = (lambda t, c: (N, t, c)) if batch_first else (lambda t, c: (t, N, c))
    q, k, v = _x(*lay(L, E)), _x(*lay(S, kd), seed=1), _x(*lay(S, vd), seed=2)
    pad = np.zeros((N, S), bool)
    pad[1, 3:] = True
    am = _x(N * H, L, S, seed=3)
    d = _agree_with_torch(ref, "MultiheadAttention", dict(embed_dim=E, num_heads=H, batch_first=batch_first, **kw),
                          [q, k, v], dict(key_padding_mask=pad, attn_mask=am, average_attn_weights=False))
    assert d <= 1e-12


def test_mha_parameters_and_init_are_torchs():
    with dl.use("mxnet"):
        m = dl.nn.MultiheadAttention(64, 4, add_bias_kv=True, kdim=32, vdim=16)
    ref = torch.nn.MultiheadAttention(64, 4, add_bias_kv=True, kdim=32, vdim=16)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in ref.named_parameters()]
    assert m.in_proj_weight is None and m._qkv_same_embed_dim is False and (m.kdim, m.vdim) == (32, 16)
    sd = {k: dl.to_numpy(v) for k, v in dl.state_dict(m).items()}
    for name, fan_in in (("q_proj_weight", 64), ("k_proj_weight", 32), ("v_proj_weight", 16)):
        bound = math.sqrt(6.0 / (64 + fan_in))                      # xavier_uniform_ on each
        assert 0.9 * bound < np.abs(sd[name]).max() <= bound
    bk = np.concatenate([sd["bias_k"].ravel(), sd["bias_v"].ravel()])
    assert abs(bk.std() - math.sqrt(1 / 64)) < 0.3 * math.sqrt(1 / 64)      # xavier_normal_ on (1, 1, E)
    assert (sd["in_proj_bias"] == 0).all() and (sd["out_proj.bias"] == 0).all()


@pytest.mark.parametrize("be", ["torch", "mxnet"])
def test_mha_call_variants_match_torch(be):
    """need_weights=False, averaged weights, 2-D bool / 3-D float masks, key is value, is_causal."""
    torch.manual_seed(1)
    ref = torch.nn.MultiheadAttention(E, H, add_zero_attn=True).double()
    with dl.use(be):
        mine = dl.nn.MultiheadAttention(E, H, add_zero_attn=True, dtype="float64")
    _copy(ref, mine)
    t = (lambda a: torch.from_numpy(a)) if be == "torch" else _mx
    q, kv = _x(4, 2, E), _x(5, 2, E, seed=1)
    causal = np.triu(np.ones((4, 4), bool), 1)
    calls = [((q, kv, kv), dict(need_weights=False)), ((q, kv, kv), dict(attn_mask=np.tile(np.array([0, 1, 0, 0, 1], bool), (4, 1)))),
             ((q, q, q), dict(attn_mask=causal, is_causal=True)), ((q, q, q), dict(attn_mask=_x(2 * H, 4, 4)))]
    for args, kw in calls:
        want = ref(*map(torch.from_numpy, args), **{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                                                    for k, v in kw.items()})
        tq = t(args[0])
        ta = [tq if a is args[0] else None for a in args]
        tkv = t(args[1]) if args[1] is not args[0] else tq
        got = mine(ta[0], tkv, tkv, **{k: t(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if w is not None:
                assert np.abs(dl.to_numpy(g) - _np(w)).max() <= 1e-12, kw


# ---- unbatched inputs ---------------------------------------------------------------------------
UNBATCHED = [
    ("MultiheadAttention", dict(embed_dim=E, num_heads=H, add_bias_kv=True, batch_first=True),
     lambda: ([_x(4, E), _x(5, E, seed=1), _x(5, E, seed=2)],
              dict(key_padding_mask=np.array([0, 0, 0, 1, 1], bool), attn_mask=_x(H, 4, 5, seed=3)))),
    ("TransformerEncoderLayer", dict(d_model=E, nhead=H, dim_feedforward=8, dropout=0.0, batch_first=True),
     lambda: ([_x(5, E)], dict(src_key_padding_mask=np.array([0, 0, 1, 0, 1], bool)))),
    ("TransformerDecoderLayer", dict(d_model=E, nhead=H, dim_feedforward=8, dropout=0.0, norm_first=True),
     lambda: ([_x(4, E), _x(5, E, seed=1)], dict(tgt_mask=np.triu(np.ones((4, 4), bool), 1),
                                                 memory_key_padding_mask=np.array([0, 1, 0, 0, 1], bool)))),
    ("Transformer", dict(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8,
                         dropout=0.0),
     lambda: ([_x(5, E), _x(4, E, seed=1)], dict(src_key_padding_mask=np.array([0, 0, 0, 1, 1], bool)))),
]


@pytest.mark.parametrize("name,ctor,inputs", UNBATCHED, ids=[u[0] for u in UNBATCHED])
def test_unbatched_inputs_as_torch(name, ctor, inputs):
    """(T, E) inputs and (T,) key padding masks, as torch takes them: torch's numbers on torch
    (bit for bit) and on MXNet eager and hybridized (float64 here: LayerNorm's declared limit)."""
    args, kwargs = inputs()
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(**ctor).double()
    with dl.use("torch"):
        mine = getattr(dl.nn, name)(**ctor, dtype="float64")
    mine.load_state_dict(ref.state_dict())
    t = {k: torch.from_numpy(v) for k, v in kwargs.items()}
    want, got = ref(*map(torch.from_numpy, args), **t), mine(*map(torch.from_numpy, args), **t)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert torch.equal(g, w)
    tol = 1e-12 if name == "MultiheadAttention" else 1e-10          # MXNet's float64 LayerNorm: 1e2 ulp
    _agree_with_torch(ref, name, ctor, args, kwargs, tol=tol)


def test_unbatched_shape_errors_name_the_rule():
    with dl.use("mxnet"):
        mha = dl.nn.MultiheadAttention(E, H)
        with pytest.raises(ValueError, match="all be batched .* or all unbatched"):
            mha(_mx(_x(4, E)), _mx(_x(5, 2, E)), _mx(_x(5, 2, E)))
        with pytest.raises(ValueError, match=r"key_padding_mask of shape \(T,\) = \(5,\)"):
            mha(_mx(_x(4, E)), _mx(_x(5, E)), _mx(_x(5, E)), key_padding_mask=_mx(np.zeros((1, 5), bool)))
        layer = dl.nn.TransformerEncoderLayer(E, H, 8)
        with pytest.raises(ValueError, match=r"\(N\*nhead, L, S\) = \(3, 5, 5\)"):
            layer(_mx(_x(5, E)), src_mask=_mx(np.zeros((6, 5, 5), bool)))


# ---- activation= --------------------------------------------------------------------------------
def test_activation_functions():
    """torch's F.relu/F.gelu and dualdl's ops run on MXNet as the names do; another function is
    refused by name on MXNet and honoured on torch (torch's numbers)."""
    import torch.nn.functional as F
    x = _x(5, 2, E)
    outs = {}
    for act in ("gelu", F.gelu, dl.ops.gelu, "relu", F.relu, torch.relu, dl.ops.relu):
        with dl.use("mxnet"):
            layer = dl.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0, activation=act, dtype="float64")
        assert layer.activation in ("relu", "gelu")
        with dl.use("torch"):
            torch.manual_seed(0)
            ref = dl.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0, activation=act, dtype="float64")
        _copy(ref, layer)
        outs[act] = d = np.abs(layer(_mx(x)).asnumpy() - ref(torch.from_numpy(x)).detach().numpy()).max()
        assert d <= 1e-10, (act, d)
    with dl.use("mxnet"):
        with pytest.raises(NotImplementedError, match=r"activation=.*tanh.*cannot be honoured on the mxnet "
                                                      r"backend: .*'relu' and 'gelu'"):
            dl.nn.TransformerDecoderLayer(E, H, 8, activation=torch.tanh)
    with dl.use("torch"):
        torch.manual_seed(0)
        mine = dl.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0, activation=torch.tanh)
    torch.manual_seed(0)
    ref = torch.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0, activation=torch.tanh)
    xt = torch.from_numpy(x.astype(np.float32))
    assert torch.equal(mine(xt), ref(xt))


# ---- torch's own layers in dualdl's stacks (torch backend) ----------------------------------------
def test_torch_layers_in_dualdl_stacks_on_torch():
    """torch.nn.TransformerEncoder/Decoder take torch's own layer (torch's module tests pass one);
    dualdl's do too on torch, with torch.nn's numbers."""
    x, mem = torch.from_numpy(_x(5, 2, E, dtype="float32")), torch.from_numpy(_x(4, 2, E, seed=1, dtype="float32"))
    pad = torch.tensor([[False, False, False, True, True], [False] * 5])
    enc_layer = torch.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0)
    dec_layer = torch.nn.TransformerDecoderLayer(E, H, 8, dropout=0.0)
    with dl.use("torch"):
        enc, dec = dl.nn.TransformerEncoder(enc_layer, 2), dl.nn.TransformerDecoder(dec_layer, 2)
        with pytest.raises(ValueError, match="valid_length needs dl.nn.TransformerEncoderLayer"):
            enc(x, valid_length=torch.tensor([5, 3]))
    ref_enc = torch.nn.TransformerEncoder(enc_layer, 2, enable_nested_tensor=False)
    ref_dec = torch.nn.TransformerDecoder(dec_layer, 2)
    assert torch.equal(enc(x, src_key_padding_mask=pad), ref_enc(x, src_key_padding_mask=pad))
    assert torch.equal(dec(mem, x), ref_dec(mem, x))


# ---- torch's keyword names --------------------------------------------------------------------------
@pytest.mark.parametrize("be", ["torch", "mxnet"])
def test_forward_keyword_names_are_torchs(be):
    with dl.use(be):
        t = (lambda a: torch.from_numpy(a)) if be == "torch" else _mx
        x, mem = t(_x(5, 2, E, dtype="float32")), t(_x(4, 2, E, seed=1, dtype="float32"))
        mha = dl.nn.MultiheadAttention(E, H)
        a = mha(x, mem, mem)[0]
        b = mha(query=x, key=mem, value=mem)[0]
        assert np.array_equal(dl.to_numpy(a), dl.to_numpy(b))
        enc = dl.nn.TransformerEncoderLayer(E, H, 8, dropout=0.0)
        assert np.array_equal(dl.to_numpy(enc(src=x)), dl.to_numpy(enc(x)))
        dec = dl.nn.TransformerDecoderLayer(E, H, 8, dropout=0.0)
        assert np.array_equal(dl.to_numpy(dec(tgt=x, memory=mem)), dl.to_numpy(dec(x, mem)))
        model = dl.nn.Transformer(E, H, 1, 1, 8, dropout=0.0)
        assert np.array_equal(dl.to_numpy(model(src=mem, tgt=x)), dl.to_numpy(model(mem, x)))
        for name, state in (("LSTM", 2), ("GRU", 1), ("RNN", 1)):
            rnn = getattr(dl.nn, name)(E, 4)
            h = [t(_x(1, 2, 4, seed=s, dtype="float32")) for s in range(state)]
            h = tuple(h) if state == 2 else h[0]
            out = rnn(input=x, hx=h)
            assert np.array_equal(dl.to_numpy(out[0]), dl.to_numpy(rnn(x, h)[0]))
        for name, state in (("LSTMCell", 2), ("GRUCell", 1), ("RNNCell", 1)):
            cell = getattr(dl.nn, name)(E, 4)
            h = [t(_x(2, 4, seed=s, dtype="float32")) for s in range(state)]
            h = tuple(h) if state == 2 else h[0]
            out = cell(input=x[0], hx=h)
            out = out[0] if isinstance(out, tuple) else out
            ref = cell(x[0], h)
            ref = ref[0] if isinstance(ref, tuple) else ref
            assert np.array_equal(dl.to_numpy(out), dl.to_numpy(ref))
