"""One training script, run as N processes with ``dualdl launch`` on PyTorch (DDP) or MXNet
(``dist_sync`` kvstore), giving the update of a single process over the global batch.

    dualdl launch --nproc 2 --backend torch examples/multi_process.py --out /tmp/mp
    dualdl launch --nproc 2 --backend mxnet examples/multi_process.py --out /tmp/mp
    python examples/multi_process.py --launch              # does both, plus the 1-process
                                                           # reference, and compares the weights
    python examples/multi_process.py --launch --quick      # smaller (the smoke test)

Run directly without ``--launch`` it prints these commands and trains as one process.

The model is a write-once ``dl.nn`` MLP classifier; every process starts from the same weights
(drawn with numpy, so both backends start equal), reads its shard of each epoch's shuffled
permutation (``ddist.shard``) and trains with SGD + momentum through ``dl.Trainer``, the same
loop on both backends and in one process. The one rule of ``docs/distributed.md``: the batch
size and learning rate are those of the **global** batch. After ``ddist.init()`` the Trainer
weights each process's samples by their share of the global batch and sums gradients over the
processes (gloo all-reduce on PyTorch, the ``dist_sync`` kvstore on MXNet): the update of one
process given the whole global batch. Rank 0 writes the final weights once
(``ddist.save_on_main``, atomic).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import dualdl as dl
import dualdl.distributed as ddist
from dualdl import nn, ops
from dualdl.distributed.env import launched_backend

N_FEATURES, N_CLASSES = 16, 4


class MLP(nn.Module):
    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, hidden)
        self.fc2 = nn.Linear(hidden, N_CLASSES)

    def forward(self, x):
        return self.fc2(ops.relu(self.fc1(x)))


def make_data(n: int, seed: int = 0):
    """Four Gaussian blobs in 16 dimensions (the same on every rank)."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((N_CLASSES, N_FEATURES)) * 1.2
    y = rng.integers(0, N_CLASSES, n)
    x = centers[y] + rng.standard_normal((n, N_FEATURES))
    return x.astype(np.float32), y.astype(np.int64)


def initial_weights(model, seed: int) -> dict:
    """The same initial weights on every rank and backend, drawn with numpy."""
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(tuple(v.shape)) / np.sqrt(v.shape[-1])).astype(np.float32)
            for k, v in dl.state_dict(model).items()}


def train(backend: str, args) -> dict:
    """Train on ``backend`` as this process's share of the job (or alone when not launched)."""
    rank, world = ddist.rank(), ddist.world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must be divisible by the {world} processes")
    local_bs = args.batch_size // world
    x, y = make_data(args.samples)
    with dl.use(backend):
        net = MLP(args.hidden)
        dl.load_state_dict(net, initial_weights(net, args.seed))
        opt = dl.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
        trainer = dl.Trainer(net, opt, dl.losses.CrossEntropyLoss())  # across processes after init()
        losses, t0 = [], time.perf_counter()
        for epoch in range(args.epochs):
            idx = ddist.shard(len(x), shuffle=True, seed=args.seed, epoch=epoch, drop_last=True)
            for i in range(0, len(idx) - local_bs + 1, local_bs):
                b = idx[i:i + local_bs]
                losses.append(trainer.train_step(x[b], y[b]))   # the loss of the global batch
        seconds = time.perf_counter() - t0
        net.eval()
        scores = dl.to_numpy(net(dl.from_numpy(x)))
        full_loss = float(np.mean(np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1))
                                  + scores.max(1) - scores[np.arange(len(y)), y]))
        return {"weights": {k: dl.to_numpy(v) for k, v in dl.state_dict(net).items()},
                "losses": losses, "seconds": seconds, "rank": rank, "world": world,
                "full_loss": full_loss, "acc": float((scores.argmax(1) == y).mean())}


def result_path(out: str, backend: str, world: int) -> str:
    return os.path.join(out, f"{backend}_world{world}.npz")


def save_result(res: dict, path: str) -> None:
    def write(tmp):
        np.savez(tmp, losses=np.array(res["losses"]), full_loss=res["full_loss"], acc=res["acc"],
                 **{f"w.{k}": v for k, v in res["weights"].items()})
    ddist.save_on_main(write, path)                    # rank 0 only, atomic; all ranks wait


def load_weights(path: str) -> dict:
    with np.load(path) as z:
        return {k[2:]: z[k] for k in z.files if k.startswith("w.")}


def worker(backend: str, args) -> None:
    """What every launched process (or the single process) runs."""
    res = train(backend, args)
    path = result_path(args.out, backend, res["world"])
    save_result(res, path)
    if ddist.is_main():
        print(f"[{backend} rank {res['rank']}/{res['world']}] {len(res['losses'])} steps of global "
              f"batch {args.batch_size} ({args.batch_size // res['world']} per process) in "
              f"{res['seconds']:.2f} s; loss on all {args.samples} samples {res['full_loss']:.4f}, "
              f"accuracy {res['acc']:.3f}; wrote {path}", flush=True)


def script_args(args) -> list:
    return ["--out", args.out, "--epochs", str(args.epochs), "--samples", str(args.samples),
            "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--hidden", str(args.hidden),
            "--seed", str(args.seed)]


def launch(args, backends) -> int:
    """Run ``dualdl launch --nproc N`` for each backend, then one process each, and compare."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DMLC_")}
    for be in backends:
        cmd = [sys.executable, "-m", "dualdl", "launch", "--nproc", str(args.nproc), "--backend", be,
               "--timeout", str(args.timeout), os.path.abspath(__file__)] + script_args(args)
        print("$ dualdl launch --nproc", args.nproc, "--backend", be, "examples/multi_process.py",
              " ".join(script_args(args)), flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, env=env, timeout=args.timeout + 30).returncode
        if rc != 0:
            print(f"dualdl launch --backend {be} failed with exit status {rc}")
            return rc
        print(f"({be}: {args.nproc} processes took {time.perf_counter() - t0:.1f} s including start-up)")
    for be in backends:                                # the reference: the same script, 1 process
        worker(be, args)
    for be in backends:
        a = load_weights(result_path(args.out, be, args.nproc))
        b = load_weights(result_path(args.out, be, 1))
        d = max(float(np.abs(a[k] - b[k]).max()) for k in a)
        print(f"{be}: {args.nproc} processes vs 1 process: max weight diff: {d:.3e}")
    if len(backends) == 2:
        a = load_weights(result_path(args.out, "torch", args.nproc))
        b = load_weights(result_path(args.out, "mxnet", args.nproc))
        d = max(float(np.abs(a[k] - b[k]).max()) for k in a)
        print(f"torch vs mxnet ({args.nproc} processes each): max weight diff: {d:.3e}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["torch", "mxnet", "both"], default="both",
                    help="unlaunched runs only; a launched process uses the launcher's --backend")
    ap.add_argument("--epochs", type=int, default=None, help="default 5 (--quick 2)")
    ap.add_argument("--samples", type=int, default=None, help="default 2048 (--quick 512)")
    ap.add_argument("--batch-size", type=int, default=64, help="GLOBAL batch size (all processes)")
    ap.add_argument("--lr", type=float, default=0.05, help="learning rate of the global batch")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="folder for the results (default: a temp folder)")
    ap.add_argument("--launch", action="store_true",
                    help="start `dualdl launch --nproc N` for each backend, then compare")
    ap.add_argument("--nproc", type=int, default=2, help="processes with --launch (default 2)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per launch (default 120)")
    ap.add_argument("--quick", action="store_true", help="2 epochs of 512 samples (smoke test)")
    args = ap.parse_args(argv)
    args.epochs = args.epochs or (2 if args.quick else 5)
    args.samples = args.samples or (512 if args.quick else 2048)

    launched = launched_backend()
    if launched:                                       # started by `dualdl launch`
        ddist.init(launched)                           # MXNet scheduler/server processes end here
        if args.out is None:
            raise SystemExit("pass --out FOLDER so that the processes write to the same place")
        os.makedirs(args.out, exist_ok=True)
        worker(launched, args)
        ddist.shutdown()
        return 0

    backends = ["torch", "mxnet"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory(prefix="dualdl_mp_") as tmp:
        args.out = args.out or tmp
        os.makedirs(args.out, exist_ok=True)
        if args.launch:
            return launch(args, backends)
        print("not started by `dualdl launch`: training as one process. To use 2 processes:")
        for be in backends:
            print(f"  dualdl launch --nproc 2 --backend {be} {os.path.relpath(__file__)} --out DIR")
        print(f"  or: python {os.path.relpath(__file__)} --launch   (both backends, and compares)")
        for be in backends:
            worker(be, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
