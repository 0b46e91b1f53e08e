"""``translate_recipe``: the Gluon script's training recipe (optimizer + lr schedule,
initializer, metrics, vision transforms, DataLoader order) as one torch-only Python file."""
from __future__ import annotations

import os
import types
from dataclasses import dataclass, field
from typing import Any, List, Optional, Union

from .emit import RecipeError, SourceFile

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class Recipe:
    """What ``translate_recipe`` returns: the generated ``source`` (imports torch/numpy only),
    the ``parts`` it holds, and ``path`` once written."""
    source: str
    parts: List[str] = field(default_factory=list)
    names: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    path: Optional[str] = None

    def write(self, path: PathLike) -> str:
        """Write the file atomically; returns its path."""
        from ...atomic import atomic_write_file
        data = self.source.encode()
        atomic_write_file(os.fspath(path), lambda f: f.write(data))
        self.path = os.fspath(path)
        return self.path

    def load(self) -> types.ModuleType:
        """The generated module, executed in memory (what ``import`` of the written file gives)."""
        mod = types.ModuleType("gluon_recipe")
        exec(compile(self.source, self.path or "<gluon_recipe>", "exec"), mod.__dict__)
        return mod

    def summary(self) -> str:
        return "\n".join([f"recipe: {', '.join(self.parts)} -> {self.path or '(not written)'}",
                          f"  defines: {', '.join(self.names)}"] +
                         [f"  note: {n}" for n in self.notes])

    __str__ = summary


def translate_recipe(trainer: Any = None, torch_model: Any = None, mapping: Any = None, *,
                     gluon_model: Any = None, initializer: Any = None, metrics: Any = None,
                     transforms: Any = None, loader: Any = None,
                     clip_global_norm: Optional[float] = None,
                     out: Optional[PathLike] = None) -> Recipe:
    """Write a Gluon training recipe as torch-only source.

    ``trainer``: a ``gluon.Trainer`` (translated with ``translate_trainer(trainer, torch_model,
    mapping, gluon_model=)``) or what ``translate_trainer`` returned -> ``make_optimizer(model)``,
    ``make_scheduler(optimizer)``. ``initializer``: what the script passed to
    ``net.initialize`` (an ``mx.init`` object, ``Mixed`` included; needs ``gluon_model``) ->
    ``init_parameters(model)``. ``metrics``: an ``mx.metric`` (or list) -> ``make_metric()``.
    ``transforms``: a ``gluon.data.vision.transforms`` pipeline, or a dict name -> pipeline ->
    ``transform_<name>(img)``. ``loader``: a ``gluon.data.DataLoader`` ->
    ``make_batch_sampler(length)``; one with gluonnlp's ``FixedBucketSampler`` and batchify ->
    ``make_batch_sampler(lengths)``, ``make_collate()``. ``clip_global_norm``: the ``max_norm``
    the script gives gluonnlp's ``clip_grad_global_norm`` -> ``clip_gradients(model)``
    (Gluon's formula, no
    epsilon; call it between ``backward`` and ``step``). ``mapping``: the ``dl.port.translate`` report (or a
    ``dl.port`` report / Mapping / dict); without it torch names must equal Gluon's structural
    names. ``out``: also write the file there."""
    from .init import emit_init
    from .metrics import emit_metrics
    from .optimizer import emit_optimizer
    from .sampler import emit_sampler
    from .transforms import emit_transforms
    from .clip import emit_clip
    if all(x is None for x in (trainer, initializer, metrics, transforms, loader,
                               clip_global_norm)):
        raise RecipeError("translate_recipe: give at least one of trainer=, initializer=, "
                          "metrics=, transforms=, loader=, clip_global_norm=")
    sf = SourceFile("Training recipe translated from Gluon (MXNet 1.9.1) to PyTorch.")
    parts, notes = [], []
    if trainer is not None:
        if not hasattr(trainer, "spec"):
            from ..trainer_translate import translate_trainer
            if torch_model is None:
                raise RecipeError("translate_recipe(trainer=<gluon.Trainer>) needs torch_model= "
                                  "(and mapping= or gluon_model=) to pair the parameters")
            trainer = translate_trainer(trainer, torch_model, mapping, gluon_model=gluon_model)
        if not trainer.spec:
            raise RecipeError("this TrainerTranslation carries no spec; make it with "
                              "dl.port.translate_trainer")
        emit_optimizer(sf, trainer)
        parts.append("optimizer" + (" + scheduler" if trainer.spec.get("scheduler") else ""))
        notes += trainer.notes
    if initializer is not None:
        if gluon_model is None:
            raise RecipeError("initializer= needs gluon_model= (each Gluon parameter's own "
                              "initializer and shape decide its rule)")
        emit_init(sf, initializer, gluon_model, torch_model, mapping)
        parts.append("initializer")
    if metrics is not None:
        emit_metrics(sf, metrics)
        parts.append("metrics")
    if transforms is not None:
        notes += emit_transforms(sf, transforms)
        parts.append("transforms")
    if loader is not None:
        emit_sampler(sf, loader)
        parts.append("sampler")
    if clip_global_norm is not None:
        emit_clip(sf, clip_global_norm)
        parts.append("clipping")
    recipe = Recipe(sf.text(), parts, list(sf.exports), notes)
    if out is not None:
        recipe.write(out)
    return recipe
