"""The project converter's table for gluon.rnn layers and recurrent-model training (Embedding,
the fused RNN layers, clip_global_norm, ``Parameter.grad()``, the WikiText datasets): same form
as :mod:`dualdl.port.project.table` (``API``: qualified Gluon name -> replacement expression;
``METHODS``: method name -> (kind, target); ``TODO``: prefix -> why not converted), merged there.
The targets live in :mod:`dualdl.port.project.torch_runtime_rnn`."""
from __future__ import annotations

from typing import Dict, Tuple

_G = "mxnet.gluon."
API: Dict[str, str] = {
    _G + "nn.Embedding": "g2t.Embedding",
    _G + "rnn.LSTM": "g2t.LSTM", _G + "rnn.GRU": "g2t.GRU", _G + "rnn.RNN": "g2t.RNN",
    _G + "rnn.LSTMCell": "g2t.LSTMCell", _G + "rnn.GRUCell": "g2t.GRUCell",
    _G + "rnn.RNNCell": "g2t.RNNCell", _G + "rnn.DropoutCell": "g2t.DropoutCell",
    _G + "rnn.SequentialRNNCell": "g2t.SequentialRNNCell",
    _G + "rnn.HybridSequentialRNNCell": "g2t.HybridSequentialRNNCell",
    _G + "utils.clip_global_norm": "g2t.clip_global_norm",
    _G + "contrib.data.text.WikiText2": "g2t.WikiText2",
    _G + "contrib.data.text.WikiText103": "g2t.WikiText103",
    _G + "contrib.data.IntervalSampler": "g2t.IntervalSampler",
    "mxnet.contrib.text.vocab.Vocabulary": "g2t.Vocabulary",
}
#: ``p.grad(ctx)`` is a method in Gluon, an attribute in torch (``p.grad(...)`` is never torch)
#: ``block.export(path)`` (word_language_model's --export-model): the weights, no graph file
METHODS: Dict[str, Tuple[str, str]] = {"grad": ("fn", "g2t.grad"), "export": ("fn", "g2t.export")}
#: ``L.size`` (read, not called): MXNet's element count, torch's ``size`` is a method
ATTRS: Dict[str, str] = {"size": "g2t.size"}
TODO: Dict[str, str] = {
    _G + "rnn": "this gluon.rnn cell (Bidirectional, Zoneout, Residual, a modifier cell) has no "
                "conversion: translate the model with dualdl translate",
}
