"""LeNet (seed 004) written once, trained on PyTorch and MXNet from the same weights.

Shows: ``nn.Sequential`` and ``nn.ModuleList`` containers, per-submodule learning rates with
``dl.optim.param_groups`` (seed 004's fine-tuning case: the feature extractor learns slowly, the
classifier fast), a hand-written training loop that is the same on both backends
(``dualdl.autograd.record``/``backward``), the max weight difference between the two backends
after training, and a ``dl.save``/``dl.load`` round trip across backends.

    python examples/lenet.py                    # both backends, 60 steps
    python examples/lenet.py --backend mxnet --steps 200
    python examples/lenet.py --quick            # a few steps (the smoke test)

Data: scikit-learn's 8x8 handwritten digits upscaled to 24x24 and padded to 28x28 (MNIST's size);
``--data random`` uses random images and labels instead (no scikit-learn needed).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import dualdl as dl
from dualdl import nn, ops
from dualdl.autograd import backward, record


class LeNet(nn.Module):
    """(N, 1, 28, 28) -> (N, 10) class scores. Conv2d(1, 6, 5) with padding 2 keeps 28x28, so
    the flattened features are 16 * 5 * 5 as in the classic LeNet-5."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2))
        # A ModuleList (Gluon has none: a Python list + register_child) of the classifier layers.
        self.classifier = nn.ModuleList([nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84),
                                         nn.Linear(84, num_classes)])

    def forward(self, x):
        x = ops.flatten(self.features(x), 1)          # torch: x.view(-1, 16 * 5 * 5)
        last = len(self.classifier) - 1
        for i, fc in enumerate(self.classifier):
            x = fc(x)
            if i < last:
                x = ops.relu(x)
        return x


def load_data(kind: str, n: int, seed: int):
    """(images (n, 1, 28, 28) float32, labels (n,) int64) and a held-out split of n // 4."""
    rng = np.random.default_rng(seed)
    n_test = max(1, n // 4)
    if kind == "random":
        x = rng.standard_normal((n + n_test, 1, 28, 28)).astype(np.float32)
        y = rng.integers(0, 10, n + n_test).astype(np.int64)
    else:
        from sklearn.datasets import load_digits
        d = load_digits()
        img = np.kron(d.images / 16.0, np.ones((3, 3)))              # 8x8 -> 24x24
        img = np.pad(img, ((0, 0), (2, 2), (2, 2)))                   # -> 28x28
        order = rng.permutation(len(img))[: n + n_test]
        x = ((img[order] - 0.5) / 0.5)[:, None].astype(np.float32)
        y = d.target[order].astype(np.int64)
    return (x[:n], y[:n]), (x[n:], y[n:])


def make_optimizer(model, features_lr: float, lr: float):
    """Seed 004's fine-tuning case: ``features.*`` at a small rate, everything else at ``lr``."""
    groups = dl.optim.param_groups(model, [("features.*", {"lr": features_lr})])
    return dl.optim.SGD(groups, lr=lr, momentum=0.9)


def train(backend: str, init: dict, data, args) -> dict:
    """Train a LeNet on ``backend`` starting from ``init``; returns weights, losses, accuracy."""
    (x, y), (xt, yt) = data
    with dl.use(backend):
        model = LeNet()
        dl.load_state_dict(model, init)
        opt = make_optimizer(model, args.features_lr, args.lr)
        loss_fn = dl.losses.CrossEntropyLoss()
        loader = dl.data.DataLoader(dl.data.ArrayDataset(x, y), batch_size=args.batch_size,
                                    shuffle=True, drop_last=True, seed=args.seed)
        losses, step, t0 = [], 0, time.perf_counter()
        model.train()
        while step < args.steps:
            for xb, yb in loader:                       # native tensors of this backend
                opt.zero_grad()
                with record(model):                     # MXNet: autograd.record(); torch: no-op
                    loss = loss_fn(model(xb), yb)       # mean over the batch on both
                backward(loss)
                opt.step()                              # torch's update rule on both
                losses.append(dl.item(loss))
                step += 1
                if step == 1:
                    first = {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}
                if step == args.steps:
                    break
        seconds = time.perf_counter() - t0
        model.eval()
        pred = dl.to_numpy(model(dl.from_numpy(xt))).argmax(1)
        weights = {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}
        return {"model": model, "losses": losses, "acc": float((pred == yt).mean()),
                "weights": weights, "first": first, "seconds": seconds,
                "groups": [(len(g["params"]), g["lr"]) for g in opt.param_groups]}


def round_trip(src, dst_backend: str, xt: np.ndarray, path: str):
    """``dl.save`` ``src`` to ``path``, ``dl.load`` it into a fresh LeNet on ``dst_backend``;
    returns the max abs difference of the weights (0: bit-exact) and of the outputs on ``xt``."""
    dl.save(src, path)
    dst = LeNet(backend=dst_backend)
    dl.load(dst, path)
    a, b = dl.state_dict(src), dl.state_dict(dst)
    wdiff = max(float(np.abs(dl.to_numpy(a[k]) - dl.to_numpy(b[k])).max()) for k in a)
    dst.eval()
    src.eval()
    ya = dl.to_numpy(src(dl.from_numpy(xt, backend=dl.state.backend_of_model(src).name)))
    yb = dl.to_numpy(dst(dl.from_numpy(xt, backend=dst_backend)))
    return wdiff, float(np.abs(ya - yb).max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["torch", "mxnet", "both"], default="both")
    ap.add_argument("--steps", type=int, default=None, help="optimizer steps (default 100; --quick 60)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--samples", type=int, default=None, help="training samples (default 1024; --quick 512)")
    ap.add_argument("--lr", type=float, default=0.05, help="classifier learning rate")
    ap.add_argument("--features-lr", type=float, default=0.01, help="features.* learning rate")
    ap.add_argument("--data", choices=["digits", "random"], default="digits")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for the checkpoints (default: a temp folder)")
    ap.add_argument("--quick", action="store_true", help="60 steps on 512 samples (smoke test)")
    args = ap.parse_args(argv)
    if args.steps is None:
        args.steps = 60 if args.quick else 100
    if args.samples is None:
        args.samples = 512 if args.quick else 1024
    backends = ["torch", "mxnet"] if args.backend == "both" else [args.backend]

    data = load_data(args.data, args.samples, args.seed)
    dl.seed(args.seed)
    init = {k: dl.to_numpy(v) for k, v in dl.state_dict(LeNet(backend="torch")).items()}
    print(f"LeNet: {sum(v.size for v in init.values())} parameters; data: {args.data}, "
          f"{len(data[0][0])} train / {len(data[1][0])} held-out images of 28x28")

    runs = {}
    for be in backends:
        r = runs[be] = train(be, init, data, args)
        groups = ", ".join(f"{n} tensors at lr {lr:g}" for n, lr in r["groups"])
        print(f"[{be}] param groups: {groups}")
        print(f"[{be}] {args.steps} steps in {r['seconds']:.2f} s: loss {r['losses'][0]:.4f} -> "
              f"{r['losses'][-1]:.4f}, held-out accuracy {r['acc']:.3f}")
    if len(runs) == 2:
        t, m = runs["torch"], runs["mxnet"]
        first = max(float(np.abs(t["first"][k] - m["first"][k]).max()) for k in init)
        diff = max(float(np.abs(t["weights"][k] - m["weights"][k]).max()) for k in init)
        loss_diff = max(abs(a - b) for a, b in zip(t["losses"], m["losses"]))
        print(f"max weight diff after step 1: {first:.3e}")
        print(f"max weight diff: {diff:.3e}")
        print(f"max loss diff: {loss_diff:.3e}")
        if diff > 1e-5:
            print("  (the weights agree to fp32 rounding step by step; a ReLU input that lands within "
                  "~1e-7 of 0 lets one sample's gradient through on one backend only, and such "
                  "rare flips grow the difference over many steps)")

    with tempfile.TemporaryDirectory(prefix="dualdl_lenet_") as tmp:
        out = args.out or tmp
        os.makedirs(out, exist_ok=True)
        check_checkpoints(runs, backends, data[1][0], out)
    return 0


def check_checkpoints(runs: dict, backends: list, xt: np.ndarray, out: str) -> None:
    """Save each trained model and load it on the other backend (or the same one if only one)."""
    for src in backends:
        for dst in backends if len(backends) == 2 else [src]:
            if len(backends) == 2 and src == dst:
                continue
            path = os.path.join(out, f"lenet_{src}.safetensors")
            wd, od = round_trip(runs[src]["model"], dst, xt, path)
            print(f"save on {src} -> load on {dst} ({os.path.basename(path)}): round-trip "
                  f"weight diff: {wd:.3e}, output diff: {od:.3e}")


if __name__ == "__main__":
    raise SystemExit(main())
