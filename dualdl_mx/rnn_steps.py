"""Step-by-step recurrent layers on MXNet (``F.contrib.foreach`` over time: eager and hybridized),
for what MXNet's fused ``RNN`` operator cannot give with torch's numbers:

- ``LSTM(proj_size > 0)`` (torch's LSTMP, ``h = W_hr (o * tanh(c))``): MXNet 1.9's ``projection_size``
  returns wrong values on CPU (differences up to 1e36 from torch for 2 layers) and has no backward
  there ("No training support for LSTM with projection on CPU currently");
- ``RNN(nonlinearity='relu')`` in float64: the fused ``rnn_relu`` kernel is 1.9e-8 off torch on
  float64 data (float32 precision); the composition below is exact to float64 rounding.

The formulas are torch's (aten's ``LSTMCell``/``SimpleCell``): ``gates = W_hh h + b_hh + (W_ih x +
b_ih)``, LSTM gates i, f, g, o; ``c' = f * c + i * g``; ``h' = o * tanh(c')``, then ``W_hr h'``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

__all__ = ["stepwise"]


def _fc(F, x, w, b, n: int):
    return F.FullyConnected(x, w, b, num_hidden=n, no_bias=b is None, flatten=False)


def _direction(F, xi, states: List[Any], w_hh, b_hh, w_hr, mode: str, hidden: int, proj: int):
    """One direction of one layer (LSTM, RNN tanh/relu): ``xi`` (T, N, G*H) the input projection of
    every step, ``states`` [(N, H or P)] (LSTM: [h, c]) -> (outputs (T, N, H or P), final states)."""
    def body(x_t, st):
        g = _fc(F, st[0], w_hh, b_hh, rows) + x_t
        if mode == "lstm":
            i, f, c_in, o = F.split(g, num_outputs=4, axis=-1)
            c = F.sigmoid(f) * st[1] + F.sigmoid(i) * F.tanh(c_in)
            h = F.sigmoid(o) * F.tanh(c)
            if w_hr is not None:
                h = _fc(F, h, w_hr, None, proj)
            return h, [h, c]
        h = F.relu(g) if mode == "rnn_relu" else F.tanh(g)
        return h, [h]

    rows = (4 if mode == "lstm" else 1) * hidden
    return F.contrib.foreach(body, xi, states)


def stepwise(F, x, states: List[Any], params: Dict[str, Any], *, mode: str, num_layers: int, dirs: int,
             hidden: int, proj: int, bias: bool, dropout: float, training: bool) -> Tuple[Any, List[Any]]:
    """``x`` (T, N, C), ``states`` [(L*D, N, .)] -> (output (T, N, D*(P or H)), final states as
    ``states``). torch's dropout on every layer's output but the last (in training, ``dropout`` > 0)."""
    gates = 4 if mode == "lstm" else 1
    finals: List[List[Any]] = [[] for _ in states]
    out = x
    for layer in range(num_layers):
        if layer > 0 and training and dropout > 0:
            out = F.Dropout(out, p=dropout, mode="always")
        ys = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            k = layer * dirs + d
            st = [F.reshape(F.slice_axis(s, axis=0, begin=k, end=k + 1), shape=(-3, -2)) for s in states]
            b_ih: Optional[Any] = params.get(f"bias_ih{sfx}") if bias else None
            b_hh: Optional[Any] = params.get(f"bias_hh{sfx}") if bias else None
            inp = out if d == 0 else F.reverse(out, axis=0)
            xi = _fc(F, inp, params[f"weight_ih{sfx}"], b_ih, gates * hidden)
            y, fin = _direction(F, xi, st, params[f"weight_hh{sfx}"], b_hh, params.get(f"weight_hr{sfx}"),
                                mode, hidden, proj)
            fin = fin if isinstance(fin, (list, tuple)) else [fin]
            ys.append(y if d == 0 else F.reverse(y, axis=0))
            for i, f in enumerate(fin):
                finals[i].append(f)
        out = ys[0] if dirs == 1 else F.concat(*ys, dim=2)
    return out, [F.stack(*f, axis=0) for f in finals]
