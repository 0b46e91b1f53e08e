"""MXNet ops -> torch expressions: the names the forward writers use, from the one op registry
(:mod:`dualdl.port.translate.oplib`: every op's translation, float32 facts, or refusal)."""
from __future__ import annotations

from typing import Dict

from .oplib import DEVICE, Expr, NeedsName, OpEntry, OpNode, bind_device, lookup, n_outputs_of, parse_attr, translate_op

__all__ = ["Expr", "OpNode", "OpEntry", "translate_op", "parse_attr", "NeedsName", "n_outputs", "lookup", "DEVICE",
           "bind_device"]


def n_outputs(op: str, attrs: Dict[str, str]) -> int:
    """How many outputs an MXNet op node has (SliceChannel/split, topk ret_typ='both', ...)."""
    return n_outputs_of(op, attrs)
