"""DDP training through dualdl.distributed: native torch MLP, sharded data, SGD-momentum.

Unlaunched it runs as one process over the full batch (the reference)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import dualdl.distributed as ddist  # noqa: E402
from common import init_weights, make_data, parser, write_result  # noqa: E402

args = parser().parse_args()
os.makedirs(args.out, exist_ok=True)
distributed = ddist.init("torch", world_size=args.world_size)

import torch  # noqa: E402

torch.set_num_threads(1)
rank, world = ddist.rank(), ddist.world_size()
local_bs = args.batch // world
X, y = (torch.from_numpy(a) for a in make_data())

model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
with torch.no_grad():
    for k, v in model.state_dict().items():
        v.copy_(torch.from_numpy(init_weights(42 + rank)[k]))   # differs per rank on purpose
ddist.broadcast_parameters(model)                                # -> rank 0's everywhere
after_bcast = {f"init.{k}": v.detach().numpy().copy() for k, v in model.state_dict().items()}
model = ddist.wrap_model(model)
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
wrote = []
for epoch in range(args.epochs):
    idx = torch.from_numpy(ddist.shard(len(X), shuffle=True, seed=7, epoch=epoch))
    for i in range(0, len(idx), local_bs):
        b = idx[i:i + local_bs]
        loss = torch.nn.functional.mse_loss(model(X[b]), y[b])   # mean over the local batch
        opt.zero_grad()
        loss.backward()                                           # DDP averages over ranks
        opt.step()
    state = {k.replace("module.", ""): v.detach().numpy().copy()
             for k, v in model.state_dict().items()}
    wrote.append(ddist.save_on_main(
        lambda tmp: np.savez(tmp, epoch=np.array(epoch), writer=np.array(rank), **state),
        os.path.join(args.out, "checkpoint.npz")))
write_result(args.out, rank, world=world, distributed=distributed, wrote=wrote,
             gradient_reduction=ddist.gradient_reduction(), **state, **after_bcast)
ddist.shutdown()
