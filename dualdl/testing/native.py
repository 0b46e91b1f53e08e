"""Training parity of a native pair: a Gluon block trained with its Gluon loss and
``gluon.Trainer.step(batch_size)`` against a torch module trained with its torch loss and a
``torch.optim`` optimizer, the two paired by a :mod:`dualdl.port` mapping.

Each step compares the loss, every gradient (Gluon's, divided by the batch size that
``Trainer.step`` rescales by, mapped onto torch's names), then every weight and buffer after the
optimizer step (BatchNorm running statistics included). The first tensor that parts, in the
target's execution order, is named, with what the pattern points at: weights parting on biases
and norm parameters while the gradients agree is a weight-decay difference (Gluon's ``wd``
decays every parameter whose ``wd_mult`` is not 0; torch's ``weight_decay`` only the param
groups that set it); running statistics parting alone is a BatchNorm momentum left unconverted
(Gluon keeps ``momentum`` of the old value, torch takes ``momentum`` of the new one: Gluon 0.9 is
torch 0.1). Settings that differ are also read off the layers before training.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional

import numpy as np

from .report import Diff, ParityError, compare_arrays

__all__ = ["check_native_training", "assert_native_training", "NativeTrainingReport"]

_GRAD_TRANSFORMS = ("copy", "concat", "transpose")   # linear maps: gradients map like values
# With a float64 reference, each side's float32 rounding is measured against its own float64
# twin: MXNet's float32 gradients of ResNet-50 in train mode were up to 10.4x further from
# float64 than torch's on an Intel Xeon and 877x on an AMD EPYC, so the allowance cannot be
# estimated from torch's rounding alone.

#: the two float64 twins against each other: the implementations without float32 rounding
#: (ResNet-50's first gradients: 1.2e-12 of the largest), tolerance relative to the largest
#: value. MXNet's update operators take lr, wd and momentum as float32 attributes (0.01 becomes
#: 0.0099999998), so from the second step on the twins part by about 1e-9 (measured 2.6e-9 on
#: the loss): 1e-7 leaves room for several steps and is still 1e3-1e6x below float32's noise.
_RTOL64, _ATOL64 = 1e-7, 1e-12


@dataclass
class NativeTrainingReport:
    steps: int
    diffs: List[Diff] = field(default_factory=list)
    findings: List[str] = field(default_factory=list)   # what the divergence points at
    not_compared: List[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(d.passed for d in self.diffs) and not self.findings

    @property
    def first_failure(self) -> Optional[Diff]:
        return next((d for d in self.diffs if not d.passed), None)

    def summary(self) -> str:
        f = self.first_failure
        lines = [f"native training parity over {self.steps} steps: "
                 f"{'PASSED' if self.passed else 'FAILED'} ({len(self.diffs)} tensors compared)"]
        if f is not None:
            lines.append(f"  first divergence: step {f.step} {f.phase} {f.name} shape {f.shape}: "
                         f"max abs {f.max_abs:.3g}, max rel {f.max_rel:.3g}")
        worst = {}
        for d in self.diffs:
            if d.phase not in worst or d.usage > worst[d.phase].usage:
                worst[d.phase] = d
        for ph, d in worst.items():
            lines.append(f"  worst {ph}: {d.name} (step {d.step}) max abs {d.max_abs:.3g}, max rel "
                         f"{d.max_rel:.3g}, {d.usage:.2g}x tolerance")
        lines += [f"  finding: {x}" for x in self.findings]
        if self.not_compared:
            lines.append(f"  not compared (non-linear mapping): {', '.join(self.not_compared[:5])}")
        return "\n".join(lines)

    __str__ = summary


def _momentum_findings(gluon_block: Any, torch_module: Any, mapping: Any) -> List[str]:
    """BatchNorm momentum of paired layers: Gluon m must be torch 1 - m."""
    import torch.nn as nn
    from ..port.sides import GluonSide
    g_mom = {}
    for path, b in GluonSide(gluon_block)._blocks():
        kw = getattr(b, "_kwargs", None) or {}
        if "momentum" in kw and "eps" in kw:
            g_mom[path] = float(kw["momentum"])
    t_mods = dict(torch_module.named_modules())
    out = []
    for e in mapping.entries:
        if not e.target.endswith("running_mean") or not e.sources:
            continue
        t_layer = e.target.rsplit(".", 1)[0]
        s_layer = e.sources[0]["key"].rsplit(".", 1)[0]
        m = t_mods.get(t_layer)
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and s_layer in g_mom and \
                m.momentum is not None and abs(g_mom[s_layer] - (1 - m.momentum)) > 1e-9:
            out.append(f"BatchNorm momentum left unconverted: Gluon {s_layer} has momentum "
                       f"{g_mom[s_layer]:g} (keeps {g_mom[s_layer]:g} of the old running value), "
                       f"torch {t_layer} has {m.momentum:g} (takes {m.momentum:g} of the new one); "
                       f"torch needs momentum={1 - g_mom[s_layer]:g}")
    if len(out) > 2:
        out = out[:1] + [f"... and {len(out) - 1} more BatchNorm layers"]
    return out


def check_native_training(gluon_block: Any, torch_module: Any, mapping: Any, inputs: Any,
                          targets: Any, gluon_loss: Callable, torch_loss: Callable,
                          gluon_trainer: Any, torch_optimizer: Any, *, steps: int = 3,
                          batch_size: Optional[int] = None, target_inputs: Any = None,
                          rtol: float = 1e-4, atol: float = 1e-7,
                          float64_reference: bool = False) -> NativeTrainingReport:
    """Train both for ``steps`` steps on the same batch and compare (see the module docstring).

    ``mapping``: a :class:`dualdl.port.Mapping` or a ``PortReport`` (Gluon -> torch), e.g. from
    ``dl.port.port_gluon_to_torch`` (which also loads the weights). ``inputs``: as for ``port``
    (array, tuple, dict); ``targets``: one numpy array (int64 for torch, float32 for Gluon).
    ``gluon_loss(outputs, targets)`` returns per-sample losses (Gluon's losses do),
    ``torch_loss(outputs, targets)`` the mean. Both models train in train mode (switch dropout off
    in their configs to compare exactly). With ``float64_reference`` a float64 copy of each side
    trains beside it (torch: the same optimizer class and param groups, built here: pass a fresh
    optimizer; Gluon: a copy of the block cast to float64 and a Trainer with a copy of the
    Trainer's optimizer), for models whose float32 gradients are ill-conditioned (ResNet-50 in
    train mode). The two float64 copies are compared with each other (phase ``"float64"``: the
    loss and every gradient, tolerance 1e-12 + 1e-7 of the largest value): that is the test of
    the two implementations. Each float32 tensor's tolerance then grows by
    ``max|torch32 - torch64| + max|gluon32 - gluon64|`` (kept in each Diff as ``ref_torch`` /
    ``ref_mxnet``), the bound that the triangle inequality puts on the two sides' rounding, so
    a float32 row fails only where the float64 rows do too.
    """
    import mxnet as mx
    import torch
    from mxnet import autograd
    from ..port.inputs import as_inputs, gluon_leaf, torch_leaf
    mapping = getattr(mapping, "mapping", mapping)
    g_in = as_inputs(inputs)
    t_in = g_in if target_inputs is None else as_inputs(target_inputs)
    g_args = g_in.convert(lambda a: mx.nd.array(gluon_leaf()(a), dtype=gluon_leaf()(a).dtype))
    t_args = t_in.convert(lambda a: torch.from_numpy(np.require(torch_leaf()(a), requirements="C")))
    y = np.asarray(targets)
    g_y = mx.nd.array(gluon_leaf()(y), dtype=gluon_leaf()(y).dtype)
    t_y = torch.from_numpy(torch_leaf()(y))
    bs = int(batch_size or y.shape[0])
    g_params = gluon_block._collect_params_with_prefix()
    t_named = dict(torch_module.named_parameters(remove_duplicate=False))
    report = NativeTrainingReport(steps)
    report.findings += _momentum_findings(gluon_block, torch_module, mapping)
    entries = [e for e in mapping.entries if e.sources]
    grad_entries = [e for e in entries if e.target in t_named and e.transform in _GRAD_TRANSFORMS]
    report.not_compared = [e.target for e in entries if e.target in t_named
                           and e.transform not in _GRAD_TRANSFORMS]
    torch_module.train()
    ref = _Float64Twin(torch_module, torch_optimizer, t_in, y) if float64_reference else None
    g_ref = _GluonFloat64Twin(gluon_block, gluon_trainer, g_in, y) if float64_reference else None
    bn_n: dict = {}
    t_out_box: list = []
    t_mods = dict(torch_module.named_modules())
    for step in range(steps):
        g_prev = {k: p.data().asnumpy() for k, p in g_params.items() if p.grad_req == "null"}
        t_prev = {k: v.detach().clone().numpy() for k, v in torch_module.state_dict().items()
                  if k.endswith("running_var")}
        with autograd.record(train_mode=True):
            g_out = gluon_block(*g_args.args, **g_args.kwargs)
            g_l = gluon_loss(g_out, g_y)
        g_l.backward()
        torch_optimizer.zero_grad()
        bn_n.update(_count_batchnorm_inputs(torch_module, lambda: t_out_box.append(
            torch_module(*t_args.args, **t_args.kwargs))))
        t_out = t_out_box.pop()
        t_l = torch_loss(t_out, t_y)
        t_l.backward()
        g_loss = np.float64(g_l.mean().asscalar())
        if ref:
            ref.backward(torch_loss)
            g_ref.backward(gluon_loss)
            _add(report, step, "float64", "loss", g_ref.loss, float(ref.loss.item()), _RTOL64, _ATOL64)
        _add(report, step, "forward", "loss", g_loss, np.float64(t_l.item()), rtol, atol,
             refs=(ref.distance("loss", t_l), g_ref.distance_loss(g_loss)) if ref else None)
        g_grads = _gluon_grads(g_params, bs)
        g64_grads = g_ref.grads(bs) if ref else None
        for e in grad_entries:
            g = t_named[e.target].grad
            tg = np.zeros(e.shape, np.float32) if g is None else g.detach().numpy()
            a = e.compute(g_grads)
            refs = None
            if ref:
                a64 = e.compute(g64_grads, keep_dtype=True)
                refs = (ref.distance("grad", e.target, g), _distance(a, a64))
                t64 = ref.value("grad", e.target)
                _add(report, step, "float64", f"grad {e.target}", a64,
                     np.zeros(e.shape) if t64 is None else t64, _RTOL64, _ATOL64)
            _add(report, step, "backward", f"grad {e.target}", a, tg, rtol, atol, refs=refs)
        gluon_trainer.step(bs)
        torch_optimizer.step()
        if ref:
            ref.step()
            g_ref.step(bs)
        g_state = {k: p.data().asnumpy() for k, p in g_params.items()}
        g64_state = g_ref.state() if ref else None
        t_state = torch_module.state_dict()
        for e in entries:
            if e.target not in t_state:
                continue
            raw = e.compute(g_state)
            a, note, widen = raw, "", 1      # widen: how far a conversion scales a difference
            layer = t_mods.get(e.target.rsplit(".", 1)[0])
            n = bn_n.pop(e.target, None) if e.target.endswith("running_var") else None
            if n and n > 1 and getattr(layer, "momentum", None):
                # Gluon's running variance takes the biased batch variance, torch's the unbiased
                # one (n/(n-1)); recover the batch variance from Gluon's update and convert it
                m = layer.momentum
                g_old = e.compute(dict(g_state, **g_prev))
                batch_var = (a.astype(np.float64) - (1 - m) * g_old) / m
                a = (1 - m) * t_prev[e.target] + m * batch_var * n / (n - 1)
                note = f"Gluon's biased batch variance converted to torch's unbiased (n={n})"
                widen = 2                    # n/(n-1), at most 2
            refs = None
            if ref:                          # Gluon's own rounding, on its raw value
                own = _distance(raw, e.compute(g64_state, keep_dtype=True))
                refs = (ref.distance("state", e.target, t_state[e.target]), own * widen)
            _add(report, step, "update", f"{'param' if e.target in t_named else 'buffer'} "
                 f"{e.target}", a, t_state[e.target].detach().numpy(), rtol, atol, note, refs=refs)
    import torch.nn as nn
    norms = {f"{path}.{n}" if path else n for path, m in torch_module.named_modules()
             if isinstance(m, (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm))
             for n, _ in m.named_parameters(recurse=False)}
    report.findings += _recipe_findings(report, norms)
    return report


def _count_batchnorm_inputs(module: Any, run: Callable[[], None]) -> dict:
    """{running_var key: values per channel in the batch} of every BatchNorm that ran."""
    import torch.nn as nn
    out, handles = {}, []
    for path, m in module.named_modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            key = f"{path}.running_var" if path else "running_var"

            def hook(_m, args, key=key):
                out.setdefault(key, args[0].numel() // args[0].shape[1])
            handles.append(m.register_forward_pre_hook(hook))
    try:
        run()
    finally:
        for h in handles:
            h.remove()
    return out


class _Float64Twin:
    """A float64 copy of the torch side, trained with the same optimizer recipe: its distance
    to the float32 torch values is torch's own rounding, the allowance for ill-conditioned models."""

    def __init__(self, module, optimizer, t_in, y):
        import copy
        import torch
        from ..port.inputs import torch_leaf
        self.model = copy.deepcopy(module).double().train()
        names = {id(p): n for n, p in module.named_parameters()}
        mine = dict(self.model.named_parameters())
        groups = [dict({k: v for k, v in g.items() if k != "params"},
                       params=[mine[names[id(p)]] for p in g["params"]])
                  for g in optimizer.param_groups]
        self.opt = type(optimizer)(groups)
        self.args = t_in.convert(lambda a: torch.from_numpy(np.require(torch_leaf(True)(a),
                                                                       requirements="C")))
        self.y = torch.from_numpy(torch_leaf(True)(np.asarray(y)))
        self.loss = None

    def backward(self, torch_loss):
        self.opt.zero_grad()
        out = self.model(*self.args.args, **self.args.kwargs)
        self.loss = torch_loss(out, self.y)
        self.loss.backward()

    def step(self):
        self.opt.step()

    def value(self, kind, key) -> Optional[np.ndarray]:
        """The float64 twin's gradient (``kind="grad"``) or state entry ``key``; None: no gradient."""
        t64 = (dict(self.model.named_parameters())[key].grad if kind == "grad"
               else self.model.state_dict()[key])
        return None if t64 is None else t64.detach().numpy()

    def distance(self, kind, key, value=None) -> float:
        """max |torch32 - torch64| of the loss (``key``: torch's float32 loss) or of ``value``."""
        if kind == "loss":
            return abs(float(key.item()) - float(self.loss.item()))
        t64 = self.value(kind, key)
        if t64 is None or value is None:
            return 0.0
        return _distance(value.detach().double().numpy(), t64)


class _GluonFloat64Twin:
    """A float64 copy of the Gluon side (the block deep-copied and cast, a Trainer over it with a
    copy of the Trainer's optimizer), trained on the same batch: its distance to the float32
    Gluon values is MXNet's own rounding, which the tolerance must allow as it allows torch's,
    and next to torch's float64 twin it compares the two implementations without float32."""

    def __init__(self, block, trainer, g_in, y):
        import copy
        import mxnet as mx
        from mxnet import gluon
        from ..port.inputs import gluon_leaf
        self.block = copy.deepcopy(block)
        self.block.cast("float64")
        orig = trainer._optimizer
        opt = copy.copy(orig)                    # its hyperparameters, with state of its own
        counts = {k: dict(v) for k, v in orig._all_index_update_counts.items()}
        current = next((k for k, v in orig._all_index_update_counts.items()
                        if v is orig._index_update_count), 0)
        opt._all_index_update_counts, opt._index_update_count = counts, counts.setdefault(current, {})
        opt.lr_mult, opt.wd_mult, opt.idx2name = dict(orig.lr_mult), dict(orig.wd_mult), dict(orig.idx2name)
        opt.lr_scheduler = copy.deepcopy(orig.lr_scheduler)
        self.params = self.block._collect_params_with_prefix()
        self.trainer = gluon.Trainer(self.block.collect_params(), opt, kvstore=None)

        def f64(a):
            a = gluon_leaf()(a)
            return mx.nd.array(a, dtype=np.float64 if a.dtype.kind == "f" else a.dtype)
        self.args = g_in.convert(f64)
        self.y = f64(np.asarray(y))
        self.loss: float = 0.0

    def backward(self, gluon_loss) -> None:
        from mxnet import autograd
        with autograd.record(train_mode=True):
            out = self.block(*self.args.args, **self.args.kwargs)
            loss = gluon_loss(out, self.y)
        loss.backward()
        self.loss = float(loss.mean().asscalar())

    def distance_loss(self, loss32: float) -> float:
        return abs(float(loss32) - self.loss)

    def grads(self, bs: int) -> dict:
        return _gluon_grads(self.params, bs)

    def step(self, bs: int) -> None:
        self.trainer.step(bs)

    def state(self) -> dict:
        return {k: p.data().asnumpy() for k, p in self.params.items()}


def _gluon_grads(params: dict, bs: int) -> dict:
    """Gluon's gradients divided by the batch size ``Trainer.step`` rescales by (zeros for
    parameters without a gradient)."""
    return {k: (p.grad().asnumpy() / bs if p.grad_req != "null" else p.data().asnumpy() * 0)
            for k, p in params.items()}


def _distance(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max()) if a.size else 0.0


def _add(report, step, phase, name, a, b, rtol, atol, note="", refs=None):
    """Tolerance ``atol + rtol * max|b|`` per tensor: gradients through a train-mode BatchNorm
    cancel to near 0 in places, where a per-element relative test would flag fp32 rounding.
    ``refs``: ``(max|torch32 - torch64|, max|gluon32 - gluon64|)`` when float64 twins run; the
    tolerance then grows by their sum."""
    b = np.asarray(b)
    scale = float(np.abs(b).max()) if b.size and np.isfinite(b).all() else 0.0
    slack = sum(refs) if refs else 0.0
    c = compare_arrays(a, b, 0.0, atol + rtol * scale + slack)
    report.diffs.append(Diff(step, phase, name, tuple(np.shape(b)), c["max_abs"], c["max_rel"],
                             c["usage"], c["passed"], note or c["note"],
                             ref_torch=refs[0] if refs else None, ref_mxnet=refs[1] if refs else None))


def _recipe_findings(report: NativeTrainingReport, norms: set) -> List[str]:
    """What the first step's pattern of failures points at."""
    first = report.first_failure
    if first is None:
        return []
    s = first.step
    grads_ok = all(d.passed for d in report.diffs if d.step == s and d.phase == "backward")
    upd = [d for d in report.diffs if d.step == s and d.phase == "update" and not d.passed]
    out = []
    if first.phase == "update" and grads_ok and upd:
        params = [d.name[len("param "):] for d in upd if d.name.startswith("param ")]
        if params and all(n.endswith("bias") or n in norms for n in params):
            out.append(f"weight decay differs on biases/norms: after step {s} only biases and "
                       f"norm parameters part ({', '.join(params[:3])}{' ...' if len(params) > 3 else ''}) "
                       f"while every gradient agrees - Gluon's Trainer wd decays every parameter "
                       f"(set param.wd_mult = 0 to exempt one), torch's weight_decay only its "
                       f"param groups")
        elif params:
            out.append(f"the optimizer steps differ: gradients agree at step {s} but "
                       f"{params[0]} parts after the step (learning rate, momentum, weight decay, "
                       f"eps or the batch_size given to Trainer.step)")
        elif all(d.name.startswith("buffer ") for d in upd):
            out.append(f"only BatchNorm running statistics part after step {s} "
                       f"({upd[0].name[len('buffer '):]}): BatchNorm momentum (Gluon m = torch "
                       f"1 - m) or biased vs unbiased running variance")
    return out


def assert_native_training(*args: Any, **kwargs: Any) -> NativeTrainingReport:
    """:func:`check_native_training`, raising :class:`ParityError` with the summary on failure."""
    report = check_native_training(*args, **kwargs)
    if not report.passed:
        raise ParityError(report)  # type: ignore[arg-type]
    return report
