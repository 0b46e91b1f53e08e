"""A ``gluon.SymbolBlock`` inside a translated Gluon tree (gluoncv's ``FeatureExpander``, a
``SymbolBlock(outputs, inputs)`` feature extractor): translated through the exported-symbol path
(``SymbolEmitter``) as one leaf of the Gluon tree. Its classes are written into the same file as
helpers (Gluon class names avoid them), its top class is constructed as the child, its weights map
to the model's own Gluon Parameters, and each BatchNorm node's momentum and per-channel count ride
on the running-variance entries for ``verify``'s running-statistics check (``nested_bn``)."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Dict, Tuple

import numpy as np

from .errors import TranslationError
from .module_tree import MapEntry
from .registry import Call, Leaf
from .render import defined_names
from .symbol_emit import SymbolEmitter
from .symbol_graph import load_symbol_graph
from .symbol_tree import build_tree

__all__ = ["is_symbol_block", "nested_leaf", "map_nested", "symbol_block_arrays"]


def is_symbol_block(block: Any) -> bool:
    import mxnet as mx
    return isinstance(block, mx.gluon.SymbolBlock)


def _join(a: str, b: str) -> str:
    return f"{a}.{b}" if a and b else (a or b)


def nested_leaf(gen: Any, block: Any, info: Any) -> Leaf:
    """The leaf of a SymbolBlock child: its emitter's classes as helpers of ``gen``'s file."""
    import mxnet as mx
    cls = type(block).__name__
    path = info.path
    try:
        inputs, out = block._cached_graph
    except Exception:
        raise TranslationError("a SymbolBlock whose graph is not built (call it once on a sample input "
                               "before translating)", block=cls, path=path) from None
    input_names = [i.name for i in inputs]
    if len(info.in_shapes) != len(input_names):
        raise TranslationError(f"this SymbolBlock takes {len(input_names)} inputs {input_names} but was called "
                               f"with {len(info.in_shapes)} tensors; call it with one array per input",
                               block=cls, path=path)
    params, save = symbol_block_arrays(block, out, lambda name: TranslationError(
        f"its parameter {name} has no value; initialise or load the model's weights before translating",
        block=cls, path=path))
    with tempfile.TemporaryDirectory() as tmp:
        sym_path = os.path.join(tmp, "nested-symbol.json")
        out.save(sym_path)
        par_path = os.path.join(tmp, "nested-0000.params")
        mx.nd.save(par_path, save)
        try:
            g, _, _ = load_symbol_graph(sym_path, par_path, [tuple(s) for s in info.in_shapes], input_names)
        except TranslationError as e:
            raise TranslationError(f"its symbol graph could not be read: {e}", block=cls, path=path) from None
    taken = set(defined_names(gen.helpers.values())) | {"Concurrent"}    # the file's names so far
    em = SymbolEmitter(g, build_tree(g), params, cls, reserved=taken)
    try:
        classes = em.classes()
    except TranslationError as e:
        raise TranslationError(f"{e} (inside the SymbolBlock {cls} at {path or '(top)'!r})", block=cls,
                               path=path) from None
    helpers = [h for h in em.helpers.values() if h not in gen.helpers]
    clash = sorted(defined_names(helpers) & taken)
    if clash:
        raise TranslationError(f"helper {clash[0]!r} of the SymbolBlock's ops is already defined differently in "
                               f"this file; please report this model", block=cls, path=path)
    top_name = em.top_class
    leaf = Leaf(Call(top_name), helpers=helpers + list(classes.values()),
                call_comment=f"the SymbolBlock {cls}, translated from its symbol graph")
    leaf.nested = em              # read by map_nested (codegen's _map_leaf hook)
    gen.ops |= set(em.ops)
    gen.notes.append(f"{path or '(top)'}: SymbolBlock {cls} translated from its symbol graph ({len(g.order)} op "
                     f"nodes) as {top_name}")
    return leaf


def map_nested(gen: Any, block: Any, leaf: Leaf, path: str, tpath: str) -> None:
    """The nested block's state_dict entries under ``tpath``, mapped to the model's Parameters."""
    em = leaf.nested
    ones = set(em.ones)
    for e in em.entries:
        real = em.real.get(e.torch_key)
        param, value = e.param, e.value
        if real in ones:     # BatchNorm(fix_gamma=True): MXNet uses 1 whatever is stored
            param, value = None, np.ones(tuple(e.param.shape), dtype=np.float32)
        m = MapEntry(_join(tpath, e.torch_key), _join(path, real or e.gluon_key or ""), param=param, value=value,
                     gluon_path=_join(path, e.gluon_path), tied_to=_join(tpath, e.tied_to) if e.tied_to else None)
        if e.torch_key.endswith("running_var") and e.gluon_path in em.bn:
            m.nested_bn = em.bn[e.gluon_path]     # (momentum, values per channel): verify's check
        gen.entries.append(m)
    if ones:
        gen.notes.append(f"{path or '(top)'}: {len(ones)} BatchNorm(fix_gamma=True) scales written as 1 and frozen "
                         f"(MXNet ignores their stored values)")


def symbol_block_arrays(block: Any, out: Any,
                        missing: Callable[[str], Exception]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(parameters by name, arrays keyed ``arg:``/``aux:`` as an exported ``.params`` file keys them) of
    a SymbolBlock whose graph ``out`` is built; ``missing(name)`` is raised for a parameter without a value."""
    aux_names = set(out.list_auxiliary_states())
    params: Dict[str, Any] = {}
    save: Dict[str, Any] = {}
    for p in block.collect_params().values():
        try:
            value = p.data()
        except Exception:
            raise missing(p.name) from None
        params[p.name] = p
        save[("aux:" if p.name in aux_names else "arg:") + p.name] = value
    return params, save
