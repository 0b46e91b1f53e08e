"""Translate a ``gluon.Trainer`` (optimizer, hyper-parameters, lr schedule, per-parameter
``lr_mult``/``wd_mult``) into a torch optimizer and scheduler whose updates equal Gluon's, step by
step. Frameworks are imported lazily. See docs/porting-trainer.md."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

__all__ = ["translate_trainer", "TrainerTranslation", "TrainerTranslationError"]

#: elementwise transforms: a torch tensor made by them updates exactly like its Gluon sources
_ELEMENTWISE = ("copy", "transpose", "concat")


class TrainerTranslationError(ValueError):
    """The Gluon trainer uses something that has no exact torch translation, or a parameter has
    no twin on the other side."""


@dataclass
class TrainerTranslation:
    """What ``translate_trainer`` returns. Unpacks as ``optimizer, scheduler = ...``.

    ``pairs``: (Gluon parameter name, torch parameter name) per trained tensor; ``untrained``:
    torch parameters that get no update because no trained Gluon parameter feeds them;
    ``gradient``: how ``optimizer.step()`` expects ``p.grad`` (see docs/porting-trainer.md)."""
    optimizer: Any
    scheduler: Any = None
    pairs: List[Tuple[str, str]] = field(default_factory=list)
    untrained: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    gradient: str = ""

    def __iter__(self) -> Iterator[Any]:
        return iter((self.optimizer, self.scheduler))

    def summary(self) -> str:
        lines = [f"optimizer: {type(self.optimizer).__module__}.{type(self.optimizer).__name__} "
                 f"({len(self.optimizer.param_groups)} param groups, {len(self.pairs)} tensors)",
                 f"scheduler: {type(self.scheduler).__name__ if self.scheduler else None}",
                 f"gradient: {self.gradient}"]
        lines += [f"  untrained torch parameter: {n}" for n in self.untrained]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = summary


def _fail(msg: str) -> None:
    raise TrainerTranslationError(msg)


# --------------------------------------------------------------------------- pairing
def _gluon_params(trainer) -> List[Any]:
    params = [p for p in trainer._params if p.grad_req != "null"]
    for p in params:
        if p._data is None or any(d == 0 for d in p.shape):
            _fail(f"Gluon parameter {p.name} has no value yet (shape {p.shape}): initialize the "
                  f"block and run one forward before translating its trainer")
    return params


def _torch_params(torch_model) -> Dict[str, Any]:
    """name -> parameter, tied parameters once (under their first name), frozen ones left out."""
    out, seen = {}, set()
    for name, p in torch_model.named_parameters():
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            out[name] = p
    return out


def _pair_by_order(gparams, tparams) -> List[Tuple[Any, str]]:
    tnames = list(tparams)
    hint = ("pass mapping= (a dualdl.port report or Mapping, or a dict gluon name -> torch "
            "name) when the two models do not declare their parameters in the same order")
    if len(gparams) != len(tnames):
        _fail(f"the Gluon trainer updates {len(gparams)} parameters, the torch model has "
              f"{len(tnames)} trainable ones: cannot pair them by order; {hint}")
    for i, (g, t) in enumerate(zip(gparams, tnames)):
        if tuple(g.shape) != tuple(tparams[t].shape):
            _fail(f"parameter #{i}: Gluon {g.name} has shape {tuple(g.shape)}, torch {t} has "
                  f"{tuple(tparams[t].shape)}: the models differ; {hint}")
    return [(g, t) for g, t in zip(gparams, tnames)]


def _gluon_lookup(trainer, report, gluon_model) -> Dict[str, Any]:
    """Every name a Gluon parameter (trained or frozen) may appear under: Parameter.name, and
    save_parameters keys from ``gluon_model`` or from a live port report's pairs."""
    pool = list(trainer._params)
    if gluon_model is not None:
        pool += list(gluon_model.collect_params().values())
    by_id = {id(p): p for p in pool}
    out = {p.name: p for p in pool}
    if gluon_model is not None:
        out.update(gluon_model._collect_params_with_prefix())
    if report is not None:
        for pair in report.pairs:
            if pair.source.ident in by_id:
                out[pair.source.key] = by_id[pair.source.ident]
    return out


def _pair_by_mapping(mapping, trainer, gparams, tparams, report,
                     gluon_model) -> List[Tuple[Any, str]]:
    if mapping.source_framework and mapping.source_framework != "gluon":
        _fail(f"the mapping goes {mapping.source_framework} -> {mapping.target_framework}; "
              f"translate_trainer needs a Gluon -> torch one")
    lookup = _gluon_lookup(trainer, report, gluon_model)
    trained = {id(p) for p in gparams}
    pairs, fed = [], set()
    for e in mapping.entries:
        if e.target not in tparams or e.transform not in _ELEMENTWISE:
            continue  # a buffer, a frozen torch tensor, or computed (a zero-filled torch bias)
        keys = [s["key"] for s in e.sources]
        missing = [k for k in keys if k not in lookup]
        if missing:
            _fail(f"the mapping feeds torch {e.target} from Gluon {missing[0]!r}, which is not a "
                  f"parameter of this trainer" + ("" if gluon_model is not None else
                  " (pass gluon_model= so that save_parameters keys like '0.weight' resolve)"))
        live = [k for k in keys if id(lookup[k]) in trained]
        if live and len(live) != len(keys):
            frozen = [k for k in keys if k not in live]
            _fail(f"torch {e.target} is built from Gluon {live[0]} (trained) and {frozen[0]} "
                  f"(grad_req='null'): the torch optimizer cannot update only part of it")
        for k in live:
            pairs.append((lookup[k], e.target))
            fed.add(id(lookup[k]))
    for p in gparams:
        if id(p) not in fed:
            _fail(f"Gluon parameter {p.name} has no torch twin in the mapping: the torch optimizer "
                  f"could not update it (folded into another tensor, or the models differ)")
    return pairs


def _pair_by_dict(d: Dict[Any, Any], trainer, gparams, tparams,
                  gluon_model) -> List[Tuple[Any, str]]:
    lookup = _gluon_lookup(trainer, None, gluon_model)
    tname_of = {id(p): n for n, p in tparams.items()}
    pairs = []
    for gk, tk in d.items():
        g = gk if hasattr(gk, "grad_req") else lookup.get(gk)
        if g is None or id(g) not in {id(p) for p in gparams}:
            _fail(f"mapping key {getattr(gk, 'name', gk)!r} is not a Gluon parameter this trainer "
                  f"updates (known: {sorted(p.name for p in gparams)[:8]} ...)")
        t = tname_of.get(id(tk)) if not isinstance(tk, str) else (tk if tk in tparams else None)
        if t is None:
            _fail(f"mapping value {tk!r} (for Gluon {g.name}) is not a trainable parameter of the "
                  f"torch model")
        if _numel(g.shape) != tparams[t].numel():
            _fail(f"mapping pairs Gluon {g.name} {tuple(g.shape)} with torch {t} "
                  f"{tuple(tparams[t].shape)}: different sizes")
        pairs.append((g, t))
    fed = {id(g) for g, _ in pairs}
    for p in gparams:
        if id(p) not in fed:
            _fail(f"Gluon parameter {p.name} has no torch twin in the mapping")
    return pairs


def _pairs(trainer, torch_model, mapping,
           gluon_model) -> Tuple[List[Tuple[Any, str]], Dict[str, Any]]:
    gparams, tparams = _gluon_params(trainer), _torch_params(torch_model)
    if mapping is None:
        if gluon_model is None:
            _fail("pass gluon_model= (the block the trainer updates: gluon.Trainer keeps its "
                  "parameters sorted by name, so only the block knows their declaration order) "
                  "or mapping= (a dualdl.port report / Mapping, or a dict gluon -> torch name)")
        ours = {id(p) for p in gparams}
        declared = [p for p in gluon_model.collect_params().values() if id(p) in ours]
        if len(declared) != len(gparams):
            _fail(f"gluon_model holds {len(declared)} of the {len(gparams)} parameters the "
                  f"trainer updates: pass the block the trainer was made from")
        pairs = _pair_by_order(declared, tparams)
    elif isinstance(mapping, dict):
        pairs = _pair_by_dict(mapping, trainer, gparams, tparams, gluon_model)
    else:
        from .api import PortReport
        from .mapping import Mapping
        report = mapping if isinstance(mapping, PortReport) else None
        if isinstance(mapping, (str, os.PathLike)):
            mapping = Mapping.load(mapping)
        elif report is not None:
            mapping = report.mapping
        if not isinstance(mapping, Mapping):
            _fail(f"mapping must be None, a PortReport, a Mapping, a mapping/report JSON path or "
                  f"a dict gluon name -> torch name, not {type(mapping).__name__}")
        pairs = _pair_by_mapping(mapping, trainer, gparams, tparams, report, gluon_model)
    return pairs, tparams


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# --------------------------------------------------------------------------- optimizer
def _groups(pairs, tparams, lr: float, wd: float) -> Tuple[List[dict], List[Tuple[str, str]]]:
    """One torch param group per (lr_mult, wd_mult); a torch tensor fed by several Gluon
    parameters needs them to agree."""
    mults: Dict[str, Tuple[float, float, str]] = {}
    for g, t in pairs:
        m = (float(g.lr_mult), float(g.wd_mult))
        if t in mults and mults[t][:2] != m:
            _fail(f"torch {t} is built from Gluon {mults[t][2]} (lr_mult/wd_mult {mults[t][:2]}) "
                  f"and {g.name} ({m}): one torch tensor cannot have two learning rates")
        mults.setdefault(t, m + (g.name,))
    groups: Dict[Tuple[float, float], dict] = {}
    for t in tparams:  # torch's declaration order
        if t not in mults:
            continue
        lm, wm, _ = mults[t]
        grp = groups.setdefault((lm, wm), {"params": [], "lr": lr * lm, "weight_decay": wd * wm,
                                           "lr_mult": lm, "wd_mult": wm})
        grp["params"].append(tparams[t])
    return list(groups.values()), [(g.name, t) for g, t in pairs]


def _check_trainer(trainer) -> Any:
    opt = getattr(trainer, "_optimizer", None)
    if opt is None or not hasattr(trainer, "_params"):
        _fail(f"expected a mxnet.gluon.Trainer, got {type(trainer).__name__}")
    if getattr(trainer, "_amp_loss_scaler", None) is not None:
        _fail("the trainer uses AMP loss scaling (amp.init_trainer); translate it without AMP "
              "and use torch.cuda.amp.GradScaler on the torch side")
    if opt.num_update != opt.begin_num_update or opt.begin_num_update != 0 or any(
            getattr(u, "states", None) for u in getattr(trainer, "_updaters", []) or []):
        _fail(f"the trainer has already stepped (num_update={opt.num_update}, "
              f"begin_num_update={opt.begin_num_update}): translate it before its first step "
              f"(optimizer states and counters are not carried over)")
    for p in trainer._params:
        if p.grad_req != "null" and getattr(p, "_grad_stype", "default") != "default":
            _fail(f"Gluon parameter {p.name} has {p._grad_stype} gradients; only dense "
                  f"gradients translate")
    return opt


def _optimizer(opt, groups, rescale: float, multi_precision: bool):
    import torch
    from dualdl_torch import gluon_optim as G
    name = type(opt).__name__.lower()
    common = dict(weight_decay=opt.wd, rescale_grad=rescale, clip_gradient=opt.clip_gradient,
                  multi_precision=multi_precision)
    lr = groups[0]["lr"] if groups else 0.01
    clip_on = bool(opt.clip_gradient) and opt.clip_gradient >= 0
    if name in ("sgd", "ccsgd"):
        if opt.momentum == 0 and rescale == 1.0 and not clip_on and not multi_precision \
                and opt.lr_scheduler is None:
            for g in groups:  # the values MXNet's kernel receives (C++ float)
                g["lr"], g["weight_decay"] = G._f32(g["lr"]), G._f32(g["weight_decay"])
            return torch.optim.SGD(groups, lr=lr, weight_decay=opt.wd), \
                ("torch.optim.SGD: without momentum Gluon's rule is torch's; lr and "
                 "weight_decay are rounded to float32 as MXNet's kernel receives them")
        return G.GluonSGD(groups, lr=lr, momentum=opt.momentum, **common), ""
    if name == "nag":
        return G.GluonNAG(groups, lr=lr, momentum=opt.momentum, **common), ""
    if name == "adam":
        return G.GluonAdam(groups, lr=lr, betas=(opt.beta1, opt.beta2), eps=opt.epsilon,
                           **common), ""
    if name == "rmsprop":
        return G.GluonRMSProp(groups, lr=lr, gamma1=opt.gamma1, gamma2=opt.gamma2,
                              eps=opt.epsilon, centered=opt.centered,
                              clip_weights=opt.clip_weights, **common), ""
    if name == "bertadam":
        return G.GluonBERTAdam(groups, lr=lr, betas=(opt.beta1, opt.beta2), eps=opt.epsilon,
                               **common), ""
    _fail(f"Gluon optimizer {type(opt).__name__!r} ({type(opt).__module__}) has no translation; "
          f"supported: sgd, nag, adam, rmsprop (plain and centered), bertadam (gluonnlp) - "
          f"MXNet 1.9.1 registers no 'adamw'")


def _scheduler(sched, optimizer):
    if sched is None:
        return None
    from dualdl_torch import gluon_optim as G
    kind = type(sched).__name__
    warm = dict(warmup_steps=sched.warmup_steps, warmup_begin_lr=sched.warmup_begin_lr,
                warmup_mode=sched.warmup_mode, warmup_final_lr=sched.warmup_final_lr)
    mod = type(sched).__module__
    if not mod.startswith("mxnet"):
        _fail(f"lr scheduler {kind} ({mod}) has no translation; supported: mxnet's "
              f"FactorScheduler, MultiFactorScheduler, PolyScheduler, CosineScheduler")
    if kind == "FactorScheduler":
        if sched.count != 0:
            _fail("the FactorScheduler has already been used (count != 0); pass a fresh one")
        return G.GluonFactorLR(optimizer, sched.step, sched.factor, sched.stop_factor_lr,
                               sched.base_lr, **warm)
    if kind == "MultiFactorScheduler":
        if sched.cur_step_ind != 0:
            _fail("the MultiFactorScheduler has already been used; pass a fresh one")
        return G.GluonMultiFactorLR(optimizer, list(sched.step), sched.factor, sched.base_lr, **warm)
    if kind == "PolyScheduler":
        return G.GluonPolyLR(optimizer, sched.max_update, sched.base_lr, sched.power,
                             sched.final_lr, base_lr_orig=sched.base_lr_orig, **warm)
    if kind == "CosineScheduler":
        return G.GluonCosineLR(optimizer, sched.max_update, sched.base_lr, sched.final_lr,
                               base_lr_orig=sched.base_lr_orig, **warm)
    _fail(f"lr scheduler {kind} has no translation; supported: FactorScheduler, "
          f"MultiFactorScheduler, PolyScheduler, CosineScheduler")


def translate_trainer(gluon_trainer: Any, torch_model: Any,
                      mapping: Union[None, Dict[Any, Any], Any, str, "os.PathLike[str]"] = None,
                      *, gluon_model: Any = None) -> TrainerTranslation:
    """A torch optimizer (and LR scheduler) that updates ``torch_model`` as ``gluon_trainer``
    updates its Gluon twin. Call it before the trainer's first step.

    ``mapping`` pairs Gluon and torch parameters: ``None`` (same architecture: ``gluon_model``'s
    parameters and ``torch_model``'s in declaration order, shapes checked), a ``dualdl.port``
    report or ``Mapping`` (or the path of a saved one; give ``gluon_model`` to resolve its
    save_parameters keys), or a dict Gluon name/Parameter -> torch name/Parameter. ``lr_mult``/``wd_mult`` become param groups.
    ``optimizer.step()`` expects ``p.grad`` from a batch-mean loss (see ``.gradient``).
    Returns a :class:`TrainerTranslation` (``optimizer, scheduler = translate_trainer(...)``).
    """
    opt = _check_trainer(gluon_trainer)
    pairs, tparams = _pairs(gluon_trainer, torch_model, mapping, gluon_model)
    if not pairs:
        _fail("the Gluon trainer updates no parameter (all have grad_req='null')")
    base_lr = opt.learning_rate if opt.lr_scheduler is None else opt.lr_scheduler.base_lr
    groups, names = _groups(pairs, tparams, base_lr, opt.wd)
    import torch
    half = any(p.dtype == torch.float16 for g in groups for p in g["params"])
    notes = []
    if half and not opt.multi_precision:
        notes.append("float16 parameters without multi_precision: updates are computed in float16 "
                     "tensor ops, not op-for-op as MXNet's kernels round (close, not bitwise)")
    rescale = float(gluon_trainer._scale)
    optimizer, why = _optimizer(opt, groups, rescale, bool(opt.multi_precision))
    if why:
        notes.append(why)
    import numpy as np
    dtypes = {(np.dtype(g.dtype).name, str(tparams[t].dtype).replace("torch.", "")) for g, t in pairs}
    notes += [f"Gluon parameters are {gd}, torch ones {td}: updates agree only to {td} precision"
              for gd, td in sorted(dtypes) if gd != td]
    scheduler = _scheduler(opt.lr_scheduler, optimizer)
    untrained = [n for n in tparams if n not in {t for _, t in names}]
    gradient = (f"p.grad = gradient of the batch-MEAN loss (Gluon: sum loss + "
                f"trainer.step(batch_size)); it is multiplied by rescale_grad={rescale:g}"
                + ("; or call optimizer.step(batch_size=B) after a sum loss"
                   if hasattr(optimizer, "_hyper") else ""))
    return TrainerTranslation(optimizer, scheduler, names, untrained, notes, gradient)
