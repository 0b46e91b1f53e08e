"""LAMB over Gluon Parameters: MXNet 1.9.1's ``mx.optimizer.LAMB`` formula (gluonnlp's BERT
recipe; written in ``dualdl.optim.lamb``) with torch.optim's protocol (param groups,
``state_dict`` in torch's layout, ``step(batch_size=)``). NDArray ops, float32 and float64
weights (the fused ``lamb_update_phase1/2`` ops take their scalars as float32)."""
from __future__ import annotations

from mxnet import nd

from dualdl.optim.lamb import LAMBArguments, trust_ratio

from .optim import Optimizer
from .optim_adaptive import next_step

__all__ = ["LAMB"]


class LAMB(LAMBArguments, Optimizer):
    """Layer-wise adaptive moments (You et al. 2019), MXNet 1.9.1's formula."""
    _dl_optimizer = "LAMB"

    def _update(self, p, w, g, group, state):
        b1, b2 = group["betas"]
        t = next_step(state, w, "exp_avg", "exp_avg_sq")
        if group["maximize"]:
            g = -g
        m = state["exp_avg"] = state["exp_avg"] * b1 + (1 - b1) * g
        v = state["exp_avg_sq"] = state["exp_avg_sq"] * b2 + (1 - b2) * g * g
        if group["bias_correction"]:
            m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
        u = m / (nd.sqrt(v) + group["eps"])
        if group["weight_decay"]:
            u = u + group["weight_decay"] * w
        ratio = trust_ratio(float(nd.norm(w).asscalar()), float(nd.norm(u).asscalar()), group)
        return w - (group["lr"] * ratio) * u
