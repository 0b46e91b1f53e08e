"""The Trainer's optimizer and lr schedule as source: the ``dualdl_torch.gluon_optim`` classes
(already torch-only, op for op Gluon's kernels) are copied into the file, with
``make_optimizer(model)`` (param groups by torch parameter name: ``lr_mult``/``wd_mult``) and
``make_scheduler(optimizer)``."""
from __future__ import annotations

from typing import Any

from .emit import SourceFile, call_src, pretty

_OPTIM = "dualdl_torch.gluon_optim"
_BASE = ["_f32", "_clip", "_clip_bound", "GluonOptimizer"]
_CLASSES = {
    "GluonSGD": _BASE + ["_GluonMomentum", "GluonSGD"],
    "GluonNAG": _BASE + ["_GluonMomentum", "GluonNAG"],
    "GluonAdam": _BASE + ["_GluonAdamFamily", "GluonAdam"],
    "GluonBERTAdam": _BASE + ["_GluonAdamFamily", "GluonBERTAdam"],
    "GluonRMSProp": _BASE + ["GluonRMSProp"],
    "GluonAdaGrad": _BASE + ["GluonAdaGrad"],
    "torch.optim.SGD": [],
}
_SCHEDULERS = {
    "GluonFactorLR": ["GluonLRScheduler", "GluonFactorLR"],
    "GluonMultiFactorLR": ["GluonLRScheduler", "GluonMultiFactorLR"],
    "GluonPolyLR": ["GluonLRScheduler", "_GluonDecayTo", "GluonPolyLR"],
    "GluonCosineLR": ["GluonLRScheduler", "_GluonDecayTo", "GluonCosineLR"],
    "GluonCVLR": ["GluonLRScheduler", "GluonCVLR"],
}


def emit_optimizer(sf: SourceFile, translation: Any) -> None:
    """``translation``: what ``dl.port.translate_trainer`` returned."""
    spec = translation.spec
    cls, kwargs = spec["optimizer"]
    sf.use(_OPTIM, _CLASSES[cls])
    groups = ",\n".join("    " + pretty(g, 4) for g in spec["groups"])
    sf.add(f'''
#: one group per (lr_mult, wd_mult) of the Gluon parameters, by torch parameter name
PARAM_GROUPS = [
{groups},
]


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """The Gluon Trainer's optimizer over ``model``'s parameters. ``step()`` takes ``p.grad`` of a
    batch-MEAN loss (Gluon: sum loss and ``trainer.step(batch_size)``); the Gluon* classes'
    ``step(batch_size=B)`` takes the gradient of a sum loss, like ``trainer.step(B)``."""
    named = dict(model.named_parameters())
    missing = [n for g in PARAM_GROUPS for n in g["params"] if n not in named]
    if missing:
        raise KeyError(f"the model has no parameter {{missing[0]!r}} (this recipe was translated "
                       f"for another module)")
    groups = [dict(g, params=[named[n] for n in g["params"]]) for g in PARAM_GROUPS]
    return {call_src(cls, ["groups"], kwargs)}
''', "make_optimizer")
    sf.add(f'''
def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """``trainer.set_learning_rate(lr)``: every group gets ``lr * lr_mult``. Like Gluon, refused
    when the recipe has an lr schedule (the schedule owns the lr)."""
    if {spec.get("scheduler") is not None!r}:
        raise UserWarning("LRScheduler of the optimizer has already been defined. Note that "
                          "set_learning_rate can mutate the value of the learning rate of the "
                          "optimizer only when the LRScheduler of the optimizer is undefined.")
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_mult", 1.0)
''', "set_learning_rate")
    sched = spec.get("scheduler")
    if sched is None:
        sf.add('''
def make_scheduler(optimizer: torch.optim.Optimizer) -> None:
    """The Gluon optimizer had no lr_scheduler: the lr stays constant."""
    return None
''', "make_scheduler")
        return
    scls, skw = sched
    sf.use(_OPTIM, _SCHEDULERS[scls])
    sf.add(f'''
def make_scheduler(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    """Gluon's lr schedule: call ``scheduler.step()`` after every ``optimizer.step()``; update n
    (1 for the first) gets ``gluon_lr(n) * lr_mult``, as Gluon's optimizer calls its scheduler
    with the incremented update count."""
    return {call_src(scls, ["optimizer"], skw)}
''', "make_scheduler")
