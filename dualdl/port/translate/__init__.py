"""Translate a native Gluon block into readable PyTorch source, its weights and the proof.

``report = dualdl.port.translate(block, sample_inputs, out_dir)`` writes ``<name>.py`` (imports
only torch), ``<name>.safetensors`` (its ``state_dict``) and ``<name>.report.json`` (the mapping
and the checks). See docs/translate.md. Importing this package imports no framework.
"""
from .api import TranslateReport, translate
from .errors import TranslationError
from .registry import Call, Leaf, Step, register_translation

__all__ = ["translate", "TranslateReport", "TranslationError", "register_translation", "Leaf", "Step", "Call"]
