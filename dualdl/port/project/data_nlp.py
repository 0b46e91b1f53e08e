"""Synthetic text-classification data for the proof of converted gluonnlp scripts: the TSV files a
fine-tuning script reads (``sentence<TAB>label`` after a header line, and GLUE's MRPC layout), so
the Gluon script and its converted twin read the same sentences without a download.

Sentences are drawn from a small lower-case word list (some words split into wordpieces by the
BERT tokenizer's vocabulary built from the data), 3 to 12 words long (the bucket sampler sees
several lengths); the label is whether a "positive" word outnumbers a "negative" one, 20% of labels
flipped (the loss stays away from 0)."""
from __future__ import annotations

import os
from typing import List, Tuple

import numpy as np

__all__ = ["write_tsv", "sentences"]

_WORDS = ("the a dog cat sat on mat it is not very good bad film plot was great awful and but "
          "really quite story acting fine dull").split()
_POS, _NEG = {"good", "great", "fine"}, {"bad", "awful", "dull"}


def sentences(n: int, seed: int = 0) -> List[Tuple[str, int]]:
    """``n`` (sentence, label) pairs, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = [_WORDS[i] for i in rng.integers(0, len(_WORDS), int(rng.integers(3, 13)))]
        label = int(sum(w in _POS for w in words) > sum(w in _NEG for w in words))
        if rng.random() < 0.2:
            label = 1 - label
        out.append((" ".join(words), label))
    return out


def write_tsv(root: str, train: int = 64, dev: int = 16, seed: int = 0) -> None:
    """``root/train.tsv`` and ``root/dev.tsv``: ``sentence<TAB>label`` with a header line."""
    os.makedirs(root, exist_ok=True)
    for name, n, s in (("train.tsv", train, seed), ("dev.tsv", dev, seed + 1)):
        with open(os.path.join(root, name), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{text}\t{label}\n" for text, label in sentences(n, s))


#: the environment variable that shrinks a zoo model for a proof at small size, on both sides:
#: JSON ``{"<model name>": {hyper-parameters}, "BERTClassifier": {"dropout": 0.0}}`` (read by
#: zoo_nlp when translating, by the Gluon run's hook and by the torch BERTClassifier)
OVERRIDE = "DUALDL_ZOO_OVERRIDE"


def override() -> dict:
    import json
    return json.loads(os.environ.get(OVERRIDE) or "{}")


def write_glue_mrpc(root: str, seed: int = 0, train: int = 64, dev: int = 16, test: int = 8,
                    dataset: str = "book_corpus_wiki_en_uncased",
                    bert_model: str = "bert_12_768_12") -> None:
    """A synthetic MRPC where gluonnlp reads it under ``root`` (the proof's ``$MXNET_HOME``):
    ``datasets/glue_mrpc/{train,dev,test}.tsv`` (and the raw files GlueMRPC checks), the cached
    vocabulary of ``dataset`` over the data's words (``models/<dataset>-<hash>.vocab``), and
    ``bert.params``: ``bert_model``'s weights (random, shrunk by ``DUALDL_ZOO_OVERRIDE``) for the
    script's ``--pretrained_bert_parameters`` (a pretrained download otherwise)."""
    import mxnet as mx
    import gluonnlp as nlp
    from gluonnlp.data.utils import _get_vocab_tokenizer_info
    folder = os.path.join(root, "datasets", "glue_mrpc")
    os.makedirs(folder, exist_ok=True)
    words = set()
    for name, n, s in (("train", train, seed), ("dev", dev, seed + 1), ("test", test, seed + 2)):
        a, b = sentences(n, s), sentences(n, s + 10)
        head = "index" if name == "test" else "Quality"
        lines = [f"{head}\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i, ((x, la), (y, _)) in enumerate(zip(a, b)):
            words.update(x.split() + y.split())
            lines.append("\t".join([str(i) if name == "test" else str(la), str(2 * i),
                                    str(2 * i + 1), x, y]))
        for fname in (f"{name}.tsv",) + ((f"msr_paraphrase_{name}.txt",) if name != "dev" else ()):
            with open(os.path.join(folder, fname), "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    models = os.path.join(root, "models")
    os.makedirs(models, exist_ok=True)
    vocab = nlp.vocab.BERTVocab(nlp.data.count_tokens(sorted(words)))
    fname, ext, _, _ = _get_vocab_tokenizer_info(dataset, models)
    with open(os.path.join(models, fname + ext), "w", encoding="utf-8") as f:
        f.write(vocab.to_json())
    mx.random.seed(seed)
    kw = dict(override().get(bert_model, {}))
    kw = dict(kw, hparam_allow_override=True) if kw else kw
    bert, _ = nlp.model.get_model(bert_model, dataset_name=None, vocab=vocab, pretrained=False,
                                  use_pooler=True, use_decoder=False, use_classifier=False, **kw)
    bert.initialize(mx.init.Normal(0.02))
    bert(mx.nd.ones((1, 4)), mx.nd.zeros((1, 4)), mx.nd.array([4]))
    bert.save_parameters(os.path.join(root, "bert.params"))


def _gluon_hook(rec: dict, state: dict) -> None:
    """In the Gluon run: the proof folder's files stand for gluonnlp's downloads (their sha1 is
    not the real data's), ``clip_grad_global_norm`` records the norm before clipping
    (``{update}/clipnorm``), and ``DUALDL_ZOO_OVERRIDE`` shrinks the zoo models it names."""
    import gluonnlp
    from gluonnlp.data import glue
    from gluonnlp.data import utils as nlp_utils
    from gluonnlp.model import bert as nlp_bert
    here = os.path.abspath(os.getcwd())

    def local(real):
        def check(path, *a, **kw):
            return os.path.abspath(path).startswith(here + os.sep) or real(path, *a, **kw)
        return check
    glue.check_sha1 = local(glue.check_sha1)
    nlp_utils.check_sha1 = local(nlp_utils.check_sha1)
    real_download = glue.download

    def download(url, path=None, *a, **kw):
        return path if path and os.path.exists(path) else real_download(url, path, *a, **kw)
    glue.download = download
    real_clip = gluonnlp.utils.clip_grad_global_norm

    def clip_grad_global_norm(parameters, max_norm, check_isfinite=True):
        norm = real_clip(parameters, max_norm, check_isfinite)      # the norm before clipping
        value = norm.asnumpy() if hasattr(norm, "asnumpy") else norm     # NDArray (1,) or float
        rec[f"{state['n']}/clipnorm"] = np.float64(np.asarray(value, np.float64).reshape(-1)[0])
        return norm
    gluonnlp.utils.clip_grad_global_norm = clip_grad_global_norm
    ov = override()
    if not ov:
        return
    real_get = nlp_bert.get_bert_model

    def get_bert_model(model_name=None, *a, **kw):
        if model_name in ov:
            kw = dict(kw, hparam_allow_override=True, **ov[model_name])
        return real_get(model_name, *a, **kw)
    nlp_bert.get_bert_model = get_bert_model
    for head in ("BERTClassifier", "RoBERTaClassifier"):
        if head in ov:
            cls = getattr(gluonnlp.model, head)

            def init(self, *a, _real=cls.__init__, _over=ov[head], **kw):
                _real(self, *a, **dict(kw, **_over))
            cls.__init__ = init


def _register() -> None:
    from .proof_data import register_gluon_hook, register_writer
    register_writer("tsv", lambda root, seed=0, train=64, dev=16: write_tsv(root, train, dev, seed),
                    ("data",), help="train=64, dev=16 (sentence<TAB>label rows)")
    register_writer("glue_mrpc", write_glue_mrpc, (".",),
                    help="train=64, dev=16, test=8, dataset=book_corpus_wiki_en_uncased, "
                         "bert_model=bert_12_768_12")
    register_gluon_hook(_gluon_hook)


_register()
