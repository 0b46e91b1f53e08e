"""Training-step time: dualdl next to hand-written native code, same model, batch and optimizer.

Per model and backend, three competitors are timed interleaved:

* ``native``: torch.nn model + torch.optim loop / Gluon blocks + ``gluon.Trainer`` loop;
* ``dualdl``: the write-once model + ``dl.optim`` + ``dl.losses``, the same loop by hand;
* ``dl.Trainer``: the write-once model + ``dl.optim`` through ``Trainer.train_step`` (adds the
  step contract: batch checks, loss scaling, stale-gradient check, buffer snapshot).

Every step ends with the framework synchronised (``mx.nd.waitall()`` on MXNet, whose ops are
asynchronous), on every side. SGD with momentum 0.9 everywhere (Gluon puts lr inside the
momentum buffer; the cost is the same).
"""
from __future__ import annotations

from typing import Callable, Dict, Iterator, List

import dualdl as dl

from . import models
from .harness import Config, Row, case, compare

TARGET = 1.05          # issue 17: every train_step row within 5% of hand-written native code
LR = 1e-3
KINDS = ("mlp", "lenet", "crnn", "transformer")


def torch_steps(kind: str, s: dict) -> Dict[str, Callable[[], None]]:
    import torch
    x_np, y_np = models.batch(kind, s)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    torch.manual_seed(0)
    tnet = models.torch_model(kind, s)
    topt = torch.optim.SGD(tnet.parameters(), lr=LR, momentum=0.9)
    tloss = models.torch_loss(kind)

    def native():
        topt.zero_grad()
        loss = tloss(tnet(x), y)
        loss.backward()
        topt.step()

    with dl.use("torch"):
        dl.seed(0)
        dnet = models.dl_model(kind, s)
        dnet2 = models.dl_model(kind, s)
    dopt = dl.optim.SGD(dnet.parameters(), lr=LR, momentum=0.9)
    dloss = models.dl_loss(kind)

    def dualdl():
        dopt.zero_grad()
        loss = dloss(dnet(x), y)
        loss.backward()
        dopt.step()

    trainer = dl.Trainer(dnet2, dl.optim.SGD(dnet2.parameters(), lr=LR, momentum=0.9), models.dl_loss(kind),
                         batch_axis=1 if kind == "transformer" else 0)

    def dl_trainer():
        trainer.train_step(x, y)

    return {"native": native, "dualdl": dualdl, "dl.Trainer": dl_trainer}


def mxnet_steps(kind: str, s: dict, hybridize: bool) -> Dict[str, Callable[[], None]]:
    import mxnet as mx
    from mxnet import autograd, gluon, nd
    x_np, y_np = models.batch(kind, s)
    B = s["batch"]

    mx.random.seed(0)
    gnet = models.gluon_model(kind, s)
    if hybridize:
        gnet.hybridize(static_alloc=True, static_shape=True)
    gtrainer = gluon.Trainer(gnet.collect_params(), "sgd", {"learning_rate": LR, "momentum": 0.9})
    gloss = models.gluon_loss(kind)
    gx, gy = nd.array(x_np), nd.array(y_np, dtype="float32")
    divisor = 1 if kind == "transformer" else B      # mean loss vs per-sample losses

    def native():
        with autograd.record():
            loss = gloss(gnet(gx), gy)
        loss.backward()
        gtrainer.step(divisor)
        nd.waitall()

    with dl.use("mxnet"):
        dl.seed(0)
        dnet = models.dl_model(kind, s)
        dnet2 = models.dl_model(kind, s)
        if hybridize:
            dnet.hybridize(static_alloc=True, static_shape=True)
            dnet2.hybridize(static_alloc=True, static_shape=True)
        dx, dy = dl.from_numpy(x_np), dl.from_numpy(y_np)
    dopt = dl.optim.SGD(dnet.parameters(), lr=LR, momentum=0.9)
    dloss = models.dl_loss(kind)

    def hand_loop(net, opt):
        opt.zero_grad()
        with autograd.record():
            loss = dloss(net(dx), dy)
        loss.backward()
        opt.step()
        nd.waitall()

    def dualdl():
        hand_loop(dnet, dopt)

    trainer = dl.Trainer(dnet2, dl.optim.SGD(dnet2.parameters(), lr=LR, momentum=0.9), models.dl_loss(kind),
                         batch_axis=1 if kind == "transformer" else 0)

    def dl_trainer():
        trainer.train_step(dx, dy)
        nd.waitall()

    fns = {"native": native, "dualdl": dualdl, "dl.Trainer": dl_trainer}
    if kind == "crnn":
        # what BatchNorm's torch precision costs: the same step with MXNet's float32 operator
        # (DUALDL_MX_FUSED_BATCHNORM=1). Eager reads the flag at each call (the first call moves
        # dnet's running statistics a little further, which does not change the cost); a graph
        # reads it when it is built, so the hybridized row has a model of its own.
        import os
        net, opt = dnet, dopt
        if hybridize:
            with dl.use("mxnet"):
                dl.seed(0)
                net = models.dl_model(kind, s)
                net.hybridize(static_alloc=True, static_shape=True)
            opt = dl.optim.SGD(net.parameters(), lr=LR, momentum=0.9)

        def dualdl_fused_bn():
            os.environ["DUALDL_MX_FUSED_BATCHNORM"] = "1"
            try:
                hand_loop(net, opt)
            finally:
                del os.environ["DUALDL_MX_FUSED_BATCHNORM"]
        fns["dualdl, float32 BatchNorm"] = dualdl_fused_bn
    return fns


def run_kind(kind: str, cfg: Config) -> Iterator[List[Row]]:
    """Yields the rows of each backend as soon as they are measured."""
    s = models.sizes(cfg.quick)[kind]
    for be in cfg.backends:
        if be == "torch":
            fns = torch_steps(kind, s)
        else:
            fns = mxnet_steps(kind, s, hybridize=be.endswith("hybrid"))
        names = {k: f"{kind} / {be} / {k}" for k in fns}
        yield compare("train_step", fns, "native", cfg, names=names,
                      targets={"dualdl": TARGET, "dl.Trainer": TARGET},
                      note=f"batch {s['batch']}", model=kind, backend=be)


@case("train_step", "mlp")
def mlp(cfg: Config) -> Iterator[List[Row]]:
    """3-layer MLP, batch 32: per-step overhead dominates."""
    return run_kind("mlp", cfg)


@case("train_step", "lenet")
def lenet(cfg: Config) -> Iterator[List[Row]]:
    """LeNet-5 on 28x28."""
    return run_kind("lenet", cfg)


@case("train_step", "crnn")
def crnn(cfg: Config) -> Iterator[List[Row]]:
    """The demo CRNN + PackedCTCLoss (CNN, 2-layer BiLSTM, CTC)."""
    return run_kind("crnn", cfg)


@case("train_step", "transformer")
def transformer(cfg: Config) -> Iterator[List[Row]]:
    """2-layer Transformer encoder (d_model 64), MSE on the outputs."""
    return run_kind("transformer", cfg)
