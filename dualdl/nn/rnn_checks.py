"""Input, state and dtype checks of the recurrent layers, with the same messages on both backends
(framework-free: shapes as tuples, dtypes as names)."""
from __future__ import annotations

from typing import Any, Sequence, Tuple

from .checks import check_not_empty

__all__ = ["check_rnn_state", "RNNChecks", "RNNCellChecks"]


def check_rnn_state(desc: str, label: str, got, want: tuple, input_shape: tuple, batch_first: bool) -> None:
    """Raise the same ValueError on both backends when an RNN state ``label`` has shape ``got``
    instead of ``want``; hints at a swapped layout when the state's batch size matches the
    input's other axis."""
    if got == want:
        return
    hint = ""
    batched = len(input_shape) == 3
    if batched and isinstance(got, tuple) and len(got) == 3 and got[1] == input_shape[1 if batch_first else 0] \
            and input_shape[0] != input_shape[1]:
        other = "batch_first=False / layout='TNC'" if batch_first else "batch_first=True / layout='NTC'"
        hint = f"; the input looks like the other layout: construct the layer with {other}"
    layout = "NTC" if batch_first else "TNC"
    raise ValueError(f"{desc}: expected state {label} of shape {want} for input of "
                     f"shape {input_shape} (layout {layout}), got {got}{hint}")


class RNNChecks:
    """Description and input-shape check shared by both backends' LSTM/GRU/RNN (mixed in before
    the framework class; needs ``batch_first``, ``input_size``, ``hidden_size``, ``num_layers``)."""

    @property
    def layout(self) -> str:
        return "NTC" if self.batch_first else "TNC"

    def _desc(self) -> str:
        return (f"{type(self).__name__}(input_size={self.input_size}, hidden_size={self.hidden_size}, "
                f"num_layers={self.num_layers}, layout={self.layout!r})")

    def _check_input_shape(self, shape: tuple) -> None:
        seq = "(N, T, {c})" if self.batch_first else "(T, N, {c})"
        expected = f"{seq.format(c=self.input_size)} or unbatched (T, {self.input_size})"
        if len(shape) not in (2, 3) or shape[-1] != self.input_size:
            raise ValueError(f"{self._desc()}: expected input of shape {expected} "
                             f"(layout {self.layout}), got {shape}")
        check_not_empty(self._desc(), shape)

    def _check_dtypes(self, weights: str, x: str, states: Sequence[Tuple[str, str]]) -> None:
        """Input and states must have the weights' dtype (names like ``"float32"``). Hides: torch's
        CPU LSTM fails inside MKLDNN (``get_mkldnn_dtype: unsupported data type``) for a float64
        state, MXNet's RNN operator with "This layer requires uniform type"."""
        if x != weights:
            raise ValueError(f"{self._desc()}: input dtype {x} does not match the weights' dtype {weights}")
        for label, d in states:
            if d != weights:
                raise ValueError(f"{self._desc()}: state {label} has dtype {d} but the weights and the "
                                 f"input are {weights}; cast the state to {weights}")


class RNNCellChecks:
    """Description and input/state check shared by both backends' LSTMCell/GRUCell/RNNCell (mixed
    in before the framework class; needs ``input_size`` and ``hidden_size``; ``_n_states`` is 2
    for an LSTM cell's (h, c))."""
    _n_states = 1

    def _desc(self) -> str:
        return f"{type(self).__name__}(input_size={self.input_size}, hidden_size={self.hidden_size})"

    def _check(self, x: Any, state: Any) -> None:
        shape = tuple(int(d) for d in x.shape)
        if len(shape) not in (1, 2) or shape[-1] != self.input_size:
            raise ValueError(f"{self._desc()}: expected input of shape (N, {self.input_size}) or "
                             f"unbatched ({self.input_size},), got {shape}")
        if state is None:
            return
        states = list(state) if isinstance(state, (list, tuple)) else [state]
        if len(states) != self._n_states:
            raise ValueError(f"{self._desc()}: expected {self._n_states} state tensor(s), got {len(states)}")
        want = (shape[0], self.hidden_size) if len(shape) == 2 else (self.hidden_size,)
        for s in states:
            got = tuple(int(d) for d in s.shape)
            if got != want:
                raise ValueError(f"{self._desc()}: expected state of shape {want} for input of shape "
                                 f"{shape}, got {got}")
