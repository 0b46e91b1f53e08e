"""The built-in layers. Each class is a declaration: instantiating it returns the active backend's
native implementation (``torch.nn.Linear`` subclass on torch, a Gluon ``HybridBlock`` on MXNet)
with PyTorch's signature, parameter names, shapes and default initialisation on both.

``isinstance(layer, dualdl.nn.Linear)`` holds for either backend's Linear.
"""
from __future__ import annotations

from .module import Module

# name -> what MXNet does differently that the MXNet implementation hides
LAYERS = {
    "Linear": "Gluon Dense flattens non-batch axes by default and infers in_units lazily; "
              "Linear applies to the last axis and creates its weight (out, in) at once.",
    "LSTM": "Gluon returns only the output without a state and a list of states with one; names l0_i2h_weight, "
            "init Uniform(0.07)/zero bias. Here (output, (h, c)) always, torch's names/init; layout= or batch_first=.",
    "GRU": "As LSTM (gates r, z, n in both); state h. Dropout between layers follows train()/eval().",
    "RNN": "Gluon RNN defaults to relu; here nonlinearity='tanh' as torch; (output, h) always.",
    "LSTMCell": "Gluon LSTMCell returns (out, [h, c]) with i2h_/h2h_ names; here (h, c) and torch's names.",
    "GRUCell": "Gluon GRUCell returns (out, [h]); here h' and torch's names (gates r, z, n in both).",
    "RNNCell": "Gluon RNNCell's activation is required; here nonlinearity='tanh' as torch; returns h'.",
    "MultiheadAttention": "Gluon/gluonnlp keep separate query/key/value Dense layers without bias and a 0/1 "
                          "mask; here torch's packed in_proj_weight (3E, E), additive float or bool masks, "
                          "masked scores -1e18 (finite) on both backends.",
    "TransformerEncoderLayer": "gluonnlp: NTC input, dropout 0.0, no q/k/v/proj bias, dropout after ffn_2 only; "
                               "here torch's layer (TNC default, dropout 0.1 on both, packed attention); "
                               "key padding mask (True = pad) or valid_length; padded outputs are 0.",
    "TransformerEncoder": "gluonnlp's encoder also scales x by sqrt(units), adds its PE and an input LayerNorm; "
                          "here torch's stack of copies of one layer (+ optional norm); padded outputs are 0.",
    "PositionalEncoding": "gluonnlp's sinusoid uses angle pos/10000^(2j/d) with j the column index (style="
                          "'gluonnlp'); style='vaswani' is the standard table. Raises past max_len (gluonnlp clamps).",
}


def _declare(name: str, doc: str) -> type:
    return type(name, (Module,), {"_dl_layer": name, "__doc__": doc, "__module__": __name__})


globals().update({name: _declare(name, doc) for name, doc in LAYERS.items()})
__all__ = sorted(LAYERS)
