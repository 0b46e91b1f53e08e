"""A Gluon Dense-tanh-Dense and its torch twin with the same weights, and regression batches:
shared by the trainer translation tests (live objects and written recipe)."""
from __future__ import annotations

import numpy as np


def gluon_torch_mlp(dtype="float64", seed=0, mults=True):
    """Gluon Dense-tanh-Dense and its torch twin, same random weights; with ``mults`` the last
    bias has lr_mult 2 / wd_mult 0 and the first weight wd_mult 0.5 (two extra param groups)."""
    import mxnet as mx
    import torch
    from mxnet import gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, in_units=4, activation="tanh", dtype=dtype),
            gluon.nn.Dense(3, in_units=5, dtype=dtype))
    net.initialize()
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    tnet = tnet.to(getattr(torch, dtype))
    rng = np.random.default_rng(seed)
    for gp, tp in zip(net.collect_params().values(), tnet.parameters()):
        v = rng.normal(size=tuple(tp.shape)).astype(dtype)
        gp.set_data(mx.nd.array(v, dtype=dtype))
        with torch.no_grad():
            tp.copy_(torch.from_numpy(v))
    if mults:
        net[1].bias.lr_mult, net[1].bias.wd_mult = 2.0, 0.0
        net[0].weight.wd_mult = 0.5
    return net, tnet


def regression_batches(dtype, steps: int, batch: int, seed: int = 1):
    """``steps`` batches of (x: batch x 4, y: batch x 3) normal values."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(batch, 4)).astype(dtype), rng.normal(size=(batch, 3)).astype(dtype))
            for _ in range(steps)]
