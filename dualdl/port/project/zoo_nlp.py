"""gluonnlp's model zoo for :mod:`dualdl.port.project.zoo`: ``gluonnlp.model.get_model(name, ...)``
(BERT and RoBERTa encoders) translated at conversion time.

Hides that the vocabulary is a run-time object: it decides only the word embedding's rows and is
what ``get_model`` returns beside the model. The configuration is translated with a placeholder
vocabulary (``pretrained=False``); the converted call's ``nlp_zoo_result``
(:mod:`dualdl.port.project.torch_runtime_nlp`) gives the embedding ``len(vocab)`` rows and returns
``(model, vocab)``. ``vocab``, ``dataset_name``, ``pretrained`` and the download options are not
part of the configuration (they load data, not architecture).
"""
from __future__ import annotations

from typing import Any, List

from .zoo import ZooEntry, register_zoo

__all__ = ["PLACEHOLDER_VOCAB", "RUNTIME_ARGS"]

#: tokens of the placeholder vocabulary the configuration is translated with
PLACEHOLDER_VOCAB = 24
#: get_model arguments that load data or place the model, not its architecture
RUNTIME_ARGS = ("ctx", "root", "vocab", "dataset_name", "pretrained", "pretrained_allow_missing",
                "ignore_extra")


def _build(name: str, **kwargs: Any) -> Any:
    """The Gluon model of a ``get_model`` configuration (random weights, placeholder vocabulary)."""
    import gluonnlp as nlp
    if kwargs.get("use_decoder", True):
        raise ValueError("use_decoder=True ties the decoder to the vocabulary and has no "
                         "translation here; call get_model(..., use_decoder=False)")
    from .data_nlp import override
    if override().get(name):           # a proof at small size (DUALDL_ZOO_OVERRIDE)
        kwargs = dict(kwargs, hparam_allow_override=True, **override()[name])
    vocab = nlp.vocab.BERTVocab(nlp.data.count_tokens([f"w{i}" for i in range(PLACEHOLDER_VOCAB)]))
    model, _ = nlp.model.get_model(name, dataset_name=None, vocab=vocab, pretrained=False, **kwargs)
    return model, {"vocab_size": len(vocab)}


def _sample(block: Any, args: tuple, kwargs: dict) -> List[Any]:
    """Token ids, token types and valid lengths (2 sequences of 9; RoBERTa: no token types)."""
    import numpy as np
    rng = np.random.default_rng(0)
    ids = rng.integers(0, PLACEHOLDER_VOCAB, (2, 9)).astype(np.float32)
    valid = np.array([5, 9], np.float32)
    if "roberta" in str(args[0] if args else kwargs.get("name", "")):
        return [ids, valid]
    return [ids, rng.integers(0, 2, (2, 9)).astype(np.float32), valid]


register_zoo("gluonnlp.model.get_model",
             ZooEntry(_build, _sample, ignore=RUNTIME_ARGS, returns="nlp_zoo_result"))
