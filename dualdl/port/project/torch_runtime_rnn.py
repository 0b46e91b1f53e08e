"""The recurrent-model part of a converted project's ``gluon2torch.py`` (see
:mod:`dualdl.port.project.torch_runtime`, copied into the same file): ``gluon.nn.Embedding``,
``gluon.rnn.LSTM``/``GRU``/``RNN``, the cells (``LSTMCell``, ``GRUCell``, ``RNNCell``,
``DropoutCell``, ``SequentialRNNCell``, ``unroll``), ``gluon.utils.clip_global_norm``,
``Parameter.grad()``, ``NDArray.size`` (the WikiText datasets:
:mod:`dualdl.port.project.torch_runtime_text`). Torch and numpy only; ``RNN_MODES`` and ``rnn_weight_names`` are the translator's conventions
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
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from ..translate.conventions import RNN_MODES, rnn_weight_names
from .torch_runtime import _act, is_training, zeros
from .torch_runtime_train import _RECORDER, One, Zero, _float64


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


# ----------------------------------------------------------------------------- cells
class _Cell(nn.Module):
    """Gluon's ``rnn.*Cell``: one step ``cell(x, states) -> (output, new states)`` with Gluon's
    keys (``i2h_weight`` ``(gates * hidden, input)``, ``h2h_weight``, ``i2h_bias``, ``h2h_bias``),
    its input size deferred; ``unroll`` over a ``TNC``/``NTC`` tensor or a list of steps."""
    _gates, _states = 1, 1

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0, **_: Any):
        super().__init__()
        self._hidden, g = int(hidden_size), self._gates * int(hidden_size)
        for name, shape, init in (
                ("i2h_weight", (g, input_size), i2h_weight_initializer),
                ("h2h_weight", (g, hidden_size), h2h_weight_initializer),
                ("i2h_bias", (g,), i2h_bias_initializer), ("h2h_bias", (g,), h2h_bias_initializer)):
            p = (nn.parameter.UninitializedParameter() if 0 in shape else
                 nn.Parameter(torch.empty(shape)))
            _own_init(p, init)
            self.register_parameter(name, p)

    def state_info(self, batch_size: int = 0) -> List[Dict[str, Any]]:
        return [{"shape": (batch_size, self._hidden), "__layout__": "NC"}] * self._states

    def begin_state(self, batch_size: int = 0, func: Callable = zeros, **kwargs: Any) -> List[Any]:
        dtype = self.h2h_weight.dtype
        out = [func(name=f"h0_{i}", **dict({"shape": (batch_size, self._hidden)}, **kwargs))
               for i in range(self._states)]
        return [s.to(dtype) if isinstance(s, torch.Tensor) and s.is_floating_point() else s
                for s in out]

    def reset(self) -> None:
        """Gluon's step counter (names of its symbols): nothing to reset here."""

    def _sums(self, x: torch.Tensor, h: torch.Tensor) -> Any:
        if isinstance(self.i2h_weight, nn.parameter.UninitializedParameter):
            self.i2h_weight.materialize((self._gates * self._hidden, x.shape[-1]),
                                        dtype=x.dtype if x.is_floating_point() else None)
        return (nn.functional.linear(x, self.i2h_weight, self.i2h_bias),
                nn.functional.linear(h, self.h2h_weight, self.h2h_bias))

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: Optional[bool] = None, valid_length: Any = None) -> Any:
        return _unroll(self, length, inputs, begin_state, layout, merge_outputs, valid_length)


def _unroll(cell: Any, length: int, inputs: Any, begin_state: Any, layout: str,
            merge_outputs: Optional[bool], valid_length: Any) -> Any:
    """Gluon's ``RecurrentCell.unroll``: the steps of ``inputs`` (a tensor split on ``layout``'s
    T axis, or a list), ``begin_state`` zeros when None; outputs a list, stacked on the T axis
    when ``merge_outputs``."""
    if valid_length is not None:
        raise ValueError("unroll(valid_length=...) has no torch translation here; translate the "
                         "model with dualdl translate")
    axis = layout.find("T")
    steps = list(inputs.unbind(axis)) if isinstance(inputs, torch.Tensor) else list(inputs)
    if length is not None and len(steps) != length:
        raise ValueError(f"unroll: {len(steps)} steps in the inputs, length={length}")
    states = begin_state if begin_state is not None else cell.begin_state(
        batch_size=steps[0].shape[0], device=steps[0].device)
    outputs = []
    for x in steps:
        out, states = cell(x, states)
        outputs.append(out)
    return (torch.stack(outputs, axis) if merge_outputs else outputs), states


class RNNCell(_Cell):
    """``gluon.rnn.RNNCell(hidden_size, activation='tanh')``: ``act(i2h(x) + h2h(h))``."""

    def __init__(self, hidden_size: int, activation: str = "tanh", **kwargs: Any):
        super().__init__(hidden_size, **kwargs)
        self._act = _act(activation)

    def forward(self, inputs: torch.Tensor, states: Sequence[torch.Tensor]) -> Any:
        out = self._act(sum(self._sums(inputs, states[0])))
        return out, [out]


class LSTMCell(_Cell):
    """``gluon.rnn.LSTMCell``: gates i, f, g (``activation``), o (``recurrent_activation``)."""
    _gates, _states = 4, 2

    def __init__(self, hidden_size: int, activation: str = "tanh",
                 recurrent_activation: str = "sigmoid", **kwargs: Any):
        super().__init__(hidden_size, **kwargs)
        self._act, self._gate = _act(activation), _act(recurrent_activation)

    def forward(self, inputs: torch.Tensor, states: Sequence[torch.Tensor]) -> Any:
        i, f, g, o = sum(self._sums(inputs, states[0])).chunk(4, -1)
        c = self._gate(f) * states[1] + self._gate(i) * self._act(g)
        h = self._gate(o) * self._act(c)
        return h, [h, c]


class GRUCell(_Cell):
    """``gluon.rnn.GRUCell``: gates r, z, n, ``n = tanh(i2h_n + r * h2h_n)`` (torch's GRUCell)."""
    _gates = 3

    def forward(self, inputs: torch.Tensor, states: Sequence[torch.Tensor]) -> Any:
        i2h, h2h = self._sums(inputs, states[0])
        (ir, iz, i_n), (hr, hz, h_n) = i2h.chunk(3, -1), h2h.chunk(3, -1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        h = (1 - z) * torch.tanh(i_n + r * h_n) + z * states[0]
        return h, [h]


class DropoutCell(nn.Module):
    """``gluon.rnn.DropoutCell(rate)``: dropout of the step's input inside ``record()``."""

    def __init__(self, rate: float, axes: Sequence[int] = (), **_: Any):
        super().__init__()
        self._rate = float(rate)

    def state_info(self, batch_size: int = 0) -> List[Dict[str, Any]]:
        return []

    def begin_state(self, batch_size: int = 0, func: Callable = zeros, **kwargs: Any) -> List[Any]:
        return []

    def forward(self, inputs: Any, states: Any = None) -> Any:
        return nn.functional.dropout(inputs, self._rate, training=is_training()), states or []

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: Optional[bool] = None, valid_length: Any = None) -> Any:
        if isinstance(inputs, torch.Tensor) and merge_outputs is not False:
            return self(inputs, begin_state)
        return _unroll(self, length, inputs, begin_state, layout, merge_outputs, valid_length)


class SequentialRNNCell(nn.Module):
    """``gluon.rnn.(Hybrid)SequentialRNNCell``: ``add(cell)`` (keys ``0.i2h_weight`` ...), the
    cells' states concatenated in order."""

    def add(self, cell: nn.Module) -> None:
        self.add_module(str(len(self._modules)), cell)

    def __getitem__(self, i: int) -> nn.Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def state_info(self, batch_size: int = 0) -> List[Dict[str, Any]]:
        return [s for c in self._modules.values() for s in c.state_info(batch_size)]

    def begin_state(self, **kwargs: Any) -> List[Any]:
        return [s for c in self._modules.values() for s in c.begin_state(**kwargs)]

    def reset(self) -> None:
        """Gluon's step counters: nothing to reset here."""

    def _split(self, states: Sequence[Any]) -> List[Any]:
        out, p = [], 0
        for c in self._modules.values():
            n = len(c.state_info())
            out.append(list(states[p:p + n]))
            p += n
        return out

    def forward(self, inputs: Any, states: Sequence[Any]) -> Any:
        new: List[Any] = []
        for c, s in zip(self._modules.values(), self._split(states)):
            inputs, s = c(inputs, s)
            new += s
        return inputs, new

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: Optional[bool] = None, valid_length: Any = None) -> Any:
        cells = list(self._modules.values())
        if begin_state is None:
            x0 = inputs if not isinstance(inputs, torch.Tensor) else [inputs.select(
                layout.find("T"), 0)]
            begin_state = self.begin_state(batch_size=x0[0].shape[0], device=x0[0].device)
        new: List[Any] = []
        for i, (c, s) in enumerate(zip(cells, self._split(begin_state))):
            inputs, s = c.unroll(length, inputs, s, layout, merge_outputs if i == len(cells) - 1
                                 else None, valid_length)
            new += s
        return inputs, new


class HybridSequentialRNNCell(SequentialRNNCell):
    pass


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
