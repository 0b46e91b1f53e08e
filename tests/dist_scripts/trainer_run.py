"""dl.Trainer written once, run unchanged as one process or under `dualdl launch --nproc N`.

Scenarios (each from the same numpy initial weights, perturbed on ranks > 0 so that the
Trainer's broadcast from rank 0 is exercised): a dl.nn MLP with SGD (momentum, weight decay),
with Adam (clipping, an unused layer), with accumulation, with uneven local batches, on two
devices per process, and a small CNN with BatchNorm. The MLP/SGD run saves a checkpoint (Trainer.save:
rank 0 writes, atomically) after SPLIT steps and is then resumed from it in this process.
``--resume CKPT`` also resumes from a checkpoint another run wrote (any world size).
Each rank writes its results to OUT/rank<r>.npz and OUT/rank<r>.json.
"""
import argparse
import json
import os
import sys

import numpy as np

import dualdl as dl
import dualdl.distributed as ddist
from dualdl import nn, ops

N, GLOBAL_BATCH, STEPS, SPLIT, SEED = 40, 8, 5, 3, 7

ap = argparse.ArgumentParser()
ap.add_argument("--backend", required=True, choices=["torch", "mxnet"])
ap.add_argument("--out", required=True)
ap.add_argument("--resume", default=None, help="a checkpoint written by another run (MLP/SGD)")
args = ap.parse_args()

ddist.init(args.backend)
dl.use(args.backend)
rank, world = ddist.rank(), ddist.world_size()
os.makedirs(args.out, exist_ok=True)


class MLP(nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)
        self.spare = nn.Linear(16, 3) if unused else None     # never gets a gradient

    def forward(self, x):
        return self.fc2(ops.tanh(self.fc1(x)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return self.fc(self.flat(self.pool(ops.relu(self.bn(self.conv(x))))))


rng = np.random.default_rng(0)
DATA = {"mlp": (rng.standard_normal((N, 6)).astype("float32"), rng.standard_normal((N, 3)).astype("float32")),
        "cnn": (rng.standard_normal((N, 2, 8, 8)).astype("float32"), rng.integers(0, 3, N).astype("int64"))}


def init_weights(model, seed):
    """Every float tensor of dl.state_dict (parameters and BatchNorm buffers) from numpy."""
    r = np.random.default_rng(seed)
    sd = {}
    for k, v in dl.state_dict(model).items():
        a = dl.to_numpy(v)
        w = (0.3 * r.standard_normal(a.shape)).astype(a.dtype)
        sd[k] = np.abs(w) + 0.5 if k.endswith("running_var") else w
    dl.load_state_dict(model, sd)


def batches(world_, rank_, uneven=False):
    """This rank's local batches: DistributedSampler shards of one global order. ``uneven``: the
    same global batches cut 5 + 3 between two ranks instead (the global weighting b_i / B)."""
    if uneven and world_ > 1:
        glob = batches(1, 0)
        return [g[:5] if rank_ == 0 else g[5:] for g in glob]
    order = list(dl.data.DistributedSampler(N, num_replicas=world_, rank=rank_, shuffle=True, seed=SEED))
    b = GLOBAL_BATCH // world_
    return [np.asarray(order[i * b:(i + 1) * b]) for i in range(STEPS)]


def build(kind, opt_name, devices=None, **kw):
    model = MLP(unused=opt_name == "adam") if kind == "mlp" else CNN()
    init_weights(model, 0 if rank == 0 else 100 + rank)      # ranks > 0 differ until the broadcast
    params = list(model.parameters())
    if opt_name == "sgd":
        opt = dl.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
    else:
        opt = dl.optim.Adam(params, lr=0.01, weight_decay=1e-3)
    loss = dl.losses.MSELoss() if kind == "mlp" else dl.losses.CrossEntropyLoss()
    return model, dl.Trainer(model, opt, loss, devices=devices, **kw)


def train(trainer, kind, index_batches, until=STEPS, ckpt=None):
    X, Y = DATA[kind]
    losses, wrote = [], None
    while trainer.global_step < until:
        idx = index_batches[trainer.global_step]
        if trainer.accumulate_steps == 2:                   # two micro-batches of each local batch
            h = len(idx) // 2
            losses.append(trainer.train_step(X[idx[:h]], Y[idx[:h]]))
            idx = idx[h:]
        losses.append(trainer.train_step(X[idx], Y[idx]))
        if ckpt is not None and trainer.global_step == SPLIT:
            wrote = trainer.save(ckpt)
    return losses, wrote


def weights(model, prefix):
    return {f"{prefix}/{k}": dl.to_numpy(v).copy() for k, v in dl.state_dict(model).items()}


results, meta = {}, {"rank": rank, "world": world, "losses": {}}
mine = batches(world, rank)
SCENARIOS = (("mlp_sgd", "mlp", "sgd", {}), ("mlp_adam", "mlp", "adam", {"clip_grad_norm": 0.5}),
             ("mlp_accum", "mlp", "sgd", {"accumulate_steps": 2}), ("mlp_uneven", "mlp", "sgd", {}),
             ("mlp_2dev", "mlp", "sgd", {"devices": [dl.cpu(0), dl.cpu(1)]}),
             ("mlp_nan", "mlp", "sgd", {"nonfinite": "skip"}),
             ("mlp_nangrad", "mlp", "sgd", {"nonfinite": "skip"}),
             ("cnn_bn", "cnn", "sgd", {}))


def nan_grad_loss(out, y):
    """MSE plus mean(sqrt(0 * out + |y - 7|)): finite everywhere; its gradient is inf * 0 = NaN
    for a sample whose targets are all 7, and 0 for every other sample."""
    extra = dl.ops.sqrt(dl.ops.add(dl.ops.mul(out, 0.0), dl.ops.abs(dl.ops.sub(y, 7.0))))
    return dl.ops.add(dl.losses.MSELoss()(out, y), dl.ops.mean(extra))
for name, kind, opt_name, kw in SCENARIOS:
    model, tr = build(kind, opt_name, **kw)
    results.update(weights(model, f"{name}/init"))    # after the Trainer's broadcast
    if name == "mlp_uneven":
        meta["losses"][name], _ = train(tr, kind, batches(world, rank, uneven=True))
        results.update(weights(model, name))
        continue
    if name == "mlp_nan":                  # a NaN in one sample of global batch 1 (rank 1's share)
        X, Y = DATA["mlp"]
        X = X.copy()
        X[batches(1, 0)[1][1]] = np.nan
        meta["losses"][name] = [tr.train_step(X[idx], Y[idx]) for idx in mine]
        meta["nan_in_my_batch_1"] = bool(np.isnan(X[mine[1]]).any())
        meta["skipped"] = [{"step": e["step"], "finite": bool(np.isfinite(e["loss"]))} for e in tr.skipped_steps]
        results.update(weights(model, name))
        continue
    if name == "mlp_nangrad":              # a finite loss whose gradient is NaN on rank 1's share only
        X, Y = DATA["mlp"]
        Y = Y.copy()
        Y[batches(1, 0)[1][1]] = 7.0
        tr.loss_fn = nan_grad_loss
        meta["losses"][name] = [tr.train_step(X[idx], Y[idx]) for idx in mine]
        meta["nangrad_in_my_batch_1"] = bool((Y[mine[1]] == 7.0).all(axis=1).any())
        meta["skipped_grad"] = [{"step": e["step"], "keys": sorted(e), "nan": bool(np.isnan(e["grad_max_abs"]))}
                                for e in tr.skipped_steps]
        results.update(weights(model, name))
        continue
    ckpt = os.path.join(args.out, "ckpt.npz") if name == "mlp_sgd" else None
    meta["losses"][name], wrote = train(tr, kind, mine, ckpt=ckpt)
    results.update(weights(model, name))
    if ckpt:
        meta["wrote"] = wrote
        model, tr = build(kind, opt_name)                 # fresh objects, resumed from the file
        tr.load(ckpt)
        meta["losses"]["resume_own"], _ = train(tr, kind, mine)
        results.update(weights(model, "resume_own"))
    if args.resume and name == "mlp_sgd":
        model, tr = build(kind, opt_name)
        tr.load(args.resume)
        meta["losses"]["resume_other"], _ = train(tr, kind, mine)
        results.update(weights(model, "resume_other"))

if world == 1:
    # the BatchNorm reference: one process, two devices, the global batch ordered as the two
    # ranks' shards (BatchNorm normalises each device's piece; device 0's running stats are kept)
    two = [np.concatenate(p) for p in zip(batches(2, 0), batches(2, 1))]
    model, tr = build("cnn", "sgd", devices=[dl.cpu(0), dl.cpu(1)])
    meta["losses"]["cnn_bn_2dev"], _ = train(tr, "cnn", two)
    results.update(weights(model, "cnn_bn_2dev"))

np.savez(os.path.join(args.out, f"rank{rank}.npz"), **results)
with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
    json.dump(meta, f)
ddist.shutdown()
sys.stdout.flush()
