"""The gluonnlp half of a converted project's ``gluon2torch.py`` (copied there with
:mod:`dualdl.port.project.torch_runtime`): the BERT fine-tuning pieces a gluonnlp script names, in
torch, numpy and the standard library only.

What it hides: gluonnlp's ``Vocab``/``BERTVocab`` index order (unknown token, the special tokens,
then the counter by frequency, ties alphabetical), its BERT tokenizer (basic: control characters
out, CJK and punctuation split, lower case without accents; then greedy longest-match wordpieces),
``BERTSentenceTransform``'s ``[CLS] a [SEP] b [SEP]`` ids (int32, as gluonnlp's), and the model
zoo: ``get_model`` builds the torch translation ``dualdl convert-project`` wrote beside this file
(``dualdl_models/``, by :mod:`dualdl.port.project.zoo` and ``zoo_nlp``) under Gluon's parameter
names, and ``BERTClassifier`` is gluonnlp's head (dropout, ``Dense``).
"""
from __future__ import annotations

import collections
import json
import os
import unicodedata
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from .torch_runtime import Dense, Dropout, Sequential
from ..recipe.torch_src.metrics import F1, Accuracy, CompositeEvalMetric
from ..recipe.torch_src.clip import clip_grad_global_norm
from .torch_runtime_text import vocab_order
from .torch_runtime_train import _RECORDER, Dataset, _float64, copy_by_key, gluon_root


# ----------------------------------------------------------------------------- vocabulary
def count_tokens(tokens: Sequence[str], to_lower: bool = False,
                 counter: Optional[collections.Counter] = None) -> collections.Counter:
    """``gluonnlp.data.count_tokens``."""
    counter = counter if counter is not None else collections.Counter()
    counter.update(t.lower() for t in tokens) if to_lower else counter.update(tokens)
    return counter


class Vocab:
    """``gluonnlp.Vocab``: index 0 the unknown token, then the special tokens (other ``*_token``
    keywords in the order given, then padding, bos, eos), the reserved tokens, then the counter's
    tokens (``vocab_order``); an unknown token looks up as the unknown token's index."""
    _defaults = dict(unknown_token="<unk>", padding_token="<pad>", bos_token="<bos>",
                     eos_token="<eos>")

    def __init__(self, counter: Optional[dict] = None, max_size: Optional[int] = None,
                 min_freq: int = 1, reserved_tokens: Optional[List[str]] = None, **tokens: Any):
        base = ("padding_token", "bos_token", "eos_token")      # gluonnlp adds these last
        specials = dict(self._defaults, **tokens)
        specials = dict([(k, v) for k, v in specials.items() if k not in base] +
                        [(k, specials[k]) for k in base])
        unk = specials.pop("unknown_token")
        self.unknown_token = unk
        order = [v for v in specials.values() if v is not None]
        for name, value in specials.items():
            setattr(self, name, value)
        special = ([unk] if unk else []) + list(dict.fromkeys(order)) + list(reserved_tokens or [])
        self.idx_to_token: List[str] = vocab_order(counter, special, max_size or None, min_freq)
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __contains__(self, token: str) -> bool:
        return token in self.token_to_idx

    def __getitem__(self, tokens: Any) -> Any:
        if isinstance(tokens, (list, tuple)):
            return [self[t] for t in tokens]
        if tokens in self.token_to_idx:
            return self.token_to_idx[tokens]
        if not self.unknown_token:
            raise KeyError(f"token {tokens!r} is not in the vocabulary and it has no unknown token")
        return self.token_to_idx[self.unknown_token]

    def to_indices(self, tokens: Any) -> Any:
        return self[tokens]

    def to_tokens(self, indices: Any) -> Any:
        if isinstance(indices, (list, tuple)):
            return [self.idx_to_token[int(i)] for i in indices]
        return self.idx_to_token[int(indices)]

    def to_json(self) -> str:
        return json.dumps({"idx_to_token": self.idx_to_token})


class BERTVocab(Vocab):
    """``gluonnlp.vocab.BERTVocab``: ``[UNK]``, ``[PAD]``, ``[CLS]``, ``[SEP]``, ``[MASK]``."""
    _defaults = dict(unknown_token="[UNK]", padding_token="[PAD]", bos_token=None, eos_token=None,
                     cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")


# ----------------------------------------------------------------------------- tokenizer
def _is_whitespace(c: str) -> bool:
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _is_control(c: str) -> bool:
    return c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf")


def _is_punctuation(c: str) -> bool:
    cp = ord(c)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or
            unicodedata.category(c).startswith("P"))


def _is_cjk(cp: int) -> bool:
    return any(a <= cp <= b for a, b in ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                         (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
                                         (0x2B820, 0x2CEAF), (0xF900, 0xFAFF),
                                         (0x2F800, 0x2FA1F)))


class BERTBasicTokenizer:
    """gluonnlp's ``BERTBasicTokenizer(lower)``."""

    def __init__(self, lower: bool = True):
        self.lower = lower

    def __call__(self, text: str) -> List[str]:
        chars = []
        for c in text:
            if ord(c) in (0, 0xFFFD) or _is_control(c):
                continue
            if _is_cjk(ord(c)):
                chars += [" ", c, " "]
            else:
                chars.append(" " if _is_whitespace(c) else c)
        out: List[str] = []
        for tok in "".join(chars).split():
            if self.lower:
                tok = "".join(c for c in unicodedata.normalize("NFD", tok.lower())
                              if unicodedata.category(c) != "Mn")
            word = ""
            for c in tok:
                if _is_punctuation(c):
                    out += [word] if word else []
                    out.append(c)
                    word = ""
                else:
                    word += c
            out += [word] if word else []
        return out


class BERTTokenizer:
    """``gluonnlp.data.BERTTokenizer(vocab, lower)``: the basic tokenizer, then greedy
    longest-match-first wordpieces (``##`` continues a word; a word with none: the unknown)."""

    def __init__(self, vocab: Vocab, lower: bool = True, max_input_chars_per_word: int = 200,
                 **_: Any):
        self.vocab, self.max_chars = vocab, max_input_chars_per_word
        self.basic_tokenizer = BERTBasicTokenizer(lower)

    def _wordpiece(self, word: str) -> List[str]:
        if len(word) > self.max_chars:
            return [self.vocab.unknown_token]
        pieces, start = [], 0
        while start < len(word):
            end, cur = len(word), None
            while start < end:
                sub = ("##" if start > 0 else "") + word[start:end]
                if sub in self.vocab:
                    cur = sub
                    break
                end -= 1
            if cur is None:
                return [self.vocab.unknown_token]
            pieces.append(cur)
            start = end
        return pieces

    def __call__(self, text: str) -> List[str]:
        return [p for w in self.basic_tokenizer(text) for p in self._wordpiece(w)]

    def convert_tokens_to_ids(self, tokens: List[str]) -> List[int]:
        return self.vocab[tokens]


class BERTSentenceTransform:
    """``gluonnlp.data.BERTSentenceTransform(tokenizer, max_seq_length, vocab, pad, pair)``:
    ``(input_ids, valid_length, segment_ids)`` as int32 arrays."""

    def __init__(self, tokenizer: BERTTokenizer, max_seq_length: int, vocab: Any = None,
                 pad: bool = True, pair: bool = True):
        self._tok, self._max, self._pad, self._pair = tokenizer, max_seq_length, pad, pair
        self._vocab = tokenizer.vocab if vocab is None else vocab

    def __call__(self, line: Sequence[str]) -> tuple:
        a = self._tok(line[0])
        b = self._tok(line[1]) if self._pair else None
        if b:
            while len(a) + len(b) > self._max - 3:
                (a if len(a) > len(b) else b).pop()
        elif len(a) > self._max - 2:
            a = a[:self._max - 2]
        v = self._vocab
        cls = getattr(v, "cls_token", None) or v.bos_token
        sep = getattr(v, "sep_token", None) or v.eos_token
        tokens = [cls] + a + [sep]
        seg = [0] * len(tokens)
        if b:
            tokens += b + [sep]
            seg += [1] * (len(b) + 1)
        ids = v[tokens]
        n = len(ids)
        if self._pad:
            ids += [v[v.padding_token]] * (self._max - n)
            seg += [0] * (self._max - n)
        return np.array(ids, dtype="int32"), np.array(n, dtype="int32"), np.array(seg, "int32")


def truncate_seqs_equal(sequences: List[list], max_len: int) -> List[list]:
    """gluonnlp's ``truncate_seqs_equal``: sequences longer than an equal share of ``max_len``
    are cut to it (the first ones one longer for the remainder); shorter ones are kept whole and
    their unused share goes to the others."""
    lens = [len(s) for s in sequences]
    if sum(lens) <= max_len:
        return sequences
    open_ = list(range(len(lens)))
    while True:
        i = min(open_, key=lambda j: (lens[j], j))
        q, r = divmod(max_len, len(open_))
        if lens[i] <= q:
            open_.remove(i)
            max_len -= lens[i]
        else:
            for n, j in enumerate(open_):
                lens[j] = q + 1 if n < r else q
            break
    return [s[:n] for s, n in zip(sequences, lens)]


def concat_sequences(seqs: List[list], separators: List[list], seq_mask: Any = 0,
                     separator_mask: Any = 1) -> tuple:
    """gluonnlp's ``concat_sequences``: ``seq + sep`` for each pair, their segment ids (the
    pair's index) and the mask of the special tokens."""
    import itertools
    pairs = list(itertools.zip_longest(separators, seqs, fillvalue=[]))
    concat = [t for sep, seq in pairs for t in seq + sep]
    segment_ids = [i for i, (sep, seq) in enumerate(pairs) for _ in range(len(seq) + len(sep))]
    if isinstance(seq_mask, int):
        seq_mask = [[seq_mask] * len(seq) for seq in seqs]
    if isinstance(separator_mask, int):
        separator_mask = [[separator_mask] * len(sep) for sep in separators]
    p_mask = [m for _, _, sm, m_ in itertools.zip_longest(separators, seqs, seq_mask,
                                                          separator_mask, fillvalue=[])
              for m in sm + m_]
    return concat, segment_ids, p_mask


class SimpleDataset(Dataset):
    """``gluon.data.SimpleDataset(list)``."""

    def __init__(self, data: Sequence[Any]):
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, i: int) -> Any:
        return self._data[i]


def vocab_from_json(text: str) -> Vocab:
    """``Vocab.from_json`` / ``BERTVocab.from_json``: the JSON gluonnlp writes (and caches)."""
    d = json.loads(text)
    ids = d.get("identifiers_to_tokens") or {}
    v = (BERTVocab if "cls_token" in ids else Vocab).__new__(
        BERTVocab if "cls_token" in ids else Vocab)
    v.unknown_token = d.get("unknown_token")
    for name, token in ids.items():
        setattr(v, name, token)
    v.idx_to_token = list(d["idx_to_token"])
    v.token_to_idx = {t: i for i, t in enumerate(v.idx_to_token)}
    return v


def cached_vocab(dataset_name: str, root: Optional[str] = None) -> Vocab:
    """The vocabulary gluonnlp caches for a pretrained model's ``dataset_name``:
    ``$MXNET_HOME/models/<dataset_name>-<sha1 prefix>.vocab`` (JSON), the file ``get_model``
    downloads; put it there (any gluonnlp run leaves it) to use it without gluonnlp."""
    import glob
    root = gluon_root(root, "models")
    found = sorted(glob.glob(os.path.join(root, f"{dataset_name}-*.vocab")))
    if not found:
        raise FileNotFoundError(f"the vocabulary of {dataset_name!r} is a gluonnlp download: put "
                                f"its cached file ({dataset_name}-<hash>.vocab) in {root}, or "
                                f"build a vocabulary and pass vocab=")
    with open(found[-1], encoding="utf-8") as f:
        return vocab_from_json(f.read())


# ----------------------------------------------------------------------------- GLUE tasks
class TSVDataset(SimpleDataset):
    """``gluonnlp.data.TSVDataset(path, num_discard_samples, field_indices)``: tab-split lines."""

    def __init__(self, path: str, num_discard_samples: int = 0,
                 field_indices: Optional[List[int]] = None, encoding: str = "utf8"):
        with open(path, encoding=encoding) as f:
            lines = f.read().splitlines()[num_discard_samples:]
        rows = [ln.split("\t") for ln in lines]
        super().__init__([[r[i] for i in field_indices] if field_indices else r for r in rows])


class GlueTask:
    """A GLUE task of ``gluonnlp.data.classification.get_task``: its labels, metrics, whether it
    is a sentence pair, and its segments read from the files gluonnlp's Glue datasets write
    (``$MXNET_HOME/datasets/glue_<task>/<segment>.tsv``)."""

    def __init__(self, folder: str, class_labels: Optional[List[str]], metrics: Any,
                 is_pair: bool, fields: Dict[str, List[int]], label_alias: Any = None):
        self.class_labels, self.metrics, self.is_pair = class_labels, metrics, is_pair
        self.label_alias, self._folder, self._fields = label_alias, folder, fields

    def get_dataset(self, segment: str = "train") -> TSVDataset:
        root = gluon_root(None, "datasets", self._folder)
        path = os.path.join(root, f"{segment}.tsv")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing: GLUE data is a gluonnlp download; run the "
                                    f"Gluon script once (it writes that file) or put it there")
        return TSVDataset(path, num_discard_samples=1, field_indices=self._fields[segment])

    def dataset_train(self) -> tuple:
        return "train", self.get_dataset("train")

    def dataset_dev(self) -> tuple:
        return "dev", self.get_dataset("dev")

    def dataset_test(self) -> tuple:
        return "test", self.get_dataset("test")


def get_task(name: str) -> GlueTask:
    """``gluonnlp.data.classification.get_task``: MRPC (accuracy + micro F1, sentence pairs)."""
    if name.upper() != "MRPC":
        raise ValueError(f"GLUE task {name!r} has no torch twin here (MRPC has); read its TSV "
                         f"files with TSVDataset and give the task's labels and metrics")
    metric = CompositeEvalMetric()
    metric.add(Accuracy())
    metric.add(F1(average="micro"))
    return GlueTask("glue_mrpc", ["0", "1"], metric, True,
                    {"train": [3, 4, 0], "dev": [3, 4, 0], "test": [3, 4]})


def nlp_clip_grad_global_norm(parameters: Any, max_norm: float,
                              check_isfinite: bool = True) -> float:
    """gluonnlp's ``utils.clip_grad_global_norm`` (the recipe's torch twin: divided by
    ``max(1, norm / max_norm)``, no epsilon); the proof records the norm before clipping
    (``{update}/clipnorm``, as the Gluon run's hook does): with the clipped gradients it proves
    the gradients before clipping."""
    norm = clip_grad_global_norm(parameters, max_norm, check_isfinite)
    if _RECORDER.path:
        _RECORDER.rec[f"{_RECORDER.n}/clipnorm"] = np.float64(norm)
    return norm


# ----------------------------------------------------------------------------- Gluon checkpoints
_DTYPES = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8", 6: "int64"}


def read_gluon_params(path: str) -> Dict[str, np.ndarray]:
    """The arrays of a Gluon ``.params`` file (``save_parameters``: MXNet's NDArray list, dense
    arrays, format versions 1-3) by name, in numpy."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    pos = [0]

    def take(fmt: str) -> tuple:
        out = struct.unpack_from("<" + fmt, data, pos[0])
        pos[0] += struct.calcsize("<" + fmt)
        return out
    if len(data) < 24 or take("QQ")[0] != 0x112:
        raise ValueError(f"{path} is not a Gluon .params file (no MXNet NDArray list magic)")
    arrays = []
    for _ in range(take("Q")[0]):
        magic, = take("I")
        if magic != 0xF993FAC8 and take("i")[0] != 0:
            raise ValueError(f"{path}: a sparse array; save it dense")
        ndim, = take("i")
        shape = take("q" * ndim)
        if ndim == 0 and magic != 0xF993FACA:
            arrays.append(np.zeros((0,), np.float32))
            continue
        take("ii")
        dtype = np.dtype(_DTYPES[take("i")[0]])
        n = int(np.prod(shape)) * dtype.itemsize
        arrays.append(np.frombuffer(data, dtype, int(np.prod(shape)), pos[0]).reshape(shape).copy())
        pos[0] += n
    names = []
    for _ in range(take("Q")[0]):
        ln, = take("Q")
        names.append(data[pos[0]:pos[0] + ln].decode("utf-8"))
        pos[0] += ln
    return {n.split(":", 1)[-1]: a for n, a in zip(names or map(str, range(len(arrays))), arrays)}


def load_gluon_parameters(block: nn.Module, filename: str, ctx: Any = None,
                          allow_missing: bool = False, ignore_extra: bool = False,
                          cast_dtype: bool = False, **_: Any) -> None:
    """``block.load_parameters`` / ``nlp.utils.load_parameters`` of a Gluon ``.params`` file (or
    a file this project saved) into a block whose state_dict keys are Gluon's names."""
    with open(filename, "rb") as f:
        gluon = f.read(8) == (0x112).to_bytes(8, "little")
    if not gluon:
        block.load_state_dict(torch.load(filename, map_location="cpu"), strict=not allow_missing)
        return
    copy_by_key(block.state_dict(keep_vars=True), read_gluon_params(filename), filename,
                allow_missing, ignore_extra)


# ----------------------------------------------------------------------------- the model zoo
def nlp_zoo_result(model: nn.Module, extra: Dict[str, Any], args: tuple, kwargs: dict) -> tuple:
    """What ``gluonnlp.model.get_model(name, vocab=vocab, pretrained=False, ...)`` returns for the
    configuration ``convert-project`` translated: ``(model, vocab)``, the word embedding with
    ``len(vocab)`` rows (the translation used a placeholder vocabulary)."""
    name = args[0] if args else kwargs.get("name")
    if kwargs.get("pretrained", True):
        raise ValueError(f"get_model({name!r}, pretrained=True) needs gluonnlp's pretrained "
                         f"weights (a download): convert them with `dualdl convert` and "
                         f"load_state_dict, and call get_model(..., pretrained=False)")
    vocab = kwargs.get("vocab")
    if kwargs.get("dataset_name"):      # gluonnlp: the dataset's vocabulary wins over vocab=
        vocab = cached_vocab(kwargs["dataset_name"], kwargs.get("root"))
    if vocab is None:
        raise ValueError(f"get_model({name!r}) without vocab= needs gluonnlp's vocabulary "
                         f"download (dataset_name=); build the vocabulary and pass vocab=")
    old = model.word_embed[0]
    if old.num_embeddings != len(vocab):
        model.word_embed[0] = type(old)(len(vocab), old.embedding_dim)
    if _float64():
        model.double()
    return model, vocab


def _load_arrays(model: nn.Module, prefix: str) -> None:
    """``GLUON2TORCH_LOAD``'s arrays (the proof's initial weights, Gluon's keys) under ``prefix``
    into ``model`` (a sub-block: ``initialize`` loads the block it is given by its own keys)."""
    path = os.environ.get("GLUON2TORCH_LOAD")
    if not path or not os.path.exists(path):
        return
    with np.load(path) as arrays, torch.no_grad():
        names = set(arrays.files)
        for k, t in model.state_dict(keep_vars=True).items():
            a = arrays[prefix + k] if prefix + k in names else None     # one read of the .npz
            if a is not None and tuple(a.shape) == tuple(t.shape):
                t.copy_(torch.from_numpy(a))


class _Head(nn.Module):
    """A gluonnlp classifier over a zoo encoder (``self.<encoder>`` and ``self.classifier``, Gluon's
    names): ``DUALDL_ZOO_OVERRIDE``'s dropout for its class, and in the proof the encoder's and
    then the lazy head's initial weights from ``GLUON2TORCH_LOAD`` (the script initialises only
    the head, by its own names)."""
    _encoder = ""

    def _dropout(self, dropout: float) -> float:
        over = json.loads(os.environ.get("DUALDL_ZOO_OVERRIDE") or "{}")
        return float(over.get(type(self).__name__, {}).get("dropout", dropout))

    def _attach(self, encoder: nn.Module, layers: List[nn.Module]) -> None:
        setattr(self, self._encoder, encoder)
        self.classifier = Sequential()
        self.classifier.add(*layers)
        self._loaded = False
        if _float64():
            encoder.double()
        _load_arrays(encoder, self._encoder + ".")

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        if not self._loaded and os.environ.get("GLUON2TORCH_LOAD"):
            self._loaded = True            # materialise the lazy head, then the proof's weights
            with torch.no_grad():
                self.classifier(x)
            if _float64():
                self.classifier.double()
            _load_arrays(self.classifier, "classifier.")
        return self.classifier(x)


class BERTClassifier(_Head):
    """``gluonnlp.model.BERTClassifier(bert, num_classes, dropout)``: the pooled output through
    ``Dropout`` and ``Dense(num_classes, flatten=False)`` (``classifier.1.weight``)."""
    _encoder = "bert"

    def __init__(self, bert: nn.Module, num_classes: int = 2, dropout: float = 0.0, **_: Any):
        super().__init__()
        dropout = self._dropout(dropout)
        self._attach(bert, ([Dropout(dropout)] if dropout else []) +
                     [Dense(num_classes, flatten=False)])

    def forward(self, inputs: torch.Tensor, token_types: torch.Tensor,
                valid_length: Optional[torch.Tensor] = None) -> torch.Tensor:
        _, pooled = self.bert(inputs, token_types, valid_length)
        return self._head(pooled)


class RoBERTaClassifier(_Head):
    """``gluonnlp.model.RoBERTaClassifier(roberta, num_classes, dropout)``: the first position's
    encoding through ``Dropout``, ``Dense(units, 'tanh')``, ``Dropout``, ``Dense(num_classes)``
    (the dropouts only when ``dropout``, as Gluon's; units: the encoder's width)."""
    _encoder = "roberta"

    def __init__(self, roberta: nn.Module, num_classes: int = 2, dropout: float = 0.0, **_: Any):
        super().__init__()
        dropout = self._dropout(dropout)
        units = roberta.encoder.layer_norm.normalized_shape[0]
        drop = [Dropout(dropout)] if dropout else []
        self._attach(roberta, drop + [Dense(units, activation="tanh")] + drop +
                     [Dense(num_classes)])

    def forward(self, inputs: torch.Tensor, valid_length: Optional[torch.Tensor] = None):
        return self._head(self.roberta(inputs, valid_length)[:, 0, :])
