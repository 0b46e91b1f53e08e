"""CRNN (seed 000) as a plain training script on PyTorch and MXNet, plus seed 000's checkpoints.

The model is the demo's (``dualdl/demo/model.py``: VGG-style CNN, two bidirectional LSTM layers,
a Linear layer over 11 classes per column); the data are strings of scikit-learn's handwritten
digits. This script shows:

- a CTC training loop with ``dl.Trainer`` on either backend from the same initial weights, and
  the max weight difference between the two trained models;
- layout handling: the model returns batch-first scores (N, T, C); CTC and seed 000's decoding
  want time-first (T, N, C): ``pred = dl.ops.permute(net(img), (1, 0, 2))`` (torch's
  ``net(img).permute(1, 0, 2)``), on both backends;
- seed 000's multi-GPU checkpoint: ``torch.save(torch.nn.DataParallel(model).state_dict())``
  writes keys ``module.cnn.0.weight``...; ``dl.load`` puts it into a plain single-device model
  on either backend (the ``module.`` prefix is removed automatically) and also loads a plain
  checkpoint into a ``DataParallel``-wrapped model (prefix added), with no renaming loop.

    python examples/crnn.py                     # both backends, 3 epochs of 640 strings
    python examples/crnn.py --backend torch --epochs 10
    python examples/crnn.py --quick             # tiny model and data (the smoke test)

The default run stops on CTC's usual plateau (blank everywhere, loss ~2.7); the loss starts to
fall again after a few hundred steps (``--train-size 1280 --epochs 6``: digit accuracy starts to
rise). ``dualdl demo`` trains longer and reports the reading accuracy.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import dualdl as dl
from dualdl import ops
from dualdl.demo.digits import accuracy, greedy_decode, make_splits
from dualdl.demo.model import CRNN


class CTCOnPackedLabels:
    """CTC loss on (N, T, C) scores and labels packed as (N, 1 + S): column 0 = length.

    The Trainer splits inputs and targets along the batch axis, so the label is one array."""

    reduction = "mean"          # the Trainer reads this: the loss is a batch mean

    def __init__(self) -> None:
        self.ctc = dl.losses.CTCLoss(blank=0, reduction="mean", zero_infinity=True)

    def __call__(self, scores, packed):
        log_probs = ops.permute(ops.log_softmax(scores, dim=2), (1, 0, 2))   # (N,T,C) -> (T,N,C)
        lengths = packed[:, 0]
        input_lengths = ops.ones_like(lengths) * int(log_probs.shape[0])
        return self.ctc(log_probs, packed[:, 1:], input_lengths, lengths)


def decode(net, images: np.ndarray, backend: str) -> list:
    """Seed 000's inference: ``pred = net(img).permute(1, 0, 2)`` -> (T, N, C), then best path."""
    net.eval()
    pred = ops.permute(net(dl.from_numpy(images, backend=backend)), (1, 0, 2))   # (T, N, C)
    best = dl.to_numpy(pred).transpose(1, 0, 2)           # back to (N, T, C) for per-string decoding
    return greedy_decode(best)


def train(backend: str, init: dict, data, args) -> dict:
    train_set, test_set = data
    with dl.use(backend):
        dl.seed(args.seed)
        net = CRNN(hidden=args.hidden, channels=args.channels)
        dl.load_state_dict(net, init)
        if args.optimizer == "adam":
            opt = dl.optim.Adam(net.parameters(), lr=args.lr)
        else:
            opt = dl.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
        trainer = dl.Trainer(net, opt, CTCOnPackedLabels(), clip_grad_norm=5.0)
        loader = dl.data.DataLoader(dl.data.ArrayDataset(train_set.images, train_set.labels),
                                    batch_size=args.batch_size, shuffle=True, drop_last=True,
                                    seed=args.seed)
        losses, t0 = [], time.perf_counter()
        for epoch in range(args.epochs):
            epoch_losses = [trainer.train_step(x, y) for x, y in loader]
            losses += epoch_losses
            print(f"[{backend}] epoch {epoch + 1}: mean CTC loss {np.mean(epoch_losses):.4f}", flush=True)
        seconds = time.perf_counter() - t0
        predicted = decode(net, test_set.images, backend)
        digit_acc, string_acc = accuracy(predicted, test_set.strings())
        return {"net": net, "losses": losses, "seconds": seconds, "digit_acc": digit_acc,
                "string_acc": string_acc, "examples": list(zip(test_set.strings()[:4], predicted[:4])),
                "weights": {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()}}


def outputs(net, x: np.ndarray) -> np.ndarray:
    be = dl.state.backend_of_model(net).name
    net.eval()
    return dl.to_numpy(net(dl.from_numpy(x, backend=be)))


def dataparallel_checkpoints(trained_torch, backends, x: np.ndarray, args, folder: str) -> None:
    """Seed 000: a checkpoint saved from ``torch.nn.DataParallel`` loads into single-device models."""
    import torch
    path = os.path.join(folder, "crnn_dataparallel.pth")
    torch.save(torch.nn.DataParallel(trained_torch).state_dict(), path)    # keys 'module.…'
    keys = list(torch.load(path, weights_only=True))
    print(f"DataParallel checkpoint {os.path.basename(path)}: {len(keys)} keys, e.g. {keys[0]!r}")
    ref = outputs(trained_torch, x)
    for be in backends:
        fresh = CRNN(hidden=args.hidden, channels=args.channels, backend=be)
        dl.load(fresh, path)                                  # 'module.' stripped automatically
        print(f"DataParallel checkpoint -> single-device {be} model: "
              f"output diff {np.abs(outputs(fresh, x) - ref).max():.3e}")
    # The other direction (seed 000's renaming loop): a plain checkpoint into a wrapped model.
    plain = os.path.join(folder, "crnn.safetensors")
    dl.save(trained_torch, plain)
    wrapped = torch.nn.DataParallel(CRNN(hidden=args.hidden, channels=args.channels, backend="torch"))
    dl.load(wrapped, plain)                                   # 'module.' added automatically
    print(f"plain checkpoint -> DataParallel-wrapped torch model: "
          f"output diff {np.abs(outputs(wrapped.module, x) - ref).max():.3e}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["torch", "mxnet", "both"], default="both")
    ap.add_argument("--epochs", type=int, default=None, help="default 3 (--quick 2)")
    ap.add_argument("--train-size", type=int, default=None, help="training strings (default 640)")
    ap.add_argument("--test-size", type=int, default=None, help="held-out strings (default 128)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    ap.add_argument("--lr", type=float, default=None, help="default 3e-3 (Adam), 0.05 (SGD)")
    ap.add_argument("--hidden", type=int, default=None, help="LSTM hidden size (default 64)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for the checkpoints (default: a temp folder)")
    ap.add_argument("--quick", action="store_true", help="small model, 128 strings (smoke test)")
    args = ap.parse_args(argv)
    q = args.quick
    args.epochs = args.epochs or (2 if q else 3)
    args.train_size = args.train_size or (128 if q else 640)
    args.test_size = args.test_size or (32 if q else 128)
    args.hidden = args.hidden or (16 if q else 64)
    args.lr = args.lr or (3e-3 if args.optimizer == "adam" else 0.05)
    args.channels = (8, 16, 16, 16) if q else (16, 32, 64, 64)
    backends = ["torch", "mxnet"] if args.backend == "both" else [args.backend]

    data = make_splits(args.train_size, args.test_size, min_len=3, max_len=5, seed=args.seed)
    dl.seed(args.seed)
    init = {k: dl.to_numpy(v) for k, v in
            dl.state_dict(CRNN(hidden=args.hidden, channels=args.channels, backend="torch")).items()}
    n_params = sum(v.size for k, v in init.items() if "running" not in k)
    print(f"CRNN: {n_params} parameters; {args.train_size} training / {args.test_size} held-out "
          f"strings of 3-5 digits, images {data[0].images.shape[1:]}")

    runs = {}
    for be in backends:
        r = runs[be] = train(be, init, data, args)
        print(f"[{be}] {len(r['losses'])} steps in {r['seconds']:.1f} s: loss {r['losses'][0]:.4f} -> "
              f"{r['losses'][-1]:.4f}; held-out digit accuracy {r['digit_acc']:.3f}, "
              f"string accuracy {r['string_acc']:.3f}; e.g. {r['examples'][:2]}")
    if len(runs) == 2:
        t, m = runs["torch"], runs["mxnet"]
        diff = max(float(np.abs(t["weights"][k] - m["weights"][k]).max()) for k in init)
        loss_diff = max(abs(a - b) for a, b in zip(t["losses"], m["losses"]))
        out_diff = float(np.abs(outputs(t["net"], data[1].images) - outputs(m["net"], data[1].images)).max())
        print(f"max weight diff: {diff:.3e}")
        print(f"max loss diff: {loss_diff:.3e}")
        if args.optimizer == "adam" and diff > 1e-4:
            print("  (Adam's first steps move every weight by about +-lr whatever the size of its "
                  "gradient, so the few gradients within rounding of 0 step in opposite directions "
                  "on the two backends; --optimizer sgd shows the arithmetic difference alone)")
        print(f"max output diff (trained models, eval mode, held-out images): {out_diff:.3e}")

    x = data[1].images[:8]
    if "torch" in runs:
        trained_torch = runs["torch"]["net"]
    else:        # the DataParallel checkpoint needs a torch model: the MXNet-trained weights in one
        trained_torch = CRNN(hidden=args.hidden, channels=args.channels, backend="torch")
        dl.load_state_dict(trained_torch, runs["mxnet"]["weights"])
    with tempfile.TemporaryDirectory(prefix="dualdl_crnn_") as tmp:
        folder = args.out or tmp
        os.makedirs(folder, exist_ok=True)
        dataparallel_checkpoints(trained_torch, backends, x, args, folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
