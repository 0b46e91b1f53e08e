"""The project converter's table for gluonnlp (BERT, vocab, bucket samplers, batchify, BERTAdam): same form as
:mod:`dualdl.port.project.table` (``API``: qualified Gluon name -> replacement expression;
``METHODS``: method name -> (kind, target); ``TODO``: prefix -> why not converted), merged there."""
from __future__ import annotations

from typing import Dict, Tuple

API: Dict[str, str] = {}
METHODS: Dict[str, Tuple[str, str]] = {}
TODO: Dict[str, str] = {}
