"""Porting gluonnlp models (LSTM language models, the BERT encoder) onto independent hand-written
PyTorch models; controls show that GELU flavour and LayerNorm eps (which no parameter reveals)
make the verification fail."""
import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
nlp = pytest.importorskip("gluonnlp")
from torch import nn  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl.port import Fused, Rename  # noqa: E402


class TorchLM(nn.Module):
    """gluonnlp StandardRNN: embedding -> multi-layer LSTM (TNC) -> decoder tied to the embedding."""
    def __init__(self, vocab, embed, hidden, layers, mode="lstm"):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.encoder = {"lstm": nn.LSTM, "gru": nn.GRU}[mode](embed, hidden, layers)
        self.decoder = nn.Linear(hidden, vocab)
        self.decoder.weight = self.embedding.weight

    def forward(self, x):
        out, state = self.encoder(self.embedding(x))
        return self.decoder(out), state


class TorchAWD(nn.Module):
    """gluonnlp AWDRNN: one single-layer LSTM per layer, the last one back to embed size, tied."""
    def __init__(self, vocab, embed, hidden, layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.rnns = nn.ModuleList([nn.LSTM(embed if i == 0 else hidden,
                                           hidden if i != layers - 1 else embed)
                                   for i in range(layers)])
        self.decoder = nn.Linear(embed, vocab)
        self.decoder.weight = self.embedding.weight

    def forward(self, x):
        h, states = self.embedding(x), []
        for rnn in self.rnns:
            h, (hn, cn) = rnn(h)
            states.append([hn, cn])
        return self.decoder(h), states


class TorchBERTCell(nn.Module):
    def __init__(self, units, hidden, heads, eps, gelu):
        super().__init__()
        self.ln_ffn = nn.LayerNorm(units, eps=eps)   # defined first, runs last
        self.attn = nn.MultiheadAttention(units, heads)  # packed in_proj: the Fused rule
        self.ln_attn = nn.LayerNorm(units, eps=eps)
        self.ffn1, self.ffn2 = nn.Linear(units, hidden), nn.Linear(hidden, units)
        self.gelu = gelu

    def forward(self, x):
        a, _ = self.attn(x, x, x, need_weights=False)
        x = self.ln_attn(x + a)
        return self.ln_ffn(x + self.ffn2(nn.functional.gelu(self.ffn1(x), approximate=self.gelu)))


class TorchBERTEncoder(nn.Module):
    """gluonnlp BERTEncoder: (T, N, C) input + learned positions, LayerNorm, post-LN cells."""
    def __init__(self, layers=2, units=16, hidden=32, max_length=20, heads=2, eps=1e-12,
                 gelu="none"):
        super().__init__()
        self.position_weight = nn.Parameter(torch.zeros(max_length, units))
        self.layer_norm = nn.LayerNorm(units, eps=eps)
        self.cells = nn.ModuleList([TorchBERTCell(units, hidden, heads, eps, gelu)
                                    for _ in range(layers)])

    def forward(self, x):
        x = self.layer_norm(x + self.position_weight[:x.shape[0]].unsqueeze(1))
        for cell in self.cells:
            x = cell(x)
        return x


def _tokens(shape=(7, 3), vocab=50, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, shape)


def _standard_rnn(mode="lstm"):
    mx.random.seed(0)
    g = nlp.model.StandardRNN(mode, 50, 16, 16, 2, 0.0, True)
    g.initialize(mx.init.Xavier())
    return g


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_standard_rnn_lm_to_torch(mode):
    g, t = _standard_rnn(mode), TorchLM(50, 16, 16, 2, mode)
    report = dl.port.port_gluon_to_torch(g, t, _tokens())
    print(mode, report.checks)
    assert report.ok, report.summary()
    assert report.max_rel_diff < 1e-5
    # LSTM/GRU: no gate permutation; gluon's saved RNN keys pair with torch's
    keys = {p.source.key: p.target.key for p in report.pairs}
    assert keys["encoder._unfused.1.h2h_weight"] == "encoder.weight_hh_l1"
    assert keys["decoder.0.weight"] == "decoder.weight"
    assert any("tied" in n for n in report.notes) or keys["embedding.0.weight"] == "embedding.weight"
    x = _tokens(seed=5)
    g_out = g(mx.nd.array(x))[0].asnumpy()
    t.eval()
    with torch.no_grad():
        t_out = t(torch.from_numpy(x))[0].numpy()
    assert np.abs(g_out - t_out).max() <= 1e-5 * max(1.0, np.abs(g_out).max())
    assert t.decoder.weight is t.embedding.weight  # tying survived the load


def test_awd_lstm_lm_1150_structure_at_small_size_to_torch():
    """The block awd_lstm_lm_1150 builds, with its hyper-parameters (dropouts, weight drop 0.5,
    tied, 3 layers) except embed/hidden sizes."""
    from gluonnlp.model import language_model
    hp = dict(language_model.awd_lstm_lm_1150_hparams, embed_size=16, hidden_size=24)
    mx.random.seed(0)
    g = nlp.model.AWDRNN(vocab_size=50, **hp)
    g.initialize(mx.init.Xavier())
    report = dl.port.port_gluon_to_torch(g, TorchAWD(50, 16, 24, 3), _tokens())
    assert report.ok, report.summary()
    assert report.max_rel_diff < 1e-5 and len(report.pairs) == 15


def test_awd_training_variant_with_output_adapter():
    mx.random.seed(0)
    # awd_lstm_lm_1150's structure (3 single-layer LSTMs, tied, weight drop 0.5) at a small size
    g = nlp.model.train.AWDRNN("lstm", 50, embed_size=16, hidden_size=24, num_layers=3,
                               tie_weights=True, dropout=0.4, weight_drop=0.5, drop_h=0.2,
                               drop_i=0.65, drop_e=0.1)
    g.initialize(mx.init.Xavier())
    t = TorchAWD(50, 16, 24, 3)
    # the train-time AWDRNN also returns its per-layer encodings: compare output and states
    report = dl.port.port_gluon_to_torch(g, t, _tokens(), source_forward=lambda m, x: m(x)[:2])
    print(report.checks)
    assert report.ok, report.summary()
    assert report.max_rel_diff < 1e-5
    assert len(report.pairs) == 15


def test_rnn_activation_mismatch_is_reported():
    """Control: a torch GRU in place of Gluon's LSTM does not even pair (gate count)."""
    g, t = _standard_rnn("lstm"), TorchLM(50, 16, 16, 2, "gru")
    report = dl.port.port_gluon_to_torch(g, t, _tokens())
    assert not report.ok and not report.loaded
    assert any("weight_ih" in k for k in report.unpaired["target"])


def _bert(init=None):
    mx.random.seed(0)
    g = nlp.model.BERTEncoder(num_layers=2, units=16, hidden_size=32, max_length=20, num_heads=2,
                              dropout=0.0)
    g.initialize(init or mx.init.Xavier())
    return g


def _seq(scale=1.0, seed=0):
    return (np.random.default_rng(seed).standard_normal((9, 3, 16)) * scale).astype(np.float32)


def test_bert_encoder_to_torch_with_fused_qkv():
    g, t = _bert(), TorchBERTEncoder()
    report = dl.port.port_gluon_to_torch(g, t, _seq())
    print(report.checks)
    assert report.ok, report.summary()
    assert report.max_rel_diff < 1e-5
    fused = [e for e in report.mapping.entries if e.transform == "concat"]
    assert [e.target for e in fused] == [f"cells.{i}.attn.in_proj_{w}" for i in (0, 1)
                                         for w in ("weight", "bias")]
    assert [s["key"].split(".")[-2] for s in fused[0].sources] == ["proj_query", "proj_key",
                                                                   "proj_value"]
    pairs = {p.source.key: p.target.key for p in report.pairs}
    # definition order would swap these two LayerNorms; execution order does not
    assert pairs["transformer_cells.0.layer_norm.gamma"] == "cells.0.ln_attn.weight"
    assert pairs["transformer_cells.0.ffn.layer_norm.gamma"] == "cells.0.ln_ffn.weight"
    assert pairs["transformer_cells.1.proj.weight"] == "cells.1.attn.out_proj.weight"
    # MultiheadAttention uses out_proj's weights without calling it: reported, placed after it
    assert any("cells.0.attn.out_proj never ran" in n for n in report.notes)


@pytest.mark.parametrize("kwargs,scale,init", [({"gelu": "tanh"}, 3.0, None),
                                              ({"eps": 1e-5}, 1e-3, 0.02)])
def test_bert_hidden_differences_fail_verification(kwargs, scale, init):
    """Controls: GELU tanh vs erf and LayerNorm eps 1e-5 vs BERT's 1e-12 change no parameter;
    only the verification can see them (eps: with BERT's N(0, 0.02) init and small inputs, where
    the variance is not much larger than eps)."""
    g = _bert(mx.init.Normal(init) if init else None)
    t = TorchBERTEncoder(**kwargs)
    before = {k: v.clone() for k, v in t.state_dict().items()}
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, _seq(scale))
    print(kwargs, report.checks)
    assert report.complete and not report.ok and not report.loaded
    assert report.max_rel_diff > 1e-4, report.summary()  # >10x the default rtol 1e-5
    assert "eps" in report.message or "GELU" in report.message
    assert all(torch.equal(before[k], v) for k, v in t.state_dict().items())


def test_bert_torch_to_gluon_reverse_direction():
    torch.manual_seed(0)
    t = TorchBERTEncoder()
    with torch.no_grad():
        t.position_weight.normal_(0, 0.5)
    g = _bert()
    g(mx.nd.array(_seq()))
    report = dl.port.port_torch_to_gluon(t, g, _seq())
    assert report.ok, report.summary()
    assert report.max_rel_diff < 1e-5
    slices = [e for e in report.mapping.entries if e.sources and e.sources[0]["part"]]
    assert len(slices) == 12  # q/k/v weight and bias of 2 layers, sliced out of in_proj


def test_rename_rule_overrides_order():
    """A user rule pairs by name; here it deliberately swaps two same-shaped LayerNorms, which
    the verification must then reject."""
    g, t = _bert(), TorchBERTEncoder()
    rules = [Rename(r"transformer_cells\.0\.layer_norm\.(gamma|beta)",
                    r"cells.0.ln_ffn.\1"),
             Rename(r"transformer_cells\.0\.ffn\.layer_norm\.(gamma|beta)", r"cells.0.ln_attn.\1")]
    report = dl.port.port_gluon_to_torch(g, t, _seq(), rules=rules)
    # Rename does not turn gamma/beta into weight/bias: those targets do not exist -> error
    assert not report.complete and not report.loaded
    assert "transformer_cells.0.layer_norm.gamma" in report.unpaired["source"]
    assert any("does not exist" in n for n in report.notes)
    rules = [Rename(r"transformer_cells\.0\.layer_norm\.gamma", "cells.0.ln_ffn.weight"),
             Rename(r"transformer_cells\.0\.layer_norm\.beta", "cells.0.ln_ffn.bias"),
             Rename(r"transformer_cells\.0\.ffn\.layer_norm\.gamma", "cells.0.ln_attn.weight"),
             Rename(r"transformer_cells\.0\.ffn\.layer_norm\.beta", "cells.0.ln_attn.bias")]
    with pytest.warns(UserWarning, match="verification failed"):
        report = dl.port.port_gluon_to_torch(g, t, _seq(), rules=rules)
    assert report.complete and not report.ok
    assert report.checks[0].max_rel_diff > 1e-2
    assert sum(p.how.startswith("rule rename") for p in report.pairs) == 4


def test_fused_rule_is_required_for_packed_projections():
    g, t = _bert(), TorchBERTEncoder()
    report = dl.port.port_gluon_to_torch(g, t, _seq(), default_rules=False)
    assert not report.complete
    assert "cells.0.attn.in_proj_weight" in report.unpaired["target"]
    report = dl.port.port_gluon_to_torch(g, t, _seq(), default_rules=False,
                                         rules=[Fused(r"in_proj_(weight|bias)$", parts=3)])
    assert report.ok, report.summary()
    assert [n for n in report.notes if n.startswith("rule fused")] == [
        f"rule fused (target): cells.{i}.attn.in_proj_{w} is 3 tensors along axis 0"
        for i in (0, 1) for w in ("weight", "bias")]
