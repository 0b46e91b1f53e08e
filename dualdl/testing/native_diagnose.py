"""What a divergence in :func:`dualdl.testing.check_native_training` points at.

Hides the conventions that part two otherwise equal runs: BatchNorm momentum (Gluon keeps
``momentum`` of the old running value, torch takes ``momentum`` of the new one: Gluon 0.9 is
torch 0.1), BatchNorm's running variance (Gluon's biased batch variance, torch's unbiased
``n/(n-1)`` one), weight decay (Gluon's ``wd`` decays every parameter whose ``wd_mult`` is not 0,
torch's ``weight_decay`` only the param groups that set it), and a learning-rate schedule stepped
by a different rule on each side.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from .native_reference import ROUNDING_RATIO
from .native_report import Divergence, NativeTrainingReport

__all__ = ["momentum_findings", "running_var_convention", "diagnose", "schedule_divergence"]


def momentum_findings(gluon_block: Any, torch_module: Any, mapping: Any) -> List[str]:
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
                m.momentum is not None and abs(g_mom[s_layer] - (1 - m.momentum)) > 1e-6:
            out.append(f"BatchNorm momentum left unconverted: Gluon {s_layer} has momentum "
                       f"{g_mom[s_layer]:g} (keeps {g_mom[s_layer]:g} of the old running value), "
                       f"torch {t_layer} has {m.momentum:g} (takes {m.momentum:g} of the new one); "
                       f"torch needs momentum={1 - g_mom[s_layer]:g}")
    if len(out) > 2:
        out = out[:1] + [f"... and {len(out) - 1} more BatchNorm layers"]
    return out


def running_var_convention(layer: Any) -> str:
    """``"biased"`` (Gluon's) or ``"unbiased"`` (torch's): what a torch BatchNorm layer keeps.
    A Gluon-faithful layer says so with a class attribute ``running_var_estimate = "biased"``."""
    return "biased" if getattr(layer, "running_var_estimate", "unbiased") == "biased" else "unbiased"


def schedule_divergence(step: int, g_lr: float, t_lr: float, scheduler: Any,
                        scheduler_step: Optional[str]) -> Optional[Divergence]:
    """A learning rate that differs (beyond float32 rounding) in ``step``."""
    if abs(g_lr - t_lr) <= 2e-7 * max(abs(g_lr), abs(t_lr)) + 1e-30:
        return None
    how = ("no torch scheduler was given (scheduler=)" if scheduler is None else
           f"the torch scheduler {type(scheduler).__name__} is stepped per {scheduler_step}")
    return Divergence(step, "schedule", "learning rate", "schedule",
                      f"Gluon's step {step} used lr {g_lr:.6g}, torch's {t_lr:.6g}; {how}. Gluon's "
                      f"lr_scheduler counts updates (it steps inside trainer.step); "
                      f"trainer.set_learning_rate(...) in the script needs the same change of "
                      f"torch's param_groups (on_step=)")


def diagnose(report: NativeTrainingReport, norms: set, bn_alt: Dict[str, str],
             twins: str) -> Optional[Divergence]:
    """The first failing row and its likely cause. ``bn_alt``: running_var rows that match under
    the other variance convention (row name -> that convention); ``twins``: why float64 twins
    did not run on both sides ("" when they did)."""
    f = report.first_failure
    if f is None:
        return None
    s = f.step
    rows = [d for d in report.diffs if d.step == s]
    grads_ok = all(d.passed for d in rows if d.name.startswith("grad "))
    failing = [d for d in rows if not d.passed]
    name = f.name
    grads_before = all(d.passed for d in rows if d.name.startswith("grad "))
    if name.startswith("clipped grad ") and grads_before:
        return Divergence(s, f.phase, name, "clipping",
                          f"every gradient agrees before clipping at step {s}, and "
                          f"{name[len('clipped grad '):]} parts after it ({f.max_abs:.3g}, "
                          f"{f.usage:.3g}x tolerance): the scripts clip differently - gluonnlp's "
                          f"clip_grad_global_norm scales by max_norm/norm, torch's clip_grad_norm_ "
                          f"by max_norm/(norm + 1e-6); Gluon's clip_gradient= clips each element "
                          f"of the rescaled gradient inside the update (torch: clip_grad_value_ or "
                          f"a Gluon* optimizer's clip_gradient); a clip on one side only parts "
                          f"whenever it is active")
    acc = int(getattr(report, "accumulate", 1) or 1)
    scale = _loss_ratio(report, s)
    if acc > 1 and scale and (name == "loss" or name.startswith("grad ")):
        return Divergence(s, f.phase, name, "accumulation",
                          f"torch's loss reaches its update {scale:.4g}x Gluon's (every micro-"
                          f"batch of step {s}): with accumulate={acc} Gluon's update divides the "
                          f"summed gradients by the size given to trainer.update (gluon_step_size="
                          f"), torch's by its loss / {acc} or step(batch_size={acc}) "
                          f"(torch_step_size=)")
    if name.startswith("grad ") and acc > 1 and s % acc:
        start = s - s % acc
        if all(d.passed for d in report.diffs if d.step == start and d.name.startswith("grad ")):
            return Divergence(s, f.phase, name, "accumulation",
                              f"the gradients agree after micro-batch 1 of the update that starts "
                              f"at step {start} and part after micro-batch {s % acc + 1} of "
                              f"{acc} ({f.max_abs:.3g}): the sides accumulate differently - Gluon "
                              f"sums micro-batches only with grad_req='add' (and zero_grad() after "
                              f"each update), torch calls backward() {acc} times before step() "
                              f"with one zero_grad() per update; the loss / {acc} or "
                              f"step(batch_size={acc}) must match trainer.update's size")
    if f.phase == "reference" and not name.startswith("param "):
        return Divergence(s, f.phase, name, "model",
                          f"Gluon's float32 {name} is {f.max_abs:.3g} from the float64 reference "
                          f"(the torch model in float64 with Gluon's optimizer), {f.usage:.3g}x "
                          f"the allowance of {ROUNDING_RATIO:g}x torch's own float32 rounding: "
                          f"the models or losses compute different things (a layer setting, "
                          f"dropout left on, a mean vs sum loss, the port mapping)" + _acc_hint(report))
    if twins and f.phase != "float64" and f.usage <= 100:
        return Divergence(s, f.phase, name, "float32 rounding",
                          f"float32 difference {f.max_abs:.3g} ({f.usage:.3g}x tolerance) with no "
                          f"float64 twin on both sides to measure each side's own rounding "
                          f"({twins}); rerun with float64_reference=True to separate rounding "
                          f"from a real difference")
    drift = _amplified_rounding(report, f)
    if drift:
        return Divergence(s, f.phase, name, "amplified rounding", drift)
    if name.startswith("buffer ") and name.endswith("running_var"):
        if name in bn_alt:
            want, got = bn_alt[name].split("->")
            return Divergence(s, f.phase, name, "batchnorm variance",
                              f"the torch layer keeps the {got} running variance, the check "
                              f"expected the {want} one (Gluon keeps the biased batch variance, "
                              f"torch's nn.BatchNorm the unbiased n/(n-1) one); translate(..., "
                              f"batchnorm='gluon') writes a Gluon-faithful BatchNorm, or pass "
                              f"batchnorm_variance='{got}' to compare under that convention")
    if name.startswith("buffer ") and ("running_" in name):
        mom = [x for x in report.findings if "momentum" in x]
        return Divergence(s, f.phase, name, "batchnorm momentum" if mom else "batchnorm statistics",
                          mom[0] if mom else "only BatchNorm running statistics part: BatchNorm "
                          "momentum (Gluon m = torch 1 - m) or the running-variance convention")
    params = [d.name[len("param "):] for d in failing if d.name.startswith("param ")]
    if name.startswith("param ") and grads_ok:
        if params and all(n.endswith("bias") or n in norms for n in params):
            return Divergence(s, f.phase, name, "weight decay",
                              f"only biases and norm parameters part after step {s} "
                              f"({', '.join(params[:3])}{' ...' if len(params) > 3 else ''}) while "
                              f"every gradient agrees - Gluon's Trainer wd decays every parameter "
                              f"(set param.wd_mult = 0 to exempt one), torch's weight_decay only "
                              f"its param groups")
        return Divergence(s, f.phase, name, "optimizer",
                          f"every gradient agrees at step {s} but {name[len('param '):]} parts "
                          f"after the update ({f.max_abs:.3g}): the optimizer's update rule or its "
                          f"hyper-parameters (lr, momentum, weight decay, eps, Nesterov form, the "
                          f"batch_size given to Trainer.step) differ - dl.port.translate_trainer "
                          f"gives Gluon's exact update")
    if name == "loss" or name.startswith("grad "):
        where = "at the first step" if s == 0 else f"at step {s} although every weight agreed after step {s - 1}"
        return Divergence(s, f.phase, name, "model",
                          f"the forward/backward differs {where}: the models or losses compute "
                          f"different things (a layer setting, dropout left on, a mean vs sum loss, "
                          f"the port mapping) - check the port report" + _acc_hint(report))
    return Divergence(s, f.phase, name, "unknown", "")


def _loss_ratio(report: NativeTrainingReport, step: int) -> float:
    """torch's loss / Gluon's at ``step`` when it is a whole factor (2, 1/2, ...) apart, else 0."""
    if step >= len(report.losses):
        return 0.0
    g, t = report.losses[step]
    if not g or not t:
        return 0.0
    r = t / g
    k = r if r >= 1 else 1 / r
    return r if abs(k - round(k)) < 1e-3 * k and round(k) >= 2 else 0.0


def _acc_hint(report: NativeTrainingReport) -> str:
    acc = int(getattr(report, "accumulate", 1) or 1)
    return ("" if acc == 1 else
            f"; or, with accumulate={acc}, the gradient scale of the update: trainer.update(n) "
            f"divides by n (gluon_step_size=), torch by its loss / {acc} or "
            f"step(batch_size={acc}) (torch_step_size=)")


def _amplified_rounding(report: NativeTrainingReport, f: Any) -> str:
    """Why a float64 row that fails late is rounding amplified by training, or "" if it is not:
    the float64 twins agreed to rounding at the first step, every step passed until ``f.step``,
    the row fails by little, and each float32 run drifted far from its own float64 twin (the
    trajectory amplifies rounding). A porting difference shows at the step that exercises it."""
    if f.phase != "float64" or f.step < 3 or f.usage > 100:
        return ""
    first = [d.usage for d in report.diffs if d.step == 0 and d.phase == "float64"]
    if not first or max(first) > 1e-3:
        return ""
    rows = [d for d in report.diffs if d.step == f.step and d.phase == "forward"]
    g = max((d.ref_mxnet or 0.0) for d in rows) if rows else 0.0
    t = max((d.ref_torch or 0.0) for d in rows) if rows else 0.0
    if max(g, t) < 1e-4:
        return ""
    return (f"the float64 twins agreed to {max(first):.2g}x their tolerance at step 0 and drifted "
            f"to {f.usage:.3g}x by step {f.step}, while each float32 run drifted from its own "
            f"float64 twin (loss: Gluon {g:.3g}, torch {t:.3g}): this training amplifies rounding "
            f"step by step (chaotic: a large lr, noisy labels, small batches), and no trajectory "
            f"comparison holds past that horizon - compare fewer steps, or the script's real data "
            f"and batch size; a porting difference shows at the step that exercises it")


def effective_lrs(gluon_trainer: Any, torch_optimizer: Any) -> tuple:
    """(Gluon's learning rate of the step just taken, torch's base lr of its first group)."""
    g = float(gluon_trainer.learning_rate)
    grp = torch_optimizer.param_groups[0]
    t = float(grp["lr"]) / float(grp.get("lr_mult", 1.0) or 1.0)
    return g, t


def alt_running_var(convention: str, new_g: np.ndarray, old_g: np.ndarray, prev_t: np.ndarray,
                    m: float, n: int) -> np.ndarray:
    """torch's running variance after this step if it kept ``convention``'s estimate: the batch
    variance recovered from Gluon's update (``new = (1-m) old + m var_biased``), applied to
    torch's previous value."""
    batch_var = (np.asarray(new_g, np.float64) - (1 - m) * np.asarray(old_g, np.float64)) / m
    if convention == "unbiased":
        batch_var = batch_var * n / (n - 1)
    return (1 - m) * np.asarray(prev_t, np.float64) + m * batch_var
