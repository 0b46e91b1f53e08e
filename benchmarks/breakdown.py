"""Where dualdl's training-step time goes: the step built up one dualdl piece at a time (model,
then loss, then optimizer), each as a ratio to the all-native step timed in the same rounds; and
single layers whose cost stands out (BatchNorm2d on MXNet, eager and hybridized)."""
from __future__ import annotations

from typing import Callable, Dict, List

import dualdl as dl

from . import models
from .harness import Config, Row, case, compare

LR = 1e-3


def _torch_fns(kind: str, s: dict) -> Dict[str, Callable[[], None]]:
    import torch
    x_np, y_np = models.batch(kind, s)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    native_loss, dl_loss = models.torch_loss(kind), models.dl_loss(kind)

    def make(dl_model: bool, loss, dl_opt: bool):
        with dl.use("torch"):
            m = models.dl_model(kind, s) if dl_model else models.torch_model(kind, s)
        o = (dl.optim.SGD if dl_opt else torch.optim.SGD)(m.parameters(), lr=LR, momentum=0.9)

        def f():
            o.zero_grad()
            loss(m(x), y).backward()
            o.step()
        return f
    return {"native": make(False, native_loss, False), "dl model": make(True, native_loss, False),
            "dl model + dl loss": make(True, dl_loss, False), "dl model + dl loss + dl.optim": make(True, dl_loss, True)}


def _mxnet_fns(kind: str, s: dict) -> Dict[str, Callable[[], None]]:
    from mxnet import autograd, gluon, nd
    x_np, y_np = models.batch(kind, s)
    gx, gy = nd.array(x_np), nd.array(y_np, dtype="float32")
    with dl.use("mxnet"):
        dx, dy = dl.from_numpy(x_np), dl.from_numpy(y_np)
    B = s["batch"]

    def make(dl_model: bool, dl_loss: bool, dl_opt: bool):
        if dl_model:
            with dl.use("mxnet"):
                m = models.dl_model(kind, s)
        else:
            m = models.gluon_model(kind, s)
        loss = models.dl_loss(kind) if dl_loss else models.gluon_loss(kind)
        xin, yin, div = (dx, dy, 1) if dl_loss else (gx, gy, B)      # dl losses return the batch mean
        if dl_opt:
            o = dl.optim.SGD(m.parameters(), lr=LR, momentum=0.9)

            def f():
                o.zero_grad()
                with autograd.record():
                    v = loss(m(xin), yin)
                v.backward()
                o.step(batch_size=div if div != 1 else None)
                nd.waitall()
        else:
            tr = gluon.Trainer(m.collect_params(), "sgd", {"learning_rate": LR, "momentum": 0.9})

            def f():
                if dl_model:
                    m.zero_grad()              # dualdl parameters accumulate (grad_req='add')
                with autograd.record():
                    v = loss(m(xin), yin)
                v.backward()
                tr.step(div)
                nd.waitall()
        return f
    return {"native": make(False, False, False), "dl model": make(True, False, False),
            "dl model + dl loss": make(True, True, False), "dl model + dl loss + dl.optim": make(True, True, True)}


@case("breakdown", "step")
def step_breakdown(cfg: Config) -> List[Row]:
    """MLP and LeNet steps with dualdl's model, loss and optimizer added one at a time, per backend."""
    rows: List[Row] = []
    for kind in ("mlp", "lenet"):
        s = models.sizes(cfg.quick)[kind]
        for be, fns in (("torch", _torch_fns(kind, s)), ("mxnet", _mxnet_fns(kind, s))):
            rows += compare("breakdown", fns, "native", cfg, names={k: f"{kind} / {be} / {k}" for k in fns},
                            note="rest native (torch.nn.functional loss / torch.optim; Gluon loss / gluon.Trainer)",
                            model=kind, backend=be)
    return rows


@case("breakdown", "batchnorm")
def batchnorm(cfg: Config) -> List[Row]:
    """MXNet BatchNorm2d forward+backward in train mode: dualdl vs gluon.nn.BatchNorm, eager and hybridized."""
    from mxnet import autograd, gluon, nd
    shape = (4, 8, 8, 16) if cfg.quick else (16, 16, 16, 64)
    x = nd.random.uniform(shape=shape)
    rows: List[Row] = []
    for hybrid in (False, True):
        with dl.use("mxnet"):
            d = dl.nn.BatchNorm2d(shape[1])
        g = gluon.nn.BatchNorm(in_channels=shape[1])
        g.initialize()
        if hybrid:
            d.hybridize()
            g.hybridize()

        def fb(m):
            def f():
                with autograd.record():
                    y = m(x)
                y.backward()
                nd.waitall()
            return f
        mode = "hybridized" if hybrid else "eager"
        rows += compare("breakdown", {"gluon": fb(g), "dualdl": fb(d)}, "gluon", cfg,
                        names={"dualdl": f"BatchNorm2d / mxnet {mode} / train fwd+bwd {shape}"},
                        note="vs gluon.nn.BatchNorm (same outputs; dualdl keeps torch's running stats)",
                        backend="mxnet", hybridized=hybrid)
    return rows


@case("breakdown", "ctc")
def ctc(cfg: Config) -> List[Row]:
    """The demo's PackedCTCLoss (dl.losses.CTCLoss inside) vs native CTC, forward+backward, per backend."""
    import numpy as np
    import torch
    from mxnet import autograd, nd
    from dualdl.demo.model import PackedCTCLoss
    s = models.sizes(cfg.quick)["crnn"]
    _, y_np = models.batch("crnn", s)
    T = s["width"] // 4
    scores = np.random.default_rng(0).standard_normal((s["batch"], T, 11)).astype(np.float32)
    loss = PackedCTCLoss()
    ts, ty = torch.from_numpy(scores).requires_grad_(), torch.from_numpy(y_np)
    ms, my = nd.array(scores), nd.array(y_np, dtype="float32")
    ms.attach_grad()
    with dl.use("mxnet"):
        dy = dl.from_numpy(y_np)

    def torch_fb(fn):
        def f():
            fn(ts, ty).backward()
        return f

    def mx_fb(fn, y):
        def f():
            with autograd.record():
                v = fn(ms, y)
            v.backward()
            nd.waitall()
        return f
    rows = compare("breakdown", {"native": torch_fb(models.torch_loss("crnn")), "dualdl": torch_fb(loss)}, "native",
                   cfg, names={"dualdl": f"PackedCTCLoss / torch / fwd+bwd, scores {scores.shape}"},
                   note="vs F.ctc_loss (same math)", backend="torch")
    rows += compare("breakdown", {"native": mx_fb(models.gluon_loss("crnn"), my), "dualdl": mx_fb(loss, dy)}, "native",
                    cfg, names={"dualdl": f"PackedCTCLoss / mxnet / fwd+bwd, scores {scores.shape}"},
                    note="vs nd.CTCLoss(blank_label='first') / length", backend="mxnet")
    return rows
