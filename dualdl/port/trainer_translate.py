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
    #: how to rebuild both as source: {"optimizer": (class, kwargs), "scheduler": (class, kwargs)
    #: or None, "groups": [{"params": [torch names], "lr", "weight_decay", ...}]}
    spec: Dict[str, Any] = field(default_factory=dict, repr=False)

    def to_source(self) -> str:
        """A Python file defining ``make_optimizer(model)`` and ``make_scheduler(optimizer)``
        that rebuild this optimizer and scheduler; it imports torch only (not dualdl, not
        mxnet). See ``dualdl.port.translate_recipe`` for the whole recipe."""
        from .recipe import translate_recipe
        return translate_recipe(trainer=self).source

    def write_source(self, path: Union[str, "os.PathLike[str]"]) -> str:
        """Write :meth:`to_source` to ``path`` (atomically); returns the path."""
        from .recipe import translate_recipe
        return translate_recipe(trainer=self).write(path)

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
        from .mapping import _structural_params
        out.update(_structural_params(gluon_model))    # names a report made by older dualdl used
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
            from .mapping import from_dualdl_report
            whose = ("; a bug in dualdl if the translate report was made from this gluon_model "
                     "(please report it)" if from_dualdl_report(mapping) else "")
            _fail(f"the mapping feeds torch {e.target} from Gluon {missing[0]!r}, which is not a "
                  f"parameter of this trainer" + (whose if gluon_model is not None else
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
        mapping = report.mapping if report is not None else _as_mapping(mapping)
        if not isinstance(mapping, Mapping):
            _fail(f"mapping must be None, a PortReport, a Mapping, a mapping/report JSON path or "
                  f"a dict gluon name -> torch name, not {type(mapping).__name__}")
        pairs = _pair_by_mapping(mapping, trainer, gparams, tparams, report, gluon_model)
    return pairs, tparams


def _as_mapping(mapping):
    """A Mapping from a Mapping, PortReport, TranslateReport or their JSON path
    (``dualdl.port.mapping.as_mapping``); other objects are returned unchanged."""
    rows = _translate_rows(mapping)
    try:
        from .mapping import as_mapping
    except ImportError:  # older mapping.py: read translate reports here
        as_mapping = None
    if as_mapping is not None and (rows is not None or isinstance(mapping, (str, os.PathLike))):
        return as_mapping(mapping)
    if rows is not None:
        return _mapping_from_rows(rows)
    if isinstance(mapping, (str, os.PathLike)):
        from .mapping import Mapping
        return Mapping.load(mapping)
    return mapping


def _translate_rows(obj) -> Optional[List[Dict[str, Any]]]:
    """The ``mapping`` rows ({"torch", "gluon", "shape"}) of a ``dl.port.translate`` report
    (the object, or the path of its ``.report.json``); None for anything else."""
    import json
    if isinstance(obj, (str, os.PathLike)):
        try:
            with open(obj) as f:
                d = json.load(f)
        except (OSError, ValueError):
            return None
        rows = d.get("mapping") if isinstance(d, dict) else None
    elif hasattr(obj, "class_name") and isinstance(getattr(obj, "mapping", None), list):
        rows = obj.mapping
    else:
        return None
    if isinstance(rows, list) and all(isinstance(r, dict) and "torch" in r and "gluon" in r
                                      for r in rows):
        return rows
    return None


def _mapping_from_rows(rows: List[Dict[str, Any]]):
    """A translate report names each torch key's Gluon source by its structural
    (``save_parameters``) key, copied as is: every row is a ``copy`` entry."""
    from .mapping import Entry, Mapping
    entries = [Entry(target=r["torch"], shape=list(r.get("shape") or []), dtype="float32",
                     sources=[{"key": r["gluon"]}], transform="copy")
               for r in rows if r.get("gluon") and not r.get("tied_to")]
    return Mapping(entries, "gluon", "torch", ["from a dl.port.translate report"])


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


def _optimizer_spec(opt, groups, rescale: float,
                    multi_precision: bool) -> Tuple[str, Dict[str, Any], str]:
    """(class name, constructor keywords, note): a ``dualdl_torch.gluon_optim`` class or
    ``torch.optim.SGD``. The same spec builds the live optimizer and the generated source."""
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
            return "torch.optim.SGD", dict(lr=lr, weight_decay=opt.wd), \
                ("torch.optim.SGD: without momentum Gluon's rule is torch's; lr and "
                 "weight_decay are rounded to float32 as MXNet's kernel receives them")
        return "GluonSGD", dict(lr=lr, momentum=opt.momentum, **common), ""
    if name == "nag":
        return "GluonNAG", dict(lr=lr, momentum=opt.momentum, **common), ""
    if name == "adam":
        return "GluonAdam", dict(lr=lr, betas=(opt.beta1, opt.beta2), eps=opt.epsilon,
                                 **common), ""
    if name == "rmsprop":
        return "GluonRMSProp", dict(lr=lr, gamma1=opt.gamma1, gamma2=opt.gamma2,
                                    eps=opt.epsilon, centered=opt.centered,
                                    clip_weights=opt.clip_weights, **common), ""
    if name == "bertadam":
        return "GluonBERTAdam", dict(lr=lr, betas=(opt.beta1, opt.beta2), eps=opt.epsilon,
                                     **common), ""
    if name == "adagrad":
        return "GluonAdaGrad", dict(lr=lr, eps=opt.float_stable_eps, **common), ""
    _fail(f"Gluon optimizer {type(opt).__name__!r} ({type(opt).__module__}) has no translation; "
          f"supported: sgd, nag, adam, rmsprop (plain and centered), adagrad, bertadam (gluonnlp) - "
          f"MXNet 1.9.1 registers no 'adamw'")


def _build_optimizer(spec: Tuple[str, Dict[str, Any]], groups: List[dict]):
    import torch
    from dualdl_torch import gluon_optim as G
    cls_name, kwargs = spec
    cls = torch.optim.SGD if cls_name == "torch.optim.SGD" else getattr(G, cls_name)
    return cls(groups, **kwargs)


def _is_gluoncv(sched) -> bool:
    """gluon-cv's LRScheduler / LRSequential (gluoncv/utils/lr_scheduler.py), however imported."""
    if type(sched).__name__ == "LRSequential" and hasattr(sched, "schedulers"):
        return True
    return all(hasattr(sched, a) for a in ("mode", "niters", "offset", "step_factor", "target_lr"))


def _gluoncv_pieces(sched) -> List[Dict[str, Any]]:
    parts = list(sched.schedulers) if type(sched).__name__ == "LRSequential" else [sched]
    pieces = []
    for p in parts:
        if not _is_gluoncv(p) or type(p).__name__ == "LRSequential":
            _fail(f"gluon-cv LRSequential holds a {type(p).__name__}; only gluon-cv LRScheduler "
                  f"pieces translate")
        if p.mode not in ("constant", "step", "linear", "poly", "cosine"):
            _fail(f"gluon-cv LRScheduler mode {p.mode!r} has no translation")
        if p.niters < 1 or (p.niters == 1 and p.mode in ("linear", "poly", "cosine")):
            _fail(f"gluon-cv LRScheduler({p.mode!r}) has niters={p.niters}: gluon-cv divides by "
                  f"niters - 1; give nepochs*iters_per_epoch (or niters) of at least 2")
        pieces.append(dict(mode=p.mode, base_lr=p.base_lr, target_lr=p.target_lr,
                           niters=int(p.niters), offset=int(p.offset), power=p.power,
                           step=None if p.step is None else [int(s) for s in p.step],
                           step_factor=p.step_factor))
    return pieces


def _scheduler_spec(sched) -> Optional[Tuple[str, Dict[str, Any]]]:
    """(class name in ``dualdl_torch.gluon_optim``, keywords after the optimizer) or None."""
    if sched is None:
        return None
    kind = type(sched).__name__
    mod = type(sched).__module__
    if _is_gluoncv(sched):
        return "GluonCVLR", dict(pieces=_gluoncv_pieces(sched))
    warm = dict(warmup_steps=sched.warmup_steps, warmup_begin_lr=sched.warmup_begin_lr,
                warmup_mode=sched.warmup_mode, warmup_final_lr=sched.warmup_final_lr)
    supported = ("supported: mxnet's FactorScheduler, MultiFactorScheduler, PolyScheduler, "
                 "CosineScheduler, and gluon-cv's LRScheduler / LRSequential")
    if not mod.startswith("mxnet"):
        _fail(f"lr scheduler {kind} ({mod}) has no translation; {supported}")
    if kind == "FactorScheduler":
        if sched.count != 0:
            _fail("the FactorScheduler has already been used (count != 0); pass a fresh one")
        return "GluonFactorLR", dict(step=sched.step, factor=sched.factor,
                                     stop_factor_lr=sched.stop_factor_lr, base_lr=sched.base_lr,
                                     **warm)
    if kind == "MultiFactorScheduler":
        if sched.cur_step_ind != 0:
            _fail("the MultiFactorScheduler has already been used; pass a fresh one")
        return "GluonMultiFactorLR", dict(step=list(sched.step), factor=sched.factor,
                                          base_lr=sched.base_lr, **warm)
    if kind == "PolyScheduler":
        return "GluonPolyLR", dict(max_update=sched.max_update, base_lr=sched.base_lr,
                                   pwr=sched.power, final_lr=sched.final_lr,
                                   base_lr_orig=sched.base_lr_orig, **warm)
    if kind == "CosineScheduler":
        return "GluonCosineLR", dict(max_update=sched.max_update, base_lr=sched.base_lr,
                                     final_lr=sched.final_lr, base_lr_orig=sched.base_lr_orig,
                                     **warm)
    _fail(f"lr scheduler {kind} has no translation; {supported}")


def _build_scheduler(spec: Optional[Tuple[str, Dict[str, Any]]], optimizer):
    if spec is None:
        return None
    from dualdl_torch import gluon_optim as G
    return getattr(G, spec[0])(optimizer, **spec[1])


def _base_lr(opt) -> float:
    """The lr the param groups start from (the schedule then sets each step's)."""
    sched = opt.lr_scheduler
    if sched is None:
        return opt.learning_rate
    if _is_gluoncv(sched):
        return _build_lr_probe(sched)
    return sched.base_lr


def _build_lr_probe(sched) -> float:
    import copy
    return float(copy.deepcopy(sched)(1))


def translate_trainer(gluon_trainer: Any, torch_model: Any,
                      mapping: Union[None, Dict[Any, Any], Any, str, "os.PathLike[str]"] = None,
                      *, gluon_model: Any = None) -> TrainerTranslation:
    """A torch optimizer (and LR scheduler) that updates ``torch_model`` as ``gluon_trainer``
    updates its Gluon twin. Call it before the trainer's first step.

    ``mapping`` pairs Gluon and torch parameters: ``None`` (same architecture: ``gluon_model``'s
    parameters and ``torch_model``'s in declaration order, shapes checked), a ``dualdl.port``
    report or ``Mapping`` (or the path of a saved one; give ``gluon_model`` to resolve its
    save_parameters keys; a ``dl.port.translate`` report or its JSON path works the same way),
    or a dict Gluon name/Parameter -> torch name/Parameter. ``lr_mult``/``wd_mult`` become param
    groups. ``.write_source(path)`` writes the result as a torch-only Python file.
    ``optimizer.step()`` expects ``p.grad`` from a batch-mean loss (see ``.gradient``).
    Returns a :class:`TrainerTranslation` (``optimizer, scheduler = translate_trainer(...)``).
    """
    opt = _check_trainer(gluon_trainer)
    pairs, tparams = _pairs(gluon_trainer, torch_model, mapping, gluon_model)
    if not pairs:
        _fail("the Gluon trainer updates no parameter (all have grad_req='null')")
    base_lr = _base_lr(opt)
    groups, names = _groups(pairs, tparams, base_lr, opt.wd)
    import torch
    half = any(p.dtype == torch.float16 for g in groups for p in g["params"])
    notes = []
    if half and not opt.multi_precision:
        notes.append("float16 parameters without multi_precision: updates are computed in float16 "
                     "tensor ops, not op-for-op as MXNet's kernels round (close, not bitwise)")
    rescale = float(gluon_trainer._scale)
    ospec = _optimizer_spec(opt, groups, rescale, bool(opt.multi_precision))
    why = ospec[2]
    tname = {id(p): n for n, p in tparams.items()}
    group_spec = [dict({k: v for k, v in g.items() if k != "params"},
                       params=[tname[id(p)] for p in g["params"]]) for g in groups]
    optimizer = _build_optimizer(ospec[:2], groups)
    if why:
        notes.append(why)
    import numpy as np
    dtypes = {(np.dtype(g.dtype).name, str(tparams[t].dtype).replace("torch.", "")) for g, t in pairs}
    notes += [f"Gluon parameters are {gd}, torch ones {td}: updates agree only to {td} precision"
              for gd, td in sorted(dtypes) if gd != td]
    sspec = _scheduler_spec(opt.lr_scheduler)
    scheduler = _build_scheduler(sspec, optimizer)
    untrained = [n for n in tparams if n not in {t for _, t in names}]
    gradient = (f"p.grad = gradient of the batch-MEAN loss (Gluon: sum loss + "
                f"trainer.step(batch_size)); it is multiplied by rescale_grad={rescale:g}"
                + ("; or call optimizer.step(batch_size=B) after a sum loss"
                   if hasattr(optimizer, "_hyper") else ""))
    spec = {"optimizer": ospec[:2], "scheduler": sspec, "groups": group_spec}
    return TrainerTranslation(optimizer, scheduler, names, untrained, notes, gradient, spec)
