"""torch vs MXNet recurrent layers with the same weights (copied through dl.state_dict /
dl.load_state_dict): outputs, final states, input/state/parameter gradients, imperative and
hybridized. Every parameter is randomised (biases included); 2 layers; both layouts; with and
without an initial state. Measured max abs diffs are printed (pytest -s) and put in failure
messages; see MAX_DIFFS."""
import zlib

import numpy as np
import pytest

import dualdl as dl
from dualdl import nn
from dualdl.testing.runners import run_step

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

TOL = 1e-5
MAX_DIFFS = {}          # case -> {"output": .., "state": .., "grad_x": .., "grad_state": .., "grad_params": ..}


def _randomize(m_torch, rng):
    sd = {k: rng.uniform(-0.5, 0.5, size=tuple(v.shape)).astype(np.float32)
          for k, v in dl.state_dict(m_torch).items()}
    dl.load_state_dict(m_torch, sd)
    return sd


def _diff(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def _run(backend, m, x, state, gouts):
    """(output, new states, grad x, grad states, parameter grads) of one backward of ``gouts``."""
    def forward(model, x, *st):
        return model(x, None if not st else (tuple(st) if len(st) == 2 else st[0]))

    r = run_step(backend, m, [x] + list(state or []), grad_outputs=gouts, forward=forward, train=None,
                 dtype=x.dtype)
    return r.outputs[0], r.outputs[1:], r.input_grads[0], r.input_grads[1:], r.grads


def _run_torch(m, x, state, gouts):
    return _run("torch", m, x, state, gouts)


def _run_mx(m, x, state, gouts):
    return _run("mxnet", m, x, state, gouts)


def _compare(case, t, m):
    d = {
        "output": _diff(t[0], m[0]),
        "state": max(_diff(a, b) for a, b in zip(t[1], m[1])),
        "grad_x": _diff(t[2], m[2]),
        "grad_state": max([_diff(a, b) for a, b in zip(t[3], m[3])], default=0.0),
        "grad_params": max(_diff(t[4][k], m[4][k]) for k in t[4]),
    }
    assert set(t[4]) == set(m[4])
    MAX_DIFFS[case] = d
    print(case, {k: f"{v:.2e}" for k, v in d.items()})
    assert max(d.values()) <= TOL, f"{case}: max abs diffs {d}"


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_rnn_parity(kind, batch_first, with_state):
    rng = np.random.default_rng(zlib.crc32(f"{kind}{batch_first}{with_state}".encode()))
    T, N, C, H, L, D = 5, 3, 4, 6, 2, 2
    kw = dict(num_layers=L, bidirectional=True, batch_first=batch_first)
    mt = getattr(nn, kind)(C, H, backend="torch", **kw)
    mm = getattr(nn, kind)(C, H, backend="mxnet", layout="NTC" if batch_first else "TNC",
                           num_layers=L, bidirectional=True)
    sd = _randomize(mt, rng)
    dl.load_state_dict(mm, dl.state_dict(mt))
    np.testing.assert_array_equal(dl.to_numpy(dl.state_dict(mm)["bias_hh_l1_reverse"]), sd["bias_hh_l1_reverse"])
    x = rng.normal(size=(N, T, C) if batch_first else (T, N, C)).astype(np.float32)
    n_states = 2 if kind == "LSTM" else 1
    state = [rng.normal(size=(L * D, N, H)).astype(np.float32) for _ in range(n_states)] if with_state else None
    out_shape = (N, T, D * H) if batch_first else (T, N, D * H)
    gouts = [rng.normal(size=out_shape).astype(np.float32)] + \
            [rng.normal(size=(L * D, N, H)).astype(np.float32) for _ in range(n_states)]
    t = _run_torch(mt, x, state, gouts)
    case = f"{kind} {'NTC' if batch_first else 'TNC'} {'state' if with_state else 'no-state'}"
    _compare(case, t, _run_mx(mm, x, state, gouts))
    mm.hybridize()
    _run_mx(mm, x, state, gouts)                      # builds the cached graph
    _compare(case + " hybridized", t, _run_mx(mm, x, state, gouts))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_train_mode_layerwise_path_parity(kind):
    """In train mode with dropout the MXNet layer runs layer by layer (dropout between layers);
    with p=1e-9 (keep probability 1.0 in float32) it must equal torch without dropout."""
    rng = np.random.default_rng(3)
    mt = getattr(nn, kind)(4, 5, num_layers=3, bidirectional=True, backend="torch")
    mm = getattr(nn, kind)(4, 5, num_layers=3, bidirectional=True, dropout=1e-9, backend="mxnet")
    _randomize(mt, rng)
    dl.load_state_dict(mm, dl.state_dict(mt))
    mt.eval()
    mm.train()
    x = rng.normal(size=(6, 2, 4)).astype(np.float32)
    n_states = 2 if kind == "LSTM" else 1
    state = [rng.normal(size=(6, 2, 5)).astype(np.float32) for _ in range(n_states)]
    gouts = [rng.normal(size=(6, 2, 10)).astype(np.float32)] + \
            [rng.normal(size=(6, 2, 5)).astype(np.float32) for _ in range(n_states)]
    t = _run_torch(mt, x, state, gouts)
    _compare(f"{kind} 3 layers train-mode layerwise", t, _run_mx(mm, x, state, gouts))
    mm.hybridize()
    _run_mx(mm, x, state, gouts)
    _compare(f"{kind} 3 layers train-mode layerwise hybridized", t, _run_mx(mm, x, state, gouts))


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell", "RNNCell"])
def test_cell_parity(kind):
    rng = np.random.default_rng(11)
    mt = getattr(nn, kind)(4, 5, backend="torch")
    mm = getattr(nn, kind)(4, 5, backend="mxnet")
    _randomize(mt, rng)
    dl.load_state_dict(mm, dl.state_dict(mt))
    x = rng.normal(size=(3, 4)).astype(np.float32)
    n = 2 if kind == "LSTMCell" else 1
    st = [rng.normal(size=(3, 5)).astype(np.float32) for _ in range(n)]
    xt = torch.from_numpy(x)
    ht = mt(xt, tuple(torch.from_numpy(s) for s in st) if n == 2 else torch.from_numpy(st[0]))
    ht = list(ht) if isinstance(ht, tuple) else [ht]
    for hyb in (False, True):
        if hyb:
            mm.hybridize()
        hm = mm(mx.nd.array(x), tuple(mx.nd.array(s) for s in st) if n == 2 else mx.nd.array(st[0]))
        hm = list(hm) if isinstance(hm, tuple) else [hm]
        d = max(_diff(a.detach().numpy(), b.asnumpy()) for a, b in zip(ht, hm))
        MAX_DIFFS[f"{kind}{' hybridized' if hyb else ''}"] = {"state": d}
        assert d <= TOL, f"{kind}: max abs diff {d:.2e}"


def test_model_with_rnn_parity_hybridized():
    """A write-once model (Embedding-free: Linear head) built on both backends, MXNet hybridized."""

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(4, 6, num_layers=2, bidirectional=True, batch_first=True)
            self.head = nn.Linear(12, 3)

        def forward(self, x):
            out, h = self.rnn(x)
            return self.head(out)

    rng = np.random.default_rng(5)
    mt = Tagger(backend="torch")
    mm = Tagger(backend="mxnet")
    _randomize(mt, rng)
    dl.load_state_dict(mm, dl.state_dict(mt))
    mm.hybridize()
    x = rng.normal(size=(2, 7, 4)).astype(np.float32)
    yt = mt(torch.from_numpy(x)).detach().numpy()
    mm(mx.nd.array(x))
    d = _diff(yt, mm(mx.nd.array(x)).asnumpy())
    MAX_DIFFS["GRU tagger model hybridized"] = {"output": d}
    assert d <= TOL, f"max abs diff {d:.2e}"


def _randomize_as(m_torch, rng, dtype):
    sd = {k: rng.uniform(-0.5, 0.5, size=tuple(v.shape)).astype(dtype) for k, v in dl.state_dict(m_torch).items()}
    dl.load_state_dict(m_torch, sd)
    return sd


def _compare_tol(case, t, m, tol):
    d = {"output": _diff(t[0], m[0]), "state": max(_diff(a, b) for a, b in zip(t[1], m[1])),
         "grad_x": _diff(t[2], m[2]), "grad_state": max([_diff(a, b) for a, b in zip(t[3], m[3])], default=0.0),
         "grad_params": max(_diff(t[4][k], m[4][k]) for k in t[4])}
    assert set(t[4]) == set(m[4])
    MAX_DIFFS[case] = d
    print(case, {k: f"{v:.2e}" for k, v in d.items()})
    assert max(d.values()) <= tol, f"{case}: max abs diffs {d}"


def _stepwise_parity(case, make, dtype, x_shape, state_shapes, out_shape, tol, rng):
    """torch vs MXNet eager and hybridized (outputs, states, every gradient) at ``dtype``."""
    mt, mm = make("torch"), make("mxnet")
    _randomize_as(mt, rng, dtype)
    dl.load_state_dict(mm, dl.state_dict(mt))
    x = rng.normal(size=x_shape).astype(dtype)
    state = [rng.normal(size=s).astype(dtype) for s in state_shapes]
    gouts = [rng.normal(size=out_shape).astype(dtype)] + [rng.normal(size=s).astype(dtype) for s in state_shapes]
    t = _run_torch(mt, x, state, gouts)
    _compare_tol(case, t, _run_mx(mm, x, state, gouts), tol)
    mm.hybridize()
    _run_mx(mm, x, state, gouts)
    _compare_tol(case + " hybridized", t, _run_mx(mm, x, state, gouts), tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm_projection_parity(dtype, batch_first):
    """LSTM(proj_size=P) (torch's LSTMP: weight_hr_l{k} (P, H), h of size P, 2 layers,
    bidirectional): MXNet's fused projection is wrong on CPU, dualdl runs it step by step."""
    rng = np.random.default_rng(21 + batch_first)
    T, N, C, H, P, L, D = 5, 3, 4, 6, 3, 2, 2
    make = lambda be: nn.LSTM(C, H, num_layers=L, bidirectional=True, proj_size=P, batch_first=batch_first,
                              dtype=dtype, backend=be)
    assert [n for n, _ in make("mxnet").named_parameters()] == [n for n, _ in make("torch").named_parameters()]
    x_shape = (N, T, C) if batch_first else (T, N, C)
    out_shape = (N, T, D * P) if batch_first else (T, N, D * P)
    _stepwise_parity(f"LSTM proj {dtype} bf={batch_first}", make, dtype, x_shape, [(L * D, N, P), (L * D, N, H)],
                     out_shape, TOL if dtype == "float32" else 1e-12, rng)


def test_rnn_relu_float64_is_exact():
    """RNN(nonlinearity='relu') in float64: MXNet's fused rnn_relu is 1.9e-8 off torch (float32
    precision); dualdl composes the steps in float64 (<= 1e-12 here)."""
    rng = np.random.default_rng(23)
    T, N, C, H, L, D = 6, 3, 4, 5, 2, 2
    make = lambda be: nn.RNN(C, H, num_layers=L, nonlinearity="relu", bidirectional=True, dtype="float64",
                             backend=be)
    _stepwise_parity("RNN relu float64", make, "float64", (T, N, C), [(L * D, N, H)], (T, N, D * H), 1e-12, rng)


def test_lstm_projection_train_mode_dropout_between_layers():
    """The step-wise path applies dropout between layers in train mode (torch's rule); p=1e-9 keeps
    everything (float32 keep probability 1.0): torch's numbers without dropout, eager and hybridized."""
    rng = np.random.default_rng(25)
    make = lambda be, p: nn.LSTM(4, 5, num_layers=3, bidirectional=True, proj_size=2, dropout=p, backend=be)
    mt, mm = make("torch", 0.0), make("mxnet", 1e-9)
    _randomize(mt, rng)
    dl.load_state_dict(mm, dl.state_dict(mt))
    mt.eval()
    mm.train()
    x = rng.normal(size=(6, 2, 4)).astype(np.float32)
    state = [rng.normal(size=(6, 2, 2)).astype(np.float32), rng.normal(size=(6, 2, 5)).astype(np.float32)]
    gouts = [rng.normal(size=(6, 2, 4)).astype(np.float32)] + [rng.normal(size=s.shape).astype(np.float32)
                                                               for s in state]
    t = _run_torch(mt, x, state, gouts)
    _compare("LSTM proj 3 layers train-mode dropout", t, _run_mx(mm, x, state, gouts))
    mm.hybridize()
    _run_mx(mm, x, state, gouts)
    _compare("LSTM proj 3 layers train-mode dropout hybridized", t, _run_mx(mm, x, state, gouts))
    mm.dropout = 0.5                                   # real dropout changes the output
    mm.hybridize(active=False)
    assert _diff(_run_mx(mm, x, state, gouts)[0], t[0]) > 1e-3
