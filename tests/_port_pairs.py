"""Third-party Gluon/torch pairs for the port and native-training tests: gluonnlp BERT and
transformers.BertModel, model-zoo / gluoncv ResNets and transformers ResNet, gluonnlp language
models and a hand-written torch LM (small configs, built from configs: no download)."""
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
    # no id 0: transformers gives the word embedding padding_idx=0 (its gradient row stays 0)
    ids, types = rng.integers(1, V, (N, T)), rng.integers(0, 2, (N, T))
    lengths = np.array(lengths)                                   # int64: Gluon wants float32
    mask = (np.arange(T)[None] < lengths[:, None]).astype(np.int64)
    return (ids, types, lengths), dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


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


X = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)


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


_DROPOUTS = ("dropout", "weight_drop", "drop_h", "drop_i", "drop_e")


def _lm(kind, dropout_off=False):
    """``dropout_off``: the zoo hyper-parameters with every dropout (and AWD's weight drop) 0,
    for training comparisons."""
    from gluonnlp.model import language_model as lm
    mx.random.seed(0)
    if dropout_off:
        lm = type("hp", (), {k: {n: (0.0 if n in _DROPOUTS else v) for n, v in getattr(lm, k).items()}
                             for k in ("standard_lstm_lm_200_hparams", "awd_lstm_lm_600_hparams")})
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


