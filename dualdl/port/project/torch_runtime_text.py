"""The text-data part of a converted project's ``gluon2torch.py`` (see
:mod:`dualdl.port.project.torch_runtime`, copied into the same file): ``gluon.contrib``'s
``WikiText2``/``WikiText103`` read from the same ``wiki.*.tokens`` files, MXNet's text
``Vocabulary`` and its token order, ``contrib.data.IntervalSampler``. Torch and numpy only.

Hides that MXNet builds the vocabulary from the segment's text (tokens split on spaces and
newlines, ``<unk>`` at 0, then the reserved tokens, then by frequency with ties by token) and
checks the files against the real dataset's sha1 (downloading otherwise): the reader here takes
the files as they are.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any, List, Optional, Sequence

import numpy as np

from .torch_runtime_train import Dataset, gluon_root


def vocab_order(counter: Any, special: List[str], most: Optional[int] = None,
                min_freq: int = 1) -> List[str]:
    """The tokens of MXNet's (and gluonnlp's) vocabularies in index order: the special tokens,
    then the counted ones by frequency, ties by token, at most ``most``, each ``>= min_freq``."""
    out = list(special)
    pairs = sorted((counter or {}).items(), key=lambda kv: kv[0])
    pairs.sort(key=lambda kv: kv[1], reverse=True)
    cap = len(set(special)) + (len(pairs) if most is None else most)
    for tok, freq in pairs:
        if freq < min_freq or len(out) == cap:
            break
        if tok not in special:
            out.append(tok)
    return out


class Vocabulary:
    """``mxnet.contrib.text.vocab.Vocabulary(counter, reserved_tokens=...)``: ``<unk>`` at 0, the
    reserved tokens, then the counted tokens by frequency (ties by token), as MXNet orders them."""

    def __init__(self, counter: Optional[Counter] = None, most_freq_count: Optional[int] = None,
                 min_freq: int = 1, unknown_token: str = "<unk>",
                 reserved_tokens: Optional[Sequence[str]] = None):
        self.unknown_token = unknown_token
        self.reserved_tokens = list(reserved_tokens or [])
        self.idx_to_token = vocab_order(counter, [unknown_token] + self.reserved_tokens,
                                        most_freq_count, min_freq)
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def to_indices(self, tokens: Any) -> Any:
        if isinstance(tokens, str):
            return self.token_to_idx.get(tokens, 0)
        return [self.token_to_idx.get(t, 0) for t in tokens]

    def to_tokens(self, indices: Any) -> Any:
        if isinstance(indices, int):
            return self.idx_to_token[indices]
        return [self.idx_to_token[i] for i in indices]


class WikiText2(Dataset):
    """``gluon.contrib.data.text.WikiText2(root, segment, vocab, seq_len)``: the same
    ``wiki.{train,valid,test}.tokens`` files from ``root`` (default ``$MXNET_HOME/datasets/
    wikitext-2``, as Gluon's; not downloaded), an ``<eos>`` after
    each line, the vocabulary built from the segment as MXNet builds it (tokens split on spaces
    and newlines), samples ``(data, label)`` of ``seq_len`` int32 ids, the label shifted by one."""
    _files = {"train": "wiki.train.tokens", "validation": "wiki.valid.tokens",
              "test": "wiki.test.tokens"}
    _name = "wikitext-2"

    def __init__(self, root: Optional[str] = None, segment: str = "train", vocab: Any = None,
                 seq_len: int = 35):
        path = os.path.join(gluon_root(root, "datasets", self._name), self._files[segment])
        if not os.path.exists(path):
            raise FileNotFoundError(f"{type(self).__name__}: {path} is missing; put the "
                                    f"dataset's {self._files[segment]} in {os.path.dirname(path)}")
        with open(path, encoding="utf8") as f:
            content = f.read()
        self._counter = Counter(t for t in re.split(" |\n", content) if t)
        self._vocab = vocab if vocab is not None else Vocabulary(self._counter,
                                                                 reserved_tokens=["<eos>"])
        lines = [ln + ["<eos>"] for ln in (x.strip().split() for x in content.splitlines()) if ln]
        ids = np.array(self._vocab.to_indices([t for ln in lines for t in ln]), dtype=np.int32)
        n = (len(ids) - 1) // seq_len * seq_len
        self._data = ids[:-1][:n].reshape(-1, seq_len)
        self._label = ids[1:][:n].reshape(-1, seq_len)

    @property
    def vocabulary(self) -> Vocabulary:
        return self._vocab

    @property
    def frequencies(self) -> Counter:
        return self._counter

    def __len__(self) -> int:
        return len(self._label)

    def __getitem__(self, i: int) -> Any:
        return self._data[i], self._label[i]


class WikiText103(WikiText2):
    _name = "wikitext-103"


class IntervalSampler:
    """``gluon.contrib.data.IntervalSampler(length, interval, rollover=True)``: ``0, interval,
    2*interval, ...`` then (rollover) ``1, 1 + interval, ...``."""

    def __init__(self, length: int, interval: int, rollover: bool = True):
        if interval > length:
            raise ValueError(f"Interval {interval} must be smaller than or equal to length "
                             f"{length}")
        self._length, self._interval, self._rollover = length, interval, rollover

    def __iter__(self):
        for i in range(self._interval if self._rollover else 1):
            yield from range(i, self._length, self._interval)

    def __len__(self) -> int:
        return self._length
