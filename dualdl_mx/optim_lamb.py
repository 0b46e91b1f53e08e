"""LAMB over Gluon Parameters: MXNet 1.9.1's ``mx.optimizer.LAMB`` (gluonnlp's BERT recipe) with
torch.optim's protocol (param groups, ``state_dict`` in torch's layout, ``step(batch_size=)``).

The formula (``lamb_update_phase1/2``; dualdl_torch.optim_lamb computes the same), per parameter::

    g = -grad if maximize else grad
    m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2                       (exp_avg, exp_avg_sq)
    m^, v^ = (m/(1-b1^t), v/(1-b2^t)) if bias_correction else (m, v)
    u = m^ / (sqrt(v^) + eps) + weight_decay*w
    r1 = ||w|| clamped to [lower_bound, upper_bound] (where given);  r2 = ||u||
    w -= lr * (r1/r2 if r1 > 0 and r2 > 0 else 1) * u

Written with NDArray ops (float32 and float64 weights; the fused ops take float32 scalars).
"""
from __future__ import annotations

from typing import Optional, Sequence

from mxnet import nd

from dualdl.optim.arguments import check_hyperparameters as _check

from .optim import Optimizer

__all__ = ["LAMB"]


class LAMB(Optimizer):
    """Layer-wise adaptive moments (You et al. 2019), MXNet 1.9.1's formula: see the module."""
    _dl_optimizer = "LAMB"

    def __init__(self, params, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0, bias_correction: bool = True, lower_bound: Optional[float] = None,
                 upper_bound: Optional[float] = None, *, maximize: bool = False):
        _check(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      bias_correction=bias_correction, lower_bound=lower_bound,
                                      upper_bound=upper_bound, maximize=maximize))

    def _update(self, p, w, g, group, state):
        b1, b2 = group["betas"]
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = nd.zeros_like(w)
            state["exp_avg_sq"] = nd.zeros_like(w)
        state["step"] += 1
        t = state["step"]
        if group["maximize"]:
            g = -g
        m = state["exp_avg"] = state["exp_avg"] * b1 + (1 - b1) * g
        v = state["exp_avg_sq"] = state["exp_avg_sq"] * b2 + (1 - b2) * g * g
        if group["bias_correction"]:
            m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
        u = m / (nd.sqrt(v) + group["eps"])
        if group["weight_decay"]:
            u = u + group["weight_decay"] * w
        r1, r2 = float(nd.norm(w).asscalar()), float(nd.norm(u).asscalar())
        if group["lower_bound"] is not None:
            r1 = max(r1, group["lower_bound"])
        if group["upper_bound"] is not None:
            r1 = min(r1, group["upper_bound"])
        ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
        return w - (group["lr"] * ratio) * u
