"""Recurrent layers on torch: the ``torch.nn`` classes, plus ``layout="TNC"|"NTC"`` (Gluon's
keyword, an alias of ``batch_first``) and input/state checks whose ``ValueError`` names the layer,
the expected layout and the shape received (torch's own errors are ``RuntimeError``s without the
layout). ``forward`` returns ``(output, state)`` as torch does; the MXNet versions return the same.
Weights stay in cuDNN's flat buffer: torch re-flattens after ``.to()``/``.cuda()`` and these
classes also after ``load_state_dict``.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch.nn.utils.rnn import PackedSequence

from dualdl.nn.layout import resolve_batch_first
from dualdl.nn.rnn_checks import RNNCellChecks, RNNChecks, check_rnn_state
from dualdl.nn.registry import defined_in
from .base import Layer


def resolve_layout(name: str, batch_first: Optional[bool], layout: Optional[str]) -> bool:
    return resolve_batch_first(batch_first, layout, name)


def _dtype_name(d: torch.dtype) -> str:
    return str(d).rsplit(".", 1)[-1]          # torch.float32 -> "float32", numpy's name


class _Checked(Layer, RNNChecks):
    """Input and state checks shared by LSTM/GRU/RNN (mixed in before the torch class)."""
    _state_labels: Tuple[str, ...] = ("h",)

    def _states(self, state: Any) -> list:
        n = len(self._state_labels)
        if n == 2:
            if not isinstance(state, (list, tuple)) or len(state) != 2:
                raise ValueError(f"{self._desc()}: expected the state as a pair (h, c), got "
                                 f"{type(state).__name__}" + (f" of {len(state)}" if isinstance(state, (list, tuple)) else ""))
            return [state[0], state[1]]
        if isinstance(state, (list, tuple)):
            if len(state) != 1:
                raise ValueError(f"{self._desc()}: expected the state h (one tensor), got {len(state)} tensors")
            return [state[0]]
        return [state]

    def _check(self, x: torch.Tensor, state: Any) -> Any:
        shape = tuple(x.shape)
        self._check_input_shape(shape)
        w = self.weight_ih_l0.dtype
        if state is None:
            if x.dtype != w:
                self._check_dtypes(_dtype_name(w), _dtype_name(x.dtype), ())
            return None
        batched = len(shape) == 3
        dirs = 2 if self.bidirectional else 1
        n = shape[0 if self.batch_first else 1] if batched else None
        states = self._states(state)
        for label, s in zip(self._state_labels, states):
            size = self.proj_size if label == "h" and getattr(self, "proj_size", 0) else self.hidden_size
            want = (self.num_layers * dirs, n, size) if batched else (self.num_layers * dirs, size)
            got = tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__
            check_rnn_state(self._desc(), label, got, want, shape, self.batch_first)
        self._check_dtypes(_dtype_name(w), _dtype_name(x.dtype),
                           [(label, _dtype_name(s.dtype)) for label, s in zip(self._state_labels, states)])
        return tuple(states) if len(states) == 2 else states[0]

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._init_flat_weights()          # re-collects the weights and flattens them (cuDNN)
        return result


class LSTM(_Checked, torch.nn.LSTM):
    """``torch.nn.LSTM`` with ``layout=``; ``forward(x, (h, c)) -> (output, (h, c))``."""
    _state_labels = ("h", "c")

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: Optional[bool] = None, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None, layout: Optional[str] = None) -> None:
        super().__init__(int(input_size), int(hidden_size), num_layers=int(num_layers), bias=bias,
                         batch_first=resolve_layout("LSTM", batch_first, layout), dropout=dropout,
                         bidirectional=bidirectional, proj_size=proj_size, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if not isinstance(input, PackedSequence):
            hx = self._check(input, hx)
        return super().forward(input, hx)


class GRU(_Checked, torch.nn.GRU):
    """``torch.nn.GRU`` with ``layout=``; ``forward(x, h) -> (output, h)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: Optional[bool] = None, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, layout: Optional[str] = None) -> None:
        super().__init__(int(input_size), int(hidden_size), num_layers=int(num_layers), bias=bias,
                         batch_first=resolve_layout("GRU", batch_first, layout), dropout=dropout,
                         bidirectional=bidirectional, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if not isinstance(input, PackedSequence):
            hx = self._check(input, hx)
        return super().forward(input, hx)


class RNN(_Checked, torch.nn.RNN):
    """``torch.nn.RNN`` (Elman, tanh by default) with ``layout=``; ``forward(x, h) -> (output, h)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: Optional[bool] = None, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None, layout: Optional[str] = None) -> None:
        super().__init__(int(input_size), int(hidden_size), num_layers=int(num_layers),
                         nonlinearity=nonlinearity, bias=bias,
                         batch_first=resolve_layout("RNN", batch_first, layout), dropout=dropout,
                         bidirectional=bidirectional, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if not isinstance(input, PackedSequence):
            hx = self._check(input, hx)
        return super().forward(input, hx)


class LSTMCell(Layer, RNNCellChecks, torch.nn.LSTMCell):
    """``torch.nn.LSTMCell``: ``forward(x, (h, c)) -> (h', c')``."""
    _n_states = 2

    def forward(self, input, hx=None):
        self._check(input, hx)
        return super().forward(input, tuple(hx) if hx is not None else None)


class GRUCell(Layer, RNNCellChecks, torch.nn.GRUCell):
    """``torch.nn.GRUCell``: ``forward(x, h) -> h'``."""

    def forward(self, input, hx=None):
        self._check(input, hx)
        return super().forward(input, hx)


class RNNCell(Layer, RNNCellChecks, torch.nn.RNNCell):
    """``torch.nn.RNNCell``: ``forward(x, h) -> h'``."""

    def forward(self, input, hx=None):
        self._check(input, hx)
        return super().forward(input, hx)


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
