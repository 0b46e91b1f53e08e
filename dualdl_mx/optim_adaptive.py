"""Adagrad, Adadelta, Adamax and NAdam over Gluon Parameters with torch.optim's update formulas.

MXNet 1.9.1 has AdaGrad, AdaDelta, Adamax and Nadam too, with other formulas (its optimizer.py):
AdaGrad divides by ``sqrt(sum + eps)`` (eps 1e-7, inside the root), applies weight decay outside
the accumulator and has no ``lr_decay``; AdaDelta has no lr and subtracts ``wd*w`` from the weight
directly; Adamax has no eps (``u = max(b2*u, |g|)``); Nadam keeps one momentum-schedule product
for the whole optimizer, advanced at every parameter's update (0.031 off torch after 6 steps of 3
parameters; 1e-9 for a single parameter: float64 product vs torch's float32, measured).
These classes are torch's single-tensor formulas written with NDArray ops (float32 and float64
weights alike), state in torch's layout and names (``sum``, ``square_avg``/``acc_delta``, ``exp_avg``/``exp_inf``,
``exp_avg``/``exp_avg_sq``/``mu_product``, ``step``). Hyper-parameter errors use torch's wording
(``dualdl.optim.arguments``).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from mxnet import nd

from dualdl.optim.arguments import check_hyperparameters as _check, check_torch_switches

from .optim import Optimizer

__all__ = ["Adagrad", "Adadelta", "Adamax", "NAdam"]


def next_step(state, w: nd.NDArray, *zeros: str, **fills: float) -> int:
    """Count a step in a parameter's state, creating it at the first one: ``step`` and the named
    buffers (``zeros`` of ``w``'s shape, or filled with ``fills``' value); returns the step number."""
    if "step" not in state:
        state["step"] = 0
        for name in zeros:
            state[name] = nd.zeros_like(w)
        for name, value in fills.items():
            state[name] = nd.full(w.shape, value, ctx=w.context, dtype=w.dtype)
    state["step"] += 1
    return state["step"]


def _grad(w: nd.NDArray, g: nd.NDArray, group) -> nd.NDArray:
    """torch's first lines: ``-g`` for maximize, then L2 decay ``g + wd*w``."""
    if group["maximize"]:
        g = -g
    if group["weight_decay"]:
        g = g + group["weight_decay"] * w
    return g


class Adagrad(Optimizer):
    """torch.optim.Adagrad: ``clr = lr / (1 + (t-1)*lr_decay); sum += g^2;
    w -= clr * g / (sqrt(sum) + eps)`` (MXNet's AdaGrad: ``g / sqrt(sum + eps)``, no lr_decay)."""
    _dl_optimizer = "Adagrad"

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: Optional[bool] = None,
                 *, maximize: bool = False, differentiable: bool = False, fused: Optional[bool] = None):
        check_torch_switches("Adagrad", differentiable)
        _check(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
               initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize), fused)

    def _update(self, p, w, g, group, state):
        t = next_step(state, w, sum=group["initial_accumulator_value"])
        g = _grad(w, g, group)
        clr = group["lr"] / (1 + (t - 1) * group["lr_decay"])
        s = state["sum"] = state["sum"] + g * g
        return w - clr * (g / (nd.sqrt(s) + group["eps"]))


class Adadelta(Optimizer):
    """torch.optim.Adadelta: ``sq = rho*sq + (1-rho)*g^2; d = sqrt(acc + eps) / sqrt(sq + eps) * g;
    acc = rho*acc + (1-rho)*d^2; w -= lr*d`` (MXNet's AdaDelta has no lr: it is torch's lr=1)."""
    _dl_optimizer = "Adadelta"

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach: Optional[bool] = None, *, capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False):
        check_torch_switches("Adadelta", differentiable, capturable)
        _check(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _update(self, p, w, g, group, state):
        rho, eps = group["rho"], group["eps"]
        next_step(state, w, "square_avg", "acc_delta")
        g = _grad(w, g, group)
        sq = state["square_avg"] = state["square_avg"] * rho + (1 - rho) * g * g
        delta = nd.sqrt(state["acc_delta"] + eps) / nd.sqrt(sq + eps) * g
        state["acc_delta"] = state["acc_delta"] * rho + (1 - rho) * delta * delta
        return w - group["lr"] * delta


class Adamax(Optimizer):
    """torch.optim.Adamax: ``m = lerp(m, g, 1-b1); u = max(b2*u, |g| + eps);
    w -= lr/(1-b1^t) * m/u`` (eps inside the max, as torch; MXNet's Adamax has no eps)."""
    _dl_optimizer = "Adamax"

    def __init__(self, params, lr: float = 2e-3, betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: Optional[bool] = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        check_torch_switches("Adamax", differentiable, capturable)
        _check(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _update(self, p, w, g, group, state):
        b1, b2 = group["betas"]
        t = next_step(state, w, "exp_avg", "exp_inf")
        g = _grad(w, g, group)
        m = state["exp_avg"] = state["exp_avg"] + (1 - b1) * (g - state["exp_avg"])
        u = state["exp_inf"] = nd.maximum(state["exp_inf"] * b2, nd.abs(g) + group["eps"])
        return w - (group["lr"] / (1 - b1 ** t)) * (m / u)


class NAdam(Optimizer):
    """torch.optim.NAdam: ``mu_t = b1*(1 - 0.5*0.96^(t*psi))``, ``P_t = P_{t-1}*mu_t`` (kept in
    float32, torch's scalar dtype); ``m = lerp(m, g, 1-b1); v = b2*v + (1-b2)*g^2;
    d = sqrt(v/(1-b2^t)) + eps; w -= lr*(1-mu_t)/(1-P_t) * g/d + lr*mu_{t+1}/(1-P_t*mu_{t+1}) * m/d``;
    ``decoupled_weight_decay`` multiplies ``w`` by ``1 - lr*wd`` instead of adding ``wd*w`` to ``g``."""
    _dl_optimizer = "NAdam"

    def __init__(self, params, lr: float = 2e-3, betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False,
                 *, foreach: Optional[bool] = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check_torch_switches("NAdam", differentiable, capturable)
        _check(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize))

    def _update(self, p, w, g, group, state):
        b1, b2 = group["betas"]
        lr, wd, psi = group["lr"], group["weight_decay"], group["momentum_decay"]
        t = next_step(state, w, "exp_avg", "exp_avg_sq")
        state.setdefault("mu_product", 1.0)
        if group["maximize"]:
            g = -g
        if wd and group["decoupled_weight_decay"]:
            w = w * (1 - lr * wd)
        elif wd:
            g = g + wd * w
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        # torch keeps mu_product in a float32 scalar tensor (float64 only under a float64 default dtype)
        prod = state["mu_product"] = float(np.float32(state["mu_product"]) * np.float32(mu))
        m = state["exp_avg"] = state["exp_avg"] + (1 - b1) * (g - state["exp_avg"])
        v = state["exp_avg_sq"] = state["exp_avg_sq"] * b2 + (1 - b2) * g * g
        denom = nd.sqrt(v / (1 - b2 ** t)) + group["eps"]
        w = w - (lr * (1.0 - mu) / (1.0 - prod)) * (g / denom)
        return w - (lr * mu_next / (1.0 - prod * mu_next)) * (m / denom)
