"""The project converter's table for gluon.rnn layers and recurrent-model training (begin_state, detach, clip_global_norm): same form as
:mod:`dualdl.port.project.table` (``API``: qualified Gluon name -> replacement expression;
``METHODS``: method name -> (kind, target); ``TODO``: prefix -> why not converted), merged there."""
from __future__ import annotations

from typing import Dict, Tuple

API: Dict[str, str] = {}
METHODS: Dict[str, Tuple[str, str]] = {}
TODO: Dict[str, str] = {}
