"""The project converter's table for gluoncv and gluon.data.vision (model zoo, transforms, CIFAR, schedulers): same form as
:mod:`dualdl.port.project.table` (``API``: qualified Gluon name -> replacement expression;
``METHODS``: method name -> (kind, target); ``TODO``: prefix -> why not converted), merged there."""
from __future__ import annotations

from typing import Dict, Tuple

API: Dict[str, str] = {}
METHODS: Dict[str, Tuple[str, str]] = {}
TODO: Dict[str, str] = {}
