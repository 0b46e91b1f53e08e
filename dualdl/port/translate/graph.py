"""The graph both readers produce (the tracer in trace.py for a Gluon block, symbol_lower.py for a
scope of an exported symbol; forward.py writes it, the proof walks the same tree): one ``Graph`` per
block call site or symbol scope with its own
ops as MXNet symbol JSON nodes, the calls of its direct children (``CallSite``), its inputs and
outputs as structures of ``T`` (shape, dtype) leaves; the per-call ``Record`` of a sample run."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["T", "Record", "CallSite", "Graph", "walk", "flatten_struct", "nested_var_name", "shape_count"]


@dataclass(frozen=True)
class T:
    """A tensor in a recorded structure: its shape and dtype."""
    shape: Tuple[int, ...]
    dtype: str = "float32"


@dataclass
class Record:
    args: tuple
    out: Any
    after_trainable: bool = True   # a layer with trainable parameters ran before this call
    skip_states: Optional[bool] = None


def walk(block: Any, path: str = ""):
    """(path, block) for the block and every descendant, parents first (Gluon ``_children`` names)."""
    yield path, block
    for name, child in block._children.items():
        yield from walk(child, f"{path}.{name}" if path else name)


def flatten_struct(s: Any) -> List[Any]:
    if isinstance(s, (list, tuple)):
        return [v for e in s for v in flatten_struct(e)]
    return [s]


@dataclass
class CallSite:
    """One call of a direct child during the trace: its inputs (symbol structure) and outputs."""
    child: str
    args: tuple
    outs: Any          # structure of placeholder names
    out_struct: Any    # recorded structure (T leaves)


@dataclass
class Graph:
    """What one block computes: JSON nodes of its own ops, its inputs, the child calls, outputs."""
    nodes: List[dict]
    heads: List[Tuple[int, int]]         # heads of [outputs..., call inputs...]
    n_outputs: int
    out_struct: Any
    in_names: List[str]
    in_struct: tuple
    calls: List[CallSite]
    params: Dict[str, str]               # var name -> own parameter attribute name
    shapes: Dict[Tuple[int, int], Optional[Tuple[int, ...]]] = field(default_factory=dict)
    # var name -> (attribute name, numpy value): arrays the block holds as plain attributes (not
    # Parameters) that its forward uses, e.g. d2l's PositionalEncoding.P; a buffer in torch
    consts: Dict[str, Tuple[str, Any]] = field(default_factory=dict)
    # the training-mode graph, when the forward branches on autograd.is_training() (trace_block(both_modes=True))
    train: Optional["Graph"] = None
    # the forward branches on the mode but only its inference graph was traced (translate(train=False))
    inference_only: bool = False
    # (attribute, head): arrays the block holds that its forward replaces (d2l's scratch BatchNorm stats)
    updates: List[Tuple[str, Tuple[int, int]]] = field(default_factory=list)
    # what the report should say about this block's translation (sizes fixed to the sample's)
    notes: List[str] = field(default_factory=list)
    # the order of the statements, ("op", node index) / ("call", call index), where the reader knows
    # it (an exported symbol's scope tree); None for a trace: calls in call order, ops where needed
    order: Optional[List[Tuple[str, int]]] = None


def nested_var_name(base: str, s: Any, j: int) -> str:
    """Name of the j-th tensor var of a nested input structure (``base__0__1``)."""
    names = []

    def go(v, b):
        if isinstance(v, (list, tuple)):
            for i, e in enumerate(v):
                go(e, f"{b}__{i}")
        else:
            names.append(b)
    go(s, base)
    return names[j]


def shape_count(shapes: Dict[Tuple[int, int], Any], nid: int) -> int:
    """How many outputs node ``nid`` has: those with a known shape, at least one (either graph)."""
    k = 0
    while (nid, k) in shapes:
        k += 1
    return max(k, 1)
