"""dualdl convert-project on a recurrent language model (tests/scripts/gluon_word_lm/: tied
embedding/decoder weights, a 2-layer LSTM, clip_global_norm, detached hidden state,
set_learning_rate annealing): the conversion, the converted project's gluon2torch.py against
MXNet's own layers, clipping and datasets, and the proof of the converted run over its updates."""
import importlib
import os
import sys
import warnings

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

from dualdl.port.project.api import check_torch_only, convert_project  # noqa: E402
from dualdl.port.project.data_text import write_text_corpus  # noqa: E402

PROJECT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "gluon_word_lm")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch_word_lm")
    report = convert_project(PROJECT, str(out), force=True)
    sys.path.insert(0, str(out))
    sys.modules.pop("gluon2torch", None)
    try:
        g2t = importlib.import_module("gluon2torch")
    finally:
        sys.path.remove(str(out))
    return report, out, g2t


def test_the_project_converts_without_todo(converted):
    report, out, _ = converted
    assert sorted(f["path"] for f in report.files) == ["data.py", "model.py", "train.py",
                                                       "train_wikitext.py"]
    assert report.to_dict()["todo_lines"] == 0 and report.converted == report.api_lines >= 35
    model_src = (out / "model.py").read_text()
    for line in ("class RNNModel(torch.nn.Module):", "self.rnn = g2t.LSTM(num_hidden, num_layers, dropout=dropout)",
                 "params=self.encoder.params)", "self.encoder = g2t.Embedding(vocab_size, num_embed,"):
        assert line in model_src, line
    train_src = (out / "train.py").read_text()
    for line in ("grads = [g2t.grad(p, context) for p in g2t.collect_params(model).values()]",
                 "gluon.utils" not in train_src and "g2t.clip_global_norm(grads, args.clip * args.bptt * args.batch_size)",
                 "ntotal += g2t.size(L)", "with g2t.predict_mode():"):
        assert line is True or line in train_src, line
    assert "        hidden = [h.detach() for h in hidden]\n" in (out / "data.py").read_text()
    for f in ("data.py", "model.py", "train.py", "train_wikitext.py"):
        check_torch_only((out / f).read_text(), forbidden_only=True)
    from dualdl.port.recipe.emit import _parse
    runtime = (out / "gluon2torch.py").read_text()     # no definition shadowed by another source's
    for mod in ("torch_runtime_rnn", "torch_runtime_text"):
        for name, src in _parse(f"dualdl.port.project.{mod}")[1].items():
            assert src in runtime, name
    for name in ("RNN_MODES", "rnn_weight_names"):       # the translator's conventions, copied
        assert _parse("dualdl.port.translate.conventions")[1][name] in runtime, name


def _gluon_layer(mode, **kw):
    from mxnet.gluon import rnn
    if mode.startswith("rnn_"):
        return rnn.RNN(6, activation=mode[4:], **kw)
    return {"lstm": rnn.LSTM, "gru": rnn.GRU}[mode](6, **kw)


def _run(layer, x, states, record, backward):
    """(output, new states, {key: weight gradient}, state gradients) of one side."""
    with record():
        out, new = layer(x, states)
        total = (out * out).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(new))
    backward(total)
    return out, new


@pytest.mark.parametrize("mode,kw", [
    ("lstm", dict(num_layers=2)), ("lstm", dict(num_layers=2, bidirectional=True, layout="NTC")),
    ("gru", dict(num_layers=2)), ("rnn_relu", dict()), ("rnn_tanh", dict(num_layers=2))])
def test_rnn_layers_are_gluons(converted, mode, kw):
    """Gluon's keys (``_unfused.0.i2h_weight``; ``l_cell``/``r_cell`` when bidirectional) in
    Gluon's order, the same gate order (weights copied by key, no permutation), layout, states
    as a list. The forward equals MXNet's float64 run within 1e-12 (its relu RNN 4.9e-8); the
    outputs and gradients are judged
    against MXNet's float32 run by measured rounding (64x torch's own float32 distance from its
    float64 run): MXNet 1.9.1's float64 CPU RNN backward is wrong in the first of 2+ layers
    (0.1-4.6 off an LSTM's layer-0 gradients where its float32 run is within 1e-6 of torch's
    float64 one)."""
    from mxnet import autograd
    from dualdl.formats.names import torch_to_gluon_names
    g2t = converted[2]
    rng = np.random.default_rng(0)
    ntc = kw.get("layout") == "NTC"
    x = rng.standard_normal((3, 4, 5) if ntc else (4, 3, 5))
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    states = [rng.standard_normal((layers, 3, 6)) for _ in range(2 if mode == "lstm" else 1)]
    gluon_side = {}
    for dt in ("float64", "float32"):
        g = _gluon_layer(mode, dtype=dt, **kw)          # input size deferred in both
        g.initialize(mx.init.Uniform(0.5))
        g(mx.nd.array(x, dtype=dt), [mx.nd.array(s, dtype=dt) for s in states])
        if dt == "float32":
            for k, p in g._collect_params_with_prefix().items():
                p.set_data(gluon_side["float64"][0]._collect_params_with_prefix()[k].data().astype(dt))
        gs = [mx.nd.array(s, dtype=dt) for s in states]
        for s in gs:
            s.attach_grad()
        out, new = _run(g, mx.nd.array(x, dtype=dt), gs, autograd.record, lambda t: t.backward())
        gluon_side[dt] = (g, out, new, gs)
    g, out, new, _ = gluon_side["float64"]
    gkeys = list(g._collect_params_with_prefix())
    torch_side = {}
    for dt in (torch.float64, torch.float32):
        cls = g2t.RNN if mode.startswith("rnn_") else getattr(g2t, mode.upper())
        t = (cls(6, activation=mode[4:], **kw) if mode.startswith("rnn_") else cls(6, **kw)).to(dt)
        t(torch.from_numpy(x).to(dt), [torch.from_numpy(s).to(dt) for s in states])   # materialize
        assert list(t.state_dict()) == gkeys
        with torch.no_grad():
            for k, p in t.named_parameters():
                p.copy_(torch.from_numpy(g._collect_params_with_prefix()[k].data().asnumpy()))
        ts = [torch.from_numpy(s).to(dt).requires_grad_() for s in states]
        tout, tnew = _run(t, torch.from_numpy(x).to(dt), ts, g2t.record, lambda v: v.backward())
        assert isinstance(tnew, list) and len(tnew) == len(states)
        torch_side[dt] = (t, tout, tnew, ts)
    ref = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU if mode == "gru" else torch.nn.RNN
    ref_keys = ref(5, 6, kw.get("num_layers", 1), bidirectional=kw.get("bidirectional", False)).state_dict()
    assert sorted(torch_to_gluon_names({k: v.numpy() for k, v in ref_keys.items()})) == sorted(gkeys)
    t, tout, tnew, ts = torch_side[torch.float64]
    worst64 = max(float(np.abs(a.detach().numpy() - b.asnumpy()).max())
                  for a, b in zip([tout] + tnew, [out] + new))
    assert worst64 < (1e-12 if mode != "rnn_relu" else 1e-7)    # MXNet's float64 relu RNN: 4.9e-8
    g32, out32, new32, gs32 = gluon_side["float32"]
    t32, tout32, tnew32, ts32 = torch_side[torch.float32]
    pairs = [(a.detach().numpy(), a32.detach().numpy(), b.asnumpy(), f"output {i}")
             for i, (a, a32, b) in enumerate(zip([tout] + tnew, [tout32] + tnew32, [out32] + new32))]
    pairs += [(p.grad.numpy(), t32.state_dict(keep_vars=True)[k].grad.numpy(),
               g32._collect_params_with_prefix()[k].grad().asnumpy(), k) for k, p in t.named_parameters()]
    pairs += [(a.grad.numpy(), a32.grad.numpy(), b.grad.asnumpy(), f"state {i}")
              for i, (a, a32, b) in enumerate(zip(ts, ts32, gs32))]
    for ref64, own32, gluon32, what in pairs:
        scale = float(np.abs(ref64).max())
        own = max(float(np.abs(own32 - ref64).max()), float(np.finfo(np.float32).eps) * scale)
        assert float(np.abs(gluon32 - ref64).max()) <= 64 * own, what
    # no states: the output only, from zeros (Gluon's begin_state)
    assert np.abs(t(torch.from_numpy(x)).detach().numpy() - g(mx.nd.array(x, dtype="float64")).asnumpy()).max() < 1e-7


def test_rnn_cells_and_unroll_are_gluons(converted):
    """LSTMCell, GRUCell, RNNCell(relu) in a SequentialRNNCell with a DropoutCell, unrolled over
    an NTC tensor (input size deferred): Gluon's keys (``0.i2h_weight`` ...), outputs, states and
    gradients equal MXNet's float64 run; one step and a list of steps as well."""
    from mxnet import autograd
    from mxnet.gluon import rnn
    g2t = converted[2]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 5))
    g = rnn.SequentialRNNCell()
    for c in (rnn.LSTMCell(6), rnn.DropoutCell(0.0), rnn.GRUCell(6), rnn.RNNCell(4, activation="relu")):
        g.add(c)
    g.collect_params().initialize(mx.init.Uniform(0.5))
    g.cast("float64")
    g0 = g.begin_state(batch_size=3, dtype="float64")
    t = g2t.SequentialRNNCell()
    for c in (g2t.LSTMCell(6), g2t.DropoutCell(0.0), g2t.GRUCell(6), g2t.RNNCell(4, activation="relu")):
        t.add(c)
    gx = mx.nd.array(x, dtype="float64")
    g.unroll(4, gx, g0, layout="NTC", merge_outputs=True)       # deferred shapes
    t = t.double()
    t.unroll(4, torch.from_numpy(x), layout="NTC", merge_outputs=True)
    gp = g._collect_params_with_prefix()
    assert list(t.state_dict()) == list(gp)
    with torch.no_grad():
        for k, p in t.named_parameters():
            p.copy_(torch.from_numpy(gp[k].data().asnumpy()))
    with autograd.record():
        out, states = g.unroll(4, gx, g0, layout="NTC", merge_outputs=True)
        (out.sum() + sum((s * s).sum() for s in states)).backward()
    with g2t.record():
        tout, tstates = t.unroll(4, torch.from_numpy(x), layout="NTC", merge_outputs=True)
        (tout.sum() + sum((s * s).sum() for s in tstates)).backward()
    assert tuple(tout.shape) == out.shape == (3, 4, 4) and len(tstates) == len(states) == 4
    assert np.abs(tout.detach().numpy() - out.asnumpy()).max() < 1e-12
    for a, b in zip(tstates, states):
        assert np.abs(a.detach().numpy() - b.asnumpy()).max() < 1e-12
    for k, p in t.named_parameters():
        assert np.abs(p.grad.numpy() - gp[k].grad().asnumpy()).max() < 1e-11, k
    steps, _ = t.unroll(4, list(torch.from_numpy(x).unbind(1)))     # a list in, a list out
    assert isinstance(steps, list) and torch.allclose(torch.stack(steps, 1), tout)
    h = t.begin_state(batch_size=3)
    one, _ = t(torch.from_numpy(x[:, 0]), h)
    assert torch.allclose(one, tout[:, 0])


def test_begin_state_dropout_and_refusals(converted):
    g2t = converted[2]
    t = g2t.LSTM(4, 2, dropout=0.5, input_size=3)
    g2t.initialize(t, g2t.Xavier())
    h = t.begin_state(batch_size=2, func=g2t.zeros, ctx=g2t.cpu())
    assert [tuple(s.shape) for s in h] == [(2, 2, 4)] * 2 and all(float(s.abs().sum()) == 0 for s in h)
    x = torch.randn(5, 2, 3)
    with g2t.predict_mode():
        a, b = t(x, h)[0], t(x, h)[0]
    assert torch.equal(a, b)               # no dropout outside record(), as Gluon
    with g2t.record():
        c = t(x, h)[0]
    assert not torch.equal(a, c)           # dropout between the layers inside record()
    for bad, what in ((dict(projection_size=2), "projection_size"),
                      (dict(lstm_state_clip_min=-1.0, lstm_state_clip_max=1.0), "lstm_state_clip")):
        with pytest.raises(ValueError, match=what):
            g2t.LSTM(4, **bad)
    with pytest.raises(ValueError, match="given by name"):
        g2t.LSTM(4, i2h_weight_initializer="xavier")
    t1 = g2t.LSTM(4, input_size=3, h2h_bias_initializer="ones")
    g2t.initialize(t1, g2t.Xavier())
    t1(x)
    b = t1._unfused[0]
    assert float(b.h2h_bias.detach().min()) == float(b.i2h_bias.detach().max()) + 1 == 1
    with pytest.raises(ValueError, match="Invalid recurrent state shape"):
        t(x, t.begin_state(batch_size=3))


def test_clip_global_norm_is_gluons(converted):
    """min(1, max_norm / (norm + 1e-8)) on the arrays in place, the norm returned; NaN/inf warn
    and propagate as MXNet's do; check_isfinite=False returns a 1-element array."""
    from mxnet import gluon
    g2t = converted[2]
    rng = np.random.default_rng(1)
    cases = [[rng.standard_normal((3, 4)), rng.standard_normal(5)],              # active
             [rng.standard_normal(4) * 0.01],                                     # inactive
             [np.array([np.nan, 1.0]), np.array([2.0])], [np.array([np.inf, 1.0])]]
    for arrays in cases:
        ga = [mx.nd.array(a) for a in arrays]
        ta = [torch.from_numpy(a.astype(np.float32)) for a in arrays]
        with warnings.catch_warnings(record=True) as gw:
            warnings.simplefilter("always")
            gn = gluon.utils.clip_global_norm(ga, 1.0)
        with warnings.catch_warnings(record=True) as tw:
            warnings.simplefilter("always")
            tn = g2t.clip_global_norm(ta, 1.0)
        assert [str(w.message) for w in tw if "nan or inf" in str(w.message)] == \
               [str(w.message) for w in gw if "nan or inf" in str(w.message)]
        np.testing.assert_allclose(tn, gn, rtol=1e-6)
        for a, b in zip(ta, ga):
            np.testing.assert_allclose(a.numpy(), b.asnumpy(), rtol=1e-6, atol=1e-7)
    t = g2t.clip_global_norm([torch.tensor([3.0, 4.0])], 1.0, check_isfinite=False)
    g = gluon.utils.clip_global_norm([mx.nd.array([3.0, 4.0])], 1.0, check_isfinite=False)
    assert tuple(t.shape) == g.shape == (1,) and float(t) == float(g.asscalar()) == 5.0
    with pytest.raises(ValueError, match="no arrays"):
        g2t.clip_global_norm([], 1.0)
    p = torch.nn.Parameter(torch.ones(3))
    assert g2t.grad(p) is p.grad and float(p.grad.abs().sum()) == 0      # Gluon: zeros, written
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        g2t.grad(torch.nn.Parameter(torch.ones(2), requires_grad=False))
    assert g2t.size(torch.zeros(2, 3)) == 6 and g2t.size(np.zeros((4, 2))) == 8


def test_tied_weights_and_initializers(converted, tmp_path):
    """Dense(params=encoder.params) shares the embedding's weight (one parameter, two of Gluon's
    keys), the embedding keeps its own Uniform(0.1), the LSTM's biases start at 0."""
    g2t = converted[2]
    m = _models(converted)[1].RNNModel(20, 8, 8, 2, 0.0, True)
    g2t.initialize(m, g2t.Xavier())
    m(torch.zeros(5, 2, dtype=torch.int32), m.begin_state(batch_size=2))
    assert m.decoder.weight is m.encoder.weight
    assert list(m.state_dict())[:2] == ["encoder.weight", "rnn._unfused.0.i2h_weight"]
    assert "decoder.weight" in m.state_dict() and len(list(m.parameters())) == 1 + 8 + 1
    assert float(m.encoder.weight.detach().abs().max()) <= 0.1
    assert float(m.rnn._unfused[0].i2h_bias.detach().abs().max()) == 0
    assert float(m.rnn._unfused[1].h2h_weight.detach().abs().max()) > 0.1      # Xavier, not 0.1-uniform
    with pytest.warns(UserWarning, match="weights only"):        # Gluon's export: no graph file
        g2t.export(m, str(tmp_path / "lm"))
    assert list(torch.load(tmp_path / "lm-0000.params")) == list(m.state_dict())


def _models(converted):
    """The project's Gluon model module and its converted twin."""
    sys.modules.pop("model", None)
    sys.path.insert(0, PROJECT)
    try:
        gluon_model = importlib.import_module("model")
    finally:
        sys.path.remove(PROJECT)
        sys.modules.pop("model", None)
    sys.path.insert(0, str(converted[1]))
    try:
        torch_model = importlib.import_module("model")
    finally:
        sys.path.remove(str(converted[1]))
        sys.modules.pop("model", None)
    return gluon_model, torch_model


def test_checkpoints_load_both_ways(converted, tmp_path):
    """The converted model's state_dict keys are Gluon's save_parameters keys (the tied weight
    under both): Gluon's file read without mxnet loads into torch with the same output, and
    torch's weights written as a Gluon file load into Gluon (float64 on both sides: 1e-12)."""
    from dualdl.formats.gluon_params import read_gluon, write_gluon
    g2t = converted[2]
    gm, tm = _models(converted)
    g = gm.RNNModel(30, 8, 8, 2, 0.0, True)
    g.initialize(mx.init.Xavier())
    g.cast("float64")
    x = np.random.default_rng(0).integers(0, 30, (5, 3))
    hid = g.begin_state(func=mx.nd.zeros, batch_size=3, dtype="float64")
    g(mx.nd.array(x), hid)
    g.save_parameters(str(tmp_path / "g.params"))
    t = tm.RNNModel(30, 8, 8, 2, 0.0, True).double()
    g2t.initialize(t, g2t.Xavier())
    t(torch.from_numpy(x), t.begin_state(batch_size=3))
    saved = read_gluon(str(tmp_path / "g.params"))
    assert sorted(saved) == sorted(t.state_dict())          # decoder.weight saved twice, as torch
    t.load_state_dict({k: torch.from_numpy(v) for k, v in saved.items()})
    assert t.decoder.weight is t.encoder.weight

    def outputs():
        go, _ = g(mx.nd.array(x), g.begin_state(func=mx.nd.zeros, batch_size=3, dtype="float64"))
        to, _ = t(torch.from_numpy(x), t.begin_state(batch_size=3))
        return go.asnumpy(), to.detach().numpy()
    a, b = outputs()
    assert np.abs(a - b).max() < 1e-12
    with torch.no_grad():
        for p in t.parameters():
            p.mul_(1.5)
    write_gluon(str(tmp_path / "t.params"), {k: v.numpy() for k, v in t.state_dict().items()})
    g.load_parameters(str(tmp_path / "t.params"))
    a2, b2 = outputs()
    assert np.abs(a2 - b2).max() < 1e-12 and np.abs(a2 - a).max() > 1e-3


def test_the_mxnet_1_0_era_calls(converted, tmp_path):
    """What apache/mxnet's word_language_model of 2018 calls: net.collect_params().initialize,
    collect_params().save/load (the best model reloaded when annealing) and the private
    trainer._init_optimizer('sgd', {...}) (a new optimizer: the new lr, fresh state)."""
    g2t = converted[2]
    m = _models(converted)[1].RNNModel(20, 8, 8, 2, 0.0, True)
    g2t.initialize(g2t.collect_params(m), g2t.Xavier())   # what the converter writes for it
    m2 = _models(converted)[1].RNNModel(20, 8, 8, 2, 0.0, True)
    g2t.collect_params(m2).initialize(g2t.Xavier())
    m2(torch.zeros(5, 2, dtype=torch.int32), m2.begin_state(batch_size=2))
    assert float(m2.encoder.weight.detach().abs().max()) <= 0.1
    x = torch.zeros(5, 2, dtype=torch.int32)
    m(x, m.begin_state(batch_size=2))
    assert float(m.rnn._unfused[0].i2h_bias.detach().abs().max()) == 0
    params = g2t.collect_params(m)
    params.save(str(tmp_path / "best.params"))
    before = {k: v.detach().clone() for k, v in params.items()}
    with torch.no_grad():
        for p in params.values():
            p.add_(1.0)
    params.load(str(tmp_path / "best.params"), g2t.cpu())
    assert all(torch.equal(before[k], v) for k, v in params.items())
    torch.save({"encoder.weight": before["encoder.weight"]}, tmp_path / "part.params")
    with pytest.raises(ValueError, match="missing"):
        params.load(str(tmp_path / "part.params"))
    tr = g2t.Trainer(params, "sgd", {"learning_rate": 1.0, "momentum": 0.9, "wd": 0})
    (m(x, m.begin_state(batch_size=2))[0] ** 2).sum().backward()
    tr.step(2)
    assert tr._optimizer.state
    tr._init_optimizer("sgd", {"learning_rate": 0.25, "momentum": 0, "wd": 0})
    assert tr.learning_rate == 0.25 and not tr._optimizer.state and tr._block is m


def test_wikitext_and_interval_sampler_are_gluons(converted, tmp_path, monkeypatch):
    """The same vocabulary (ids by frequency, ties by token; <unk> 0, <eos> 1), samples and
    batches as MXNet's WikiText2 + IntervalSampler on the same files."""
    from mxnet import gluon
    from mxnet.gluon import contrib
    from mxnet.gluon.contrib.data import text
    g2t = converted[2]
    write_text_corpus(str(tmp_path), train=300)
    monkeypatch.setattr(text, "check_sha1", lambda path, sha1: True)
    gtrain = contrib.data.text.WikiText2(str(tmp_path), "train", seq_len=7)
    gval = contrib.data.text.WikiText2(str(tmp_path), "validation", vocab=gtrain.vocabulary, seq_len=7)
    ttrain = g2t.WikiText2(str(tmp_path), "train", seq_len=7)
    tval = g2t.WikiText2(str(tmp_path), "validation", vocab=ttrain.vocabulary, seq_len=7)
    assert ttrain.vocabulary.idx_to_token == gtrain.vocabulary.idx_to_token
    assert dict(ttrain.frequencies) == dict(gtrain.frequencies)
    for g, t in ((gtrain, ttrain), (gval, tval)):
        assert len(g) == len(t) > 5
        for i in (0, len(g) - 1):
            assert np.array_equal(g[i][0].asnumpy(), t[i][0]) and np.array_equal(g[i][1].asnumpy(), t[i][1])
            assert g[i][0].dtype == t[i][0].dtype == np.int32
    n = len(gtrain) // 3
    gb = [b[0].asnumpy() for b in gluon.data.DataLoader(
        gtrain, 3, sampler=contrib.data.IntervalSampler(len(gtrain), n), last_batch="discard")]
    tb = [b[0].numpy() for b in g2t.DataLoader(
        ttrain, 3, sampler=g2t.IntervalSampler(len(ttrain), n), last_batch="discard")]
    assert len(gb) == len(tb) and all(np.array_equal(a, b) for a, b in zip(gb, tb))
    assert list(g2t.IntervalSampler(13, 3, rollover=False)) == list(
        contrib.data.IntervalSampler(13, 3, rollover=False))
    with pytest.raises(FileNotFoundError, match="wiki.test.tokens"):
        g2t.WikiText2(str(tmp_path / "nowhere"), "test")


_ARGS = ["--tied", "--dropout", "0", "--nhid", "16", "--emsize", "16"]
_DATA = "text,train=100,valid=60,test=60"


def test_the_converted_project_runs_to_the_end(converted, tmp_path):
    """3 epochs on torch alone: the annealing branch, the best model saved and loaded back,
    the test perplexity; no mxnet or dualdl imported."""
    import subprocess
    from dualdl.port.project.proof_data import write_data
    _, out, _ = converted
    write_data(_DATA, str(tmp_path))
    code = ("import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], "
            "run_name='__main__'); print('MODULES', sorted({m.split('.')[0] for m in sys.modules}))")
    r = subprocess.run([sys.executable, "-c", code, str(out / "train.py"), *_ARGS],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(out), OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "learning rate annealed to 0.25" in r.stderr and "test ppl" in r.stderr
    import ast
    mods = set(ast.literal_eval(r.stdout.split("MODULES", 1)[1].strip()))
    assert "torch" in mods and not mods & {"mxnet", "dualdl", "gluonnlp", "gluoncv"}
    assert sorted(torch.load(tmp_path / "lm.params")) == sorted(
        ["encoder.weight", "decoder.weight", "decoder.bias"] +
        [f"rnn._unfused.{k}.{w}_{t}" for k in (0, 1) for w in ("i2h", "h2h") for t in ("weight", "bias")])


def test_the_converted_run_is_the_gluon_run(converted, tmp_path):
    """14 updates (2 epochs and 2 after the lr annealed by 4), both scripts unmodified: the
    batches and carried hidden states, lr, loss, clip_global_norm's norm and gradients before
    it, the gradients the update uses and the weights after it, every row of the Gluon float32
    run within 64x torch's own float32 distance from the converted script's float64 run (worst
    0.25x; gluon32 - torch32: loss 2.7e-6, grad 7.9e-7, weights 1.6e-6)."""
    from dualdl.port.project.proof import prove_scripts
    from dualdl.port.project.proof_data import write_data
    _, out, _ = converted
    write_data(_DATA, str(tmp_path))
    p = prove_scripts(os.path.join(PROJECT, "train.py"), str(out / "train.py"), str(tmp_path),
                      steps=14, args=_ARGS)
    assert p.passed, p.summary()
    assert p.evidence == "float64 run of the converted script" and p.usage < 1
    assert {"clipnorm", "preclip", "input", "grad", "param", "loss", "lr"} <= set(p.max_diff)
    g = np.load(tmp_path / "gluon_run.npz")
    assert [float(g[f"{s}/lr"]) for s in range(14)] == [1.0] * 12 + [0.25] * 2
    norms = [float(g[f"{s}/clipnorm"]) for s in range(14)]
    limit = 0.2 * 5 * 4                  # --clip * --bptt * --batch_size
    assert any(n > limit for n in norms) and any(n < limit for n in norms)   # active and not
    assert np.array_equal(g["0/param/encoder.weight"], g["0/param/decoder.weight"])


@pytest.mark.slow
def test_the_proof_catches_an_untied_decoder(converted, tmp_path):
    """The converted model with the tie dropped (what a Dense that ignored ``params=`` did): the
    decoder's gradient is its own, not the shared one, so update 0 fails (about 15 s)."""
    from dualdl.port.project.proof import prove_scripts
    from dualdl.port.project.proof_data import write_data
    _, out, _ = converted
    bad = out / "bad"
    bad.mkdir()
    for f in ("train.py", "data.py", "gluon2torch.py"):
        (bad / f).write_text((out / f).read_text())
    src = (out / "model.py").read_text()
    assert "params=self.encoder.params)" in src
    (bad / "model.py").write_text(src.replace("params=self.encoder.params)", ")"))
    write_data(_DATA, str(tmp_path))
    p = prove_scripts(os.path.join(PROJECT, "train.py"), str(bad / "train.py"), str(tmp_path),
                      steps=2, args=_ARGS, float64=False)
    assert not p.passed and p.first_failure.startswith("update 0: ")


@pytest.mark.slow
def test_the_wikitext_run_is_the_gluon_run(converted, tmp_path):
    """train_wikitext.py (gluon.contrib's WikiText2 read from the synthetic wiki.*.tokens,
    IntervalSampler batches, hybridize, the loss scaled per token, trainer.step(1)): 12
    updates, the lr annealed 20 -> 5 at update 10, every batch equal (about 15 s)."""
    from dualdl.port.project.proof import prove_scripts
    from dualdl.port.project.proof_data import write_data
    _, out, _ = converted
    write_data(_DATA, str(tmp_path))
    p = prove_scripts(os.path.join(PROJECT, "train_wikitext.py"), str(out / "train_wikitext.py"),
                      str(tmp_path), steps=12, args=["--tied", "--dropout", "0", "--hybridize"])
    assert p.passed, p.summary()
    assert p.max_diff["batch"] == 0 and {"clipnorm", "preclip", "grad", "param"} <= set(p.max_diff)
    g = np.load(tmp_path / "gluon_run.npz")
    assert [float(g[f"{s}/lr"]) for s in range(12)] == [20.0] * 10 + [5.0] * 2
