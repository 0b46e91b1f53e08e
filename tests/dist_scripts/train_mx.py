"""Gluon training on the dist_sync kvstore through dualdl.distributed: native Dense MLP, sharded
data, SGD-momentum, trainer.step(global batch), the short last batch through step_scale.
Unlaunched it runs as one process (the reference).
Scheduler and server processes run this file too: `import mxnet` (in init) runs them and exits."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import dualdl.distributed as ddist  # noqa: E402
from common import init_weights, make_data, parser, write_result  # noqa: E402

args = parser().parse_args()
distributed = ddist.init("mxnet", world_size=args.world_size)
os.makedirs(args.out, exist_ok=True)

import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402

rank, world = ddist.rank(), ddist.world_size()
local_bs = args.batch // world
Xn, yn = make_data()
X, y = mx.nd.array(Xn), mx.nd.array(yn)

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(16, activation="relu", in_units=10), gluon.nn.Dense(1, in_units=16))
net.initialize()
params = list(net.collect_params().values())
names = ["0.weight", "0.bias", "2.weight", "2.bias"]
w0 = init_weights(42 + rank)                                   # differs per rank on purpose
for name, p in zip(names, params):
    p.set_data(mx.nd.array(w0[name]))
ddist.broadcast_parameters(net)                                # -> rank 0's everywhere
after_bcast = {f"init.{n}": p.data().asnumpy() for n, p in zip(names, params)}
trainer = gluon.Trainer(net.collect_params(), "sgd",
                        {"learning_rate": args.lr, "momentum": args.momentum},
                        **ddist.trainer_kwargs())   # the dist_sync kvstore
wrote = []
for epoch in range(args.epochs):
    idx = ddist.shard(len(Xn), shuffle=True, seed=7, epoch=epoch)
    for i in range(0, len(idx), local_bs):
        b = mx.nd.array(idx[i:i + local_bs], dtype="int64")
        scale, step_bs = ddist.step_scale(len(b), local_bs)     # short last batch: scale > 1
        with autograd.record():
            out = net(mx.nd.take(X, b))
            per_sample = ((out - mx.nd.take(y, b)) ** 2).mean(axis=1) * scale
        per_sample.backward()                                   # sum over the local batch
        trainer.step(step_bs)                                   # server sums over workers
    state = {n: p.data().asnumpy() for n, p in zip(names, params)}
    wrote.append(ddist.save_on_main(
        lambda tmp: np.savez(tmp, epoch=np.array(epoch), writer=np.array(rank), **state),
        os.path.join(args.out, "checkpoint.npz")))
write_result(args.out, rank, world=world, distributed=distributed, wrote=wrote,
             gradient_reduction=ddist.gradient_reduction(), **state, **after_bcast)
ddist.shutdown()
