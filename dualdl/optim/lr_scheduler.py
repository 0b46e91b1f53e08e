"""Learning-rate schedules with torch.optim.lr_scheduler's names, signatures and recurrences.

For a torch optimizer these return torch's own scheduler objects; for a dualdl MXNet optimizer,
a dualdl scheduler computing the same values with the same (chainable) recurrences, so the two
backends see bit-identical learning rates. Hides: MXNet's schedulers (``mx.lr_scheduler``) are
attached to the optimizer and count *updates*, with different formulas (e.g. ``FactorScheduler``).
"""
from __future__ import annotations

import math
from collections import Counter
from bisect import bisect_right
from typing import Any, Callable, List, Sequence, Union

from .lr_scheduler_base import EPOCH_DEPRECATION_WARNING, LRScheduler  # noqa: F401
from .lr_scheduler_warmup import (_LinearLR, _OneCycleLR, _PolynomialLR,  # noqa: F401
                                  _ReduceLROnPlateau, _SequentialLR)

from ..backend import backend_of

__all__ = ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR", "LinearLR", "PolynomialLR",
           "SequentialLR", "OneCycleLR", "ReduceLROnPlateau", "LRScheduler"]


class _Factory:
    """The optimizer's framework's own scheduler where it has PyTorch's semantics
    (``Backend.native_lr_scheduler``), else dualdl's neutral one."""

    def __new__(cls, optimizer, *args, **kwargs):
        be = backend_of(optimizer, default=None)
        native = be.native_lr_scheduler(cls.__name__) if be is not None else None
        if native is not None:
            return native(optimizer, *args, **kwargs)
        return globals()["_" + cls.__name__](optimizer, *args, **kwargs)


class _StepLR(LRScheduler):
    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = int(step_size), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class _MultiStepLR(LRScheduler):
    def __init__(self, optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(milestones, self.last_epoch) for b in self.base_lrs]


class _ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class _CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and self.last_epoch > 0:
            return [self.eta_min + (b - self.eta_min) * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for b in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [lr + (b - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                    for b, lr in zip(self.base_lrs, self._lrs())]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (lr - self.eta_min) + self.eta_min for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


class _LambdaLR(LRScheduler):
    def __init__(self, optimizer, lr_lambda: Union[Callable[[int], float], List[Callable[[int], float]]],
                 last_epoch: int = -1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"expected {n} lr_lambdas, got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * f(self.last_epoch) for b, f in zip(self.base_lrs, self.lr_lambdas)]


def _declare(name: str, doc: str) -> type:
    return type(name, (_Factory,), {"__doc__": doc, "__module__": __name__})


StepLR = _declare("StepLR", "StepLR(optimizer, step_size, gamma=0.1): multiply lr by gamma every step_size steps.")
MultiStepLR = _declare("MultiStepLR", "MultiStepLR(optimizer, milestones, gamma=0.1).")
ExponentialLR = _declare("ExponentialLR", "ExponentialLR(optimizer, gamma).")
CosineAnnealingLR = _declare("CosineAnnealingLR", "CosineAnnealingLR(optimizer, T_max, eta_min=0).")
LambdaLR = _declare("LambdaLR", "LambdaLR(optimizer, lr_lambda): lr = initial_lr * lr_lambda(step).")


# warm-up, one-cycle, sequential and plateau schedules: their own file, found by the factory here

LinearLR = _declare("LinearLR", "LinearLR(optimizer, start_factor=1/3, end_factor=1.0, total_iters=5): "
                    "lr factor moving linearly from start_factor to end_factor (warm-up).")
PolynomialLR = _declare("PolynomialLR", "PolynomialLR(optimizer, total_iters=5, power=1.0): "
                        "lr = initial_lr * (1 - min(t, total_iters)/total_iters)^power.")
SequentialLR = _declare("SequentialLR", "SequentialLR(optimizer, schedulers, milestones): each scheduler in "
                        "turn (e.g. LinearLR warm-up, then PolynomialLR or CosineAnnealingLR decay).")
OneCycleLR = _declare("OneCycleLR", "OneCycleLR(optimizer, max_lr, total_steps=None, epochs=None, "
                      "steps_per_epoch=None, pct_start=0.3, anneal_strategy='cos', cycle_momentum=True, ...): "
                      "one cycle of lr (and of SGD's momentum / Adam's beta1, inversely).")
ReduceLROnPlateau = _declare("ReduceLROnPlateau", "ReduceLROnPlateau(optimizer, mode='min', factor=0.1, patience=10, "
                             "threshold=1e-4, threshold_mode='rel', cooldown=0, min_lr=0, eps=1e-8): "
                             "``step(metric)`` lowers lr when the metric stops improving.")
