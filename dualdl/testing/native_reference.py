"""A float64 reference for the Gluon side where MXNet cannot train a float64 copy (gluonnlp's
attention runs ``_contrib_interleaved_matmul_selfatt_qk`` and MXNet's ``log_softmax`` in float32
only; ``bertadam`` passes ``rescale_grad`` as a float32 array).

The reference is the torch model in float64 (a copy of the port the check is given) stepped by
Gluon's own update rule: the Gluon trainer translated by :func:`dualdl.port.translate_trainer`
(Gluon's exact kernels in torch), its schedule, ``trainer.set_learning_rate`` changes and the
script's Gluon clipping (a clip with a ``torch`` twin, :func:`clip_global_norm`). Compared with
the torch float64 twin it separates the optimizer, the schedule and the clipping from float32
rounding exactly (rows of phase ``"float64"``); Gluon's float32 run is judged against it (phase
``"reference"``, the loss and every gradient: |gluon32 - reference64| within
:data:`ROUNDING_RATIO` times torch's own measured |torch32 - torch64|, plus the float32 row
tolerance), which is the model check (the weights follow from the gradients and the update rule,
which the float64 rows prove exactly; Adam-like updates amplify a tiny gradient's relative
rounding into the weights, so weights are not judged against it): both distances
are float32 rounding of one computation grown by the same training, so their ratio does not
move with the learning rate the way a fixed tolerance does.
"""
from __future__ import annotations

import copy
import inspect
from typing import Any, Dict, Optional

import numpy as np

from .native_twins import _HYPER, TorchFloat64Twin, f32

__all__ = ["GluonTorchReference", "clip_global_norm", "ROUNDING_RATIO", "reference_row"]

#: how much further from float64 MXNet's float32 kernels may land than torch's own: measured on
#: gluonnlp BERT (2 layers, units 32) at lr 3e-5 and 1e-3 (tests/test_port_journey.py)
ROUNDING_RATIO = 64.0


class clip_global_norm:
    """gluonnlp's ``nlp.utils.clip_grad_global_norm(params, max_norm)`` as a script calls it
    (``gluon_clip=clip_global_norm(1.0)``), with its torch twin ``.torch(params)``: gradients
    divided by ``max(1, norm / max_norm)`` - no epsilon, unlike torch's ``clip_grad_norm_``
    (``max_norm / (norm + 1e-6)``)."""

    def __init__(self, max_norm: float):
        self.max_norm = float(max_norm)

    def __call__(self, params: list) -> Any:
        import gluonnlp as nlp
        return nlp.utils.clip_grad_global_norm(params, self.max_norm)

    def torch(self, params: list) -> float:
        from ..port.recipe.torch_src.clip import clip_grad_global_norm
        return clip_grad_global_norm(params, self.max_norm)


class GluonTorchReference(TorchFloat64Twin):
    """The torch model in float64 with Gluon's optimizer (see the module docstring). It reads
    and writes like the Gluon float64 twin: ``grads``/``state`` keyed by Gluon names (copied
    tensors only), ``loss`` a float."""

    def __init__(self, torch_module: Any, gluon_trainer: Any, gluon_block: Any, mapping: Any):
        from ..port.trainer_translate import translate_trainer
        import torch.nn as nn
        self.model = copy.deepcopy(torch_module).double().train()
        for m in self.model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.momentum is not None:
                m.momentum = 1.0 - f32(1.0 - float(m.momentum))
        tr = translate_trainer(gluon_trainer, self.model, mapping, gluon_model=gluon_block)
        self.opt, self.sched = tr
        self.trainer = gluon_trainer
        self.source = None
        self.params: Dict[str, Any] = {}
        self._g_of = {e.target: e.sources[0]["key"] for e in mapping.entries
                      if len(e.sources) == 1 and e.transform == "copy" and not e.transpose
                      and not e.sources[0].get("part") and not e.sources[0].get("transpose")}
        self.loss: Any = None
        self._t_scale = 1.0

    def sync(self) -> None:
        """Gluon's lr (``trainer.set_learning_rate``) and every hyper-parameter rounded to float32
        as MXNet's kernels take them (``beta1`` 0.9 is 0.89999998 there)."""
        scheduled = getattr(self.trainer._optimizer, "lr_scheduler", None) is not None
        lr = f32(float(self.trainer.learning_rate))
        for g in self.opt.param_groups:
            if not scheduled:
                g["lr"] = lr * float(g.get("lr_mult", 1.0) or 1.0)
            for k in list(g):
                if k in _HYPER or k == "betas":
                    g[k] = f32(g[k])

    def backward(self, args: Any, y: Any, torch_loss, zero: bool = True) -> None:
        super().backward(args, y, torch_loss, zero)

    def clip(self, gluon_clip: Any) -> None:
        if gluon_clip is not None:
            gluon_clip.torch(list(self.model.parameters()))

    def step(self, bs: int, t_scale: Optional[int] = None, **_: Any) -> None:
        """Gluon's ``rescale_grad = float32(1/bs)`` on torch's gradient scale ``t_scale``."""
        self.sync()
        t = float(t_scale or 1)
        fix = float(np.float32(1.0 / bs)) * bs / (float(np.float32(1.0 / t)) * t)
        for p in self.model.parameters():
            if p.grad is not None and fix != 1.0:
                p.grad.mul_(fix)
        if "batch_size" in inspect.signature(self.opt.step).parameters:
            self.opt.step(batch_size=t)
        else:                              # torch.optim.SGD: Gluon's plain sgd, no rescaling
            for p in self.model.parameters():
                if p.grad is not None and t != 1.0:
                    p.grad.div_(t)
            self.opt.step()
        if self.sched is not None:
            self.sched.step()

    def grads(self, _bs: Any = None) -> dict:
        named = dict(self.model.named_parameters(remove_duplicate=False))
        return {g: (named[t].grad.detach().numpy() / self._t_scale if named[t].grad is not None
                    else np.zeros(tuple(named[t].shape)))
                for t, g in self._g_of.items() if t in named}

    def state(self) -> dict:
        sd = self.model.state_dict()
        return {g: sd[t].detach().numpy().copy() for t, g in self._g_of.items() if t in sd}


def can_reference(gluon_clip: Any) -> str:
    """"" if the Gluon side's clipping has a torch twin, else why not."""
    if gluon_clip is not None and not callable(getattr(gluon_clip, "torch", None)):
        return ("gluon_clip= has no torch twin (.torch(params)); use "
                "dualdl.testing.clip_global_norm(max_norm) for gluonnlp's clip_grad_global_norm")
    return ""


def reference_row(report: Any, step: int, name: str, g32: Any, ref64: Any, torch_rounding: float,
                  rtol: float, atol: float) -> Any:
    """The model check where Gluon has no float64 twin: Gluon's float32 value against the
    float64 reference, within ROUNDING_RATIO x (torch's own measured rounding, or float32's
    resolution of the step's loss and of the value itself, whichever is larger: a gradient that
    cancels to near 0, a classifier bias's, rounds like the loss terms it sums - MXNet's float32
    log_softmax lands 7e-7 from float64 there, torch's 1e-8)."""
    from .native_report import add_row
    if name == "loss":
        report._loss_scale = abs(float(np.asarray(ref64)))
    scale = max(float(np.abs(np.asarray(ref64, np.float64)).max()) if np.size(ref64) else 0.0,
                getattr(report, "_loss_scale", 0.0))
    floor = float(np.finfo(np.float32).eps) * scale
    return add_row(report, step, "reference", name, g32, ref64, rtol, atol,
                   refs=(ROUNDING_RATIO * max(torch_rounding, floor),))
