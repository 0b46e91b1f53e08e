"""What each guarantee of a dualdl training step costs: the ``train_step`` rows next to the same
step with one guarantee switched off, all as ratios to the hand-written native step timed in the
same rounds (issue 17: "say in numbers what each remaining cost buys").

Switched off, one at a time:

* **torch's accumulating gradients, on MXNet.** dualdl's parameters use ``grad_req='add'`` and the
  loop calls ``zero_grad()``, because torch adds every backward into ``.grad`` until it is
  cleared. The variant is the same hand loop with Gluon's ``grad_req='write'`` and no
  ``zero_grad()``, which is what Gluon's own loop does: there, a second backward before the step
  overwrites the first instead of adding to it.
* **dl.Trainer's non-finite check.** The Trainer applies a step only if every gradient element and
  the loss are finite (:class:`NoCheck` replaces the check by a plain step). On MXNet the check
  runs inside dualdl's guarded SGD operator, so the variant there is the optimizer's plain
  multi-tensor step, which is no faster.

And one option that dualdl does not turn on by itself: torch's fused CPU SGD kernel
(``dl.optim.SGD(..., fused=True)``, torch's own option). Its momentum buffers differ from torch's
default per-parameter loop by one float32 ulp in some elements (benchmarks/findings.md, stop 23),
so the default stays torch's.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

import dualdl as dl

from . import models, train_step
from .harness import Config, Row, case, compare

LR = train_step.LR
KINDS = ("mlp", "lenet")
NO_CHECK = "dl.Trainer without the finite check"
FUSED = "dl.Trainer, SGD(fused=True)"
WRITE = "dualdl, grad_req='write' and no zero_grad"


class NoCheck:
    """Stands in for an adapter's optim module in a Trainer whose step is not checked: no gradient
    or loss is tested, the step is always applied; everything else is the adapter's own."""

    def __init__(self, impl: Any) -> None:
        self._impl = impl

    def __getattr__(self, name: str) -> Any:
        return getattr(self._impl, name)

    @staticmethod
    def grads_finite(params, cache=None) -> bool:
        return True

    @staticmethod
    def step_if_finite(optimizer, params, cache=None, losses=None) -> bool:
        optimizer.step()
        return True


def trainer_step(backend: str, kind: str, s: dict, *, check: bool = True, hybridize: bool = False,
                 **sgd: Any) -> Callable[[], None]:
    """One ``dl.Trainer.train_step`` on a fresh copy of the benchmark model (SGD, momentum 0.9)."""
    x_np, y_np = models.batch(kind, s)
    with dl.use(backend):
        dl.seed(0)
        net = models.dl_model(kind, s)
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        x, y = dl.from_numpy(x_np), dl.from_numpy(y_np)
    tr = dl.Trainer(net, dl.optim.SGD(net.parameters(), lr=LR, momentum=0.9, **sgd), models.dl_loss(kind))
    if not check:
        tr._optim_impl = NoCheck(tr._optim_impl)
    if backend == "mxnet":
        from mxnet import nd

        def step() -> None:
            tr.train_step(x, y)
            nd.waitall()
        return step

    def step() -> None:
        tr.train_step(x, y)
    return step


def mxnet_write_loop(kind: str, s: dict, hybridize: bool) -> Callable[[], None]:
    """The hand-written dualdl loop with Gluon's ``grad_req='write'`` and no ``zero_grad()``."""
    from mxnet import autograd, nd
    x_np, y_np = models.batch(kind, s)
    with dl.use("mxnet"):
        dl.seed(0)
        net = models.dl_model(kind, s)
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        x, y = dl.from_numpy(x_np), dl.from_numpy(y_np)
    net.collect_params().setattr("grad_req", "write")
    opt = dl.optim.SGD(net.parameters(), lr=LR, momentum=0.9)
    loss_fn = models.dl_loss(kind)

    def step() -> None:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        nd.waitall()
    return step


def steps(kind: str, s: dict, backend: str) -> Dict[str, Callable[[], None]]:
    """``train_step``'s competitors for ``backend`` plus the variants without one guarantee."""
    if backend == "torch":
        fns = train_step.torch_steps(kind, s)
        fns[NO_CHECK] = trainer_step("torch", kind, s, check=False)
        fns[FUSED] = trainer_step("torch", kind, s, fused=True)
        return fns
    hybridize = backend.endswith("hybrid")
    fns = train_step.mxnet_steps(kind, s, hybridize)
    fns[WRITE] = mxnet_write_loop(kind, s, hybridize)
    fns[NO_CHECK] = trainer_step("mxnet", kind, s, check=False, hybridize=hybridize)
    return fns


@case("guarantees", "steps")
def guarantee_steps(cfg: Config) -> List[Row]:
    """MLP and LeNet steps with and without each guarantee, per backend, as ratios to native code."""
    rows: List[Row] = []
    for kind in KINDS:
        s = models.sizes(cfg.quick)[kind]
        for be in cfg.backends:
            fns = steps(kind, s, be)
            rows += compare("guarantees", fns, "native", cfg, names={k: f"{kind} / {be} / {k}" for k in fns},
                            note=f"batch {s['batch']}", model=kind, backend=be)
    return rows
