"""dl.port on third-party pairs nobody wrote for dualdl: gluonnlp BERT -> transformers.BertModel,
model-zoo / gluoncv ResNets -> transformers.ResNetForImageClassification, gluonnlp language
models -> a torch LM. Correct ports pass at the defaults; each deliberate mistake is refused
with a message naming it, and the target is left unchanged."""
import importlib.util
import os

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
nlp = pytest.importorskip("gluonnlp")
transformers = pytest.importorskip("transformers")
from mxnet.gluon.model_zoo import vision  # noqa: E402
from torch import nn  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl.port import Ignore, PortInputError  # noqa: E402


def _same(before, model):
    return all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def _sd(m):
    return {k: v.clone() for k, v in m.state_dict().items()}


# ------------------------------------------------------------------------------ BERT
V, T, N = 60, 9, 3


def _gluon_bert(layers=2, units=32, hidden=64, heads=2):
    mx.random.seed(0)
    enc = nlp.model.BERTEncoder(num_layers=layers, units=units, hidden_size=hidden, max_length=16,
                                num_heads=heads, dropout=0.0, output_attention=False,
                                output_all_encodings=False, layer_norm_eps=1e-12)
    g = nlp.model.BERTModel(enc, vocab_size=V, token_type_vocab_size=2, units=units,
                            embed_size=units, use_pooler=True, use_decoder=False,
                            use_classifier=False)
    g.initialize(mx.init.Normal(0.02))
    return g


def _hf_bert(eps=1e-12, act="gelu", layers=2, units=32, hidden=64, heads=2):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=V, hidden_size=units, num_hidden_layers=layers,
                                  num_attention_heads=heads, intermediate_size=hidden,
                                  max_position_embeddings=16, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, layer_norm_eps=eps,
                                  hidden_act=act)
    return transformers.BertModel(cfg).eval()


def _bert_inputs(lengths=(9, 6, 4), seed=0):
    rng = np.random.default_rng(seed)
    ids, types = rng.integers(0, V, (N, T)), rng.integers(0, 2, (N, T))
    lengths = np.array(lengths)                                   # int64: Gluon wants float32
    mask = (np.arange(T)[None] < lengths[:, None]).astype(np.int64)
    return (ids, types, lengths), dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def test_bert_to_transformers_keyword_inputs_padding_apart():
    g, t = _gluon_bert(), _hf_bert()
    src_in, dst_in = _bert_inputs()
    report = dl.port.port_gluon_to_torch(g, t, src_in, target_inputs=dst_in)
    print(report.summary())
    assert report.ok, report.summary()
    assert len(report.pairs) == 39 and report.max_rel_diff < 1e-5
    # gluonnlp's contrib attention is float32-only: the torch float64 run is the reference
    assert all("target float64" in c.evidence for c in report.checks)
    # gluonnlp zeroes padded outputs, transformers does not: said so, not counted
    assert all(c.padded_max_abs_diff > 0.1 for c in report.checks)
    assert any("padded positions only" in n for n in report.notes)
    # the headline figures are the deciding check's
    assert f"{report.checks[0].tolerance:.3g}" in report.message or \
        f"{report.checks[1].tolerance:.3g}" in report.message


@pytest.mark.parametrize("kwargs,named", [({"act": "gelu_new"}, "GELU (tanh"),
                                          ({"act": "gelu_pytorch_tanh"}, "GELU (tanh"),
                                          ({"eps": 1e-5}, "norm eps differs"),
                                          ({"eps": 1e-3}, "norm eps differs")])
def test_bert_hidden_setting_mistakes_are_named(kwargs, named):
    g, t = _gluon_bert(), _hf_bert(**kwargs)
    before = _sd(t)
    src_in, dst_in = _bert_inputs()
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, src_in, target_inputs=dst_in)
    assert report.complete and not report.ok and not report.loaded
    assert named in report.message, report.message
    assert _same(before, t)


def test_bert_missing_attention_mask_is_named():
    g, t = _gluon_bert(), _hf_bert()
    before = _sd(t)
    src_in, dst_in = _bert_inputs()
    del dst_in["attention_mask"]
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, src_in, target_inputs=dst_in)
    print(report.summary())
    assert report.complete and not report.ok and not report.loaded
    assert "missing attention mask" in report.message and "attention_mask" in report.message
    assert _same(before, t)


def test_wrong_inputs_give_a_dualdl_error_not_a_framework_one():
    g, t = _gluon_bert(), _hf_bert()
    before = _sd(t)
    src_in, _ = _bert_inputs()
    # the Gluon inputs given positionally to BertModel: token types land in attention_mask and
    # the float valid lengths in token_type_ids (torch RuntimeError inside)
    with pytest.raises(PortInputError, match=r"target \(BertModel\) failed.*input_ids"):
        dl.port.port_gluon_to_torch(g, t, (src_in[0], src_in[1], src_in[2].astype(np.float32)))
    with pytest.raises(PortInputError, match=r"source \(BERTModel\) failed"):
        dl.port.port_gluon_to_torch(g, t, (src_in[0][:, :2],))   # no token types
    assert _same(before, t)


# ------------------------------------------------------------------------------ ResNet
def _v1b_module():
    import mxnet.gluon  # noqa: F401
    spec = importlib.util.find_spec("gluoncv")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gluoncv not installed")
    path = os.path.join(spec.submodule_search_locations[0], "model_zoo", "resnetv1b.py")
    # `import gluoncv` refuses torch>=2: load the model file alone (it imports only mxnet)
    s = importlib.util.spec_from_file_location("gluoncv_resnetv1b", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def _gluon_resnet(name):
    mx.random.seed(0)
    net = (_v1b_module().resnet50_v1b(classes=10) if name == "resnet50_v1b"
           else vision.get_model(name, classes=10))
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 3, 32, 32)))
    return net


def _hf_resnet(deep, stride_on_1x1):
    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(
        embedding_size=64, hidden_sizes=[256, 512, 1024, 2048] if deep else [64, 128, 256, 512],
        depths=[3, 4, 6, 3] if deep else [2, 2, 2, 2], layer_type="bottleneck" if deep else "basic",
        hidden_act="relu", downsample_in_first_stage=False,
        downsample_in_bottleneck=stride_on_1x1, num_labels=10)
    return transformers.ResNetForImageClassification(cfg).eval()


_X = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)


@pytest.mark.parametrize("name", ["resnet18_v1", "resnet50_v1", "resnet50_v1b"])
def test_resnets_to_transformers(name):
    g, t = _gluon_resnet(name), _hf_resnet(name != "resnet18_v1", name == "resnet50_v1")
    report = dl.port.port_gluon_to_torch(g, t, _X)
    print(name, report.summary().split("\n  note")[0])
    assert report.ok, report.summary()
    assert all(c.evidence == "float64 on both sides" for c in report.checks)
    folds = sum(e.transform == "fold_bias" for e in report.mapping.entries)
    assert folds == (32 if name == "resnet50_v1" else 0)
    with torch.no_grad():
        out = t(torch.from_numpy(_X)).logits.numpy()
    assert np.abs(out - g(mx.nd.array(_X)).asnumpy()).max() <= 1e-5 * np.abs(out).max()


@pytest.mark.parametrize("name,stride_on_1x1", [("resnet50_v1", False), ("resnet50_v1b", True)])
def test_resnet_v1_v1b_stride_placement_is_named(name, stride_on_1x1):
    g, t = _gluon_resnet(name), _hf_resnet(True, stride_on_1x1)
    before = _sd(t)
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, _X)
    assert report.complete and not report.ok and not report.loaded
    assert "conv stride differs" in report.message and "v1b" in report.message
    assert _same(before, t)


def test_dropped_conv_biases_are_named():
    g, t = _gluon_resnet("resnet50_v1"), _hf_resnet(True, True)
    before = _sd(t)
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, _X, rules=[Ignore(r"body\.[06]\.bias$")])
    print(report.message)
    assert report.complete and not report.ok and not report.loaded
    assert "32 source biases not ported (dropped" in report.message
    assert _same(before, t)


# ------------------------------------------------------------------------------ LSTM LMs
class TorchLSTM(nn.Module):
    """One LSTM layer written by hand (torch's parameter names); ``gates`` is the order the
    fused gate rows are read in: torch and Gluon both use i,f,g,o."""
    def __init__(self, cin, hidden, gates="ifgo"):
        super().__init__()
        self.weight_ih_l0 = nn.Parameter(torch.zeros(4 * hidden, cin))
        self.weight_hh_l0 = nn.Parameter(torch.zeros(4 * hidden, hidden))
        self.bias_ih_l0 = nn.Parameter(torch.zeros(4 * hidden))
        self.bias_hh_l0 = nn.Parameter(torch.zeros(4 * hidden))
        self.gates = gates

    def forward(self, x, state=None):
        h = x.new_zeros(x.shape[1], self.weight_hh_l0.shape[1]) if state is None else state[0][0]
        c = torch.zeros_like(h) if state is None else state[1][0]
        outs = []
        for xt in x:
            z = xt @ self.weight_ih_l0.T + self.bias_ih_l0 + h @ self.weight_hh_l0.T + self.bias_hh_l0
            g = dict(zip(self.gates, z.chunk(4, 1)))
            c = torch.sigmoid(g["f"]) * c + torch.sigmoid(g["i"]) * torch.tanh(g["g"])
            h = torch.sigmoid(g["o"]) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs), [h[None], c[None]]


class TorchLM(nn.Module):
    """Embedding -> per-layer LSTMs (TNC) -> decoder tied to the embedding: gluonnlp's
    StandardRNN (``layers`` in one nn.LSTM) or AWDRNN (one LSTM per layer, the last one back to
    the embedding size), with begin states as a list per layer of [h, c]."""
    def __init__(self, vocab, embed, hidden, layers, awd=False, gates=None):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        if awd:
            sizes = [(embed if i == 0 else hidden, hidden if i < layers - 1 else embed)
                     for i in range(layers)]
            self.rnns = nn.ModuleList([TorchLSTM(a, b, gates) if gates else nn.LSTM(a, b)
                                       for a, b in sizes])
        else:
            self.rnns = nn.ModuleList([nn.LSTM(embed, hidden, layers)])
        self.decoder = nn.Linear(embed if awd else hidden, vocab)
        self.decoder.weight = self.embedding.weight

    def forward(self, x, states=None):
        h, out_states = self.embedding(x), []
        for i, rnn in enumerate(self.rnns):
            st = None if states is None else states[i]
            h, st = rnn(h, None if st is None else tuple(st))
            out_states.append(list(st))
        return self.decoder(h), out_states


def _tokens(seed=0):
    return np.random.default_rng(seed).integers(0, 50, (7, 3))


def _lm(kind):
    from gluonnlp.model import language_model as lm
    mx.random.seed(0)
    if kind == "standard_rnn":
        g = nlp.model.StandardRNN("lstm", 50, 16, 16, 2, 0.0, True)
        t = TorchLM(50, 16, 16, 2)
    elif kind == "standard_lstm_lm_200":   # its hyper-parameters, vocabulary 50
        g = nlp.model.StandardRNN(vocab_size=50, **lm.standard_lstm_lm_200_hparams)
        hp = lm.standard_lstm_lm_200_hparams
        t = TorchLM(50, hp["embed_size"], hp["hidden_size"], hp["num_layers"])
    else:
        hp = lm.awd_lstm_lm_600_hparams
        g = nlp.model.AWDRNN(vocab_size=50, **hp)
        t = TorchLM(50, hp["embed_size"], hp["hidden_size"], hp["num_layers"], awd=True)
    g.initialize(mx.init.Xavier())
    return g, t


@pytest.mark.parametrize("kind", ["standard_rnn", "standard_lstm_lm_200", "awd_lstm_lm_600"])
def test_language_models_to_torch(kind):
    g, t = _lm(kind)
    report = dl.port.port_gluon_to_torch(g, t, _tokens())
    print(kind, report.summary().split("\n  note")[0])
    assert report.ok, report.summary()
    assert all(c.evidence == "float64 on both sides" for c in report.checks)
    assert t.decoder.weight is t.embedding.weight


def test_nested_begin_states_per_layer():
    """AWDRNN's begin state is a list per layer of [h, c]: passed as nested lists to both."""
    g, t = _lm("awd_lstm_lm_600")
    rng = np.random.default_rng(1)
    states = [[rng.standard_normal((1, 3, h)).astype(np.float32) * 0.5 for _ in range(2)]
              for h in (600, 600, 200)]
    report = dl.port.port_gluon_to_torch(g, t, (_tokens(), states))
    assert report.ok, report.summary()
    # the states reach both models: without them the outputs differ from these
    t.eval()
    with torch.no_grad():
        with_states = t(torch.from_numpy(_tokens()),
                        [[torch.from_numpy(a) for a in s] for s in states])[0]
        without = t(torch.from_numpy(_tokens()))[0]
    assert (with_states - without).abs().max() > 1e-3


def test_lstm_gate_order_ifog_is_named():
    from gluonnlp.model import language_model as lm
    hp = dict(lm.awd_lstm_lm_600_hparams, embed_size=16, hidden_size=24)
    mx.random.seed(0)
    g = nlp.model.AWDRNN(vocab_size=50, **hp)
    g.initialize(mx.init.Xavier())
    t = TorchLM(50, 16, 24, 3, awd=True, gates="ifog")
    before = _sd(t)
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, _tokens())
    print(report.message)
    assert report.complete and not report.ok and not report.loaded
    assert "first divergent layer: source encoder.0 / target rnns.0" in report.message and "gate order" in report.message
    assert _same(before, t)
    # the same hand-written cell in i,f,g,o order ports
    assert dl.port.port_gluon_to_torch(g, TorchLM(50, 16, 24, 3, awd=True, gates="ifgo"),
                                       _tokens()).ok
