"""dl.port.translate on users' own HybridBlocks (CRNN, residual branch, a child called twice,
tied weights, RNN begin states), the clear errors for what cannot be translated, the extension
point, and the CLI."""
import os
import subprocess
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from mxnet.gluon import nn  # noqa: E402

import dualdl.port as port  # noqa: E402
from dualdl.port.translate import Call, Leaf, TranslationError  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import _translate_blocks as B  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rng = np.random.default_rng(0)


def _translate(block, inputs, tmp_path, **kw):
    block.initialize()
    report = port.translate(block, [a.astype(np.float32) if a.dtype.kind == "f" else a for a in inputs],
                            str(tmp_path), **kw)
    print(report.summary())
    print(open(report.source_path).read())
    return report


def test_crnn_lstm_layout_and_per_step_dense(tmp_path):
    r = _translate(B.CRNN(), [rng.standard_normal((2, 1, 8, 16))], tmp_path)
    assert r.ok, r.summary()
    src = open(r.source_path).read()
    assert "nn.LSTM(32, 16, num_layers=2, bidirectional=True, batch_first=False)  # Gluon layout 'TNC'" in src
    assert "self.rnn(cnn.permute(3, 0, 1, 2).flatten(2))[0]" in src
    assert "nn.Linear(32, 11)  # Gluon Dense(flatten=False)" in src
    keys = {m["torch"] for m in r.mapping}
    assert {"rnn.weight_ih_l1_reverse", "cnn.1.running_var", "fc.weight"} <= keys
    assert r.max_rel_diff < 1e-6


def test_residual_block(tmp_path):
    block = B.Residual()
    block.hybridize()
    r = _translate(block, [rng.standard_normal((2, 8, 6, 6))], tmp_path)
    assert r.ok, r.summary()
    assert block._active            # still hybridized afterwards
    assert "return torch.relu(bn + shortcut)" in open(r.source_path).read()


def test_child_called_twice_and_own_ops(tmp_path):
    r = _translate(B.SharedTwice(), [rng.standard_normal((4, 4, 6))], tmp_path)
    assert r.ok, r.summary()
    src = open(r.source_path).read()
    assert src.count("self.proj(") == 2 and "torch.cat([act, proj_1], dim=-1)[:, :, 2:10].mean(dim=1)" in src


def test_tied_weights_stay_tied(tmp_path):
    r = _translate(B.TiedLM(), [rng.integers(0, 20, (2, 5))], tmp_path)
    assert r.ok, r.summary()
    from safetensors.torch import load_file
    from dualdl.port.translate.verify import load_generated
    m = load_generated(r.source_path, r.class_name)()
    m.load_state_dict(load_file(r.weights_path))
    assert m.decoder.weight is m.embedding.weight
    assert [e for e in r.mapping if e["torch"] == "decoder.weight"][0]["tied_to"] == "embedding.weight"


def test_lstm_with_begin_states(tmp_path):
    x, h, c = rng.standard_normal((2, 4, 3)), rng.standard_normal((1, 2, 5)), rng.standard_normal((1, 2, 5))
    r = _translate(B.WithStates(), [x, h, c], tmp_path)
    assert r.ok, r.summary()
    assert "self.lstm(x, (h, c))" in open(r.source_path).read()


def test_non_hybrid_block_reports_what_was_not_translated(tmp_path):
    r = _translate(B.PythonLoop(), [rng.standard_normal((2, 4))], tmp_path)
    assert not r.ok and not r.checks
    assert r.untranslated[0]["block"] == "PythonLoop"
    assert "asscalar" in r.untranslated[0]["reason"] or "values of" in r.untranslated[0]["reason"]
    src = open(r.source_path).read()
    assert "self.inner = nn.Linear(4, 4)" in src and "raise NotImplementedError" in src


class _Erf(nn.HybridBlock):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.fc = nn.Dense(3, in_units=4)

    def hybrid_forward(self, F, x):
        return F.log1p(F.sigmoid(self.fc(x)))


class _Refused(nn.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.make_loss(F.sigmoid(x))    # refused: its backward is not its forward's gradient


def test_unsupported_op_names_op_block_and_path(tmp_path):
    outer = nn.HybridSequential()
    outer.add(nn.Dense(4, in_units=4), _Refused())
    outer.initialize()
    with pytest.raises(TranslationError) as e:
        port.translate(outer, np.ones((2, 4), np.float32), str(tmp_path))
    msg = str(e.value)
    assert "'make_loss'" in msg and "_Refused" in msg and "'1'" in msg and "register_translation" in msg
    assert not os.listdir(tmp_path) if os.path.exists(tmp_path) else True


def test_generated_code_that_raises_while_proven_is_a_translation_error(tmp_path):
    """A translation that writes code torch rejects at run time (here a user registration naming a
    method tensors lack): a TranslationError naming the generated line, no raw traceback, no files."""
    port.register_translation("log1p", lambda args, attrs, node: f"{args[0]}.log_one_plus()", replace=True)
    try:
        with pytest.raises(TranslationError) as e:
            _translate(_Erf(), [rng.standard_normal((2, 4))], tmp_path / "bad")
    finally:
        from dualdl.port.translate import registry
        registry.unregister_translation("log1p")
    msg = str(e.value)
    assert "the generated module raised AttributeError" in msg and "log_one_plus" in msg and "line" in msg, msg
    assert not (tmp_path / "bad").exists() or not any(p.suffix == ".py" for p in (tmp_path / "bad").iterdir())


def test_register_op_and_block_translation(tmp_path):
    port.register_translation("log1p", lambda args, attrs, node: f"torch.log1p({args[0]}) * 1.0", replace=True)
    try:
        r = _translate(_Erf(), [rng.standard_normal((2, 4))], tmp_path / "op")
        assert r.ok and "torch.log1p(" in open(r.source_path).read() and " * 1.0" in open(r.source_path).read()
    finally:
        from dualdl.port.translate import registry
        registry.unregister_translation("log1p")

    class Scale(nn.HybridBlock):      # a custom leaf with its own parameter
        def __init__(self, **kw):
            super().__init__(**kw)
            self.alpha = self.params.get("alpha", shape=(4,))

        def hybrid_forward(self, F, x, alpha):
            return F.broadcast_mul(x, alpha)

    def scale_to_torch(block, info):
        return Leaf(Call("Scale", [int(block.alpha.shape[0])]), {"alpha": "weight"}, helpers=[SCALE_SRC])
    port.register_translation(Scale, scale_to_torch)
    from dualdl.port.translate import registry
    try:
        net = nn.HybridSequential()
        net.add(nn.Dense(4, in_units=4), Scale())
        r = _translate(net, [rng.standard_normal((2, 4))], tmp_path / "blk", name="scaled")
        assert r.ok, r.summary()
        assert {"1.weight", "0.weight"} <= {m["torch"] for m in r.mapping}
        assert "class Scale(nn.Module)" in open(r.source_path).read()
    finally:
        registry._BLOCKS.pop(Scale)


SCALE_SRC = '''class Scale(nn.Module):
    """x times a learned per-feature scale (a user's translation of a custom Gluon block)."""

    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * self.weight
'''


def test_cli_translates_a_factory_with_a_params_file(tmp_path):
    trained = B.Residual()
    trained.initialize(mx.init.Normal(0.5))
    trained(mx.nd.ones((1, 8, 6, 6)))
    trained.save_parameters(str(tmp_path / "trained.params"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.dirname(__file__)]))
    p = subprocess.run([sys.executable, "-m", "dualdl", "translate", "_translate_blocks:Residual",
                        "--input-shape", "2,8,6,6", "--out", str(tmp_path), "--name", "res",
                        "--params", str(tmp_path / "trained.params")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "translate res: OK" in p.stdout
    assert {"res.py", "res.safetensors", "res.report.json"} <= set(os.listdir(tmp_path))
    from safetensors.torch import load_file
    weights = load_file(str(tmp_path / "res.safetensors"))
    assert np.array_equal(weights["conv.weight"].numpy(), trained.conv.weight.data().asnumpy())
    assert np.array_equal(weights["bn.weight"].numpy(), trained.bn.gamma.data().asnumpy())
    bad = subprocess.run([sys.executable, "-m", "dualdl", "translate", "_translate_blocks:CRNN",
                          "--input-shape", "2,1,8,16", "--out", str(tmp_path),
                          "--params", str(tmp_path / "trained.params")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "cannot load" in bad.stderr


def test_wrong_translation_is_not_ok_and_names_the_first_divergent_layer(tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Dense(5, in_units=4), nn.Activation("relu"), nn.Dense(3, in_units=5))
    port.register_translation(nn.Activation, lambda block, info: Leaf(Call("nn.Tanh")))   # wrong on purpose
    from dualdl.port.translate import registry
    try:
        r = _translate(net, [rng.standard_normal((2, 4))], tmp_path, name="wrong")
    finally:
        registry._BLOCKS.pop(nn.Activation)
    assert not r.ok
    assert not r.checks[0].passed and r.checks[0].max_abs_diff > 1e-3
    assert r.first_divergent == "1"
    import json
    assert json.load(open(r.report_path))["ok"] is False


def test_gluonnlp_standard_rnn_tied_weights(tmp_path):
    nlp = pytest.importorskip("gluonnlp")
    net = nlp.model.StandardRNN("lstm", 30, 8, 8, 2, dropout=0.0, tie_weights=True)
    r = _translate(net, [rng.integers(0, 30, (5, 2))], tmp_path)
    assert r.ok, r.summary()
    src = open(r.source_path).read()
    assert "self.decoder[0].weight = self.embedding[0].weight" in src
    assert "def forward(self, inputs, begin_state=None):" in src
    assert "encoder, (encoder_1, encoder_2) = self.encoder(embedding)  # Gluon passes zero begin states" in src


def test_gluonnlp_awd_rnn_layers_called_one_by_one(tmp_path):
    nlp = pytest.importorskip("gluonnlp")
    net = nlp.model.AWDRNN("lstm", 30, 8, 8, 2, tie_weights=True, dropout=0.0, weight_drop=0.0,
                           drop_h=0.0, drop_i=0.2, drop_e=0.0)
    r = _translate(net, [rng.integers(0, 30, (5, 2))], tmp_path)
    assert r.ok, r.summary()
    src = open(r.source_path).read()
    assert "self.encoder = nn.ModuleList(" in src and "self.encoder[1](encoder_0)" in src
    assert "SharedDropout(0.2, (0,))" in src                      # Gluon Dropout(axes=(0,))
    assert "self.decoder[0].weight = self.embedding[0].weight" in src


def test_gluonnlp_standard_rnn_with_dropout_translates(tmp_path):
    """Its hybrid_forward calls F.Dropout(axes=(0,)) on the RNN output: a shared-mask dropout
    in the generated forward (was refused as untraceable)."""
    nlp = pytest.importorskip("gluonnlp")
    net = nlp.model.StandardRNN("lstm", 30, 8, 8, 2, dropout=0.2, tie_weights=True)
    net.initialize()
    r = port.translate(net, rng.integers(0, 30, (5, 2)), str(tmp_path))
    assert r.ok, r.summary()
    assert "shared_dropout(encoder, 0.2, (0,), self.training)" in open(r.source_path).read()


def _small_bert(**kw):
    nlp = pytest.importorskip("gluonnlp")
    enc = nlp.model.BERTEncoder(num_layers=2, units=16, hidden_size=32, max_length=16, num_heads=2, dropout=0.0,
                                output_attention=False, output_all_encodings=False, **kw)
    net = nlp.model.BERTModel(enc, vocab_size=30, token_type_vocab_size=2, units=16, embed_size=16,
                              use_pooler=True, use_decoder=False, use_classifier=False)
    return net, [rng.integers(0, 30, (2, 7)), rng.integers(0, 2, (2, 7)), np.array([7, 4])]


def test_gluonnlp_bert_small_valid_length_becomes_a_mask(tmp_path):
    net, inputs = _small_bert()
    r = _translate(net, inputs, tmp_path)
    assert r.ok, r.summary()
    assert r.dtype == "float32" and "float32" in r.notes[0]     # MXNet's fused attention has no float64 on CPU
    for c in r.checks:     # decided against torch float64, by torch's own float32 rounding
        assert c.evidence.startswith("Gluon float32 against torch float64") and c.rounding["torch"] > 0
        assert c.float32_max_abs_diff is not None and c.tolerance <= 8 * c.rounding["torch"] + 1e-6 * 2e4
    assert r.max_rel_diff < 1e-4
    src = open(r.source_path).read()
    assert "def length_softmax(" in src and "def interleaved_qk(" in src
    assert "def forward(self, inputs, token_types, valid_length, masked_positions=None):" in src


def test_gluonnlp_bert_small_wrong_layernorm_eps_is_caught_in_float32(tmp_path):
    """A float32-only model with a real mistake: LayerNorm eps 1e-6 instead of the model's 1e-12. The Gluon-vs-torch float32 difference is small (a fixed float32 tolerance of
    2e-4 would pass it), but it is far beyond torch's own float32 rounding against float64."""
    net, inputs = _small_bert(layer_norm_eps=1e-12)
    from dualdl.port.translate import registry
    port.register_translation(nn.LayerNorm, lambda block, info: Leaf(       # wrong eps on purpose
        Call("nn.LayerNorm", [int(block.gamma.shape[0])], [("eps", 1e-6)], names=["normalized_shape"]),
        {"gamma": "weight", "beta": "bias"}))
    try:
        r = _translate(net, inputs, tmp_path, name="wrong_eps")
    finally:
        registry._BLOCKS.pop(nn.LayerNorm)
    assert r.dtype == "float32" and not r.ok
    eval_check = r.checks[0]
    assert not eval_check.passed and eval_check.evidence.startswith("Gluon float32 against torch float64")
    assert eval_check.float32_max_rel_diff < 2e-4                  # what the old float32 rule accepted
    assert eval_check.max_abs_diff > 8 * eval_check.rounding["torch"]
    assert r.first_divergent == "encoder.layer_norm"


@pytest.mark.slow
def test_gluonnlp_bert_12_768_12_is_ok_by_evidence(tmp_path):
    """bert_12_768_12's hyper-parameters (vocabulary 30522, 110M parameters, random init) at 2x16
    tokens: float32-only in MXNet, proven against torch float64. The time is printed
    (docs/translate.md)."""
    import time
    nlp = pytest.importorskip("gluonnlp")
    hp = nlp.model.bert.bert_hparams["bert_12_768_12"]
    mx.random.seed(0)
    enc = nlp.model.BERTEncoder(num_layers=hp["num_layers"], units=hp["units"], hidden_size=hp["hidden_size"],
                                max_length=hp["max_length"], num_heads=hp["num_heads"], dropout=hp["dropout"],
                                output_attention=False, output_all_encodings=False, layer_norm_eps=1e-12)
    net = nlp.model.BERTModel(enc, vocab_size=30522, token_type_vocab_size=2, units=768, embed_size=768,
                              use_pooler=True, use_decoder=False, use_classifier=False)
    net.initialize()
    inputs = [rng.integers(0, 30522, (2, 16)), rng.integers(0, 2, (2, 16)), np.array([16, 9])]
    t0 = time.perf_counter()
    r = port.translate(net, inputs, str(tmp_path))
    print(f"bert_12_768_12 translate + verify: {time.perf_counter() - t0:.2f} s {r.seconds}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(r.summary())
    assert r.ok, r.summary()
    assert r.dtype == "float32" and all(c.evidence.startswith("Gluon float32 against torch float64") for c in r.checks)
    grads = next(c for c in r.checks if c.name.startswith("gradients"))
    assert grads.float32_max_abs_diff > 0 and grads.rounding["torch"] > 0
