"""Float64 twins for :func:`dualdl.testing.check_native_training`: a float64 copy of each side,
trained beside it on the same batches with the same schedule.

Hides two differences between the float32 runs and a naive float64 copy:

* MXNet's update operators take ``lr``, ``wd`` and ``momentum`` as C++ ``float`` attributes
  (0.01 becomes 0.0099999998) even on float64 weights, and torch's float32 kernels turn a Python
  hyper-parameter into float32 too; a float64 torch copy with the exact values drifts from
  Gluon's float64 copy by that rounding (measured: 4.0e-9 on an MLP bias after 6 steps, above the
  1e-7 relative tolerance). The torch twin therefore takes every hyper-parameter rounded to
  float32, synced from the float32 optimizer before each step (so a scheduler or an
  ``on_step`` change reaches it).
* MXNet's BatchNorm takes ``momentum`` as a ``float`` attribute too: Gluon's 0.9 keeps
  0.89999998 of the old running value and takes 0.10000002 of the new one (2.4e-7 relative more
  than torch's exact 0.1: measured 2.38e-7 on cifar_resnet20_v1's running means after one step).
  The torch twin's BatchNorm layers take ``1 - float32(1 - momentum)``.
* ``trainer.step(B)`` hands the kernels ``rescale_grad = 1/B`` as a float32 attribute too (1/100
  becomes 0.0099999998: the float64 twins of mnist.py's MLP, batch 100, parted by 2.2e-9 on the
  loss after one step). The torch twin's mean-loss gradient is scaled by ``float32(1/B) * B``
  before its step, after the gradient rows are compared.
* Gluon's ``lr_scheduler`` lives inside the optimizer: the Gluon twin gets a copy of it and steps
  it by itself; a learning rate set with ``trainer.set_learning_rate`` is copied over.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Optional

import numpy as np

__all__ = ["TorchFloat64Twin", "GluonFloat64Twin", "f32", "distance"]

_HYPER = ("lr", "weight_decay", "momentum", "dampening", "eps", "alpha", "lr_decay")


def f32(v: Any) -> Any:
    """``v`` rounded to float32 and back (tuples element-wise; anything else unchanged)."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, float):
        return float(np.float32(v))
    if isinstance(v, tuple) and all(isinstance(x, float) for x in v):
        return tuple(float(np.float32(x)) for x in v)
    return v


def distance(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max()) if a.size else 0.0


class TorchFloat64Twin:
    """A float64 copy of the torch module with the same optimizer class and param groups."""

    def __init__(self, module: Any, optimizer: Any):
        self.source = optimizer
        import torch.nn as nn
        self.model = copy.deepcopy(module).double().train()
        for m in self.model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.momentum is not None:
                m.momentum = 1.0 - f32(1.0 - float(m.momentum))
        names = {id(p): n for n, p in module.named_parameters()}
        mine = dict(self.model.named_parameters())
        groups = [dict({k: v for k, v in g.items() if k != "params"},
                       params=[mine[names[id(p)]] for p in g["params"]])
                  for g in optimizer.param_groups]
        import inspect
        accepted = inspect.signature(type(optimizer).__init__).parameters
        self.opt = type(optimizer)(groups, **{k: v for k, v in optimizer.defaults.items()
                                              if k in accepted})
        self.sync()
        self.loss: Any = None

    def sync(self) -> None:
        """Hyper-parameters of the float32 optimizer, rounded to float32 (see module doc)."""
        for mine, theirs in zip(self.opt.param_groups, self.source.param_groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = f32(v) if k in _HYPER or k == "betas" else v

    def backward(self, args: Any, y: Any, torch_loss, zero: bool = True) -> None:
        if zero:                                 # not between accumulated micro-batches
            self.opt.zero_grad()
        out = self.model(*args.args, **args.kwargs)
        self.loss = torch_loss(out, y)
        self.loss.backward()

    def step(self, batch_size: int = 1, step_size: Optional[int] = None) -> None:
        """``step_size``: the float32 optimizer is a ``Gluon*`` one stepped with
        ``step(batch_size=step_size)``: it rescales as Gluon does, the twin too."""
        self.sync()
        if step_size:
            self.opt.step(batch_size=step_size)
            return
        scale = float(np.float32(1.0 / batch_size)) * batch_size
        if scale != 1.0:
            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad.mul_(scale)
        self.opt.step()

    def value(self, kind: str, key: str) -> Optional[np.ndarray]:
        """The twin's gradient (``kind="grad"``) or state entry ``key``; None: no gradient."""
        t64 = (dict(self.model.named_parameters(remove_duplicate=False))[key].grad if kind == "grad"
               else self.model.state_dict()[key])
        return None if t64 is None else t64.detach().numpy()

    def state(self) -> Dict[str, np.ndarray]:
        return {k: v.detach().numpy().copy() for k, v in self.model.state_dict().items()}


class GluonFloat64Twin:
    """A float64 copy of the Gluon block (deep-copied and cast) and a Trainer over it with a copy
    of the Trainer's optimizer (hyper-parameters, update counts, lr_mult/wd_mult, scheduler)."""

    def __init__(self, block: Any, trainer: Any):
        from mxnet import gluon
        self.block = copy.deepcopy(block)
        self.block.cast("float64")
        self.orig = orig = trainer._optimizer
        opt = copy.copy(orig)                    # its hyperparameters, with state of its own
        counts = {k: dict(v) for k, v in orig._all_index_update_counts.items()}
        current = next((k for k, v in orig._all_index_update_counts.items()
                        if v is orig._index_update_count), 0)
        opt._all_index_update_counts, opt._index_update_count = counts, counts.setdefault(current, {})
        opt.lr_mult, opt.wd_mult = dict(orig.lr_mult), dict(orig.wd_mult)
        opt.idx2name = dict(orig.idx2name)
        opt.lr_scheduler = copy.deepcopy(orig.lr_scheduler)
        self.opt = opt
        self.params = self.block._collect_params_with_prefix()
        self.trainer = gluon.Trainer(self.block.collect_params(), opt, kvstore=None)
        self.loss: float = 0.0

    def backward(self, args: Any, y: Any, gluon_loss) -> None:
        from mxnet import autograd
        with autograd.record(train_mode=True):
            out = self.block(*args.args, **args.kwargs)
            loss = gluon_loss(out, y)
        loss.backward()
        self.loss = float(loss.mean().asscalar())
        self.loss_sum = float(loss.sum().asscalar())

    def grads(self, bs: int) -> dict:
        return gluon_grads(self.params, bs)

    def step(self, bs: int, plain: bool = True, reduced: bool = False) -> None:
        """``trainer.step(bs)``, or (``plain=False``: accumulation or clipping between backward
        and update) ``trainer.update(bs)`` after the script's clip of the twin's gradients."""
        if self.orig.lr_scheduler is None:       # trainer.set_learning_rate on the original
            self.opt.lr = self.orig.lr
        self.opt.wd = self.orig.wd
        if plain:
            self.trainer.step(bs)
        else:
            if not reduced:
                self.trainer.allreduce_grads()
            self.trainer.update(bs)

    def state(self) -> dict:
        return {k: p.data().asnumpy() for k, p in self.params.items()}


def gluon_grads(params: dict, bs: int) -> dict:
    """Gluon's gradients divided by the batch size ``Trainer.step`` rescales by (zeros for
    parameters without a gradient)."""
    return {k: (p.grad().asnumpy() / bs if p.grad_req != "null" else p.data().asnumpy() * 0)
            for k, p in params.items()}
