"""Read an exported MXNet model (``model-symbol.json`` + ``model-0000.params``, what
``HybridBlock.export`` writes) into a graph: op nodes with their attributes, which variables are
data inputs, weights (``arg:``) or running statistics (``aux:``), and every value's shape for the
given input shapes. Malformed files give one clear ``TranslationError`` naming the file and what
is wrong instead of MXNet's own traceback."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import TranslationError
from .gate import Attrs

__all__ = ["BlockDelegate", "SymNode", "SymGraph", "load_symbol_graph", "read_params"]

Value = Tuple[int, int]   # (node id, output index)


@dataclass
class SymNode:
    id: int
    op: str                       # "null" for a variable
    name: str
    attrs: Dict[str, str]
    inputs: List[Value]
    kind: str = "op"              # op | input | param | aux


@dataclass
class SymGraph:
    """The parsed model. ``order``: op node ids in the file's (topological) order."""
    nodes: List[SymNode]
    heads: List[Value]
    inputs: List[str]
    shapes: Dict[Value, Tuple[int, ...]] = field(default_factory=dict)
    dtypes: Dict[Value, str] = field(default_factory=dict)
    symbol_json: str = ""
    path: str = ""
    absorbed: set = field(default_factory=set)    # op nodes not written: folded into a layer, or unused
    rnn_parts: set = field(default_factory=set)   # the absorbed nodes an RNN layer takes its weights from
    rnn: Dict[int, Any] = field(default_factory=dict)
    layer_names: Dict[int, str] = field(default_factory=dict)   # a layer's name when its scope was folded away

    @property
    def order(self) -> List[int]:
        return [n.id for n in self.nodes if n.op != "null" and n.id not in self.absorbed]

    def consumers(self) -> Dict[int, List[int]]:
        out: Dict[int, List[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            if n.id in self.absorbed and n.id not in self.rnn_parts:
                continue    # not computed (after the chosen outputs)
            for src, _ in n.inputs:
                out[src].append(n.id)
        return out


def _err(msg: str, path: str) -> TranslationError:
    return TranslationError(f"{msg} ({path})")


_MAX_SYMBOL_BYTES = 1 << 30     # an exported symbol of a large model is a few MB; a bigger one is no export


def _regular_file(path: str, what: str, max_bytes: Optional[int] = None) -> None:
    """Refuse a missing path, a FIFO, a device or a folder before opening it (reading a FIFO or
    /dev/zero would wait or read forever), and a symbol file larger than any export."""
    if not os.path.exists(path):
        raise _err(f"the {what} file does not exist", path)
    if not os.path.isfile(path):
        raise _err(f"the {what} file is not a regular file (a folder, FIFO or device); give the file "
                   f"HybridBlock.export wrote", path)
    if max_bytes is not None and os.path.getsize(path) > max_bytes:
        raise _err(f"the {what} file is {os.path.getsize(path)} bytes, larger than any MXNet export "
                   f"({max_bytes} at most); give the '-symbol.json' file that HybridBlock.export wrote", path)


def read_params(params_path: str) -> Tuple[Dict[str, object], Dict[str, object]]:
    """(arg, aux) NDArrays by name from a ``.params`` file (``arg:``/``aux:`` prefixes as
    ``export`` writes them; a file without prefixes, as ``save_parameters`` writes, counts as args)."""
    import mxnet as mx
    _regular_file(params_path, "params")
    try:
        loaded = mx.nd.load(params_path)
    except Exception as e:   # MXNetError on a truncated or foreign file
        last = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
        raise _err(f"cannot read the params file: it is not an MXNet .params file or it is truncated "
                   f"(MXNet: {last})", params_path) from None
    if not isinstance(loaded, dict):
        raise _err("the params file holds a list of arrays without names; export the model with "
                   "HybridBlock.export (or mx.nd.save with a dict)", params_path)
    arg, aux = {}, {}
    for k, v in loaded.items():
        kind, _, name = k.partition(":")
        if kind == "aux" and name:
            aux[name] = v
        elif kind == "arg" and name:
            arg[name] = v
        else:
            arg[k] = v
    return arg, aux


_WEIGHT_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_running_mean", "_running_var", "_moving_mean",
                    "_moving_var", "_alpha")
_LAYER_OPS = frozenset({"Convolution", "Deconvolution", "FullyConnected", "BatchNorm", "Embedding", "LeakyReLU",
                        "RNN", "LayerNorm", "InstanceNorm", "GroupNorm"})


def _weight_like(nodes: List[SymNode]) -> set:
    """Variables that are a layer's weight (its input 1, 2, ...) or named like one: a data input is
    none of these, so one missing from the params file is reported as a missing weight."""
    out = {n.id for n in nodes if n.op == "null" and n.name.endswith(_WEIGHT_SUFFIXES)}
    for n in nodes:
        if n.op in _LAYER_OPS:
            out.update(src for src, _ in n.inputs[1:] if nodes[src].op == "null")
    return out


#: Module-API output layers: forward is an activation, backward ignores the head gradient (uses a label)
TRAINING_HEADS = frozenset({"SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
                            "MAERegressionOutput", "SVMOutput", "MakeLoss"})


def g_name(nodes: List[SymNode], v: Value) -> str:
    """The name MXNet gives output ``v`` in ``get_internals()`` (what ``outputs=`` takes)."""
    n = nodes[v[0]]
    if n.op == "null":
        return n.name
    return f"{n.name}_output" if v[1] == 0 else f"{n.name}_output{v[1]}"


def _pick_outputs(nodes: List[SymNode], outputs: Sequence[str], path: str) -> List[Value]:
    heads = []
    for name in outputs:
        hit = next(((n.id, k) for n in nodes if n.op != "null" for k in range(8)
                    if name in (f"{n.name}_output{k}", f"{n.name}_output" if k == 0 else None, n.name if k == 0 else None)),
                   None)
        if hit is None:
            raise _err(f"no node output named {name!r} (names look like 'fc1_output', as in "
                       f"sym.get_internals().list_outputs())", path)
        heads.append(hit)
    return heads


def _reachable(nodes: List[SymNode], heads: List[Value]) -> set:
    keep, todo = set(), [h for h, _ in heads]
    while todo:
        i = todo.pop()
        if i not in keep:
            keep.add(i)
            todo.extend(s for s, _ in nodes[i].inputs)
    return keep


def _data_order(names: List[str]) -> List[str]:
    """``export`` names several inputs data0, data1, ... by position: order them by that number."""
    if len(names) > 1 and all(re.fullmatch(r"data\d+", n) for n in names):
        return sorted(names, key=lambda n: int(n[4:]))
    return names


def load_symbol_graph(symbol_path: str, params_path: str, input_shapes: Sequence[Sequence[int]],
                      input_names: Optional[Sequence[str]] = None,
                      input_dtypes: Optional[Sequence[str]] = None, outputs: Optional[Sequence[str]] = None):
    """(graph, arg params, aux params): the parsed symbol with every value's shape inferred for
    ``input_shapes``, and the weights as NDArrays by name."""
    import mxnet as mx
    _regular_file(symbol_path, "symbol", _MAX_SYMBOL_BYTES)
    with open(symbol_path, "rb") as f:
        raw = f.read()
    try:
        data = json.loads(raw.decode("utf-8"))
        nodes_json, heads = data["nodes"], data["heads"]
    except RecursionError:
        raise _err("the symbol file nests its JSON too deeply to be an MXNet symbol (HybridBlock.export writes a "
                   "flat node list); give the '-symbol.json' file that export wrote", symbol_path) from None
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise _err(f"not an MXNet symbol JSON file ({type(e).__name__}: {str(e)[:120]}); give the "
                   f"'-symbol.json' file that HybridBlock.export wrote", symbol_path) from None
    try:
        nodes = [SymNode(i, str(n["op"]), str(n["name"]), Attrs({str(k): str(v) for k, v in (n.get("attrs") or
                                                                                              n.get("param") or {}).items()},
                                                                str(n["op"]), str(n["name"])),
                         [(int(a[0]), int(a[1]) if len(a) > 1 else 0) for a in n.get("inputs", [])])
                 for i, n in enumerate(nodes_json)]
        heads_v = [(int(h[0]), int(h[1]) if len(h) > 1 else 0) for h in heads]
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise _err(f"a node of the symbol file is malformed ({type(e).__name__}: {str(e)[:120]})",
                   symbol_path) from None
    for n in nodes:
        if any(not 0 <= s < n.id for s, _ in n.inputs):
            raise _err(f"node {n.name!r} refers to a node that does not come before it", symbol_path)
        if any(not 0 <= k < 1 << 16 for _, k in n.inputs):
            raise _err(f"node {n.name!r} takes an output number out of range ({[k for _, k in n.inputs]})",
                       symbol_path)
    if not heads_v or any(not 0 <= h < len(nodes) or not 0 <= k < 1 << 16 for h, k in heads_v):
        raise _err("the symbol file has no valid output ('heads')", symbol_path)
    if outputs:
        heads_v = _pick_outputs(nodes, outputs, symbol_path)
        data["heads"] = [[h, k, 0] for h, k in heads_v]
        raw = json.dumps(data, ensure_ascii=False).encode("utf-8")    # MXNet reads no \\u escapes
    keep = _reachable(nodes, heads_v)
    head_op = next((n for n in nodes if n.id in keep and n.op in TRAINING_HEADS), None)
    if head_op is not None:
        src = g_name(nodes, head_op.inputs[0]) if head_op.inputs else "its input"
        raise _err(f"node {head_op.name!r} is a training head ({head_op.op}: its backward ignores the incoming "
                   f"gradient and uses a label), not part of the model to translate; translate the graph "
                   f"before it with outputs=[{src!r}]", symbol_path)
    try:
        sym = mx.sym.load_json(raw.decode("utf-8"))
    except Exception as e:
        last = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
        raise _err(f"MXNet cannot load the symbol file ({last})", symbol_path) from None
    arg, aux = read_params(params_path)
    variables = [n for n in nodes if n.op == "null" and n.id in keep]
    _refuse_nan({n.name for n in variables}, arg, aux, params_path)
    if input_names is None:
        weights = _weight_like(nodes)
        input_names = _data_order([n.name for n in variables if n.name not in arg and n.name not in aux
                                   and n.id not in weights])
    input_names = list(input_names)
    var_names = {n.name for n in variables}
    for nm in input_names:
        if nm not in var_names:
            raise _err(f"input {nm!r} is not a variable of the symbol (its variables without weights: "
                       f"{[n.name for n in variables if n.name not in arg and n.name not in aux]})", symbol_path)
    missing = [n.name for n in variables if n.name not in input_names and n.name not in arg and n.name not in aux]
    if missing:
        raise _err(f"the params file {params_path} has no value for {len(missing)} weight(s) of the symbol: "
                   f"{missing[:5]}{' ...' if len(missing) > 5 else ''}; give the .params file written by the "
                   f"same export (or name the extra data inputs with input_names)", symbol_path)
    if len(input_shapes) != len(input_names):
        raise _err(f"the model takes {len(input_names)} input(s) {input_names}, but {len(input_shapes)} input "
                   f"shape(s) were given; give one shape per input, in this order", symbol_path)
    aux_names = set(sym.list_auxiliary_states())
    for n in variables:
        n.kind = "input" if n.name in input_names else ("aux" if n.name in aux_names else "param")
    for nm in set(aux_names):
        if nm not in aux and nm in arg:
            aux[nm] = arg.pop(nm)
    shapes_in = {nm: tuple(int(s) for s in shp) for nm, shp in zip(input_names, input_shapes)}
    for nm, v in list(arg.items()) + list(aux.items()):
        if nm in var_names:
            shapes_in.setdefault(nm, tuple(v.shape))
    g = SymGraph(nodes, heads_v, input_names, symbol_json=raw.decode("utf-8"), path=symbol_path)
    g.absorbed |= {n.id for n in nodes if n.op != "null" and n.id not in keep}   # computed for nothing
    _infer(g, sym, shapes_in, input_names, input_dtypes, params_path)
    return g, arg, aux


def _refuse_nan(names, arg, aux, params_path: str) -> None:
    """A weight holding NaN cannot be proven (NaN equals nothing, itself included): say which."""
    import numpy as np
    for nm, v in list(arg.items()) + list(aux.items()):
        if nm in names and np.dtype(v.dtype).kind == "f":
            bad = int(np.isnan(v.asnumpy()).sum())
            if bad:
                raise _err(f"weight {nm!r} holds {bad} NaN value(s) of {int(np.prod(v.shape))}: a model with NaN "
                           f"weights computes NaN and cannot be proven equal to anything; give the .params file "
                           f"of a trained model (or re-initialise those weights)", params_path)


def _infer(g: SymGraph, sym, shapes_in, input_names, input_dtypes, params_path) -> None:
    """Every value's shape (MXNet's own inference), with a clear error for a wrong input shape
    or a weight whose shape does not fit."""
    internals = sym.get_internals()
    out_names = internals.list_outputs()
    try:
        _, shapes, _ = internals.infer_shape(**shapes_in)
    except Exception as e:
        msg = str(e).strip().splitlines()
        where = next((ln for ln in msg if "Error in operator" in ln), msg[-1] if msg else "")
        raise _err(f"the input shape(s) {[shapes_in[n] for n in input_names]} for {input_names} do not fit the "
                   f"model or its weights ({where.strip()[:300]}); give the shape the model was exported for "
                   f"(for an image model N,C,H,W)", g.path) from None
    if shapes is None or any(s is None for s in shapes):
        raise _err("MXNet could not infer every shape from the input shapes given", g.path)
    # internals outputs follow the nodes; a node with several outputs lists each
    by_name: Dict[str, Tuple[int, ...]] = dict(zip(out_names, (tuple(int(d) for d in s) for s in shapes)))
    for n in g.nodes:
        if n.op == "null":
            g.shapes[(n.id, 0)] = by_name.get(n.name, shapes_in.get(n.name))
            continue
        k = 0
        while f"{n.name}_output{k}" in by_name:
            g.shapes[(n.id, k)] = by_name[f"{n.name}_output{k}"]
            k += 1
        if f"{n.name}_output" in by_name:
            g.shapes[(n.id, 0)] = by_name[f"{n.name}_output"]


class BlockDelegate:
    """What ``verify`` asks of a reference block, passed to the SymbolBlock ``self.block``:
    its parameters, its cast and its forward hooks."""
    block: Any

    def collect_params(self, *a):
        return self.block.collect_params(*a)

    def cast(self, dtype):
        return self.block.cast(dtype)

    def register_forward_hook(self, hook):
        return self.block.register_forward_hook(hook)
