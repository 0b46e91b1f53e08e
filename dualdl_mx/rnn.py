"""Recurrent layers on MXNet with PyTorch's API: ``LSTM``, ``GRU``, ``RNN``, ``LSTMCell``,
``GRUCell``, ``RNNCell``.

What differs from Gluon's ``gluon.rnn`` and is hidden here:

- ``forward(x, state=None)`` always returns ``(output, state)``: ``state`` is ``(h, c)`` for LSTM and
  ``h`` for GRU/RNN, shapes ``(num_layers * num_directions, N, H)`` as torch. Gluon returns only
  the output when no state is passed, and a *list* of states otherwise.
- Parameters have torch's names, shapes and registration order (``weight_ih_l0``,
  ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, ``..._reverse``), not ``l0_i2h_weight``; the gate
  order is the same in both frameworks (LSTM i,f,g,o; GRU r,z,n), so weights copy unchanged.
- Initialisation is torch's: U(-1/sqrt(H), 1/sqrt(H)) for every weight and bias (Gluon: Uniform(0.07)
  weights, zero biases). Vanilla ``RNN`` defaults to ``tanh`` (Gluon: ``relu``).
- ``batch_first=True`` or ``layout="NTC"`` (Gluon's name) select batch-major input.
- Dropout between layers follows the module's ``train()``/``eval()`` flag, not
  ``autograd.record()``; its masks come from MXNet's RNG, so they differ from torch's.
- ``bias=False`` feeds zero biases to MXNet's fused ``RNN`` operator (it always has biases).
- ``LSTM(proj_size=P)`` is torch's LSTMP (``weight_hr_l{k}`` (P, H), h of size P) and
  ``RNN(nonlinearity='relu')`` in float64 has torch's float64 numbers: both run step by step
  (dualdl_mx/rnn_steps.py), as MXNet's fused operator is wrong or float32-precise there.
- Unbatched input (T, C) with states (L*D, H) and torch's keyword names (``input=``, ``hx=``).

The fused ``F.RNN`` operator runs over the concatenated parameters in the order Gluon's
``_RNNLayer`` uses (all weights by layer, direction, i2h/h2h; then all biases), so the layers
hybridize.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Optional, Sequence, Tuple

import numpy as np
from mxnet import nd
from mxnet.gluon import HybridBlock

from .base import Layer, is_ndarray
from .rnn_steps import stepwise

from dualdl.nn.layout import resolve_batch_first
from dualdl.nn.rnn_checks import RNNCellChecks, RNNChecks, check_rnn_state
from dualdl.nn.registry import defined_in


def resolve_layout(name: str, batch_first: Optional[bool], layout: Optional[str]) -> bool:
    return resolve_batch_first(batch_first, layout, name)


def _tuple(shape) -> Tuple[int, ...]:
    return tuple(int(s) for s in shape)


class _RNNBase(RNNChecks, Layer):
    """Multi-layer fused recurrent layer over MXNet's ``RNN`` operator."""
    _gates = 1
    _kind = "RNN"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: Optional[bool] = None, dropout: float = 0.0, bidirectional: bool = False,
                 layout: Optional[str] = None, nonlinearity: str = "tanh", proj_size: int = 0) -> None:
        super().__init__()
        name = type(self).__name__
        self.batch_first = resolve_layout(name, batch_first, layout)    # the rest: dualdl.nn.arguments
        if dropout > 0 and int(num_layers) == 1:
            warnings.warn(f"{name}: dropout option adds dropout after all but last recurrent layer, so "
                          f"non-zero dropout expects num_layers greater than 1, but got dropout={dropout} "
                          f"and num_layers={num_layers}", stacklevel=3)
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.bias = int(num_layers), bool(bias)
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.nonlinearity, self.proj_size = nonlinearity, int(proj_size)
        self._dirs = 2 if self.bidirectional else 1
        h_out = self.proj_size or self.hidden_size          # the size of h (torch: proj_size if > 0)
        gh = self._gates * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self._weight_names, self._bias_names = [], []
        for layer in range(self.num_layers):
            n_in = self.input_size if layer == 0 else h_out * self._dirs
            for d in range(self._dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                for pname, shape in ((f"weight_ih{sfx}", (gh, n_in)), (f"weight_hh{sfx}", (gh, h_out))):
                    self._dl_new_param(pname, shape, init=self._uniform(bound))
                    self._weight_names.append(pname)
                if self.bias:
                    for pname in (f"bias_ih{sfx}", f"bias_hh{sfx}"):
                        self._dl_new_param(pname, (gh,), init=self._uniform(bound))
                        self._bias_names.append(pname)
                if self.proj_size:                          # torch's order: after the biases
                    self._dl_new_param(f"weight_hr{sfx}", (self.proj_size, self.hidden_size),
                                       init=self._uniform(bound))

    # ---- description and checks --------------------------------------------------------------
    def _state_shape(self, batch: int, batched: bool, label: str = "c") -> Tuple[int, ...]:
        n = self.num_layers * self._dirs
        size = self.proj_size if label == "h" and self.proj_size else self.hidden_size
        return (n, batch, size) if batched else (n, size)

    def _check(self, x: nd.NDArray, state: Any) -> None:
        shape = _tuple(x.shape)
        self._check_input_shape(shape)
        w = np.dtype(self.weight_ih_l0.dtype).name
        if state is None:
            self._check_dtypes(w, np.dtype(x.dtype).name, ())
            return
        batched = len(shape) == 3
        n = shape[0 if self.batch_first else 1] if batched else 0
        states = self._split_state(state)
        for label, s in zip(self._state_labels(), states):
            got = _tuple(s.shape) if hasattr(s, "shape") else type(s).__name__
            check_rnn_state(self._desc(), label, got, self._state_shape(n, batched, label), shape,
                            self.batch_first)
        self._check_dtypes(w, np.dtype(x.dtype).name,
                           [(label, np.dtype(s.dtype).name) for label, s in zip(self._state_labels(), states)])

    def _state_labels(self) -> Sequence[str]:
        return ("h",)

    def _split_state(self, state: Any) -> list:
        if isinstance(state, (list, tuple)):
            if len(state) != 1:
                raise ValueError(f"{self._desc()}: expected the state h (one tensor), got {len(state)} tensors")
            return [state[0]]
        return [state]

    def _pack_state(self, states: list):
        return states[0]

    # ---- forward -----------------------------------------------------------------------------
    def forward(self, input, hx=None):
        """``(output, state)`` for input (T, N, C) (or (N, T, C) batch-first, or unbatched (T, C))."""
        x, state, squeeze = input, hx, False
        if is_ndarray(x):
            self._check(x, state)
            if x.ndim == 2:                                   # unbatched, as torch
                squeeze = True
                x = x.expand_dims(0 if self.batch_first else 1)
                if state is not None:
                    state = [s.expand_dims(1) for s in self._split_state(state)]
            if state is None:
                n = x.shape[0 if self.batch_first else 1]
                state = [nd.zeros(self._state_shape(n, True, label), ctx=x.context, dtype=x.dtype)
                         for label in self._state_labels()]
        states = list(self._split_state(state)) if state is not None else None
        out, new = HybridBlock.forward(self, x, states)
        new = list(new) if isinstance(new, (list, tuple)) else [new]
        if squeeze:
            out = out.squeeze(axis=0 if self.batch_first else 1)
            new = [s.squeeze(axis=1) for s in new]
        return out, self._pack_state(new)

    def _zeros(self, F, x):
        """Zero states from the (TNC) input's batch size; works on Symbols (no shape needed)."""
        z = F.zeros_like(F.slice_axis(F.slice_axis(x, axis=2, begin=0, end=1), axis=0, begin=0, end=1))
        return [F.broadcast_to(z, shape=(self.num_layers * self._dirs, 0, self._state_shape(0, True, label)[2]))
                for label in self._state_labels()]

    def _mode(self) -> str:
        raise NotImplementedError

    def _params_for(self, F, params, layers) -> Any:
        weights, biases = [], []
        for layer in layers:
            for d in range(self._dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                weights += [params[f"weight_ih{sfx}"].reshape((-1,)), params[f"weight_hh{sfx}"].reshape((-1,))]
                if self.bias:
                    biases += [params[f"bias_ih{sfx}"].reshape((-1,)), params[f"bias_hh{sfx}"].reshape((-1,))]
        if not self.bias:   # the fused operator always adds biases: feed zeros
            gh = self._gates * self.hidden_size
            z = F.zeros_like(F.slice_axis(weights[1], axis=0, begin=0, end=gh))
            biases = [z] * (2 * self._dirs * len(layers))
        return F._internal._rnn_param_concat(*(weights + biases), dim=0)

    def _stepwise(self) -> bool:
        """Whether this layer runs step by step (rnn_steps.py) instead of MXNet's fused operator."""
        return bool(self.proj_size) or (self._mode() == "rnn_relu" and
                                        np.dtype(self.weight_ih_l0.dtype) == np.float64)

    def hybrid_forward(self, F, input, hx=None, **params):
        """torch's argument names (``m(input=x, hx=h)``); ``hx`` is the list of states here."""
        x, states = input, hx
        if self.batch_first:
            x = F.swapaxes(x, dim1=0, dim2=1)
        if states is None:
            states = self._zeros(F, x)
        mode, D, H = self._mode(), self._dirs, self.hidden_size
        if self._stepwise():
            out, new = stepwise(F, x, list(states), params, mode=mode, num_layers=self.num_layers, dirs=D,
                                hidden=H, proj=self.proj_size, bias=self.bias, dropout=self.dropout,
                                training=self.training)
            return (F.swapaxes(out, dim1=0, dim2=1) if self.batch_first else out), new
        fused = not (self.training and self.dropout > 0 and self.num_layers > 1)
        groups = [list(range(self.num_layers))] if fused else [[k] for k in range(self.num_layers)]
        finals = [[] for _ in states]
        out = x
        for gi, layers in enumerate(groups):
            if gi > 0:
                out = F.Dropout(out, p=self.dropout, mode="always")
            lo, hi = layers[0] * D, (layers[-1] + 1) * D
            st = states if fused else [F.slice_axis(s, axis=0, begin=lo, end=hi) for s in states]
            res = F.RNN(out, self._params_for(F, params, layers), *st, state_size=H,
                        num_layers=len(layers), bidirectional=D == 2, p=0.0, state_outputs=True,
                        mode=mode)
            out = res[0]
            for i in range(len(states)):
                finals[i].append(res[1 + i])
        new = [f[0] if len(f) == 1 else F.concat(*f, dim=0) for f in finals]
        if self.batch_first:
            out = F.swapaxes(out, dim1=0, dim2=1)
        return out, new

    def flatten_parameters(self) -> None:
        """torch's API; MXNet concatenates parameters per call, so there is nothing to do."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class LSTM(_RNNBase):
    """``torch.nn.LSTM`` on MXNet; state ``(h, c)``; ``proj_size`` > 0: torch's LSTMP (``weight_hr``),
    h of size ``proj_size``, run step by step."""
    _gates = 4

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: Optional[bool] = None, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None, layout: Optional[str] = None) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, layout,
                         proj_size=proj_size)

    def _mode(self) -> str:
        return "lstm"

    def _state_labels(self) -> Sequence[str]:
        return ("h", "c")

    def _split_state(self, state: Any) -> list:
        if not isinstance(state, (list, tuple)) or len(state) != 2:
            raise ValueError(f"{self._desc()}: expected the state as a pair (h, c), got "
                             f"{type(state).__name__}" + (f" of {len(state)}" if isinstance(state, (list, tuple)) else ""))
        return [state[0], state[1]]

    def _pack_state(self, states: list):
        return (states[0], states[1])


class GRU(_RNNBase):
    """``torch.nn.GRU`` on MXNet; state ``h``. Gates r, z, n as torch (and as MXNet's operator)."""
    _gates = 3

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: Optional[bool] = None, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, layout: Optional[str] = None) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, layout)

    def _mode(self) -> str:
        return "gru"


class RNN(_RNNBase):
    """``torch.nn.RNN`` (Elman) on MXNet; ``nonlinearity`` defaults to ``"tanh"`` (Gluon: relu)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: Optional[bool] = None, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None, layout: Optional[str] = None) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         layout, nonlinearity)

    def _mode(self) -> str:
        return "rnn_" + self.nonlinearity


# ---- cells: one time step, torch's parameter names (weight_ih, weight_hh, bias_ih, bias_hh) ----
class _CellBase(RNNCellChecks, Layer):
    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = int(input_size), int(hidden_size), bool(bias)
        gh, bound = self._gates * self.hidden_size, 1.0 / math.sqrt(self.hidden_size)
        self._dl_new_param("weight_ih", (gh, self.input_size), init=self._uniform(bound))
        self._dl_new_param("weight_hh", (gh, self.hidden_size), init=self._uniform(bound))
        if self.bias:
            self._dl_new_param("bias_ih", (gh,), init=self._uniform(bound))
            self._dl_new_param("bias_hh", (gh,), init=self._uniform(bound))

    def forward(self, input, hx=None):
        x, state, squeeze = input, hx, False
        if is_ndarray(x):
            self._check(x, state)
            if x.ndim == 1:
                squeeze, x = True, x.expand_dims(0)
                if state is not None:
                    state = [s.expand_dims(0) for s in (state if isinstance(state, (list, tuple)) else [state])]
            if state is None:
                z = nd.zeros((x.shape[0], self.hidden_size), ctx=x.context, dtype=x.dtype)
                state = [z] * self._n_states
        states = list(state) if isinstance(state, (list, tuple)) else ([state] if state is not None else None)
        new = HybridBlock.forward(self, x, states)
        new = list(new) if isinstance(new, (list, tuple)) else [new]
        if squeeze:
            new = [s.squeeze(axis=0) for s in new]
        return tuple(new) if self._n_states == 2 else new[0]

    def _gates_of(self, F, x, h, params):
        gi = F.FullyConnected(x, params["weight_ih"], params.get("bias_ih"), num_hidden=self._gates * self.hidden_size,
                              no_bias=not self.bias, flatten=False)
        gh = F.FullyConnected(h, params["weight_hh"], params.get("bias_hh"), num_hidden=self._gates * self.hidden_size,
                              no_bias=not self.bias, flatten=False)
        return gi, gh

    def _zero_state(self, F, x):
        z = F.slice_axis(F.zeros_like(x), axis=1, begin=0, end=1)
        return F.broadcast_to(z, shape=(0, self.hidden_size))

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class LSTMCell(_CellBase):
    """``torch.nn.LSTMCell`` on MXNet: ``forward(x, (h, c)) -> (h', c')``."""
    _gates = 4

    _n_states = 2

    def hybrid_forward(self, F, input, hx=None, **params):
        x, states = input, hx
        if states is None:
            states = [self._zero_state(F, x)] * 2
        h, c = states
        gi, gh = self._gates_of(F, x, h, params)
        i, f, g, o = F.split(gi + gh, num_outputs=4, axis=-1)
        c2 = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        return [F.sigmoid(o) * F.tanh(c2), c2]


class GRUCell(_CellBase):
    """``torch.nn.GRUCell`` on MXNet: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``."""
    _gates = 3

    def hybrid_forward(self, F, input, hx=None, **params):
        x, h = input, (hx[0] if hx is not None else self._zero_state(F, input))
        gi, gh = self._gates_of(F, x, h, params)
        ir, iz, inn = F.split(gi, num_outputs=3, axis=-1)
        hr, hz, hn = F.split(gh, num_outputs=3, axis=-1)
        r, z = F.sigmoid(ir + hr), F.sigmoid(iz + hz)
        n = F.tanh(inn + r * hn)
        return [(1 - z) * n + z * h]


class RNNCell(_CellBase):
    """``torch.nn.RNNCell`` on MXNet (``nonlinearity`` "tanh" by default, or "relu")."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias)
        self.nonlinearity = nonlinearity

    def hybrid_forward(self, F, input, hx=None, **params):
        x, h = input, (hx[0] if hx is not None else self._zero_state(F, input))
        gi, gh = self._gates_of(F, x, h, params)
        return [F.Activation(gi + gh, act_type=self.nonlinearity)]


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
