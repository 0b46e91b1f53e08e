"""A whole model written once: a small seq2seq Transformer (token embeddings, sinusoid positional
encoding, ``nn.Transformer`` with a causal ``tgt_mask`` and key padding masks, output Linear) trained
3 steps with teacher forcing on PyTorch and on MXNet from identical weights and batches (dropout 0).
The max abs / rel differences per step (loss, logits, gradients, weights after the step) are printed
with ``-s`` and reported in docs/models.md ("Whole models")."""
import numpy as np
import pytest

import dualdl as dl
from dualdl import nn, ops

pytest.importorskip("torch")
pytest.importorskip("mxnet")

SRC_VOCAB, TGT_VOCAB, PAD, BOS = 11, 13, 0, 1
D, HEADS, FF, N, S, T, STEPS, LR = 16, 2, 32, 4, 7, 6, 3, 0.05
# SGD with momentum, not Adam: the gradient of attention's key bias (in_proj_bias[E:2E]) is 0 in exact
# arithmetic (softmax ignores a per-query constant), so both backends hold rounding noise there (~1e-9,
# opposite signs) and Adam's g / sqrt(v) turns that noise into full lr-sized steps (measured with Adam
# lr 1e-2: 7.9e-3 apart after one step, everything else <= 5.6e-5; docs/models.md)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, d_model=D, nhead=HEADS, layers=2, dim_feedforward=FF):
        super().__init__()
        self.src_emb = nn.Embedding(SRC_VOCAB, d_model)
        self.tgt_emb = nn.Embedding(TGT_VOCAB, d_model)
        self.pos = nn.PositionalEncoding(d_model, max_len=32, scale=True, batch_first=True)
        self.transformer = nn.Transformer(d_model, nhead, layers, layers, dim_feedforward, dropout=0.0,
                                          batch_first=True)
        self.out = nn.Linear(d_model, TGT_VOCAB)

    def forward(self, src, tgt_in, src_pad, tgt_pad):
        causal = self.transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        h = self.transformer(self.pos(self.src_emb(src)), self.pos(self.tgt_emb(tgt_in)), tgt_mask=causal,
                             src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                             memory_key_padding_mask=src_pad)
        return self.out(h)


def batch(step):
    """Source and target token batches with ragged lengths (PAD = 0 after each sequence), BOS first;
    teacher forcing: the decoder reads tgt[:, :-1] and predicts tgt[:, 1:]."""
    rng = np.random.default_rng(100 + step)
    src_len = rng.integers(2, S + 1, N)
    tgt_len = rng.integers(2, T + 2, N)                     # includes BOS
    src = np.where(np.arange(S)[None] < src_len[:, None], rng.integers(2, SRC_VOCAB, (N, S)), PAD)
    tgt = np.where(np.arange(T + 1)[None] < tgt_len[:, None], rng.integers(2, TGT_VOCAB, (N, T + 1)), PAD)
    tgt[:, 0] = BOS
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    return src.astype(np.int64), tgt_in.astype(np.int64), src == PAD, tgt_in == PAD, tgt_out.astype(np.int64)


def _numpy_state(model):
    return {k: dl.to_numpy(v).astype(np.float64) for k, v in dl.state_dict(model).items()}


def train(backend, init, steps=STEPS):
    """Teacher-forced training on ``backend`` from ``init``; per step: loss, logits, grads, weights."""
    with dl.use(backend):
        model = Seq2SeqTransformer()
        dl.load_state_dict(model, init)
        opt = dl.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
        loss_fn = dl.losses.CrossEntropyLoss(ignore_index=PAD)
        record = []
        for step in range(steps):
            src, tgt_in, src_pad, tgt_pad, tgt_out = (dl.from_numpy(a) for a in batch(step))
            opt.zero_grad()
            with dl.autograd.record(model):
                logits = model(src, tgt_in, src_pad, tgt_pad)
                loss = loss_fn(ops.reshape(logits, (-1, TGT_VOCAB)), ops.reshape(tgt_out, (-1,)))
            dl.autograd.backward(loss)
            grads = {k: dl.to_numpy(p.grad if backend == "torch" else p.grad()).astype(np.float64)
                     for k, p in model.named_parameters()}
            opt.step()
            record.append(dict(loss=float(dl.to_numpy(loss)), logits=dl.to_numpy(logits).astype(np.float64),
                               grads=grads, weights=_numpy_state(model)))
    return model, record


def _diff(a, b):
    d = float(np.abs(a - b).max())
    return d, d / max(float(np.abs(b).max()), 1e-30)


def _worst(da, db):
    return max((_diff(da[k], db[k]) for k in db), key=lambda x: x[0])


@pytest.fixture(scope="module")
def runs():
    with dl.use("torch"):
        import torch
        torch.manual_seed(0)
        init = {k: dl.to_numpy(v) for k, v in dl.state_dict(Seq2SeqTransformer()).items()}
    out = {be: train(be, init) for be in ("torch", "mxnet")}
    out["init"] = {k: v.astype(np.float64) for k, v in init.items()}
    return out


def test_seq2seq_transformer_trains_the_same_on_both_backends(runs):
    (_, rt), (_, rm) = runs["torch"], runs["mxnet"]
    print("\nseq2seq Transformer, teacher forcing + causal mask, SGD lr 0.05 momentum 0.9: max abs (rel) mxnet vs torch")
    for s, (a, b) in enumerate(zip(rm, rt)):
        loss = abs(a["loss"] - b["loss"])
        lg, gr, wt = _diff(a["logits"], b["logits"]), _worst(a["grads"], b["grads"]), _worst(a["weights"], b["weights"])
        print(f"step {s + 1}: loss {b['loss']:.4f} |d| {loss:.1e}; logits {lg[0]:.1e} ({lg[1]:.1e}); "
              f"grads {gr[0]:.1e} ({gr[1]:.1e}); weights after step {wt[0]:.1e} ({wt[1]:.1e})")
        assert loss <= 1e-5 and lg[0] <= 1e-4 and gr[1] <= 1e-4 and wt[0] <= 1e-5, (s, loss, lg, gr, wt)
    moved = _worst(rt[-1]["weights"], runs["init"])[0]
    print(f"weights moved by up to {moved:.1e} in {STEPS} steps")
    assert moved > 1e3 * _worst(rm[-1]["weights"], rt[-1]["weights"])[0], "the comparison would be vacuous"


def test_same_parameter_names_and_init_scheme_on_both_backends(runs):
    mt, mm = runs["torch"][0], runs["mxnet"][0]
    names = list(dl.state_dict(mt))
    assert names == list(dl.state_dict(mm))
    assert "transformer.decoder.layers.1.multihead_attn.in_proj_weight" in names
    assert "transformer.encoder.norm.weight" in names and "transformer.decoder.norm.bias" in names
    with dl.use("mxnet"):                  # xavier-uniform re-init of every >1-axis parameter, as torch
        w = dl.to_numpy(dl.state_dict(nn.Transformer(16, 2, 1, 1, 32))["decoder.layers.0.linear1.weight"])
    bound = np.sqrt(6.0 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
def test_the_causal_mask_hides_future_tokens(backend, runs):
    """Teacher forcing is only valid with the causal mask: changing a later target token leaves the
    logits of every earlier position unchanged (and changes its own)."""
    model = runs[backend][0]
    src, tgt_in, src_pad, tgt_pad, _ = batch(0)
    tgt_pad[:] = False
    changed = tgt_in.copy()
    changed[:, 3] = (changed[:, 3] + 1) % TGT_VOCAB
    with dl.use(backend):
        model.eval()
        a, b = (dl.to_numpy(model(*(dl.from_numpy(x) for x in (src, t, src_pad, tgt_pad)))) for t in (tgt_in, changed))
    assert np.array_equal(a[:, :3], b[:, :3])
    assert np.abs(a[:, 3:] - b[:, 3:]).max() > 1e-3


def test_generate_square_subsequent_mask_is_torchs():
    import torch
    want = torch.nn.Transformer.generate_square_subsequent_mask(5).numpy()
    for be in ("torch", "mxnet"):
        got = dl.to_numpy(nn.Transformer.generate_square_subsequent_mask(5, backend=be))
        assert got.dtype == np.float32 and np.array_equal(got, want), be
    assert np.isneginf(want[0, 1]) and want[1, 0] == 0 and want[2, 2] == 0
