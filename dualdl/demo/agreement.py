"""Where torch and MXNet agreement is measurable: the demo's first training steps in lockstep.

Over a whole run the two backends' trajectories separate (training is chaotic), so comparing
final weights says little. Here both backends start every step from the *same* weights (torch's,
copied into the MXNet model) and the same batch, take one step of the demo's recipe, and the loss
and every parameter's gradient (as applied: after clipping) are compared. That sees differences
down to float32 rounding, where an SGD step's weight change (lr x gradient) cannot.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import numpy as np

import dualdl as dl

from .digits import DigitStrings
from .recipe import Recipe, make_trainer
from .run import build_model, steps_per_epoch


@dataclass
class StepAgreement:
    step: int
    loss: Tuple[float, float]                      # (torch, mxnet)
    grads: Dict[str, Tuple[float, float]] = field(default_factory=dict)   # name -> (max abs, rel)
    weights_abs: float = 0.0                       # max |w_torch - w_mxnet| after the step

    @property
    def loss_abs(self) -> float:
        return abs(self.loss[0] - self.loss[1])

    @property
    def loss_rel(self) -> float:
        return self.loss_abs / max(abs(self.loss[0]), 1e-30)

    def worst(self) -> Tuple[str, float, float]:
        """(parameter, its max abs, its relative difference) with the largest relative difference."""
        name = max(self.grads, key=lambda k: self.grads[k][1])
        return (name,) + self.grads[name]

    @property
    def grad_abs(self) -> float:
        return max(a for a, _ in self.grads.values())


def _grads(trainer: "dl.Trainer") -> Dict[str, np.ndarray]:
    grads = trainer._be.module("grads")
    names = [n for n, _ in trainer._named]
    return {n: g for n, g in zip(names, grads.grad_arrays(trainer._params)) if g is not None}


def _weights(model) -> Dict[str, np.ndarray]:
    return {k: dl.to_numpy(v) for k, v in dl.state_dict(model).items()}


def _diff(a: np.ndarray, b: np.ndarray) -> Tuple[float, float]:
    d = float(np.abs(a.astype(np.float64) - b).max()) if a.size else 0.0
    return d, d / max(float(np.abs(a).max()), 1e-30)


def first_steps(init: Dict[str, np.ndarray], train: DigitStrings, recipe: Recipe,
                devices_per_backend: Dict[str, Sequence[dl.Device]], steps: int = 3) -> List[StepAgreement]:
    """Loss and per-parameter gradient agreement over the first ``steps`` steps of the recipe on
    the first batches, both backends starting each step from torch's weights (see module doc)."""
    if set(devices_per_backend) != {"torch", "mxnet"}:
        raise ValueError("the lockstep check compares torch with mxnet")
    b = recipe.batch_size
    spe = steps_per_epoch(len(train), b)
    models, trainers = {}, {}
    for be, devs in devices_per_backend.items():
        models[be] = build_model(be, init, recipe.hidden, devs[0])
        trainers[be] = make_trainer(be, models[be], recipe, spe, devs)
    out = []
    for k in range(min(steps, spe)):
        x, y = train.images[k * b:(k + 1) * b], train.labels[k * b:(k + 1) * b]
        if k:
            dl.load_state_dict(models["mxnet"], _weights(models["torch"]))   # same weights again
        loss = tuple(float(trainers[be].train_step(x, y)) for be in ("torch", "mxnet"))
        g_t, g_m = _grads(trainers["torch"]), _grads(trainers["mxnet"])
        w_t, w_m = _weights(models["torch"]), _weights(models["mxnet"])
        out.append(StepAgreement(k + 1, loss, {n: _diff(g_t[n], g_m[n]) for n in g_t if n in g_m},
                                 max(_diff(w_t[n], w_m[n])[0] for n in w_t)))
    return out
