"""LAMB as a ``torch.optim.Optimizer`` (torch has none): MXNet 1.9.1's ``mx.optimizer.LAMB``
formula (gluonnlp's BERT recipe), written in ``dualdl.optim.lamb``; both backends compute it,
and tests check both against a float64 numpy reference and against MXNet's own LAMB."""
from __future__ import annotations

import torch

from dualdl.optim.lamb import LAMBArguments, trust_ratio

from .optim import _BatchSizeStep

__all__ = ["LAMB"]


class _LAMB(LAMBArguments, torch.optim.Optimizer):
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
                    state.update(step=0, exp_avg=torch.zeros_like(w), exp_avg_sq=torch.zeros_like(w))
                state["step"] += 1
                t = state["step"]
                m = state["exp_avg"].mul_(b1).add_(g, alpha=1 - b1)
                v = state["exp_avg_sq"].mul_(b2).addcmul_(g, g, value=1 - b2)
                if group["bias_correction"]:
                    m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
                u = m / (v.sqrt() + group["eps"])
                if group["weight_decay"]:
                    u = u + group["weight_decay"] * w
                ratio = trust_ratio(float(torch.linalg.vector_norm(w)), float(torch.linalg.vector_norm(u)), group)
                w.sub_(u, alpha=group["lr"] * ratio)
        return loss


class LAMB(_BatchSizeStep, _LAMB):
    """Layer-wise adaptive moments (You et al. 2019), MXNet 1.9.1's formula."""
    _dl_optimizer = "LAMB"
    _torch_cls = _LAMB
