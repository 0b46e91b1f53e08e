"""translate on MXNet's numpy interface (``npx.set_np()``: d2l, Sockeye 2, MXNet >= 1.6 code), on
d2l's own model code (tests/_translate_d2l.py), with the float64 proof; Python forwards that read
shapes / begin_state / is_training; classes that override ``__call__``."""
import os
import re
import sys
import warnings

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
from mxnet import gluon, npx  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from dualdl.port.translate import TranslationError  # noqa: E402
from dualdl.port.translate.api import translate  # noqa: E402
from dualdl.port.translate.verify import load_generated  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import _translate_d2l as d2l  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)

# d2l models that translate with the proof (all 21 of tests/_translate_d2l.py)
OK = [
    "lenet", "alexnet", "vgg", "nin", "googlenet", "bn_lenet", "resnet", "densenet", "rnn_model", "gru_model",
    "rnn_begin_state", "lstm_begin_state", "seq2seq", "additive_attention", "dot_product_attention",
    "multihead_attention", "transformer_encoder_block", "bert_encoder", "bert_model", "positional_encoding",
    "bn_lenet_scratch"]


@pytest.fixture
def np_mode():
    """numpy interface on for the test, off after (it is global MXNet state)."""
    was = npx.is_np_array()
    npx.set_np()
    yield
    npx.reset_np()
    if was:
        npx.set_np()


@pytest.mark.parametrize("name", OK)
def test_d2l_translates_with_proof(np_mode, tmp_path, name):
    block, inputs = d2l.MODELS[name]()
    report = translate(block, inputs, str(tmp_path), name)
    assert report.ok, report.summary()
    assert report.max_abs_diff is not None and report.max_rel_diff is not None
    assert npx.is_np_array() and npx.is_np_shape()      # translate leaves the mode as it found it
    src = open(report.source_path).read()
    imports = [line for line in src.splitlines() if line.startswith(("import ", "from "))]
    assert imports and all("mxnet" not in line and "dualdl" not in line for line in imports), imports
    compile(src, report.source_path, "exec")


def test_state_kept_in_attributes_becomes_buffer_updates(np_mode, tmp_path):
    """d2l's from-scratch BatchNorm keeps its running statistics as plain arrays its forward replaces
    in training: they become buffers the generated forward replaces (detached), proven by a check of
    the buffers after the train step against Gluon's attributes; the Gluon block is left as it was."""
    block, inputs = d2l.MODELS["bn_lenet_scratch"]()
    bn = block[1]
    before = bn.moving_mean.asnumpy().copy()
    report = translate(block, inputs, str(tmp_path), "bn")
    assert report.ok, report.summary()
    state = [c for c in report.checks if c.name.startswith("state the forward replaces")]
    assert state and state[0].passed and "8 tensors" in state[0].detail, report.summary()
    assert np.array_equal(bn.moving_mean.asnumpy(), before)
    src = open(report.source_path).read()
    assert "self.moving_mean = new.detach()" in src and "self.register_buffer('moving_mean'" in src, src
    m = load_generated(report.source_path, report.class_name)()
    m.load_state_dict(load_file(report.weights_path))
    x = torch.from_numpy(np.asarray(inputs[0], np.float32))
    old = m.get_submodule("1").moving_mean.clone()
    m.train()(x)
    new = m.get_submodule("1").moving_mean
    assert not torch.equal(old, new) and not new.requires_grad
    assert "1.moving_mean" in dict(m.named_buffers())


def test_translate_restores_state(np_mode, tmp_path):
    """The trace patches np/npx in the block's module, Symbol.shape and the block's attributes
    while it runs: all restored (d2l keeps attention_weights on the block)."""
    import mxnet.numpy as mnp
    import mxnet.numpy_extension as mnpx
    from mxnet.gluon.parameter import Parameter
    from mxnet.symbol.numpy import _Symbol
    block, inputs = d2l.MODELS["multihead_attention"]()
    data = Parameter.data
    report = translate(block, inputs, str(tmp_path), "mha")
    src = open(report.source_path).read()
    # d2l's X.reshape(X.shape[0], X.shape[1], num_heads, -1) keeps the sizes symbolic (any batch / length)
    assert "W_q.reshape(W_q.shape[0], W_q.shape[1], 2, -1)" in src
    assert d2l.np is mnp and d2l.npx is mnpx
    assert Parameter.data is data and "shape" not in vars(_Symbol) and "shape" not in vars(mx.sym.Symbol)
    assert isinstance(block.attention.attention_weights, mnp.ndarray)
    out = block(*[mnp.array(a) for a in inputs])       # the block still runs as before
    assert out.shape == (2, 4, 8)


def test_legacy_mode_unchanged(tmp_path):
    """Legacy (mx.nd) blocks are fed legacy arrays; translate does not switch the numpy interface on."""
    assert not npx.is_np_array()
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, activation="relu"), gluon.nn.Dense(2))
    net.initialize()
    report = translate(net, np.ones((2, 3), "float32"), str(tmp_path), "mlp")
    assert report.ok and not npx.is_np_array()


class _ShapeBlock(gluon.nn.Block):
    """A legacy nn.Block whose Python code reads x.shape and calls nd.* (d2l's 0.x style)."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(6, flatten=False)

    def forward(self, x):
        y = self.dense(x)
        y = y.reshape((y.shape[0], y.shape[1], 2, -1))
        return mx.nd.relu(y).sum(axis=-1) / y.shape[-1]


def test_legacy_block_reads_shape(tmp_path):
    net = _ShapeBlock()
    net.initialize()
    report = translate(net, np.random.default_rng(0).standard_normal((2, 5, 4)).astype("float32"),
                       str(tmp_path), "shapes")
    assert report.ok, report.summary()
    src = open(report.source_path).read()
    assert "dense.reshape(dense.shape[0], dense.shape[1], 2, -1)" in src      # Reshape code 0: copied sizes


class _ValueBranch(gluon.nn.Block):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3)

    def forward(self, x):
        y = self.dense(x)
        if y.sum() > 0:      # depends on the values: no single graph
            return y
        return -y


def test_value_dependent_branch_refused(tmp_path):
    net = _ValueBranch()
    net.initialize()
    report = translate(net, np.ones((2, 4), "float32"), str(tmp_path), "branch")
    assert not report.ok
    u = report.untranslated[0]
    assert u["block"] == "_ValueBranch" and u["path"] == ""
    assert "depends on the values of a tensor" in u["reason"]
    assert "shape" not in vars(mx.sym.Symbol) and mx.autograd.is_training.__module__ == "mxnet.autograd"


class _NpOps(gluon.nn.Block):
    """numpy-interface ops whose conventions differ from torch's or from MXNet's legacy ops."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(12, flatten=False)
        self.w = self.params.get("w", shape=(12, 5))
        self.gamma = self.params.get("gamma", shape=(12,), init="ones")
        self.beta = self.params.get("beta", shape=(12,), init="zeros")

    def forward(self, x):
        from mxnet import np as mnp, npx as mnpx
        y = self.dense(x)                                   # (2, 3, 12)
        a = mnp.dot(y, self.w.data())                       # N-d dot: last axis with the 2nd-to-last
        b = mnpx.reshape(y, (-2, -6, 3, -1, -4))            # (2, 3, 3, 4): -6 splits an axis
        c = mnpx.reshape(b, (-5, -2, -2))                   # (6, 3, 4): -5 merges two
        d = mnp.transpose(c).mean(axis=(0, 1), keepdims=True)
        e = mnp.tile(y[:, -1], (2, 1)) + mnp.repeat(y[:, 0], 2, axis=0)
        f = mnp.concatenate([a.reshape(-1), y.max(axis=1).reshape(-1)], axis=0)
        g = mnp.where(y > 0, y, mnp.exp(y) - 1).sum(axis=1)
        h = mnpx.layer_norm(y, self.gamma.data(), self.beta.data(), axis=-1, eps=1e-5)
        return a, d, e, f, g, mnp.squeeze(npx_one(mnpx, y), axis=0), h


def npx_one(mnpx, y):
    return mnpx.sigmoid(y[:1])   # a bare slice: MXNet stores scalar begin/end


def test_numpy_ops(np_mode, tmp_path):
    net = _NpOps()
    net.initialize()
    report = translate(net, np.random.default_rng(1).standard_normal((2, 3, 4)).astype("float32"),
                       str(tmp_path), "npops")
    assert report.ok, report.summary()
    src = open(report.source_path).read()
    assert "torch.tensordot" in src and "torch.repeat_interleave" in src


class _Std(gluon.nn.Block):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(4)

    def forward(self, x):
        return self.dense(x).std(axis=1)


def test_std_refused(np_mode, tmp_path):
    """MXNet 1.9.1's np.std / np.var have an all-zero gradient (torch's is the true one): refused."""
    net = _Std()
    net.initialize()
    report = translate(net, np.ones((2, 3), "float32"), str(tmp_path), "std")
    assert not report.ok
    assert "no gradient through np.std" in report.untranslated[0]["reason"]


class _NpHybrid(gluon.nn.HybridBlock):
    """Sockeye 2 / MXNet >= 1.6 style: a HybridBlock whose hybrid_forward uses F.np / F.npx."""

    def __init__(self):
        super().__init__()
        self.proj = gluon.nn.Dense(8, flatten=False)

    def hybrid_forward(self, F, x, lengths):
        y = F.npx.relu(self.proj(x))
        return F.npx.softmax(F.npx.sequence_mask(y.swapaxes(0, 1), lengths, use_sequence_length=True,
                                                 value=-1e4, axis=0), axis=-1)


def test_numpy_hybrid_block(np_mode, tmp_path):
    net = _NpHybrid()
    net.initialize()
    report = translate(net, [np.random.default_rng(2).standard_normal((2, 5, 3)).astype("float32"),
                             np.array([3, 5], "float32")], str(tmp_path), "nphybrid")
    assert report.ok, report.summary()


def test_call_override(tmp_path):
    """gluonnlp's DistilBERT overrides __call__ (it passes [] token types to BERTModel): traced as the
    user calls it; its inner blocks as their forward was called."""
    nlp = pytest.importorskip("gluonnlp")
    mx.random.seed(0)
    enc = nlp.model.BERTEncoder(num_layers=1, units=16, hidden_size=32, max_length=16, num_heads=2, dropout=0.0,
                                output_attention=False, output_all_encodings=False)
    net = nlp.model.DistilBERTModel(enc, vocab_size=30, units=16, embed_size=16)
    net.initialize(mx.init.Normal(0.02))
    ids = np.random.default_rng(0).integers(0, 30, (2, 7)).astype("float32")
    report = translate(net, [ids, np.array([7, 4], "float32")], str(tmp_path), "distil")
    assert report.ok, report.summary()
    src = open(report.source_path).read()
    assert "def forward(self, inputs, valid_length)" in src


class _TrainBranch(gluon.nn.HybridBlock):
    """Computes something else in training (gluoncv YOLOv3's output head does)."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3)

    def hybrid_forward(self, F, x):
        y = self.dense(x)
        if mx.autograd.is_training():
            return y * 2
        return y


class _TrainMore(_TrainBranch):
    """Returns more tensors in training than in inference."""

    def hybrid_forward(self, F, x):
        y = self.dense(x)
        if mx.autograd.is_training():
            return y, y * 2
        return y


class _TrainLoss(_TrainBranch):
    """gluoncv's detectors: a loss inside autograd.record() (training and recording), outputs otherwise."""

    def hybrid_forward(self, F, x):
        y = self.dense(x)
        if mx.autograd.is_training() and mx.autograd.is_recording():
            return (y * y).sum()
        return y


class _SameBothWays(gluon.nn.HybridBlock):
    """Asks autograd.is_training() but computes the same graph either way."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3)

    def hybrid_forward(self, F, x):
        scale = 1.0 if mx.autograd.is_training() else 1.0
        return self.dense(x) * scale


def test_is_training_branch(tmp_path):
    """Both graphs are traced: one forward with `if self.training:` (proven in eval and train mode),
    one plain forward when they agree; outputs that differ in number per mode (YOLOv3's output
    layer) are written per mode and proven in each; a training forward that asks
    autograd.is_recording() is refused unless translated for inference (train=False)."""
    net = _TrainBranch()
    net.initialize()
    report = translate(net, np.ones((2, 4), "float32"), str(tmp_path / "tb"), "tb")
    assert report.ok, report.summary()
    assert "if self.training:" in open(report.source_path).read()
    net = _SameBothWays()
    net.initialize()
    report = translate(net, np.ones((2, 4), "float32"), str(tmp_path / "same"), "same")
    assert report.ok and "if self.training" not in open(report.source_path).read()
    net = _TrainMore()
    net.initialize()
    report = translate(net, np.ones((2, 4), "float32"), str(tmp_path / "more"), "more")
    assert report.ok, report.summary()
    src = open(report.source_path).read()
    assert "if self.training:" in src and ", dense * 2" in src.replace("(dense * 2)", "dense * 2"), src
    m = load_generated(report.source_path, report.class_name)()
    m.load_state_dict(load_file(report.weights_path))
    x = torch.ones(2, 4)
    assert isinstance(m.train()(x), tuple) and len(m(x)) == 2 and isinstance(m.eval()(x), torch.Tensor)
    net = _TrainLoss()
    net.initialize()
    with pytest.raises(TranslationError) as e:
        translate(net, np.ones((2, 4), "float32"), str(tmp_path / "loss"), "loss")
    assert "_TrainLoss" in str(e.value) and "autograd.is_recording()" in str(e.value) and "train=False" in str(e.value)
    report = translate(net, np.ones((2, 4), "float32"), str(tmp_path / "loss_inf"), "loss_inf", train=False)
    assert report.ok, report.summary()
    m = load_generated(report.source_path, report.class_name)()
    m.load_state_dict(load_file(report.weights_path))
    assert torch.equal(m.eval()(x), m.dense(x))
    with pytest.raises(NotImplementedError, match=r"translated for inference .* call \.eval\(\)"):
        m.train()(x)
    assert [c.name for c in report.checks] == ["eval outputs (randomised norms/biases)",
                                               "eval outputs (the block's own weights)"]
    assert any("translated for inference (train=False)" in n for n in report.notes), report.notes


class _DefaultZeros(gluon.nn.Block):
    """Builds an array with a function bound as a default argument (not swapped for its symbol twin)."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3)

    def forward(self, x, func=mx.nd.zeros):
        y = self.dense(x)
        return y + func(shape=y.shape)


def test_array_meeting_a_traced_value_is_named(tmp_path):
    net = _DefaultZeros()
    net.initialize()
    report = translate(net, np.ones((2, 4), "float32"), str(tmp_path), "dz")
    assert not report.ok
    reason = report.untranslated[0]["reason"]
    assert "_DefaultZeros" in reason and "build it with np/npx/nd/F inside forward" in reason


class _Legacy(gluon.nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3)

    def hybrid_forward(self, F, x):
        return F.Activation(self.dense(x), act_type="relu")


def test_wrong_mode_is_named(tmp_path):
    """A numpy-interface model translated with the mode off, and a legacy one with it on: one
    TranslationError that says which call to make, not MXNet's error."""
    was = npx.is_np_array()
    npx.set_np()
    try:
        block, inputs = d2l.MODELS["multihead_attention"]()
    finally:
        npx.reset_np()
    with pytest.raises(TranslationError) as e:
        translate(block, inputs, str(tmp_path / "a"), "mha")
    assert "call npx.set_np() before translate" in str(e.value) and "MultiHeadAttention" in str(e.value)
    net = _Legacy()
    net.initialize()
    npx.set_np()
    try:
        with pytest.raises(TranslationError) as e:
            translate(net, np.ones((2, 4), "float32"), str(tmp_path / "b"), "legacy")
        assert "call npx.reset_np() before translate" in str(e.value)
    finally:
        npx.reset_np()
        if was:
            npx.set_np()


class _Shorter(gluon.nn.Block):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, flatten=False)

    def forward(self, x):
        from mxnet import np as mnp
        y = self.dense(x)
        return mnp.tanh(y[:, :x.shape[1] - 1])     # a size computed from a shape: the sample's number


def test_sizes_fixed_to_the_sample_are_noted(np_mode, tmp_path):
    """Sizes read from x.shape stay symbolic where they feed a reshape of the same tensor
    (transpose_qkv), x.reshape(y.shape) / v.repeat(X.shape[1]) (masked_softmax),
    np.broadcast_to(c, (X.shape[0], ...)) (the seq2seq decoder) or p[:, :X.shape[1], :] (BERT's
    positions); elsewhere (y[:, :x.shape[1] - 1]) they are the sample's numbers, and the trace says so."""
    from dualdl.port.translate.trace import gluon_inputs, record_calls, trace_block
    block, inputs = d2l.MODELS["multihead_attention"]()
    records = record_calls(block, gluon_inputs(block, [np.asarray(a) for a in inputs]))
    assert trace_block(block, "", records).notes == trace_block(block.attention, "attention", records).notes == []
    block, inputs = d2l.MODELS["bert_encoder"]()     # pos_embedding[:, :X.shape[1], :]: p[:, :x.shape[1]]
    records = record_calls(block, gluon_inputs(block, [np.asarray(a) for a in inputs]))
    assert trace_block(block, "", records).notes == []
    net = _Shorter()
    net.initialize()
    records = record_calls(net, gluon_inputs(net, [np.ones((2, 5, 4), "float32")]))
    note = ("size 4 that _Shorter's Python code read from x.shape is written as a number (the sample "
            "input's): the generated forward expects inputs of that size on that axis")
    assert trace_block(net, "", records).notes == [note]
    report = translate(net, np.ones((2, 5, 4), "float32"), str(tmp_path / "short"), "short")
    assert report.ok and f"(top): {note}" in report.notes
    block, inputs = d2l.MODELS["seq2seq"]()
    records = record_calls(block, gluon_inputs(block, [np.asarray(a) for a in inputs]))
    assert trace_block(block.decoder, "decoder", records).notes == []
    report = translate(block, inputs, str(tmp_path), "s2s")
    assert report.ok, report.summary()
    assert re.search(r"\.unsqueeze\(0\)\.expand\(\w+\.shape\[0\], -1, -1\)", open(report.source_path).read())


def test_masklm_index_tensors(np_mode, tmp_path):
    """d2l's MaskLM: np.arange(0, X.shape[0]) follows X (size, dtype, device); X[batch_idx, positions]
    (index tensors, which MXNet 1.9 symbols refuse) is traced as gather_nd."""
    block, inputs = d2l.MODELS["bert_model"]()
    report = translate(block, inputs, str(tmp_path), "bert")
    assert report.ok, report.summary()
    src = open(report.source_path).read()
    assert "torch.arange(X.shape[0], dtype=X.dtype, device=X.device)" in src
    assert "X[tuple(torch.stack([" in src


class _LengthMask(gluon.nn.Block):
    """gluonnlp's TransformerDecoder.init_state_from_encoder: a mask from x.shape, .dtype, .context."""

    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, flatten=False)

    def forward(self, x, valid_length):
        length = x.shape[1]
        mask = mx.nd.broadcast_lesser(
            mx.nd.arange(length, ctx=valid_length.context, dtype=valid_length.dtype).reshape((1, -1)),
            valid_length.reshape((-1, 1)))
        return self.dense(x) * mask.expand_dims(-1)


def test_legacy_dtype_context_arange(tmp_path):
    net = _LengthMask()
    net.initialize()
    report = translate(net, [np.ones((2, 5, 4), "float32"), np.array([3, 5], "float32")], str(tmp_path), "lm")
    assert report.ok, report.summary()
    src = open(report.source_path).read()
    assert "torch.arange(x.shape[1], dtype=x.dtype, device=x.device)" in src and not report.notes
