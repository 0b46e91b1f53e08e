"""torch.optim optimizers and LR schedulers that apply MXNet 1.9.1 Gluon's update rules.

Plain PyTorch (nothing else is imported), so a model moved off MXNet keeps its training recipe
without keeping MXNet. Each class mirrors the C++ kernel ``gluon.Trainer.step`` runs, operation
by operation, including what changes numbers compared with ``torch.optim``:

- hyper-parameters reach the kernels as C++ ``float``: they are rounded to float32 first
  (this is what makes float64 runs agree to ~1e-16 instead of ~1e-8);
- ``rescale_grad`` multiplies the gradient inside the kernel, ``clip_gradient`` clips
  elementwise (before ``wd`` is added for SGD/NAG, after it for Adam/RMSProp);
- ``step()`` uses ``p.grad`` as the gradient of a **batch-mean** loss times ``rescale_grad``
  (the Trainer's scale, 1.0 by default): this equals Gluon's sum-loss gradient times
  ``1/batch_size``. ``step(batch_size=B)`` instead takes the gradient of a **sum** loss and uses
  ``rescale_grad / B``, exactly as ``trainer.step(B)`` does;
- ``multi_precision=True``: float16 parameters are updated through a float32 master copy kept
  in the optimizer state (``state["master"]``), as Gluon's ``multi_precision`` does.

Every param group carries ``lr``, ``weight_decay`` (Gluon ``wd * wd_mult``), ``lr_mult`` (used by
the schedulers below: group lr = schedule(step) * lr_mult), ``rescale_grad``, ``clip_gradient``.
"""
from __future__ import annotations

import math
import struct
from typing import Any, Iterable, List, Optional, Sequence

import torch

__all__ = ["GluonOptimizer", "GluonSGD", "GluonNAG", "GluonAdam", "GluonRMSProp", "GluonBERTAdam",
           "GluonAdaGrad",
           "GluonLRScheduler", "GluonFactorLR", "GluonMultiFactorLR", "GluonPolyLR",
           "GluonCosineLR", "GluonCVLR"]


def _f32(x: float) -> float:
    """``x`` as the C++ ``float`` field of an MXNet operator parameter stores it."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _clip(g: torch.Tensor, bound: Optional[float]) -> torch.Tensor:
    return g if bound is None else g.clamp(-bound, bound)


def _clip_bound(value: Optional[float]) -> Optional[float]:
    """Gluon passes ``clip_gradient`` only when truthy, and the kernels ignore negative bounds."""
    if not value or value < 0:
        return None
    return _f32(value)


class GluonOptimizer(torch.optim.Optimizer):
    """Base class: per-parameter step count, float32 master copies, rescale/clip/batch_size.

    Subclasses implement ``_init_state(state, w, group)`` and ``_update(w, g, state, group, hp)``
    where ``w`` is the tensor to update in place (the master copy under multi-precision),
    ``g`` the raw gradient and ``hp`` the float32-rounded hyper-parameters of the group."""

    def __init__(self, params: Iterable[Any], defaults: dict):
        for k in ("lr", "weight_decay", "rescale_grad"):
            if defaults.get(k) is None or defaults[k] < 0:
                raise ValueError(f"{k} must be a non-negative number, got {defaults.get(k)!r}")
        defaults.setdefault("lr_mult", 1.0)
        defaults.setdefault("clip_gradient", None)
        defaults.setdefault("multi_precision", False)
        super().__init__(params, defaults)

    def _init_state(self, state: dict, w: torch.Tensor, group: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _update(self, w, g, state, group, hp) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _hyper(self, group: dict, batch_size: Optional[float]) -> dict:
        rescale = group["rescale_grad"]
        if batch_size is not None:
            rescale = rescale / batch_size
        return {"lr": _f32(group["lr"]), "wd": _f32(group["weight_decay"]),
                "rescale": _f32(rescale), "clip": _clip_bound(group["clip_gradient"])}

    @torch.no_grad()
    def step(self, closure=None, batch_size: Optional[float] = None):
        """One Gluon update. ``batch_size``: ``p.grad`` holds a sum-loss gradient (see module doc)."""
        if batch_size is not None and not batch_size > 0:
            raise ValueError(f"batch_size must be positive, got {batch_size!r}")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            hp = self._hyper(group, batch_size)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Gluon optimizers here take dense gradients only")
                state = self.state[p]
                master = group["multi_precision"] and p.dtype == torch.float16
                if not state:
                    state["step"] = 0
                    if master:
                        state["master"] = p.detach().float().clone()
                    self._init_state(state, state["master"] if master else p, group)
                state["step"] += 1
                w = state["master"] if master else p
                self._update(w, p.grad.float() if master else p.grad, state, group, hp)
                if master:
                    p.copy_(w)
        return loss


class _GluonMomentum(GluonOptimizer):
    """SGD and NAG share their hyper-parameters and their one state tensor."""

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.0, weight_decay: float = 0.0,
                 rescale_grad: float = 1.0, clip_gradient: Optional[float] = None,
                 multi_precision: bool = False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      rescale_grad=rescale_grad, clip_gradient=clip_gradient,
                                      multi_precision=multi_precision))

    def _init_state(self, state, w, group):
        state["momentum_buffer"] = torch.zeros_like(w, memory_format=torch.preserve_format)


class GluonSGD(_GluonMomentum):
    """Gluon ``sgd`` (``multi_sgd[_mom]_update``): ``mom = momentum*mom - lr*wd*w - lr*clip(rescale*g);
    w += mom``.

    Differs from ``torch.optim.SGD(momentum=...)``: the buffer holds ``-lr * buf`` (the learning
    rate is folded into it), so when the lr changes (a schedule, ``set_learning_rate``) old steps
    keep their old lr; torch's buffer would rescale them with the new one (0.66 apart after two
    lr halvings in 5 steps, see docs/porting-trainer.md). Clipping comes before ``wd`` is added."""

    def _update(self, w, g, state, group, hp):
        lr, mu = hp["lr"], _f32(group["momentum"])
        decay = w.mul(lr * hp["wd"])
        if hp["clip"] is None:
            step = g.mul(lr * hp["rescale"])
        else:
            step = _clip(g.mul(hp["rescale"]), hp["clip"]).mul_(lr)
        if group["momentum"] > 0:
            mom = state["momentum_buffer"]
            mom.mul_(mu).sub_(decay).sub_(step)
            w.add_(mom)
        else:
            w.add_(decay.neg_().sub_(step))


class GluonNAG(_GluonMomentum):
    """Gluon ``nag`` (``nag_mom_update``, updated in place as ``Trainer`` does)::

        m = momentum*m;  G = clip(rescale*g) + wd*w
        w = w - m + (momentum+1) * (m - lr*G)
        m = m - lr*(clip(rescale*g) + wd*w_new)

    Differs from ``torch.optim.SGD(nesterov=True)``: the buffer carries ``-lr`` (as Gluon SGD's),
    and because the kernel writes the weight before the momentum, the weight decay term of the
    new momentum uses the *updated* weight. With ``momentum=0`` it is Gluon's ``sgd_update``
    kernel: ``w = (1 - lr*wd)*w - lr*clip(rescale*g)``."""

    def _update(self, w, g, state, group, hp):
        lr, wd, mu = hp["lr"], hp["wd"], _f32(group["momentum"])
        if hp["clip"] is None:
            sg = g.mul(hp["rescale"])
        else:
            sg = _clip(g.mul(hp["rescale"]), hp["clip"])
        if group["momentum"] <= 0:
            if hp["clip"] is None:
                sg = g.mul(lr * hp["rescale"])
            else:
                sg = sg.mul(lr)
            w.mul_(1.0 - lr * wd).sub_(sg)
            return
        m = state["momentum_buffer"].mul_(mu)
        inner = m.sub(sg.add(w.mul(wd)).mul_(lr))
        w.sub_(m).add_(inner.mul_(mu + 1.0))
        m.sub_(sg.add_(w.mul(wd)).mul_(lr))


class _GluonAdamFamily(GluonOptimizer):
    """Adam and BERTAdam share their hyper-parameters and their two moment tensors."""
    _EPS = 1e-8

    def __init__(self, params, lr: float = 0.001, betas: Sequence[float] = (0.9, 0.999),
                 eps: Optional[float] = None, weight_decay: float = 0.0, rescale_grad: float = 1.0,
                 clip_gradient: Optional[float] = None, multi_precision: bool = False):
        eps = self._EPS if eps is None else eps
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, rescale_grad=rescale_grad,
                                      clip_gradient=clip_gradient, multi_precision=multi_precision))

    def _init_state(self, state, w, group):
        state["exp_avg"] = torch.zeros_like(w, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(w, memory_format=torch.preserve_format)


class GluonAdam(_GluonAdamFamily):
    """Gluon ``adam`` (``adam_update``)::

        G = clip(rescale*g + wd*w);  m = b1*m + (1-b1)*G;  v = b2*v + (1-b2)*G*G
        w = w - lr_t*m / (sqrt(v) + eps),   lr_t = lr * sqrt(1-b2^t) / (1-b1^t)

    Differs from ``torch.optim.Adam``: the bias correction is folded into the lr, so eps is
    added to ``sqrt(v)`` not to ``sqrt(v/(1-b2^t))`` (torch's eps is effectively
    ``eps*sqrt(1-b2^t)`` smaller: 1e-2 apart with small gradients); ``clip_gradient`` clips
    *after* the L2 term is added (``torch.nn.utils.clip_grad_value_`` before the step clips the
    raw gradient only). ``wd`` is L2 in the gradient, not AdamW's decoupled decay."""

    def _update(self, w, g, state, group, hp):
        beta1, beta2 = group["betas"]
        t = state["step"]
        lr_t = _f32(group["lr"] * (math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)))
        b1, b2, eps = _f32(beta1), _f32(beta2), _f32(group["eps"])
        G = _clip(g.mul(hp["rescale"]).add_(w.mul(hp["wd"])), hp["clip"])
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.mul_(b1).add_(G.mul(1.0 - b1))
        v.mul_(b2).add_(G.mul(1.0 - b2).mul_(G))
        w.sub_(m.mul(lr_t).div_(v.sqrt().add_(eps)))


class GluonRMSProp(GluonOptimizer):
    """Gluon ``rmsprop`` (``rmsprop_update`` / centered: ``rmspropalex_update``)::

        G = clip(rescale*g + wd*w);  n = (1-g1)*G*G + g1*n
        plain:    w = w - lr * G / sqrt(n + eps)
        centered: s = (1-g1)*G + g1*s;  d = g2*d - lr*G / sqrt(n - s*s + eps);  w = w + d

    Differs from ``torch.optim.RMSprop``: eps is inside the square root (torch adds it to
    ``sqrt(n)``), the centered variant's momentum ``g2`` accumulates ``-lr * ...`` (the lr is
    folded into the buffer) and ``clip_weights`` clamps the weights after the step."""

    def __init__(self, params, lr: float = 0.001, gamma1: float = 0.9, gamma2: float = 0.9,
                 eps: float = 1e-8, centered: bool = False, clip_weights: Optional[float] = None,
                 weight_decay: float = 0.0, rescale_grad: float = 1.0,
                 clip_gradient: Optional[float] = None, multi_precision: bool = False):
        super().__init__(params, dict(lr=lr, gamma1=gamma1, gamma2=gamma2, eps=eps,
                                      centered=centered, clip_weights=clip_weights,
                                      weight_decay=weight_decay, rescale_grad=rescale_grad,
                                      clip_gradient=clip_gradient, multi_precision=multi_precision))

    def _init_state(self, state, w, group):
        state["square_avg"] = torch.zeros_like(w, memory_format=torch.preserve_format)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(w, memory_format=torch.preserve_format)
            state["delta"] = torch.zeros_like(w, memory_format=torch.preserve_format)

    def _update(self, w, g, state, group, hp):
        g1, eps = _f32(group["gamma1"]), _f32(group["eps"])
        G = _clip(g.mul(hp["rescale"]).add_(w.mul(hp["wd"])), hp["clip"])
        n = state["square_avg"]
        if not group["centered"]:
            n.mul_(g1).add_(G.mul(G).mul_(1.0 - g1))
            w.sub_(G.div(n.add(eps).sqrt_()).mul_(hp["lr"]))
        else:
            s, d = state["grad_avg"], state["delta"]
            n.mul_(g1).add_(G.mul(1.0 - g1).mul_(G))
            s.mul_(g1).add_(G.mul(1.0 - g1))
            rms = n.sub(s.mul(s)).add_(eps).sqrt_()
            d.mul_(_f32(group["gamma2"])).sub_(G.mul(hp["lr"]).div_(rms))
            w.add_(d)
        bound = _clip_bound(group["clip_weights"])
        if bound is not None:
            w.clamp_(-bound, bound)


class GluonBERTAdam(_GluonAdamFamily):
    """gluonnlp ``bertadam`` (``multi_adamw_update``; MXNet 1.9.1 registers no ``adamw``)::

        G = clip(rescale*g);  m = b1*(m - G) + G;  v = b2*(v - G*G) + G*G
        w = w - lr * (m / (sqrt(v) + eps) + wd*w)

    Differs from ``torch.optim.AdamW``: no bias correction at all, and the decoupled decay is
    multiplied by the lr inside one expression (torch: ``w *= 1 - lr*wd`` first)."""

    _EPS = 1e-6  # gluonnlp's default

    def _update(self, w, g, state, group, hp):
        if hp["rescale"] == 0 or not math.isfinite(hp["rescale"]):
            return  # the kernel skips the update
        b1, b2 = (_f32(b) for b in group["betas"])
        G = _clip(g.mul(hp["rescale"]), hp["clip"])
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.sub_(G).mul_(b1).add_(G)
        G2 = G.mul(G)
        v.sub_(G2).mul_(b2).add_(G2)
        w.sub_(m.div(v.sqrt().add_(_f32(group["eps"]))).add_(w.mul(hp["wd"])).mul_(hp["lr"]))


class GluonAdaGrad(GluonOptimizer):
    """Gluon ``adagrad`` (``mx.optimizer.AdaGrad``: NDArray operations in Python, dense)::

        G = clip(rescale*g);  h = h + G*G;  w = w + (G / sqrt(h + eps) + w*wd) * -lr

    Differs from ``torch.optim.Adagrad``: eps is inside the square root (torch adds it to
    ``sqrt(h)``), ``wd`` is added *after* the division (torch adds ``wd*w`` to the gradient
    first), the default eps is 1e-7, and there is no ``lr_decay``/``initial_accumulator_value``.
    The NDArray scalar operands are applied in the weight's dtype (float32: the scalar is
    rounded first), as torch does with a Python scalar."""

    def __init__(self, params, lr: float = 0.01, eps: float = 1e-7, weight_decay: float = 0.0,
                 rescale_grad: float = 1.0, clip_gradient: Optional[float] = None,
                 multi_precision: bool = False):
        super().__init__(params, dict(lr=lr, eps=eps, weight_decay=weight_decay,
                                      rescale_grad=rescale_grad, clip_gradient=clip_gradient,
                                      multi_precision=multi_precision))

    def _hyper(self, group: dict, batch_size: Optional[float]) -> dict:
        rescale = group["rescale_grad"]
        if batch_size is not None:
            rescale = rescale / batch_size
        clip = group["clip_gradient"]
        return {"lr": float(group["lr"]), "wd": float(group["weight_decay"]),
                "rescale": float(rescale), "clip": None if clip is None else _f32(clip)}

    def _init_state(self, state, w, group):
        state["sum"] = torch.zeros_like(w, memory_format=torch.preserve_format)

    def _update(self, w, g, state, group, hp):
        G = g.mul(hp["rescale"])
        if hp["clip"] is not None:
            G = G.clamp(-hp["clip"], hp["clip"])
        h = state["sum"]
        h.add_(G.mul(G))
        div = G.div(h.add(float(group["eps"])).sqrt_())
        w.add_(div.add_(w.mul(hp["wd"])).mul_(-hp["lr"]))


# --------------------------------------------------------------------------- LR schedulers
class GluonLRScheduler(torch.optim.lr_scheduler.LRScheduler):
    """Gives every group ``gluon_lr(n) * group["lr_mult"]`` for the n-th update (n = 1 for the
    first ``optimizer.step()``; call ``scheduler.step()`` after each ``optimizer.step()``).

    Gluon's schedulers are called with the update count *after* it was incremented, so the first
    step uses ``schedule(1)``; torch's ``last_epoch`` starts at 0, hence ``n = last_epoch + 1``.
    Warmup (``warmup_steps``, ``warmup_begin_lr``, ``warmup_mode`` linear/constant) is shared."""

    def __init__(self, optimizer, base_lr: float, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0.0, warmup_mode: str = "linear",
                 warmup_final_lr: Optional[float] = None, last_epoch: int = -1):
        if warmup_mode not in ("linear", "constant"):
            raise ValueError(f"warmup_mode must be 'linear' or 'constant', got {warmup_mode!r}")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_final_lr = base_lr if warmup_final_lr is None else warmup_final_lr
        self.warmup_mode = warmup_mode
        for g in optimizer.param_groups:
            g.setdefault("lr_mult", 1.0)
        super().__init__(optimizer, last_epoch)

    def _warmup(self, n: int) -> float:
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        return self.warmup_begin_lr + (self.warmup_final_lr - self.warmup_begin_lr) * \
            float(n) / float(self.warmup_steps)

    def gluon_lr(self, n: int) -> float:
        """The lr Gluon's scheduler returns for update ``n``."""
        return self._warmup(n) if n < self.warmup_steps else self._decayed(n)

    def _decayed(self, n: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_lr(self) -> List[float]:
        lr = self.gluon_lr(self.last_epoch + 1)
        return [lr * g["lr_mult"] for g in self.optimizer.param_groups]


class GluonFactorLR(GluonLRScheduler):
    """``mx.lr_scheduler.FactorScheduler``: the lr is multiplied by ``factor`` each time the update
    count passes a multiple of ``step`` (one multiplication at a time, floored at
    ``stop_factor_lr``, as Gluon's loop does; warmup steps are *not* subtracted)."""

    def __init__(self, optimizer, step: int, factor: float = 1.0, stop_factor_lr: float = 1e-8,
                 base_lr: float = 0.01, **warmup):
        self.step_size, self.factor, self.stop_factor_lr = step, factor, stop_factor_lr
        super().__init__(optimizer, base_lr, **warmup)

    def _decayed(self, n):
        lr = self.base_lr
        for _ in range(max(0, (n - 1) // self.step_size)):
            lr *= self.factor
            if lr < self.stop_factor_lr:
                lr = self.stop_factor_lr
        return lr


class GluonMultiFactorLR(GluonLRScheduler):
    """``mx.lr_scheduler.MultiFactorScheduler``: one multiplication by ``factor`` for every
    milestone in ``step`` that the update count has passed (``n > milestone``)."""

    def __init__(self, optimizer, step: Sequence[int], factor: float = 1.0, base_lr: float = 0.01,
                 **warmup):
        self.milestones, self.factor = list(step), factor
        super().__init__(optimizer, base_lr, **warmup)

    def _decayed(self, n):
        lr = self.base_lr
        for s in self.milestones:
            if n > s:
                lr *= self.factor
        return lr


class _GluonDecayTo(GluonLRScheduler):
    """Poly/cosine: ``final_lr + (base_lr_orig - final_lr) * shape(progress)`` until
    ``max_update``, then the last value (Gluon keeps it in ``base_lr``)."""

    def __init__(self, optimizer, max_update: int, base_lr: float = 0.01, final_lr: float = 0.0,
                 base_lr_orig: Optional[float] = None, **warmup):
        self.max_update, self.final_lr = max_update, final_lr
        self.base_lr_orig = base_lr if base_lr_orig is None else base_lr_orig
        self.max_steps = max_update - warmup.get("warmup_steps", 0)
        super().__init__(optimizer, base_lr, **warmup)

    def _shape(self, progress: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _decayed(self, n):
        if n > self.max_update:
            if self.max_update < self.warmup_steps:
                return self.base_lr  # Gluon never updated it
            n = self.max_update
        return self._at(n)

    def _at(self, n):
        """The decayed lr at update ``n`` (``warmup_steps <= n <= max_update``)."""
        return self.final_lr + (self.base_lr_orig - self.final_lr) * \
            self._shape(float(n - self.warmup_steps) / float(self.max_steps))


class GluonPolyLR(_GluonDecayTo):
    """``mx.lr_scheduler.PolyScheduler``: ``final + (base - final) * (1 - progress)**pwr``."""

    def __init__(self, optimizer, max_update: int, base_lr: float = 0.01, pwr: float = 2,
                 final_lr: float = 0.0, **kwargs):
        self.power = pwr
        super().__init__(optimizer, max_update, base_lr, final_lr, **kwargs)

    def _shape(self, progress):
        return pow(1 - progress, self.power)


class GluonCosineLR(_GluonDecayTo):
    """``mx.lr_scheduler.CosineScheduler``: ``final + (base - final) * (1 + cos(pi*progress))/2``,
    evaluated in Gluon's operation order (``(base - final) * (1 + cos(pi * steps / max_steps))``
    then ``/ 2``), which is what keeps it equal to the last bit (the algebraically equal
    ``(base - final) * ((1 + cos(pi * progress)) / 2)`` is 1 ulp off at some updates)."""

    def _at(self, n):
        return self.final_lr + (self.base_lr_orig - self.final_lr) * \
            (1 + math.cos(math.pi * (n - self.warmup_steps) / self.max_steps)) / 2


class GluonCVLR(GluonLRScheduler):
    """gluon-cv's ``LRSequential([LRScheduler(...), ...])`` (one piece: a bare ``LRScheduler``).

    Each piece is a dict ``mode`` (constant/step/linear/poly/cosine), ``base_lr``, ``target_lr``,
    ``niters``, ``offset`` (updates before it), ``power``, ``step`` (update counts, or None),
    ``step_factor``. As gluon-cv does, the update count is clamped to the last scheduled update,
    the piece whose end lies past it is chosen, and ``T = clamp(n - offset, 0, niters - 1)``;
    ``step`` mode multiplies by ``step_factor`` once per ``s <= T``. A warmup is a ``linear``
    piece first (gluon-cv scripts: ``LRScheduler('linear', base_lr=0, target_lr=lr, ...)``)."""

    def __init__(self, optimizer, pieces: Sequence[dict], last_epoch: int = -1):
        if not pieces:
            raise ValueError("GluonCVLR needs at least one piece (gluon-cv's LRSequential "
                             "asserts len(schedulers) > 0)")
        self.pieces = [dict(p) for p in pieces]
        self.ends: List[int] = []
        count = 0
        for p in self.pieces:
            if p["mode"] not in ("constant", "step", "linear", "poly", "cosine"):
                raise ValueError(f"gluon-cv LRScheduler mode must be constant, step, linear, "
                                 f"poly or cosine, got {p['mode']!r}")
            count += int(p["niters"])
            self.ends.append(count)
        self.count = count
        super().__init__(optimizer, self.pieces[0]["base_lr"], last_epoch=last_epoch)

    def gluon_lr(self, n: int) -> float:
        n = min(n, self.count - 1)
        ind = len(self.pieces) - 1
        for i, end in enumerate(self.ends):
            if end > n:
                ind = i
                break
        p = self.pieces[ind]
        N = p["niters"] - 1
        T = min(max(0, n - p["offset"]), N)
        mode, base, target = p["mode"], p["base_lr"], p["target_lr"]
        if mode == "constant":
            factor = 0
        elif mode == "linear":
            factor = 1 - T / N
        elif mode == "poly":
            factor = pow(1 - T / N, p["power"])
        elif mode == "cosine":
            factor = (1 + math.cos(math.pi * T / N)) / 2
        elif p["step"] is not None:
            factor = pow(p["step_factor"], sum([1 for s in p["step"] if s <= T]))
        else:
            factor = 1
        if mode == "step":
            return base * factor
        return target + (base - target) * factor
