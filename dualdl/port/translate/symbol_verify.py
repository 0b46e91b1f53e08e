"""The proof for an exported model, with the checks of ``verify.py`` unchanged: the reference is
MXNet's own ``SymbolBlock`` built from the same files. A SymbolBlock has no BatchNorm child
blocks, so this adapter shows ``verify`` one stand-in per BatchNorm node (its momentum and the
shape it normalised) for the running-statistics check. Dropout nodes get ``p=0`` in the reference
(their random masks differ between frameworks; the eval check is unaffected), and the zero begin
states of an RNN, which export freezes as float32, are float64 like the rest of the proof."""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Dict, List, Sequence, Tuple

from .symbol_graph import BlockDelegate

__all__ = ["reference_block", "SymbolProxy", "bn_records", "first_divergent"]


def reference_block(symbol_json: str, input_names: Sequence[str], arg: Dict[str, Any], aux: Dict[str, Any],
                    no_dropout: bool = True):
    """(SymbolBlock, names of dropout nodes set to 0) with the weights of ``arg``/``aux`` loaded."""
    import mxnet as mx
    import warnings
    data = json.loads(symbol_json)
    dropped = []
    if no_dropout:
        for n in data["nodes"]:
            if n["op"] in ("Dropout", "RNN"):
                attrs = n.setdefault("attrs", {})
                if float(attrs.get("p", "0.5" if n["op"] == "Dropout" else "0")) != 0.0:
                    dropped.append(n["name"])
                attrs["p"] = "0"
        rnn_states = {i for n in data["nodes"] if n["op"] == "RNN" for i, _, *_ in n["inputs"][2:]}
        for i in rnn_states:     # export froze the zero begin states as float32: the proof runs in float64
            n = data["nodes"][i]
            if n["op"] in ("_zeros", "zeros") and n.get("attrs", {}).get("dtype", "float32") == "float32":
                n["attrs"]["dtype"] = "float64"
    sym = mx.sym.load_json(json.dumps(data, ensure_ascii=False))   # MXNet reads no \\u escapes
    inputs = [mx.sym.var(nm) for nm in input_names]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        block = mx.gluon.SymbolBlock(sym, inputs)
    block._dualdl_json = json.dumps(data, ensure_ascii=False)     # for the imperative re-check
    params = block.collect_params()
    values = dict(arg)
    values.update(aux)
    for name, p in params.items():
        key = p.name if p.name in values else name
        v = values[key]
        p.shape = v.shape
        p._load_init(v.astype(p.dtype) if v.dtype != p.dtype else v, mx.cpu())
    return block, dropped


class _BatchNormNode:
    """What ``verify`` reads of a Gluon BatchNorm block: its momentum."""

    def __init__(self, momentum: float):
        self._kwargs = {"momentum": momentum}
        self._children: "OrderedDict[str, Any]" = OrderedDict()
        self._reg_params: Dict[str, Any] = {}


_BatchNormNode.__name__ = "BatchNorm"


class SymbolProxy(BlockDelegate):
    """The SymbolBlock as ``verify`` walks it: calls, parameters and casts go to the block; its
    children are the BatchNorm stand-ins, named by node."""

    def __init__(self, block: Any, bn: Dict[str, Tuple[float, int]]):
        self.block = block
        self._children: "OrderedDict[str, Any]" = OrderedDict((k, _BatchNormNode(m)) for k, (m, _) in bn.items())
        self._reg_params: Dict[str, Any] = {}

    def __call__(self, *args):
        return self.block(*args)


def bn_records(proxy: SymbolProxy, bn: Dict[str, Tuple[float, int]]) -> Dict[int, List[Any]]:
    """Records in the form ``verify`` reads: per stand-in, one call whose input has ``count``
    elements per channel (shape ``(count, 1)``)."""
    from .graph import Record, T
    return {id(proxy._children[k]): [Record((T((count, 1)),), None)] for k, (_, count) in bn.items()}


def first_divergent(block: Any, g: Any, layer_paths: Dict[int, str], torch_cls: Any, state: Dict[str, Any],
                    arrays: Sequence[Any], rtol: float = 1e-8) -> Any:
    """The first layer node (file order) whose float64 eval output differs between MXNet (the
    graph's internal output, from the same files) and the torch module at its path (a forward
    hook), as ``"<node name> (torch <path>)"``; None if every layer agrees."""
    import mxnet as mx
    import numpy as np
    import torch
    from .proof_torch import default_dtype, skip_random_init
    nodes = [n for n in sorted(layer_paths) if (n, 0) in g.shapes]
    if not nodes:
        return None
    inputs, out = block._cached_graph
    internals = out.get_internals()
    names = internals.list_outputs()
    want = []
    for n in nodes:
        nm = f"{g.nodes[n].name}_output" if f"{g.nodes[n].name}_output" in names else f"{g.nodes[n].name}_output0"
        want.append(internals[nm])
    params = block.collect_params()
    dtype = next((p.dtype for p in params.values()), np.float32)
    probe = mx.gluon.SymbolBlock(mx.sym.Group(want), inputs, params=params)
    probe.cast("float64")
    try:
        g_outs = probe(*[mx.nd.array(np.asarray(a, dtype=np.float64), dtype="float64") for a in arrays])
        g_outs = [o.asnumpy() for o in (g_outs if isinstance(g_outs, (list, tuple)) else [g_outs])]
    finally:
        block.cast(dtype)
    with skip_random_init():
        model = torch_cls()
    model.load_state_dict({k: v.clone() for k, v in state.items()})
    model.double().eval()
    mods = dict(model.named_modules())
    seen: Dict[str, Any] = {}

    def keep(path):
        def hook(m, a, o):
            seen.setdefault(path, (o[0] if isinstance(o, tuple) else o).detach().numpy())
        return hook
    handles = [mods[layer_paths[n]].register_forward_hook(keep(layer_paths[n])) for n in nodes
               if layer_paths[n] in mods]
    try:
        with torch.no_grad(), default_dtype(np.float64):
            model(*[torch.from_numpy(np.asarray(a).astype(np.int64) if np.asarray(a).dtype.kind in "iu"
                                     else np.asarray(a, dtype=np.float64)) for a in arrays])
    finally:
        for h in handles:
            h.remove()
    for n, ref in zip(nodes, g_outs):
        got = seen.get(layer_paths[n])
        if got is None:
            continue
        scale = max(float(np.abs(ref).max()), 1e-30) if ref.size else 1.0
        if got.shape != ref.shape or (ref.size and float(np.abs(got - ref).max()) > rtol * scale):
            return f"{g.nodes[n].name} (torch {layer_paths[n]})"
    return None
