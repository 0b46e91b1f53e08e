"""Optimizers over Gluon Parameters implementing torch.optim's exact update formulas.

Gradients are read from each parameter's first context (the data-parallel code sums the context
copies there first); the updated value is written to every context, so replicas never drift
(a Gluon ``Trainer`` without a kvstore over two contexts diverges silently).
A parameter with no backward since ``zero_grad()`` is skipped, as torch skips ``grad is None``.

Where one of MXNet's fused update ops can compute torch's formula, the step runs that op (one per
parameter) instead of ~5-8 NDArray ops (``fused=False`` forces the reference formulas):
- SGD with momentum (also nesterov, dampening) keeps ``mom = -lr * buf`` (MXNet's layout) and
  rescales it when lr changes, so an lr change mid-run still follows torch;
- Adam/AdamW fold torch's bias corrections into ``adam_update``'s lr and epsilon
  (``lr*sqrt(bc2)/bc1``, ``eps*sqrt(bc2)``), and correct for the op's float32 ``1 - beta``
  constants (``1 - 0.999f`` is 1.3e-5 off torch's 0.001): see ``_adam_constants``;
- amsgrad, RMSprop and non-float32 parameters use the reference NDArray formulas (the ops take
  their hyper-parameters as float32, 1e-7 off a float64 formula).
``state_dict()`` always holds torch's state (``momentum_buffer``, ``exp_avg``, ``exp_avg_sq``,
``step``); SGD's fused layout keeps ``-momentum_buffer`` (an exact negation, so save/load resumes
bit for bit); loaded state is converted at the next step.
SGD's multi-tensor calls (the parameters chunked into ``multi_sgd_mom_update`` calls, and the
prepared plan per parameter group) are in dualdl_mx/optim_multi.py.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
from mxnet import autograd, gluon, nd

from dualdl.optim.arguments import check_torch_switches

from .grad_check import _global_norm, grad_maxima, grads_finite
from .fast.grad_state import fresh_params
from .grads import zero_grad as zero_grads
from .fast.guarded_step import step_if_finite
from .optim_multi import _MultiSGDPlan, _broadcast, _size_chunks

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "clip_grad_norm_", "clip_grad_value_",
           "grad_maxima", "grads_finite", "step_if_finite"]

_REQUIRED = object()
_FUSED_DTYPES = (np.float32,)    # the ops take lr/wd/betas as float32: float64 weights keep the formulas


def _rescale(group: Dict[str, Any], batch_size: Optional[float]) -> float:
    """The fused ops' ``rescale_grad``: 1/B for ``step(batch_size=B)``, negated for ``maximize``."""
    r = 1.0 if batch_size is None else 1.0 / batch_size
    return -r if group.get("maximize") else r


class Optimizer:
    """torch.optim.Optimizer's protocol on Gluon Parameters: ``param_groups``, ``state``,
    ``step``, ``zero_grad``, ``state_dict``/``load_state_dict``, ``add_param_group``."""

    _dl_optimizer = ""

    def __init__(self, params: Iterable[Any], defaults: Dict[str, Any], fused: Optional[bool] = None) -> None:
        self.fused = fused is not False
        self.defaults = dict(defaults)
        self.param_groups: List[Dict[str, Any]] = []
        self.state: Dict[gluon.Parameter, Dict[str, Any]] = {}
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: Dict[str, Any]) -> None:
        group = dict(group)
        params = group["params"]
        params = [params] if isinstance(params, gluon.Parameter) else list(params)
        for p in params:
            if not isinstance(p, gluon.Parameter):
                raise TypeError(f"{type(self).__name__} on the mxnet backend optimizes Gluon Parameters, "
                                f"got {type(p).__name__}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        for k, v in self.defaults.items():
            if v is _REQUIRED and k not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {k}")
            group.setdefault(k, v)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero every gradient with one ``reset_arrays`` per context (Gluon's ``Parameter.zero_grad``
        runs one ``zeros_like`` per array), and mark the parameters as having no fresh gradient."""
        zero_grads([p for g in self.param_groups for p in g["params"]],
                   self.__dict__.setdefault("_zero_cache", {}))

    def step(self, closure=None, batch_size: Optional[float] = None):
        """One update of every parameter with a fresh gradient (torch's formula).
        ``batch_size=B`` divides the gradient by ``B`` first (Gluon's ``trainer.step(B)``)."""
        if batch_size is not None and batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        loss = None
        if closure is not None:
            with autograd.record():
                loss = closure()
        with autograd.pause():
            for group in self.param_groups:
                params = fresh_params(group["params"])
                if self.fused:
                    params = self._multi_update(params, group, batch_size)
                for p in params:
                    data = p.list_data()
                    w, g = data[0], p.list_grad()[0]
                    state = self.state.setdefault(p, {})
                    if self.fused and w.dtype in _FUSED_DTYPES and w.stype == "default" \
                            and self._fused_update(w, g, group, state, batch_size):
                        _broadcast(data)
                        continue
                    self._to_torch_state(state)
                    if batch_size is not None:
                        g = g / batch_size
                    new = self._update(p, w, g, group, state)
                    for d in data:
                        new.copyto(d)
        return loss

    def _prepared_step(self) -> Optional[Callable[[], None]]:
        """The step as operator calls prepared now, or None where this optimizer has none for the
        current state (then ``step()`` runs as usual)."""
        return None

    def _multi_update(self, params: List[gluon.Parameter], group: Dict[str, Any],
                      batch_size: Optional[float]) -> List[gluon.Parameter]:
        """Update the parameters of ``group`` that a multi-tensor op can take (several per call);
        return the others, for the per-parameter path."""
        return params

    def _update(self, p, w: nd.NDArray, g: nd.NDArray, group: Dict[str, Any], state: Dict[str, Any]) -> nd.NDArray:
        """The reference formula: the new weight, from NDArray ops (state in torch's layout)."""
        raise NotImplementedError

    def _fused_update(self, w: nd.NDArray, g: nd.NDArray, group: Dict[str, Any], state: Dict[str, Any],
                      batch_size: Optional[float]) -> bool:
        """Update ``w`` in place with a fused op computing torch's formula; False if none applies."""
        return False

    def _to_torch_state(self, state: Dict[str, Any]) -> None:
        """Convert a parameter's state from the fused layout to torch's, in place."""

    def _scratch_like(self, w: nd.NDArray, slot: int = 0) -> nd.NDArray:
        """A temporary of ``w``'s shape: a view into one buffer per (slot, context, dtype), sized
        to the largest parameter (fused ops always write a weight output)."""
        key = (slot, w.context, np.dtype(w.dtype).name)
        views = self.__dict__.setdefault("_scratch_views", {})
        v = views.get(key + (w.shape,))
        if v is None:
            flats = self.__dict__.setdefault("_scratch_flat", {})
            flat = flats.get(key)
            if flat is None or flat.size < w.size:
                flat = flats[key] = nd.empty((w.size,), ctx=w.context, dtype=w.dtype)
                for k in [k for k in views if k[:3] == key]:
                    del views[k]
            v = views[key + (w.shape,)] = flat[:w.size].reshape(w.shape)
        return v

    def _torch_state(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """A copy of a parameter's state in torch's layout (for ``state_dict``)."""
        s = dict(state)
        self._to_torch_state(s)
        return s

    # ---- serialisation in torch's layout: {"state": {index: {...}}, "param_groups": [...]} ----
    def state_dict(self) -> Dict[str, Any]:
        for st in self.state.values():       # live state to torch's layout (see SGD): exact resumes
            self._to_torch_state(st)
        index = {}
        groups = []
        for g in self.param_groups:
            ids = []
            for p in g["params"]:
                index.setdefault(p, len(index))
                ids.append(index[p])
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ids})
        state = {index[p]: {k: (v.asnumpy() if isinstance(v, nd.NDArray) else v)
                            for k, v in self._torch_state(s).items()}
                 for p, s in self.state.items() if p in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(a["params"]) != len(b["params"]) for a, b in zip(groups, self.param_groups)):
            raise ValueError("loaded optimizer state has a different number of parameter groups or "
                             "parameters per group than this optimizer")
        index = {}
        for saved, mine in zip(groups, self.param_groups):
            for i, p in zip(saved["params"], mine["params"]):
                index[i] = p
        new_state = {}
        for i, s in state_dict["state"].items():
            p = index[int(i)]
            ctx = p.list_ctx()[0]
            new_state[p] = {k: (nd.array(v, ctx=ctx, dtype=v.dtype) if isinstance(v, np.ndarray) else v)
                            for k, v in s.items()}
        for saved, mine in zip(groups, self.param_groups):
            mine.update({k: v for k, v in saved.items() if k != "params"})
        self.state = new_state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} (dualdl, mxnet) ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])


class SGD(Optimizer):
    """torch.optim.SGD: ``d = g + wd*w; buf = mu*buf + (1-dampening)*d (buf = d at the first step);
    d = d + mu*buf if nesterov else buf; w -= lr*d``."""
    _dl_optimizer = "SGD"

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: Optional[bool] = None, differentiable: bool = False, fused: Optional[bool] = None):
        check_torch_switches("SGD", differentiable)
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"invalid SGD hyper-parameters: lr={lr}, momentum={momentum}, weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize), fused)

    def _update(self, p, w, g, group, state):
        d = -g if group["maximize"] else g
        if group["weight_decay"]:
            d = d + group["weight_decay"] * w
        mu = group["momentum"]
        if mu:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = d.copy()
            else:
                buf = mu * buf + (1 - group["dampening"]) * d
            state["momentum_buffer"] = buf
            d = d + mu * buf if group["nesterov"] else buf
        return w - group["lr"] * d

    # Fused layouts, converted on demand (``_to_torch_state``, and at the next step):
    # - multi-tensor (momentum, no nesterov/dampening, lr > 0): {"mx_mom": -lr*buf, "mx_lr": lr},
    #   MXNet's own layout, one ``multi_sgd_mom_update`` call per chunk of parameters (Gluon's
    #   Trainer makes one per 4). torch keeps buf; an lr change from lr0 to lr1 scales the
    #   layout by lr1/lr0, folded into the call's momentum (mu*lr1/lr0), so it costs nothing;
    # - per parameter: {"neg_momentum_buffer": -buf}, an exact negation of torch's buffer.
    # ``state_dict()`` returns torch's layout and switches the live state to it too, so a run
    # resumed from a checkpoint continues bit for bit like the run that wrote it.
    def _to_torch_state(self, state):
        if "neg_momentum_buffer" in state:
            state["momentum_buffer"] = -state.pop("neg_momentum_buffer")
        elif "mx_mom" in state:
            state["momentum_buffer"] = state.pop("mx_mom") / -state.pop("mx_lr")

    def _multi_update(self, params, group, batch_size):
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        if not (mu and lr > 0) or group["nesterov"] or group["dampening"] or not params:
            return params
        rs = _rescale(group, batch_size)
        plans = self.__dict__.setdefault("_multi_plans", {})
        plan = plans.get(id(group))
        if plan is not None and plan.matches(params, self.state):
            plan.run(lr, mu, wd, rs)
            return plan.rest
        rest, by_lr = [], {}
        for p in params:
            data = p.list_data()
            w, g = data[0], p.list_grad()[0]
            if w.dtype not in _FUSED_DTYPES or w.stype != "default" or g.stype != "default":
                rest.append(p)
                continue
            state = self.state.setdefault(p, {})
            mom = state.get("mx_mom")
            if mom is None:
                if "neg_momentum_buffer" in state:          # -buf -> -lr*buf
                    mom = state.pop("neg_momentum_buffer") * lr
                elif "momentum_buffer" in state:            # torch layout (loaded, or a checkpoint)
                    mom = state.pop("momentum_buffer") * -lr
                else:                                       # first step: buf = d
                    mom = nd.zeros_like(w)
                state["mx_mom"], state["mx_lr"] = mom, lr
            by_lr.setdefault(state["mx_lr"], []).append((w.size, (p, data, w, g, mom, state)))
        for old_lr, items in by_lr.items():
            for chunk in _size_chunks(items):
                args = []
                for _, _, w, g, mom, _ in chunk:
                    args += (w, g, mom)
                n = len(chunk)
                # mom' = (mu*lr/old_lr)*mom - lr*(rs*g + wd*w) = -lr*(mu*buf + d); w' = w + mom'
                nd.multi_sgd_mom_update(*args, lrs=(lr,) * n, wds=(wd,) * n, momentum=mu * lr / old_lr,
                                        rescale_grad=rs, num_weights=n, out=[c[2] for c in chunk])
                for _, data, _, _, _, state in chunk:
                    state["mx_lr"] = lr
                    _broadcast(data)
        plans[id(group)] = _MultiSGDPlan(params, rest, [it for items in by_lr.values() for _, it in items])
        return rest

    def _prepared_runs(self) -> Optional[List[Tuple["_MultiSGDPlan", float, float, float, float]]]:
        """``(plan, lr, momentum, wd, rescale)`` of every group with fresh parameters, when each
        group's multi-tensor plan still matches them and takes them all; else None."""
        if not self.fused:
            return None
        plans = self.__dict__.get("_multi_plans", {})
        runs = []
        for group in self.param_groups:
            params = fresh_params(group["params"])
            if not params:
                continue
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            plan = plans.get(id(group))
            if not (mu and lr > 0) or group["nesterov"] or group["dampening"] or plan is None \
                    or plan.rest or not plan.matches(params, self.state):
                return None
            runs.append((plan, lr, mu, wd, _rescale(group, None)))
        return runs

    def _prepared_step(self):
        """The step as its plans' prepared operator calls only (see :meth:`_prepared_runs`)."""
        runs = self._prepared_runs()
        if runs is None:
            return None

        def step() -> None:
            with autograd.pause():
                for plan, lr, mu, wd, rs in runs:
                    plan.run(lr, mu, wd, rs)
        return step

    def _fused_update(self, w, g, group, state, batch_size):
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        rs = _rescale(group, batch_size)
        if not mu:
            if wd:       # sgd_update rounds (1 - lr*wd) to float32 (a drift of up to 3e-8 per step)
                return False
            nd.sgd_update(w, g, lr=lr, wd=0.0, rescale_grad=rs, out=w)      # w -= lr * rs*g
            return True
        c = 1 - group["dampening"]
        if "mx_mom" in state:
            self._to_torch_state(state)
        if "neg_momentum_buffer" in state:
            nb = state["neg_momentum_buffer"]
        elif "momentum_buffer" in state:              # torch layout (loaded, or after a reference step)
            nb = state["neg_momentum_buffer"] = -state.pop("momentum_buffer")
        else:                                         # first step: buf = d (no dampening)
            nb = state["neg_momentum_buffer"] = nd.zeros_like(w)
            c = 1.0
        src = w
        if group["nesterov"]:
            # w - lr*(d + mu*buf') with d = buf' - mu*buf: (w + lr*mu*buf) - lr*(1+mu)*buf'
            src = self._scratch_like(w, 1)
            nd.sgd_update(w, nb, lr=lr * mu, wd=0.0, rescale_grad=1.0, out=src)
        # sgd_mom_update with lr=c: nb = mu*nb - c*(rs*g + wd*w), i.e. buf' = mu*buf + c*d (wd in
        # the buffer as torch has it); its weight output (w - buf') goes to a scratch array.
        # (sgd_update's own wd would round (1 - lr*wd) to float32: a drift of 3e-8 per step)
        nd.sgd_mom_update(w, g, nb, lr=c, momentum=mu, wd=wd, rescale_grad=rs, out=self._scratch_like(w))
        nd.sgd_update(src, nb, lr=lr * (1 + mu) if group["nesterov"] else lr, wd=0.0, rescale_grad=-1.0, out=w)
        return True


def _adam_constants(b1: float, b2: float) -> Optional[Tuple[float, float]]:
    """(k, s) for ``adam_update``: the op weighs the gradient by ``1 - float32(beta)`` computed in
    float32, torch by ``float32(1 - beta)`` (for beta2 = 0.999: 0.99998713e-3 vs 1e-3, which would
    bias every update by 6.5e-6). Scaling the gradient by ``k`` makes the second moment torch's;
    the first moment then comes out ``s`` times torch's, so it is scaled by ``s`` before the op
    and by ``1/s`` after (both moments stay in torch's layout), and the op's lr is divided by ``s``."""
    f = np.float32
    c1, c1_op = float(f(1 - b1)), float(f(1) - f(b1))
    c2, c2_op = float(f(1 - b2)), float(f(1) - f(b2))
    if not (c1_op and c2_op):          # float32(beta) == 1: the op would never move; torch would
        return None
    k = math.sqrt(c2 / c2_op)
    return k, k * c1_op / c1


class Adam(Optimizer):
    """torch.optim.Adam (amsgrad too): ``w -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)``;
    weight_decay adds ``wd*w`` to the gradient."""
    _dl_optimizer = "Adam"
    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: Optional[bool] = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: Optional[bool] = None, decoupled_weight_decay: bool = False):
        check_torch_switches(type(self).__name__, differentiable, capturable)
        if decoupled_weight_decay:          # torch: Adam(decoupled_weight_decay=True) is AdamW
            self._decoupled = True
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or weight_decay < 0:
            raise ValueError(f"invalid Adam hyper-parameters: lr={lr}, betas={betas}, eps={eps}, "
                             f"weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize), fused)

    def _update(self, p, w, g, group, state):
        b1, b2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        if group["maximize"]:
            g = -g
        if wd and self._decoupled:
            w = w * (1 - lr * wd)
        elif wd:
            g = g + wd * w
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = nd.zeros_like(w)
            state["exp_avg_sq"] = nd.zeros_like(w)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = nd.zeros_like(w)
        state["step"] += 1
        t = state["step"]
        m = state["exp_avg"] = state["exp_avg"] * b1 + (1 - b1) * g
        v = state["exp_avg_sq"] = state["exp_avg_sq"] * b2 + (1 - b2) * g * g
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        if group["amsgrad"]:
            v = state["max_exp_avg_sq"] = nd.maximum(state["max_exp_avg_sq"], v)
        denom = nd.sqrt(v) / math.sqrt(bc2) + group["eps"]
        return w - (lr / bc1) * (m / denom)

    def _fused_update(self, w, g, group, state, batch_size):
        b1, b2 = group["betas"]
        consts = _adam_constants(b1, b2)
        if group["amsgrad"] or consts is None:
            return False
        k, s = consts
        lr, wd = group["lr"], group["weight_decay"]
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = nd.zeros_like(w)
            state["exp_avg_sq"] = nd.zeros_like(w)
        state["step"] += 1
        t = state["step"]
        bc1, sbc2 = 1 - b1 ** t, math.sqrt(1 - b2 ** t)
        m = state["exp_avg"]
        if wd and self._decoupled:
            w *= 1 - lr * wd
        m *= s
        # adam_update: d = rs*g + wd*w; m = b1*m + (1-b1)*d; v = b2*v + (1-b2)*d^2;
        # w -= lr' * m / (sqrt(v) + eps'), with torch's bias corrections folded into lr' and eps'
        nd.adam_update(w, g, m, state["exp_avg_sq"], lr=lr * sbc2 / (bc1 * s), beta1=b1, beta2=b2,
                       epsilon=group["eps"] * sbc2, wd=0.0 if self._decoupled else wd * k,
                       rescale_grad=_rescale(group, batch_size) * k, out=w)
        m *= 1.0 / s
        return True


class AdamW(Adam):
    """torch.optim.AdamW: decoupled weight decay ``w *= 1 - lr*wd`` then the Adam step."""
    _dl_optimizer = "AdamW"
    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: Optional[bool] = None, capturable: bool = False, differentiable: bool = False,
                 fused: Optional[bool] = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused)


class RMSprop(Optimizer):
    """torch.optim.RMSprop: ``sq = a*sq + (1-a)*g^2``; ``avg = sqrt(sq [- ga^2]) + eps``;
    ``w -= lr*g/avg`` (or through a momentum buffer). MXNet's RMSProp puts eps inside the root."""
    _dl_optimizer = "RMSprop"

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: Optional[bool] = None, maximize: bool = False,
                 differentiable: bool = False):
        check_torch_switches("RMSprop", differentiable, capturable)
        if lr < 0 or eps < 0 or momentum < 0 or weight_decay < 0 or alpha < 0:
            raise ValueError(f"invalid RMSprop hyper-parameters: lr={lr}, alpha={alpha}, eps={eps}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _update(self, p, w, g, group, state):
        a = group["alpha"]
        if group["maximize"]:
            g = -g
        if group["weight_decay"]:
            g = g + group["weight_decay"] * w
        if "step" not in state:
            state["step"] = 0
            state["square_avg"] = nd.zeros_like(w)
            if group["momentum"] > 0:
                state["momentum_buffer"] = nd.zeros_like(w)
            if group["centered"]:
                state["grad_avg"] = nd.zeros_like(w)
        state["step"] += 1
        sq = state["square_avg"] = state["square_avg"] * a + (1 - a) * g * g
        if group["centered"]:
            ga = state["grad_avg"] = state["grad_avg"] * a + (1 - a) * g
            avg = nd.sqrt(sq - ga * ga) + group["eps"]
        else:
            avg = nd.sqrt(sq) + group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"] = state["momentum_buffer"] * group["momentum"] + g / avg
            return w - group["lr"] * buf
        return w - group["lr"] * (g / avg)


def clip_grad_norm_(params: Iterable[gluon.Parameter], max_norm: float, norm_type: float = 2.0) -> float:
    """torch.nn.utils.clip_grad_norm_ on the first-context gradients (all copies scaled)."""
    ps = fresh_params(params)
    if not ps:
        return 0.0
    total = _global_norm([p.list_grad()[0] for p in ps], norm_type)
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for p in ps:
            for gr in p.list_grad():
                gr *= coef
    return total


def clip_grad_value_(params: Iterable[gluon.Parameter], clip_value: float) -> None:
    for p in fresh_params(params):
        for gr in p.list_grad():
            nd.clip(gr, -clip_value, clip_value, out=gr)
