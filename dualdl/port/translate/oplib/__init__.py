"""The op registry, complete on import: one module per op family, each registering its ops with
:func:`~dualdl.port.translate.oplib.base.op` (a translation), ``refuse`` (a reason) or
``inapplicable`` (not part of a forward). ``lookup(name)`` gives an op's entry."""
from . import (arith, unary, shape, reduce, nn, norm, numpy, numpy_more, contrib, contrib_more, box, roi, linalg,  # noqa: F401
               index, spatial, pdf, classified)
from .base import (DEVICE, Expr, NeedsName, OpEntry, OpNode, bind_device, entries, family, lookup, n_outputs_of,
                   parse_attr, register_user, translate_op, unregister_user)

__all__ = ["OpEntry", "OpNode", "Expr", "NeedsName", "lookup", "entries", "family", "translate_op", "n_outputs_of",
           "register_user", "unregister_user", "float32_ops", "parse_attr", "DEVICE", "bind_device"]


def float32_ops(kind: str) -> frozenset:
    """The MXNet op names MXNet 1.9.1 computes in float32: ``kind="only"``, those that refuse float64
    on CPU ("Only FP32 is supported"); ``kind="internal"``, those that take float64 but compute in
    float32 (measured against torch float64: tests/test_translate_op_values.py)."""
    if kind not in ("only", "internal"):
        raise ValueError(f"float32_ops: kind must be 'only' or 'internal', got {kind!r}")
    return frozenset(e.name for e in entries() if (e.float32_only if kind == "only" else e.float32_internal))
