"""The project converter's table for gluonnlp (BERT, vocab, bucket samplers, batchify, BERTAdam):
same form as :mod:`dualdl.port.project.table` (``API``: qualified Gluon name -> replacement
expression; ``METHODS``: method name -> (kind, target); ``TODO``: prefix -> why not converted),
merged there.

``gluonnlp.model.get_model`` is a model zoo factory: ``g2t.zoo(...)`` builds the torch module
translated at conversion time (:mod:`dualdl.port.project.zoo_nlp`); the rest are the torch-only
definitions of :mod:`dualdl.port.project.torch_runtime_nlp` and the recipe's
``torch_src/nlp_data.py`` (``FixedBucketSampler`` and batchify, measured equal to gluonnlp's)."""
from __future__ import annotations

from typing import Dict, Tuple

_D = "gluonnlp.data."
_B = _D + "batchify."


def _twice(table: Dict[str, str]) -> Dict[str, str]:
    """gluonnlp exports its names from the package and from the defining module: both spellings."""
    out = dict(table)
    for full, short in (("gluonnlp.data.transforms.", _D), ("gluonnlp.data.sampler.", _D),
                        ("gluonnlp.data.utils.", _D), ("gluonnlp.data.batchify.batchify.", _B),
                        ("gluonnlp.vocab.bert.", "gluonnlp.vocab."),
                        ("gluonnlp.model.bert.", "gluonnlp.model.")):
        out.update({full + k[len(short):]: v for k, v in table.items()
                    if k.startswith(short) and "." not in k[len(short):]})
    return out


API: Dict[str, str] = _twice({
    # the model zoo and the classifier head
    "gluonnlp.model.get_model": "g2t.zoo('gluonnlp.model.get_model')",
    "gluonnlp.model.BERTClassifier": "g2t.BERTClassifier",
    "gluonnlp.model.RoBERTaClassifier": "g2t.RoBERTaClassifier",
    # vocabulary and tokenizers
    "gluonnlp.Vocab": "g2t.Vocab", "gluonnlp.vocab.Vocab": "g2t.Vocab",
    "gluonnlp.vocab.BERTVocab": "g2t.BERTVocab", _D + "count_tokens": "g2t.count_tokens",
    "gluonnlp.data.dataset.TSVDataset": "g2t.TSVDataset",
    _D + "BERTTokenizer": "g2t.BERTTokenizer", _D + "BERTBasicTokenizer": "g2t.BERTBasicTokenizer",
    _D + "BERTSentenceTransform": "g2t.BERTSentenceTransform",
    "gluonnlp.data.bert.glue.truncate_seqs_equal": "g2t.truncate_seqs_equal",
    "gluonnlp.data.bert.glue.concat_sequences": "g2t.concat_sequences",
    # datasets, samplers, batchify
    "mxnet.gluon.data.SimpleDataset": "g2t.SimpleDataset",
    _D + "SimpleDataset": "g2t.SimpleDataset",
    _D + "FixedBucketSampler": "g2t.GluonFixedBucketSampler",
    _B + "Pad": "g2t.GluonPad", _B + "Stack": "g2t.GluonStack", _B + "Tuple": "g2t.GluonTuple",
    _B + "List": "g2t.GluonList", _B + "Dict": "g2t.GluonDict",
    # clipping (the recipe's gluonnlp formula; the proof records the norm before clipping)
    "gluonnlp.utils.clip_grad_global_norm": "g2t.nlp_clip_grad_global_norm",
    # utilities
    "gluonnlp.utils.check_version": "g2t.check_version", "gluonnlp.utils.mkdir": "g2t.makedirs",
    "gluonnlp.utils.save_parameters": "g2t.save_parameters",
    "gluonnlp.utils.load_parameters": "g2t.load_gluon_parameters",
    # GLUE (the files gluonnlp's Glue datasets write under $MXNET_HOME/datasets)
    "gluonnlp.data.classification.get_task": "g2t.get_task", _D + "TSVDataset": "g2t.TSVDataset",
})
API["gluonnlp.utils.version.check_version"] = API["gluonnlp.utils.check_version"]

METHODS: Dict[str, Tuple[str, str]] = {}

TODO: Dict[str, str] = {
    "gluonnlp.data.Glue": "GLUE datasets download their data: read the TSV files yourself",
    "gluonnlp.data.GPT2BPETokenizer": "the GPT-2 BPE vocabulary is a download",
    "gluonnlp.calibration": "INT8 calibration (MKL-DNN) has no torch counterpart",
    "mxnet.contrib.amp": "MXNet AMP: use torch.autocast and torch.cuda.amp.GradScaler",
    "mxnet.contrib.quantization": "MXNet quantization has no torch translation",
    "mxnet.gluon.SymbolBlock": "an exported symbol: translate it with dualdl translate",
    "mxnet.library": "MXNet custom operator libraries have no torch counterpart",
}
