"""A Transformer encoder classifier (seed 002) trained on PyTorch and MXNet from the same weights.

Task (synthetic, variable length): a sequence of 4-24 tokens drawn from 1..9 (0 is padding) is
class 1 when token 1 occurs more often than token 2. The model embeds the tokens, adds a
positional encoding, runs ``dl.nn.TransformerEncoder`` over the padded batch, averages the valid
positions and scores two classes.

What seed 002 says differs between the frameworks, made explicit here:

- **layout**: gluonnlp's encoder takes (N, T, C) only; torch's takes (T, N, C) unless
  ``batch_first=True``. dualdl has torch's default (TNC); this script passes ``layout="NTC"``
  (the same as ``batch_first=True``).
- **dropout**: gluonnlp's default is 0.0, torch's 0.1 (dualdl: 0.1 on both). This script passes
  ``--dropout`` explicitly, default 0.0: the two backends draw dropout masks from different
  random generators, so only without dropout do they do the same arithmetic and end with the same
  weights. With ``--dropout 0.1`` both train, but the weights are not expected to agree.
- **padding**: Gluon passes ``valid_length`` (N,), torch a key padding mask (N, T) with True =
  padding. Both work on both backends and give the same numbers at the valid positions (checked
  below); ``valid_length`` zeroes the padded output positions, a key padding mask leaves torch's
  values there (the padded queries attend to the valid keys).

    python examples/transformer_classifier.py               # both backends, 150 steps
    python examples/transformer_classifier.py --backend mxnet --dropout 0.1
    python examples/transformer_classifier.py --quick       # the smoke test
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import dualdl as dl
from dualdl import nn, ops

VOCAB = 10          # 0 = padding, tokens 1..9


class Classifier(nn.Module):
    """(tokens (N, T) int64, valid_length (N,) float32) -> (N, 2) class scores."""

    def __init__(self, d_model: int = 32, nhead: int = 4, num_layers: int = 2, dim_feedforward: int = 64,
                 dropout: float = 0.0, max_len: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model, padding_idx=0)
        self.pos = nn.PositionalEncoding(d_model, max_len=max_len, layout="NTC")
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=dropout,
                                           layout="NTC")              # = batch_first=True
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers)
        self.head = nn.Linear(d_model, 2)

    def forward(self, tokens, valid_length):
        x = self.pos(self.embed(tokens))                           # (N, T, C)
        h = self.encoder(x, valid_length=valid_length)             # padded positions are 0
        pooled = ops.div(ops.sum(h, dim=1), ops.unsqueeze(valid_length, 1))   # mean of valid steps
        return self.head(pooled)


def make_data(n: int, seed: int, min_len: int = 4, max_len: int = 24):
    """tokens (n, max_len) int64 0-padded, lengths (n,) float32, labels (n,) int64."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, n)
    tokens = np.zeros((n, max_len), np.int64)
    labels = np.zeros(n, np.int64)
    for i, L in enumerate(lengths):
        tokens[i, :L] = rng.integers(1, VOCAB, L)
        labels[i] = int((tokens[i] == 1).sum() > (tokens[i] == 2).sum())
    return tokens, lengths.astype(np.float32), labels


def train(backend: str, init: dict, data, args) -> dict:
    (tok, vl, y), (tok_t, vl_t, y_t) = data
    with dl.use(backend):
        dl.seed(args.seed)
        net = Classifier(d_model=args.d_model, dropout=args.dropout)
        dl.load_state_dict(net, init)
        opt = dl.optim.Adam(net.parameters(), lr=args.lr)
        trainer = dl.Trainer(net, opt, dl.losses.CrossEntropyLoss())
        loader = dl.data.DataLoader(dl.data.ArrayDataset(tok, vl, y), batch_size=args.batch_size,
                                    shuffle=True, drop_last=True, seed=args.seed, backend="numpy")
        losses, t0 = [], time.perf_counter()
        while len(losses) < args.steps:
            for t, v, lab in loader:
                losses.append(trainer.train_step((t, v), lab))     # x = (tokens, valid_length)
                if len(losses) == args.steps:
                    break
        seconds = time.perf_counter() - t0
        _, scores = trainer.eval_step((tok_t, vl_t))
        acc = float((dl.to_numpy(scores).argmax(1) == y_t).mean())
        return {"net": net, "losses": losses, "seconds": seconds, "acc": acc, "scores": dl.to_numpy(scores),
                "weights": {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}}


def weight_diffs(a: dict, b: dict, d_model: int):
    """(max abs difference over all weights except the attention key biases, max over those)."""
    main, key_bias = 0.0, 0.0
    for k in a:
        d = np.abs(a[k] - b[k])
        if k.endswith("in_proj_bias"):                      # packed [q; k; v] biases, (3E,)
            key_bias = max(key_bias, float(d[d_model:2 * d_model].max()))
            d = np.concatenate([d[:d_model], d[2 * d_model:]])
        main = max(main, float(d.max()))
    return main, key_bias


def padding_forms_agree(net, backend: str, tok: np.ndarray, vl: np.ndarray) -> float:
    """valid_length vs key padding mask (True = pad): max abs difference of the encoder outputs at
    the valid positions (valid_length zeroes the padded ones; the mask leaves torch's values there)."""
    net.eval()
    x = net.pos(net.embed(dl.from_numpy(tok, backend=backend)))
    pad = np.arange(tok.shape[1])[None, :] >= vl[:, None]                 # (N, T) True = padding
    a = dl.to_numpy(net.encoder(x, valid_length=dl.from_numpy(vl, backend=backend)))
    b = dl.to_numpy(net.encoder(x, src_key_padding_mask=dl.from_numpy(pad, backend=backend)))
    assert np.all(a[pad] == 0), "valid_length: padded outputs should be 0"
    assert np.isfinite(b).all(), "key padding mask: the padded queries attend to the valid keys"
    return float(np.abs(a - b)[~pad].max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["torch", "mxnet", "both"], default="both")
    ap.add_argument("--steps", type=int, default=None, help="optimizer steps (default 150; --quick 60)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--samples", type=int, default=2048)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="dropout of every encoder layer (gluonnlp default 0.0, torch 0.1); default 0.0")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="60 steps, d_model 16 (smoke test)")
    args = ap.parse_args(argv)
    args.steps = args.steps or (60 if args.quick else 150)
    if args.quick:
        args.d_model = min(args.d_model, 16)
    backends = ["torch", "mxnet"] if args.backend == "both" else [args.backend]

    train_set = make_data(args.samples, args.seed)
    test_set = make_data(512, args.seed + 1)
    print(f"task: is token 1 more frequent than token 2 in a sequence of 4-24 tokens; "
          f"{args.samples} training / 512 held-out sequences; class 1 share {test_set[2].mean():.3f}")
    print(f"encoder: 2 layers, d_model {args.d_model}, 4 heads, layout NTC (batch_first=True), "
          f"dropout {args.dropout} (explicit: gluonnlp's default is 0.0, torch's 0.1); padding via "
          f"valid_length")
    dl.seed(args.seed)
    init = {k: dl.to_numpy(v) for k, v in
            dl.state_dict(Classifier(d_model=args.d_model, dropout=args.dropout, backend="torch")).items()}

    runs = {}
    for be in backends:
        r = runs[be] = train(be, init, (train_set, test_set), args)
        print(f"[{be}] {args.steps} steps in {r['seconds']:.1f} s: loss {r['losses'][0]:.4f} -> "
              f"{np.mean(r['losses'][-10:]):.4f} (mean of the last 10); held-out accuracy {r['acc']:.3f}")
        d = padding_forms_agree(r["net"], be, test_set[0][:64], test_set[1][:64])
        print(f"[{be}] valid_length vs key padding mask: max output diff {d:.3e}")
    if len(runs) == 2:
        t, m = runs["torch"], runs["mxnet"]
        diff, key_bias = weight_diffs(t["weights"], m["weights"], args.d_model)
        loss_diff = max(abs(a - b) for a, b in zip(t["losses"], m["losses"]))
        print(f"max weight diff: {diff:.3e}")
        print(f"max diff of the attention key biases: {key_bias:.3e} (they shift every score of a "
              f"query equally, which softmax ignores: their true gradient is 0, and Adam turns the "
              f"rounding noise into steps of about lr; they do not change any output)")
        print(f"max loss diff: {loss_diff:.3e}")
        print(f"max output diff (trained models, held-out): {np.abs(t['scores'] - m['scores']).max():.3e}")
        if args.dropout > 0:
            print("  (dropout > 0: each backend draws its own masks, so the runs are not expected to agree)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
