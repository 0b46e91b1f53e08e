"""Sequence layouts: Gluon's ``layout="TNC"|"NTC"`` and torch's ``batch_first`` mean the same thing."""
from __future__ import annotations

from typing import Optional

__all__ = ["resolve_batch_first"]


def resolve_batch_first(batch_first: Optional[bool], layout: Optional[str], who: str) -> bool:
    """``batch_first`` from either keyword: ``layout="NTC"`` is ``batch_first=True``, ``"TNC"``
    (Gluon's default, torch's default) is ``False``. Contradicting values are an error naming ``who``."""
    if layout is not None:
        key = str(layout).upper()
        if key not in ("TNC", "NTC"):
            raise ValueError(f"{who}: layout must be 'TNC' or 'NTC', got {layout!r}")
        from_layout = key == "NTC"
        if batch_first is not None and bool(batch_first) != from_layout:
            raise ValueError(f"{who}: batch_first={batch_first} contradicts layout={layout!r} "
                             f"(layout 'NTC' is batch_first=True, 'TNC' is batch_first=False)")
        return from_layout
    return bool(batch_first) if batch_first is not None else False
