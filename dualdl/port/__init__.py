"""Porting native Gluon models to PyTorch (and back), with proof.

``report = dualdl.port.port_gluon_to_torch(gluon_block, torch_module, sample_inputs)`` pairs
tensors by the execution order of their layers on the sample input, then by role and shape,
applies explicit rules for what pairing cannot see, loads the target only if everything paired,
and verifies the outputs. See docs/porting.md. Importing this package imports no framework.
"""
from .api import PortReport, port, port_gluon_to_torch, port_torch_to_gluon
from .inputs import PortInputError
from .gluoncv_compat import import_gluoncv
from .mapping import Entry, Mapping, MappingError, as_mapping, register_transform
from .rules import (DEFAULT_RULES, FoldConvBias, Fused, Ignore, Rename, Rule, Transpose,
                    ZeroMissingBias)
from .recipe import Recipe, RecipeError, translate_recipe
from .sides import PortWarning
from .trainer_translate import TrainerTranslation, TrainerTranslationError, translate_trainer
from .translate import TranslateReport, TranslationError, register_translation, translate

__all__ = ["port", "port_gluon_to_torch", "port_torch_to_gluon", "PortReport", "Mapping", "Entry",
           "register_transform", "Rule", "Fused", "Transpose", "Rename", "Ignore", "FoldConvBias",
           "ZeroMissingBias", "DEFAULT_RULES", "PortWarning", "PortInputError",
           "translate", "TranslateReport", "TranslationError", "register_translation",
           "translate_trainer", "TrainerTranslation", "TrainerTranslationError",
           "translate_recipe", "Recipe", "RecipeError", "as_mapping", "MappingError", "import_gluoncv"]
