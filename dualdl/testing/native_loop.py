"""The update loop :func:`dualdl.testing.check_native_training` replays: gradient accumulation,
clipping and the optimizer step, as a Gluon script and its torch port write them.

Hides how the two frameworks spell one update:

* accumulation: Gluon sums micro-batch gradients with ``grad_req='add'`` and updates with
  ``trainer.allreduce_grads(); trainer.update(n)`` (then ``params.zero_grad()``); torch sums
  them by calling ``backward()`` several times before ``optimizer.step()`` and ``zero_grad()``.
* the gradient the optimizer sees: Gluon's is ``grad / n`` (``rescale_grad = 1/n`` for the
  ``n`` given to ``step``/``update``), torch's is ``grad`` (``torch.optim``) or ``grad / n`` for
  a ``Gluon*`` optimizer stepped with ``step(batch_size=n)``; rows compare those.
* clipping: gluonnlp's ``clip_grad_global_norm`` (scale ``max_norm / norm``), torch's
  ``clip_grad_norm_`` (``max_norm / (norm + 1e-6)``), both called by the script between the
  backward and the update (``gluon_clip=`` / ``torch_clip=``: the call each script makes, given
  the list of parameters), and Gluon's optimizer ``clip_gradient`` (an element-wise clip of the
  rescaled gradient inside the update, as the ``Gluon*`` optimizers' ``clip_gradient`` group
  key): the rows after clipping compare the gradients each update really uses.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import numpy as np

__all__ = ["UpdateLoop", "inner_clip"]


def inner_clip(gluon_trainer: Any, torch_optimizer: Any) -> Tuple[Optional[float], Optional[float]]:
    """The element-wise clip each optimizer applies inside its update (None: none)."""
    g = getattr(getattr(gluon_trainer, "_optimizer", None), "clip_gradient", None)
    groups = getattr(torch_optimizer, "param_groups", [{}])
    t = groups[0].get("clip_gradient") if groups else None
    return (float(g) if g is not None and g > 0 else None,
            float(t) if t is not None and t > 0 else None)


class UpdateLoop:
    """Micro-batch bookkeeping and the clip / update calls of both sides (and their twins)."""

    def __init__(self, accumulate: int, gluon_clip: Optional[Callable], torch_clip: Optional[Callable],
                 gluon_step_size: Optional[int], torch_step_size: Optional[int]):
        self.acc = accumulate
        self.gluon_clip, self.torch_clip = gluon_clip, torch_clip
        self.g_size, self.t_size = gluon_step_size, torch_step_size
        self.m = 0             # micro-batches in the current update
        self.n = 0             # samples in the current update
        self.clipping = gluon_clip is not None or torch_clip is not None

    def micro(self, step: int, size: int) -> Tuple[bool, bool]:
        """(first micro-batch of an update, last one) for the micro-batch about to run."""
        if self.m == self.acc:
            self.m, self.n = 0, 0
        self.m += 1
        self.n += size
        return self.m == 1, self.m == self.acc

    def scales(self) -> Tuple[float, float]:
        """(Gluon's divisor: the size given to step/update, torch's: its step(batch_size=))."""
        g = self.g_size or self.n * self.acc / self.m    # equal micro-batches: exact at the end
        return float(g), float(self.t_size or 1)

    @property
    def gluon_size(self) -> int:
        return int(self.g_size or self.n)

    def clip(self, gluon_trainer: Any, g_params: dict, torch_module: Any, gw: Any, tw: Any) -> None:
        """The scripts' clipping calls between backward and update, on both sides and twins
        (the twin's allreduce_grads comes before its clip too)."""
        if self.gluon_clip is not None:
            gluon_trainer.allreduce_grads()
            self.gluon_clip(_unique(g_params.values()))
            if gw is not None and hasattr(gw, "clip"):     # the float64 torch reference
                gw.clip(self.gluon_clip)
            elif gw is not None:
                gw.trainer.allreduce_grads()
                self.gluon_clip(_unique(gw.params.values()))
        if self.torch_clip is not None:
            self.torch_clip(list(torch_module.parameters()))
            if tw is not None:
                self.torch_clip(list(tw.model.parameters()))

    def update(self, gluon_trainer: Any, torch_optimizer: Any, gw: Any, tw: Any,
               zero_gluon: bool) -> None:
        n = self.gluon_size
        if self.acc == 1 and self.gluon_clip is None:
            gluon_trainer.step(n)
        else:
            if self.gluon_clip is None:
                gluon_trainer.allreduce_grads()
            gluon_trainer.update(n)
        if self.t_size:
            torch_optimizer.step(batch_size=self.t_size)
        else:
            torch_optimizer.step()
        if tw is not None:
            tw.step(n, self.t_size)
        if gw is not None and hasattr(gw, "clip"):
            gw.step(n, self.t_size)
        elif gw is not None:
            gw.step(n, plain=self.acc == 1 and self.gluon_clip is None,
                    reduced=self.gluon_clip is not None)
            if zero_gluon:
                for p in gw.params.values():
                    if p.grad_req == "add":
                        p.zero_grad()


def _unique(params: Any) -> list:
    seen, out = set(), []
    for p in params:
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def clip_view(values: np.ndarray, bound: Optional[float]) -> np.ndarray:
    """An effective gradient as an optimizer's inner element-wise clip uses it."""
    return values if bound is None else np.clip(values, -bound, bound)
