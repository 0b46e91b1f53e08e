"""dl.Trainer on CUDA, run unchanged as one process or under `dualdl launch --nproc N` (NCCL on
CUDA machines). A small CNN (no BatchNorm: its batch statistics depend on how
the batch is split; BatchNorm on CUDA has its own tests) with SGD (momentum) takes STEPS steps of a global batch
split by DistributedSampler; each rank writes its weights and losses to OUT/rank<r>.npz.
``--device cpu`` runs the same thing on the CPU (the reference)."""
import argparse
import json
import os

import numpy as np

import dualdl as dl
import dualdl.distributed as ddist
from dualdl import nn, ops

N, GLOBAL_BATCH, STEPS, SEED = 32, 8, 4, 3

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
args = ap.parse_args()

ddist.init("torch")
dl.use("torch")
rank, world = ddist.rank(), ddist.world_size()
os.makedirs(args.out, exist_ok=True)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 3)

    def forward(self, x):
        return self.fc(ops.flatten(ops.relu(self.conv(x)), 1))


rng = np.random.default_rng(0)
X = rng.standard_normal((N, 2, 8, 8)).astype("float32")
Y = rng.integers(0, 3, N).astype("int64")
model = CNN()
r = np.random.default_rng(1)
dl.load_state_dict(model, {k: (0.3 * r.standard_normal(dl.to_numpy(v).shape)).astype("float32")
                           for k, v in dl.state_dict(model).items()})
dev = dl.gpu(int(os.environ.get("LOCAL_RANK", "0"))) if args.device == "gpu" else dl.cpu(0)
if dev.kind == "gpu":
    model.to(dl.get_backend("torch").native_device(dev))
trainer = dl.Trainer(model, dl.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), dl.losses.CrossEntropyLoss(),
                     devices=[dev])
order = list(dl.data.DistributedSampler(N, num_replicas=world, rank=rank, shuffle=True, seed=SEED))
b = GLOBAL_BATCH // world
losses = [trainer.train_step(X[order[i * b:(i + 1) * b]], Y[order[i * b:(i + 1) * b]]) for i in range(STEPS)]
np.savez(os.path.join(args.out, f"rank{rank}.npz"), **{k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()})
with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
    import torch.distributed as tdist
    json.dump({"losses": losses, "world": world,
               "pg_backend": tdist.get_backend() if tdist.is_initialized() else None}, f)
