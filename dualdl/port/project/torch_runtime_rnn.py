"""The recurrent-model part of a converted project's ``gluon2torch.py`` (see
:mod:`dualdl.port.project.torch_runtime`, copied into the same file): ``gluon.nn.Embedding``,
``gluon.rnn.LSTM``/``GRU``/``RNN``, ``gluon.utils.clip_global_norm``, ``Parameter.grad()``,
``NDArray.size`` and the WikiText datasets with their vocabulary and ``IntervalSampler``. Torch
and numpy only; ``RNN_MODES`` and ``rnn_weight_names`` are the translator's conventions
(:mod:`dualdl.port.translate.conventions`), copied into the same file.

What it hides:

* Gluon's RNN layers keep their weights under ``save_parameters`` keys torch's ``nn.LSTM`` does not
  have (``_unfused.0.i2h_weight``, ``_unfused.0.l_cell.i2h_weight`` when bidirectional, as
  Gluon's ``_RNNLayer._collect_params_with_prefix`` writes them); the layer here holds them under
  those keys and runs torch's own ``nn.LSTM`` on them (``torch.func.functional_call``), the gate
  order being the same (LSTM i, f, g, o; GRU r, z, n; measured in tests/test_project_rnn.py).
* Gluon takes and returns states as a list (``[h, c]``), torch's LSTM as a tuple; Gluon's layer
  called without states returns the output only; dropout between layers follows Gluon's training
  mode (``autograd.record()``), not ``module.train()``; ``begin_state(func=mx.nd.zeros, ...)``.
* ``clip_global_norm`` scales by ``max_norm / (norm + 1e-8)`` (torch's ``clip_grad_norm_``:
  ``1e-6``), takes the arrays themselves, and warns (does not raise) on a NaN/inf norm.
"""
from __future__ import annotations

import os
import re
import warnings
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..translate.conventions import RNN_MODES, rnn_weight_names
from .torch_runtime import is_training, zeros
from .torch_runtime_train import _RECORDER, Dataset, One, Zero, _float64


def _own_init(p: torch.Tensor, init: Any) -> None:
    """Gluon's per-parameter initializer (``weight_initializer=``) wins over ``initialize``'s:
    noted on the parameter for ``initialize`` (an initializer object, ``'zeros'``/``'ones'``, or
    None: ``initialize``'s own)."""
    if isinstance(init, str):
        named = {"zeros": Zero, "zero": Zero, "ones": One, "one": One}
        if init.lower() not in named:
            raise ValueError(f"initializer {init!r} given by name: pass the object "
                             f"(mx.init.{init.capitalize()}()), it converts to g2t's")
        init = named[init.lower()]()
    if init is not None:
        p._gluon_init = init


class Embedding(nn.Embedding):
    """``gluon.nn.Embedding(input_dim, output_dim)``: torch's (weight ``(input_dim,
    output_dim)``, key ``weight`` in both); Gluon takes float ids, torch wants integers."""

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: Any = None, sparse_grad: bool = False, **_: Any):
        super().__init__(input_dim, output_dim)
        _own_init(self.weight, weight_initializer)

    @property
    def params(self) -> Dict[str, nn.Parameter]:
        """``self.encoder.params`` for weight tying (``nn.Dense(..., params=...)``)."""
        return {"weight": self.weight}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.long())


def _gluon_key(gluon_name: str, bidirectional: bool) -> str:
    """``l0_i2h_weight`` -> Gluon's checkpoint key ``_unfused.0.i2h_weight`` (bidirectional:
    ``_unfused.0.l_cell.i2h_weight``): Gluon's ``_RNNLayer._collect_params_with_prefix``."""
    d, k, g, t = re.match(r"([lr])(\d+)_(i2h|h2h)_(weight|bias)$", gluon_name).groups()
    return f"_unfused.{k}.{d + '_cell.' if bidirectional else ''}{g}_{t}"


class _RNNLayer(nn.Module):
    """Gluon's fused RNN layer (``rnn.LSTM``/``GRU``/``RNN``) with Gluon's keys and calling
    convention; the arithmetic is torch's ``nn.LSTM``/``GRU``/``RNN`` on the same weights."""
    _mode = "lstm"

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC",
                 dropout: float = 0.0, bidirectional: bool = False, input_size: int = 0,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 projection_size: Optional[int] = None, dtype: Any = "float32",
                 use_sequence_length: bool = False, **kwargs: Any):
        super().__init__()
        if layout not in ("TNC", "NTC"):
            raise ValueError(f"Invalid layout {layout!r}; must be one of ['TNC' or 'NTC']")
        clips = {k: v for k, v in kwargs.items() if k.startswith("lstm_state_clip") and v}
        if projection_size or use_sequence_length or clips:
            what = ("projection_size" if projection_size else "use_sequence_length"
                    if use_sequence_length else sorted(clips)[0])
            raise ValueError(f"gluon.rnn {type(self).__name__}({what}=...) has no torch "
                             f"counterpart here; translate the model with dualdl translate")
        cls, extra, gates = RNN_MODES[self._mode]
        self._cls, self._extra = getattr(nn, cls.split(".")[-1]), dict(extra)
        self._hidden, self._layers, self._layout = int(hidden_size), int(num_layers), layout
        self._dir, self._dropout = 2 if bidirectional else 1, float(dropout)
        order = ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")    # Gluon's registration
        self._names = sorted(((_gluon_key(g, bidirectional), t)
                              for g, t in rnn_weight_names(self._layers, self._dir)),
                             key=lambda kt: (int(kt[0].split(".")[1]), kt[0].count("r_cell"),
                                             order.index(kt[0].rsplit(".", 1)[1])))
        inits = {"i2h_weight": i2h_weight_initializer, "h2h_weight": h2h_weight_initializer,
                 "i2h_bias": i2h_bias_initializer, "h2h_bias": h2h_bias_initializer}
        self._unfused = nn.ModuleList(nn.Module() for _ in range(self._layers))
        nh = self._hidden
        for key, _ in self._names:
            _, k, *cell, leaf = key.split(".")
            owner = self._unfused[int(k)]
            if cell and not hasattr(owner, cell[0]):
                owner.add_module(cell[0], nn.Module())
            owner = getattr(owner, cell[0]) if cell else owner
            ni = (input_size if k == "0" else nh * self._dir) if leaf == "i2h_weight" else nh
            shape = (gates * nh, ni) if leaf.endswith("weight") else (gates * nh,)
            p = (nn.parameter.UninitializedParameter() if ni == 0 else
                 nn.Parameter(torch.empty(shape)))
            _own_init(p, inits[leaf])
            owner.register_parameter(leaf, p)
        self.__dict__["_impl"] = None       # torch's layer, not a submodule (no keys of its own)

    def _param(self, key: str) -> nn.Parameter:
        mod: nn.Module = self
        for part in key.split(".")[:-1]:
            mod = getattr(mod, part)
        return getattr(mod, key.split(".")[-1])

    def _weights(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        gates = RNN_MODES[self._mode][2]
        out = {}
        for key, tname in self._names:
            p = self._param(key)
            if isinstance(p, nn.parameter.UninitializedParameter):   # Gluon's deferred shape
                p.materialize((gates * self._hidden, x.shape[-1]), dtype=x.dtype
                              if x.is_floating_point() else None)
            out[tname] = p
        return out

    def begin_state(self, batch_size: int = 0, func: Callable = zeros, **kwargs: Any) -> List[Any]:
        """Gluon's ``begin_state``: ``func(shape=(layers * dirs, batch, hidden), **kwargs)`` per
        state, in the dtype of the layer's weights (the proof's float64 run included)."""
        dtype = next((p.dtype for p in self.parameters()
                      if not isinstance(p, nn.parameter.UninitializedParameter)), None)
        out = []
        for i in range(2 if self._mode == "lstm" else 1):
            info = dict({"shape": (self._layers * self._dir, batch_size, self._hidden),
                         "dtype": "float32"}, **kwargs)
            s = func(name=f"h0_{i}", **info)
            if isinstance(s, torch.Tensor) and s.is_floating_point() and dtype is not None:
                s = s.to(dtype)
            out.append(s)
        return out

    def forward(self, inputs: torch.Tensor, states: Any = None) -> Any:
        skip = states is None
        batch = inputs.shape[self._layout.find("N")]
        if skip:
            states = self.begin_state(batch, device=inputs.device)
        if isinstance(states, torch.Tensor):
            states = [states]
        if _float64():      # the proof's float64 run: states begun before the model was cast
            states = [s.to(inputs.dtype) if s.is_floating_point() else s for s in states]
        want = (self._layers * self._dir, batch, self._hidden)
        for s in states:
            if tuple(s.shape) != want:
                raise ValueError(f"Invalid recurrent state shape. Expecting {want}, got "
                                 f"{tuple(s.shape)}.")
        weights = self._weights(inputs)
        if self._impl is None or self._impl.input_size != inputs.shape[-1]:
            self.__dict__["_impl"] = self._cls(
                inputs.shape[-1], self._hidden, self._layers, bidirectional=self._dir == 2,
                batch_first=self._layout == "NTC",
                dropout=self._dropout if self._layers > 1 else 0.0, **self._extra)
        self._impl.train(is_training())   # dropout between layers: Gluon's training mode
        hx = tuple(states[:2]) if self._mode == "lstm" else states[0]
        out, h = torch.func.functional_call(self._impl, weights, (inputs, hx))
        new = list(h) if self._mode == "lstm" else [h]
        return out if skip else (out, new)

    def extra_repr(self) -> str:
        return (f"{self._mode}, hidden {self._hidden}, layers {self._layers}, layout "
                f"{self._layout}" + (", bidirectional" if self._dir == 2 else ""))


class LSTM(_RNNLayer):
    """``gluon.rnn.LSTM(hidden_size, num_layers, layout='TNC', dropout, bidirectional,
    input_size)``."""
    _mode = "lstm"


class GRU(_RNNLayer):
    """``gluon.rnn.GRU``: the cuDNN-style GRU of both frameworks (``r * (W_hn h + b_hn)``)."""
    _mode = "gru"


class RNN(_RNNLayer):
    """``gluon.rnn.RNN(hidden_size, num_layers, activation='relu', ...)``: Gluon's default
    activation is relu, torch's tanh."""

    def __init__(self, hidden_size: int, num_layers: int = 1, activation: str = "relu",
                 **kwargs: Any):
        if activation not in ("relu", "tanh"):
            raise ValueError(f"gluon.rnn.RNN activation {activation!r}: relu or tanh")
        self._mode = "rnn_" + activation
        super().__init__(hidden_size, num_layers, **kwargs)


# ----------------------------------------------------------------------------- gradients
def grad(param: torch.Tensor, ctx: Any = None) -> torch.Tensor:
    """``param.grad(ctx)``: the gradient array itself (clipping it in place clips what the
    Trainer uses); a parameter that got no gradient has zeros, as Gluon's ``grad_req='write'``."""
    if not param.requires_grad:
        raise RuntimeError("Cannot get gradient array for a Parameter with grad_req='null' "
                           "(requires_grad=False), as Gluon's Parameter.grad refuses it")
    if param.grad is None:
        param.grad = torch.zeros_like(param)
    return param.grad


def clip_global_norm(arrays: Sequence[torch.Tensor], max_norm: float,
                     check_isfinite: bool = True) -> Any:
    """``gluon.utils.clip_global_norm``: each array times ``min(1, max_norm / (norm + 1e-8))``,
    in place, the squared norms summed in the arrays' dtype (MXNet: float32 ``dot``). A NaN/inf
    norm warns as Gluon does and the arrays are scaled by it (NaN stays NaN). Returns the norm
    before clipping: a float, or a 1-element tensor when ``check_isfinite=False``."""
    if len(arrays) == 0:
        raise ValueError("clip_global_norm: no arrays given (Gluon asserts len(arrays) > 0)")
    total = torch.sqrt(sum((a.reshape(-1) @ a.reshape(-1)).to(arrays[0].dtype) for a in arrays))
    _record_clip(arrays, total)
    if check_isfinite and not bool(torch.isfinite(total)):
        warnings.warn(UserWarning("nan or inf is detected. Clipping results will be undefined."),
                      stacklevel=2)
    scale = torch.clamp(max_norm / (total + 1e-8), max=1.0)   # NaN passes through, as MXNet's min
    for a in arrays:
        a.mul_(scale.to(a.dtype))
    return float(total) if check_isfinite else total.reshape(1)


def _record_clip(arrays: Sequence[torch.Tensor], total: torch.Tensor) -> None:
    """The proof's record of a clipping (off unless ``GLUON2TORCH_RECORD``): the norm and each
    array before clipping, as the Gluon driver's hook records them
    (``dualdl.port.project.data_text``)."""
    if _RECORDER.path:
        s = _RECORDER.n
        _RECORDER.rec[f"{s}/clipnorm"] = np.float64(total.detach().double())
        for i, a in enumerate(arrays):
            _RECORDER.rec[f"{s}/preclip/{i}"] = a.detach().cpu().numpy().copy()


def _record_inputs() -> Any:
    """The proof's record of the array inputs of each outermost module call inside ``record()``
    (``{update}/input/{call}.{i}``, as the Gluon driver's hook records Gluon's block calls):
    the batch of a script that slices its own batches, its carried hidden state, the loss's
    inputs."""
    depth, calls = [0], {"n": -1, "c": 0}

    def flat(args: Any) -> List[torch.Tensor]:
        out: List[torch.Tensor] = []
        for a in args:
            if isinstance(a, (list, tuple)):
                out += flat(a)
            elif isinstance(a, torch.Tensor):
                out.append(a)
        return out

    def pre(module: nn.Module, args: tuple) -> None:
        if depth[0] == 0 and is_training() and _RECORDER.path:
            s = _RECORDER.n
            calls.update(n=s, c=calls["c"] + 1 if calls["n"] == s else 0)
            for i, a in enumerate(flat(args)):
                _RECORDER.rec[f"{s}/input/{calls['c']}.{i}"] = a.detach().cpu().numpy().copy()
        depth[0] += 1

    def post(module: nn.Module, args: tuple, out: Any) -> None:
        depth[0] -= 1
    return (nn.modules.module.register_module_forward_pre_hook(pre),
            nn.modules.module.register_module_forward_hook(post))


_INPUT_HOOKS = _record_inputs() if os.environ.get("GLUON2TORCH_RECORD") else None


def export(block: nn.Module, path: str, epoch: int = 0, **_: Any) -> None:
    """``block.export(path, epoch)``: Gluon writes ``path-symbol.json`` (its graph) and
    ``path-%04d.params``; torch has no such graph file, so the weights only (torch's format,
    Gluon's keys), with a warning naming torch's way to a graph."""
    fname = "%s-%04d.params" % (path, epoch)
    torch.save(block.state_dict(), fname)
    warnings.warn(f"export: wrote the weights only ({fname}); torch has no Gluon symbol file: "
                  f"use torch.export.export(model, example_inputs) for a graph", stacklevel=2)


def size(x: Any) -> Any:
    """``x.size``: MXNet's ``NDArray.size`` is the element count, torch's ``Tensor.size`` a
    method; other objects (numpy arrays, a user's) keep their own ``size``."""
    return x.numel() if isinstance(x, torch.Tensor) else x.size


# ----------------------------------------------------------------------------- text data
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
        root = root or os.path.join(os.environ.get("MXNET_HOME", "~/.mxnet"), "datasets",
                                    self._name)
        path = os.path.join(os.path.expanduser(root), self._files[segment])
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
