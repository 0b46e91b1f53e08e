"""nn.LSTM / GRU / RNN and the cells on each backend: torch's parameter names, shapes, order and
init; (output, state) returns; layouts; numbers against a numpy reference; clear errors."""
import math

import numpy as np
import pytest

import dualdl as dl
from dualdl import nn

R = np.random.default_rng(7)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _np(t):
    return dl.to_numpy(t)


def _t(a):
    return dl.from_numpy(np.asarray(a, dtype=np.float32))


def expected_names(num_layers, bidirectional, bias=True):
    names = []
    for k in range(num_layers):
        for sfx in ("", "_reverse")[: 2 if bidirectional else 1]:
            names += [f"weight_ih_l{k}{sfx}", f"weight_hh_l{k}{sfx}"]
            if bias:
                names += [f"bias_ih_l{k}{sfx}", f"bias_hh_l{k}{sfx}"]
    return names


# ---- numpy reference (one layer, one direction, TNC) ----------------------------------------
def _sig(x):
    return 1 / (1 + np.exp(-x))


def np_step(kind, x, h, c, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh"):
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    if kind == "LSTM":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        return _sig(o) * np.tanh(c), c
    if kind == "GRU":
        ir, iz, inn = np.split(gi, 3, axis=-1)
        hr, hz, hn = np.split(gh, 3, axis=-1)
        r, z = _sig(ir + hr), _sig(iz + hz)
        n = np.tanh(inn + r * hn)
        return (1 - z) * n + z * h, None
    pre = gi + gh
    return (np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, 0)), None


def np_layer(kind, x, h, c, p, sfx="_l0", reverse=False, nonlinearity="tanh"):
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    out = np.zeros(x.shape[:2] + (h.shape[-1],), np.float64)
    for t in steps:
        h, c = np_step(kind, x[t], h, c, p["weight_ih" + sfx], p["weight_hh" + sfx], p["bias_ih" + sfx],
                       p["bias_hh" + sfx], nonlinearity)
        out[t] = h
    return out, h, c


def np_rnn(kind, x, p, num_layers, bidirectional, H, nonlinearity="tanh"):
    """Multi-layer, optionally bidirectional reference with zero initial state (TNC)."""
    D = 2 if bidirectional else 1
    hs, cs, inp = [], [], x.astype(np.float64)
    for k in range(num_layers):
        outs = []
        for d in range(D):
            z = np.zeros((x.shape[1], H))
            o, h, c = np_layer(kind, inp, z, z, p, f"_l{k}" + ("_reverse" if d else ""), bool(d), nonlinearity)
            outs.append(o)
            hs.append(h)
            cs.append(c)
        inp = np.concatenate(outs, axis=-1)
    return inp, np.stack(hs), (np.stack(cs) if kind == "LSTM" else None)


def _params(m):
    return {k: _np(v) for k, v in dl.state_dict(m).items()}


# ---- parameters ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, True)])
def test_parameter_names_shapes_order(backend, kind, num_layers, bidirectional):
    m = getattr(nn, kind)(6, 5, num_layers=num_layers, bidirectional=bidirectional)
    sd = dl.state_dict(m)
    assert list(sd) == expected_names(num_layers, bidirectional)
    assert [n for n, _ in m.named_parameters()] == list(sd)
    G, D = GATES[kind], 2 if bidirectional else 1
    for name, v in sd.items():
        k = int(name.split("_l")[1][0])
        n_in = 6 if k == 0 else 5 * D
        want = {"weight_ih": (G * 5, n_in), "weight_hh": (G * 5, 5)}.get(name[:9], (G * 5,))
        assert tuple(v.shape) == want, name
    assert isinstance(m, getattr(nn, kind))


def test_no_bias_has_no_bias_params(backend):
    m = nn.GRU(4, 3, num_layers=2, bias=False)
    assert list(dl.state_dict(m)) == expected_names(2, False, bias=False)
    out, h = m(_t(R.normal(size=(5, 2, 4))))
    assert out.shape == (5, 2, 3) and h.shape == (2, 2, 3)


def test_init_is_torch_uniform(backend):
    H = 64
    m = nn.LSTM(32, H, num_layers=2)
    bound = 1 / math.sqrt(H)
    vals = np.concatenate([a.ravel() for a in _params(m).values()])
    assert np.abs(vals).max() <= bound + 1e-7
    # U(-b, b) has std b/sqrt(3); 66k samples -> well within 3%
    assert abs(vals.std() - bound / math.sqrt(3)) < 0.03 * bound
    assert abs(vals.mean()) < 0.01 * bound
    biases = np.concatenate([a for k, a in _params(m).items() if k.startswith("bias")])
    assert biases.std() > 0.5 * bound / math.sqrt(3)        # biases are random too (Gluon: zeros)


# ---- forward returns -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("layout_kw", [{}, {"batch_first": True}, {"layout": "NTC"}, {"layout": "TNC"}])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_returns_output_and_state(backend, kind, layout_kw, bidirectional):
    T, N, C, H, L = 5, 3, 4, 6, 2
    m = getattr(nn, kind)(C, H, num_layers=L, bidirectional=bidirectional, **layout_kw)
    bf = layout_kw.get("batch_first", False) or layout_kw.get("layout") == "NTC"
    assert m.batch_first == bf
    x = _t(R.normal(size=(N, T, C) if bf else (T, N, C)))
    D = 2 if bidirectional else 1
    for st in (None, "given"):
        if st == "given":
            h0 = _t(R.normal(size=(L * D, N, H)))
            st = (h0, _t(R.normal(size=(L * D, N, H)))) if kind == "LSTM" else h0
        res = m(x, st)
        assert isinstance(res, tuple) and len(res) == 2
        out, state = res
        assert tuple(out.shape) == ((N, T, D * H) if bf else (T, N, D * H))
        if kind == "LSTM":
            assert isinstance(state, tuple) and len(state) == 2
            for s in state:
                assert tuple(s.shape) == (L * D, N, H)
        else:
            assert tuple(state.shape) == (L * D, N, H)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_matches_numpy_reference(backend, kind):
    T, N, C, H = 4, 3, 5, 6
    m = getattr(nn, kind)(C, H, num_layers=2, bidirectional=True)
    x = R.normal(size=(T, N, C)).astype(np.float32)
    out, state = m(_t(x))
    ref_out, ref_h, ref_c = np_rnn(kind, x, _params(m), 2, True, H)
    np.testing.assert_allclose(_np(out), ref_out, atol=2e-6)
    h = state[0] if kind == "LSTM" else state
    np.testing.assert_allclose(_np(h), ref_h, atol=2e-6)
    if kind == "LSTM":
        np.testing.assert_allclose(_np(state[1]), ref_c, atol=2e-6)
    # bidirectional layout: state[2] is the last layer's forward final step, state[3] its backward one
    np.testing.assert_allclose(_np(h)[2], _np(out)[-1, :, :H], atol=1e-7)
    np.testing.assert_allclose(_np(h)[3], _np(out)[0, :, H:], atol=1e-7)


def test_rnn_nonlinearity_default_tanh_and_relu(backend):
    x = _t(R.normal(size=(6, 2, 3)) * 5)
    m = nn.RNN(3, 4)
    assert m.nonlinearity == "tanh"
    out, _ = m(x)
    ref, _, _ = np_rnn("RNN", dl.to_numpy(x), _params(m), 1, False, 4)
    np.testing.assert_allclose(_np(out), ref, atol=2e-6)
    r = nn.RNN(3, 4, nonlinearity="relu")
    out, _ = r(x)
    ref, _, _ = np_rnn("RNN", dl.to_numpy(x), _params(r), 1, False, 4, "relu")
    np.testing.assert_allclose(_np(out), ref, atol=2e-6)
    assert _np(out).min() >= 0
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")


def test_initial_state_is_used(backend):
    m = nn.GRU(3, 4)
    x = R.normal(size=(5, 2, 3)).astype(np.float32)
    h0 = R.normal(size=(1, 2, 4)).astype(np.float32)
    out, h = m(_t(x), _t(h0))
    p = _params(m)
    ref, ref_h, _ = np_layer("GRU", x, h0[0], None, p)
    np.testing.assert_allclose(_np(out), ref, atol=2e-6)
    np.testing.assert_allclose(_np(h)[0], ref_h, atol=2e-6)


def test_unbatched_input(backend):
    m = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    x = R.normal(size=(5, 3)).astype(np.float32)
    out, (h, c) = m(_t(x))
    assert tuple(out.shape) == (5, 8) and tuple(h.shape) == (4, 4) and tuple(c.shape) == (4, 4)
    out_b, (h_b, _) = m(_t(x[:, None]))
    np.testing.assert_allclose(_np(out), _np(out_b)[:, 0], atol=1e-7)
    out2, _ = m(_t(x), (h, c))          # unbatched state (L*D, H)
    assert tuple(out2.shape) == (5, 8)


def test_train_dropout_between_layers(backend):
    m = nn.LSTM(4, 8, num_layers=2, dropout=0.5)
    x = _t(R.normal(size=(6, 3, 4)))
    m.eval()
    a, _ = m(x)
    b, _ = m(x)
    np.testing.assert_array_equal(_np(a), _np(b))
    m.train()
    c, _ = m(x)
    assert np.abs(_np(c) - _np(a)).max() > 1e-3
    m.eval()
    d, _ = m(x)
    np.testing.assert_array_equal(_np(a), _np(d))


# ---- errors ----------------------------------------------------------------------------------
def test_layout_conflict_and_bad_layout(backend):
    with pytest.raises(ValueError, match="contradicts"):
        nn.LSTM(3, 4, batch_first=False, layout="NTC")
    with pytest.raises(ValueError, match="layout"):
        nn.GRU(3, 4, layout="NCT")
    assert nn.LSTM(3, 4, batch_first=True, layout="ntc").batch_first


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (5,), (6, 2, 7)])
def test_bad_input_shape(backend, shape):
    m = nn.LSTM(5, 4)
    with pytest.raises(ValueError, match=r"LSTM\(input_size=5.*layout 'TNC'.*expected input of shape \(T, N, 5\)"
                                         r"|LSTM\(input_size=5.*expected input of shape \(T, N, 5\).*layout TNC"):
        m(_t(np.zeros(shape)))


def test_bad_state_shape(backend):
    m = nn.LSTM(5, 4, num_layers=2)
    x = _t(np.zeros((6, 3, 5)))
    with pytest.raises(ValueError, match=r"expected state h of shape \(2, 3, 4\).*got \(1, 3, 4\)"):
        m(x, (_t(np.zeros((1, 3, 4))), _t(np.zeros((2, 3, 4)))))
    with pytest.raises(ValueError, match=r"pair \(h, c\)"):
        m(x, _t(np.zeros((2, 3, 4))))
    g = nn.GRU(5, 4)
    with pytest.raises(ValueError, match=r"GRU.*expected state h of shape \(1, 3, 4\)"):
        g(x, _t(np.zeros((1, 4))))


def test_input_dtype_must_match_weights(backend):
    m = nn.GRU(5, 4)
    with pytest.raises(ValueError, match="dtype"):
        m(dl.from_numpy(np.zeros((6, 3, 5), dtype=np.float64)))


def test_dropout_with_one_layer_warns(backend):
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.LSTM(3, 4, dropout=0.5)


def test_batch_first_data_to_tnc_layer_is_detected(backend):
    m = nn.GRU(5, 4)                                  # TNC
    x = _t(np.zeros((3, 6, 5)))                       # actually (N=3, T=6, C)
    h0 = _t(np.zeros((1, 3, 4)))
    with pytest.raises(ValueError, match="batch_first=True / layout='NTC'"):
        m(x, h0)


# ---- cells -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cells(backend, kind):
    base = kind[:-4] if kind != "RNNCell" else "RNN"
    m = getattr(nn, kind)(5, 6)
    names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
    sd = dl.state_dict(m)
    assert list(sd) == names
    assert tuple(sd["weight_ih"].shape) == (GATES[base] * 6, 5)
    p = {k + "_l0": v for k, v in _params(m).items()}
    x = R.normal(size=(3, 5)).astype(np.float32)
    h0 = R.normal(size=(3, 6)).astype(np.float32)
    c0 = R.normal(size=(3, 6)).astype(np.float32)
    if base == "LSTM":
        h, c = m(_t(x), (_t(h0), _t(c0)))
        rh, rc = np_step("LSTM", x, h0, c0, *[p[n + "_l0"] for n in names])
        np.testing.assert_allclose(_np(c), rc, atol=2e-6)
        hz, cz = m(_t(x))
        np.testing.assert_allclose(_np(hz), np_step("LSTM", x, 0 * h0, 0 * c0, *[p[n + "_l0"] for n in names])[0],
                                   atol=2e-6)
    else:
        h = m(_t(x), _t(h0))
        rh, _ = np_step(base, x, h0, None, *[p[n + "_l0"] for n in names])
        hz = m(_t(x))
        np.testing.assert_allclose(_np(hz), np_step(base, x, 0 * h0, None, *[p[n + "_l0"] for n in names])[0],
                                   atol=2e-6)
    np.testing.assert_allclose(_np(h), rh, atol=2e-6)
    with pytest.raises(ValueError, match=rf"{kind}\(input_size=5.*expected input of shape \(N, 5\)"):
        m(_t(np.zeros((3, 4))))
    bad = _t(np.zeros((2, 6)))
    with pytest.raises(ValueError, match=rf"{kind}.*expected state of shape \(3, 6\)"):
        m(_t(x), (bad, bad) if base == "LSTM" else bad)
    n = 2 if base == "LSTM" else 1
    with pytest.raises(ValueError, match=rf"{kind}.*expected {n} state tensor\(s\), got 3"):
        m(_t(x), (_t(h0),) * 3)


# ---- backend specifics -----------------------------------------------------------------------
def test_torch_layers_are_torch_rnns_and_stay_flat():
    import torch
    with dl.use("torch"):
        m = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    assert isinstance(m, torch.nn.LSTM)
    m2 = nn.LSTM(3, 4, num_layers=2, bidirectional=True, backend="torch")
    m2.load_state_dict(m.state_dict())
    # the flat weight list still points at the module's parameters after a load and a move
    assert all(a is b for a, b in zip(m2._flat_weights, [getattr(m2, n) for n in m2._flat_weights_names]))
    m2.to("cpu")
    x = torch.randn(5, 2, 3)
    torch.testing.assert_close(m(x)[0], m2(x)[0], rtol=0, atol=0)


def test_mxnet_hybridized_inside_a_module_matches_imperative():
    import mxnet as mx

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True)
            self.fc = nn.Linear(10, 2)

        def forward(self, x):
            out, (h, c) = self.rnn(x)          # no state: zeros built inside the graph
            return self.fc(out), h, c

    with dl.use("mxnet"):
        net = Net()
        x = _t(R.normal(size=(3, 6, 4)))
        ref = [_np(t) for t in net(x)]
        net.hybridize()
        for _ in range(2):
            got = net(x)
        assert net._cached_graph
        for r, g in zip(ref, got):
            np.testing.assert_allclose(_np(g), r, atol=1e-6)
        # gradients reach every RNN parameter
        x.attach_grad()
        with mx.autograd.record():
            y, h, c = net(x)
            loss = (y ** 2).sum() + h.sum()
        loss.backward()
        for name, p in net.rnn.named_parameters():
            assert np.abs(p.grad().asnumpy()).sum() > 0, name
        assert np.abs(x.grad.asnumpy()).sum() > 0
