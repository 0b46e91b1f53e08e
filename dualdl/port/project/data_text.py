"""The proof's text data and its Gluon-side hooks, for word language models
(:func:`dualdl.port.project.proof.prove_scripts`).

* :func:`write_text_corpus`: a synthetic corpus in the files a word-LM script reads: WikiText's
  ``wiki.{train,valid,test}.tokens`` (``gluon.contrib.data.text.WikiText2``) and a plain
  ``{train,valid,test}.txt`` (a script's own corpus reader).
* :func:`install_gluon_hooks` (run inside the Gluon driver's process, before the script): what
  the Gluon run must do for the proof without an edit of the script: WikiText2 reads the local
  synthetic files (MXNet checks them against the real dataset's sha1 and downloads otherwise);
  ``gluon.utils.clip_global_norm`` records the norm and every array before clipping
  (``{update}/clipnorm``, ``{update}/preclip/{i}``); the outermost block call inside
  ``autograd.record()`` records its array inputs (``{update}/input/{call}.{i}``: the batch and
  the carried hidden state of a script that slices its batches itself, with no DataLoader to
  observe, then the loss block's inputs). The converted side records the same keys
  (``torch_runtime_rnn``).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List

import numpy as np

from .proof_data import register_gluon_hook, register_writer

__all__ = ["write_text_corpus", "install_gluon_hooks"]

_FILES = {"train": ("wiki.train.tokens", "train.txt"), "valid": ("wiki.valid.tokens", "valid.txt"),
          "test": ("wiki.test.tokens", "test.txt")}


def write_text_corpus(root: str, seed: int = 0, vocab: int = 50, train: int = 400,
                      valid: int = 120, test: int = 120) -> None:
    """A synthetic corpus of ``vocab - 2`` words (``w0`` ...; with ``<eos>`` and ``<unk>`` that is
    the model's vocabulary), from a Markov chain in which each word has 3 likely successors (a
    model can learn it, so the loss moves), in lines of 4-12 words under WikiText's `` = Title =``
    headings, some ``<unk>`` tokens as WikiText has; about ``train``/``valid``/``test`` words."""
    rng = np.random.default_rng(seed)
    sizes = {"train": train, "valid": valid, "test": test}
    words = [f"w{i}" for i in range(vocab - 2)]
    succ = rng.integers(0, len(words), (len(words), 3))
    os.makedirs(root, exist_ok=True)
    for seg, (wiki, plain) in _FILES.items():
        lines: List[str] = [f" = Segment {seg} = ", ""]
        n, w = 0, int(rng.integers(len(words)))
        while n < sizes[seg]:
            line = []
            for _ in range(int(rng.integers(4, 13))):
                jump = rng.random() >= 0.9
                w = int(rng.integers(len(words))) if jump else int(succ[w, rng.integers(3)])
                line.append("<unk>" if rng.random() < 0.03 else words[w])
            lines.append(" " + " ".join(line) + " ")
            n += len(line)
        text = "\n".join(lines) + "\n"
        for name in (wiki, plain):
            with open(os.path.join(root, name), "w", encoding="utf8") as f:
                f.write(text)


def install_gluon_hooks(rec: Dict[str, Any], state: Dict[str, Any]) -> None:
    """Patch MXNet in the Gluon driver's process (see the module docstring); ``state["n"]`` is
    the index of the update being recorded."""
    import mxnet as mx
    from mxnet import autograd, gluon
    from mxnet.gluon.contrib.data import text

    real_sha1 = text.check_sha1
    text.check_sha1 = lambda path, sha1: os.path.exists(path) or real_sha1(path, sha1)
    real_clip = gluon.utils.clip_global_norm

    def clip_global_norm(arrays, max_norm, check_isfinite=True):
        before = [a.asnumpy().copy() for a in arrays]
        norm = real_clip(arrays, max_norm, check_isfinite)
        s = state["n"]
        rec[f"{s}/clipnorm"] = np.float64(norm if check_isfinite else norm.asscalar())
        for i, a in enumerate(before):
            rec[f"{s}/preclip/{i}"] = a
        return norm
    gluon.utils.clip_global_norm = clip_global_norm
    real_call = gluon.Block.__call__
    depth = [0]

    calls = {"n": -1, "c": 0}

    def call(self, *args, **kwargs):
        if depth[0] == 0 and autograd.is_recording():
            s = state["n"]
            calls.update(n=s, c=calls["c"] + 1 if calls["n"] == s else 0)
            for i, a in enumerate(_arrays(args, mx.nd.NDArray)):
                rec[f"{s}/input/{calls['c']}.{i}"] = a.asnumpy().copy()
        depth[0] += 1
        try:
            return real_call(self, *args, **kwargs)
        finally:
            depth[0] -= 1
    gluon.Block.__call__ = call


def _arrays(args: Any, kind: type) -> List[Any]:
    """The arrays of a call's arguments, lists and tuples flattened in order."""
    out: List[Any] = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out += _arrays(a, kind)
        elif isinstance(a, kind):
            out.append(a)
    return out


register_writer("text", write_text_corpus, folders=("data", "datasets/wikitext-2"),
                help="vocab=50, train=400, valid=120, test=120 (words per segment)")
register_gluon_hook(install_gluon_hooks)
