"""LAMB as a ``torch.optim.Optimizer`` (torch has none): MXNet 1.9.1's ``mx.optimizer.LAMB``
formula (gluonnlp's BERT recipe), written in ``dualdl_mx.optim_lamb``'s docstring; both
backends compute it, and tests check both against a float64 numpy reference."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from dualdl.optim.arguments import check_hyperparameters as _check

from .optim import _BatchSizeStep

__all__ = ["LAMB"]


class _LAMB(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0, bias_correction: bool = True, lower_bound: Optional[float] = None,
                 upper_bound: Optional[float] = None, *, maximize: bool = False):
        _check(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      bias_correction=bias_correction, lower_bound=lower_bound,
                                      upper_bound=upper_bound, maximize=maximize))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                g = -w.grad if group["maximize"] else w.grad
                state = self.state[w]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(w)
                    state["exp_avg_sq"] = torch.zeros_like(w)
                state["step"] += 1
                t = state["step"]
                m = state["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
                v = state["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                if group["bias_correction"]:
                    m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
                u = m / (v.sqrt() + group["eps"])
                if group["weight_decay"]:
                    u = u + group["weight_decay"] * w
                r1, r2 = float(torch.linalg.vector_norm(w)), float(torch.linalg.vector_norm(u))
                if group["lower_bound"] is not None:
                    r1 = max(r1, group["lower_bound"])
                if group["upper_bound"] is not None:
                    r1 = min(r1, group["upper_bound"])
                ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
                w.sub_(u, alpha=group["lr"] * ratio)
        return loss


class LAMB(_BatchSizeStep, _LAMB):
    __doc__ = _LAMB.__doc__
    _dl_optimizer = "LAMB"
    _torch_cls = _LAMB
