"""``translate_symbol_file(symbol, params, input_shapes, out_dir)``: an exported MXNet model
(``model-symbol.json`` + ``model-0000.params``, what ``HybridBlock.export`` writes and model zoos
ship) -> readable PyTorch source, safetensors weights and the float64 proof against MXNet's own
``SymbolBlock`` of the same files. The same three files and report as ``translate``."""
from __future__ import annotations

import os
import re
import tempfile
import time
from typing import Any, Optional, Sequence

import numpy as np

from .pipeline import TranslateReport

__all__ = ["translate_symbol_file", "translate_symbol_block"]


def _default_name(symbol_path: str) -> str:
    """The file's name without ``-symbol.json``: resnet18_v1-symbol.json -> resnet18_v1."""
    from .publish import name_from
    base = re.sub(r"(-symbol)?\.json$", "", os.path.basename(symbol_path))
    return name_from(base if base and not base[0].isdigit() else "model_" + base)


def _samples(g, input_shapes, input_dtypes, seed: int) -> list:
    """Random sample inputs: ids below the Embedding size for an input that feeds an Embedding
    (or is declared int), normal values otherwise."""
    rng = np.random.default_rng(seed + 1)
    out = []
    consumers = g.consumers()
    for k, (nm, shape) in enumerate(zip(g.inputs, input_shapes)):
        vid = next(n.id for n in g.nodes if n.op == "null" and n.name == nm)
        emb = [g.nodes[c] for c in consumers[vid] if g.nodes[c].op == "Embedding"]
        dtype = (input_dtypes[k] if input_dtypes else None) or ("int64" if emb else "float32")
        if np.dtype(dtype).kind in "iu":
            high = int(min(g.shapes[e.inputs[1]][0] for e in emb)) if emb else 10
            out.append(rng.integers(0, high, shape).astype(np.int64))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


def translate_symbol_file(symbol_path: str, params_path: str, input_shapes: Sequence[Sequence[int]], out_dir: str,
                          name: Optional[str] = None, *, verify: bool = True, lr: float = 0.1, seed: int = 0,
                          input_names: Optional[Sequence[str]] = None, input_dtypes: Optional[Sequence[str]] = None,
                          sample_inputs: Optional[Sequence[Any]] = None, force: bool = False,
                          outputs: Optional[Sequence[str]] = None) -> TranslateReport:
    """Write ``out_dir/<name>.py`` (torch modules recovered from the node names: ``stage1``, its
    repeated blocks as one class), ``<name>.safetensors`` and ``<name>.report.json``; return the
    report (``.ok`` only if every check passed, float64 on both sides).

    ``input_shapes``: one shape per data input (the symbol's variables without a stored weight,
    ``data`` or ``data0, data1, ...``; name them with ``input_names``). ``sample_inputs`` replaces
    the random inputs the proof uses. ``outputs`` picks the model's outputs by internal name
    (``["fc1_output"]``: the graph before a Module-API ``SoftmaxOutput`` head). Malformed files raise
    :class:`TranslationError`."""
    from .publish import name_problem as _name_problem
    from .symbol_graph import load_symbol_graph

    name = name or _default_name(symbol_path)
    if _name_problem(name):
        raise ValueError(f"translate: cannot use the name {name!r}: {_name_problem(name)}; choose another name")
    try:
        shapes = [tuple(int(d) for d in s) for s in input_shapes]
    except (TypeError, ValueError):
        raise ValueError(f"translate: input_shapes must be a list of shapes, one per input, such as "
                         f"[(1, 3, 224, 224)]; got {input_shapes!r}") from None
    if any(d <= 0 for s in shapes for d in s):
        raise ValueError(f"translate: every dimension of an input shape must be positive, got {shapes}")
    t0, c0 = time.perf_counter(), time.process_time()
    g, arg, aux = load_symbol_graph(symbol_path, params_path, shapes, input_names, input_dtypes, outputs)
    if sample_inputs is not None:
        arrays = [np.asarray(a.asnumpy() if hasattr(a, "asnumpy") else a) for a in sample_inputs]
        if [tuple(a.shape) for a in arrays] != shapes:
            raise ValueError(f"translate: sample_inputs have shapes {[a.shape for a in arrays]}, input_shapes "
                             f"{shapes}")
    else:
        arrays = _samples(g, shapes, input_dtypes, seed)
    return _translate_graph(g, arg, aux, arrays, out_dir, name, verify=verify, lr=lr, seed=seed, t0=t0, c0=c0,
                            force=force)


def _translate_graph(g, arg, aux, arrays, out_dir, name, *, verify, lr, seed, t0, c0, force) -> TranslateReport:
    """Emit, stage, prove, publish: the files are written as ``translate`` writes them (``Staging``)."""
    from .pipeline import stage_prove_publish
    from .publish import Staging
    from .symbol_emit import SymbolEmitter
    from .symbol_tree import build_tree
    from .symbol_verify import SymbolProxy, bn_records, first_divergent, reference_block
    from .verify import verify as run_verify

    stage = Staging(out_dir, name, force=force)     # refuses before any work: file as out_dir, foreign files
    block, dropped = reference_block(g.symbol_json, g.inputs, arg, aux)
    params = {p.name: p for p in block.collect_params().values()}
    em = SymbolEmitter(g, build_tree(g), params, name)
    source = em.source()

    def prove(report, cls, state, current):
        proxy = SymbolProxy(block, em.bn)
        checks, first, notes, report.dtype = run_verify(
            proxy, cls, em.entries, arrays, {}, bn_records(proxy, em.bn), lr=lr, seed=seed,
            ops=sorted(em.ops), current=current)
        if not all(c.passed for c in checks):
            checks, notes = _imperative_recheck(g, block, cls, em, arrays, lr, seed, current, checks, notes)
        report.checks, report.first_divergent, report.notes = checks, first, list(notes)
        if checks and (not checks[0].passed or not checks[-1].passed):   # randomised or own weights
            report.first_divergent = first_divergent(block, g, em.layer_paths, cls, state, arrays)
        if dropped:
            report.notes.append(f"dropout set to 0 in the MXNet reference for the train-mode checks "
                                f"({len(dropped)} Dropout nodes; random masks differ)")

    notes = [f"{len(em.ones)} BatchNorm(fix_gamma=True) scales written as 1 and frozen (MXNet ignores their "
             f"stored values)"] if em.ones else []
    notes.append(f"translated from the exported symbol {os.path.basename(g.path)} ({len(g.order)} op nodes, "
                 f"inputs {g.inputs} of shapes {[list(a.shape) for a in arrays]})")
    _fix_ones(params, em.ones)
    return stage_prove_publish(stage, name, em.top_class, source, em.entries,
                               lambda e: em.real.get(e.torch_key, e.gluon_key), prove=prove if verify else None,
                               block=em.top_class, unproven_note="not verified (verify=False)", notes=notes,
                               t0=t0, c0=c0)


def _imperative_recheck(g, block, cls, em, arrays, lr, seed, current, checks, notes):
    """The SymbolBlock proof failed: run it again against MXNet's imperative execution of the same
    graph (what Gluon blocks are verified against). If that passes, its checks decide and the
    report names each symbolic-execution difference; otherwise the SymbolBlock checks stand."""
    import json as _json
    from .symbol_imperative import ImperativeGraph
    from .symbol_verify import SymbolProxy, bn_records
    from .verify import verify as run_verify
    nodes = _json.loads(block._dualdl_json)["nodes"] if hasattr(block, "_dualdl_json") else None
    if nodes is None:
        return checks, notes
    ref = SymbolProxy(ImperativeGraph(g, block, nodes), em.bn)
    try:
        imp, _, imp_notes, _ = run_verify(ref, cls, em.entries, arrays, {}, bn_records(ref, em.bn), lr=lr, seed=seed,
                                          ops=sorted(em.ops), current=current)
    except Exception as e:   # an op without an imperative form: the SymbolBlock checks stand
        return checks, notes + [f"imperative MXNet re-check not possible ({type(e).__name__}: {str(e)[:120]})"]
    if not all(c.passed for c in imp):
        return checks, notes
    diffs = "; ".join(f"{c.name}: max rel diff {c.max_rel_diff:.3g} ({c.detail.split(' (tolerance')[0]})" for c in checks
                      if not c.passed)
    return imp, imp_notes + [
        "judged against MXNet's imperative execution of the same graph (each node run as its mx.nd op, as "
        "un-hybridized Gluon runs): MXNet's symbolic executor (SymbolBlock) differs from its own imperative "
        f"ops here, where the torch module agrees with the imperative ones: {diffs}"]


def _fix_ones(params, names) -> None:
    """MXNet ignores the gamma of a BatchNorm(fix_gamma=True) and uses 1: the torch weight is 1."""
    import mxnet as mx
    for nm in names:
        p = params[nm]
        p.set_data(mx.nd.ones(p.shape, dtype=p.dtype))


def translate_symbol_block(block: Any, sample_inputs: Any, out_dir: str, name: Optional[str] = None, *,
                           verify: bool = True, lr: float = 0.1, seed: int = 0, force: bool = False,
                           **_: Any) -> TranslateReport:
    """``translate`` for a ``gluon.SymbolBlock`` (``SymbolBlock.imports(...)``): its symbol and
    current weights are written to a temporary export and translated as files are. The block
    itself is not changed."""
    import mxnet as mx
    if not isinstance(block, mx.gluon.SymbolBlock):
        raise TypeError(f"translate_symbol_block: expected a gluon.SymbolBlock, got {type(block).__name__}")
    items = sample_inputs if isinstance(sample_inputs, (list, tuple)) else [sample_inputs]
    arrays = [np.asarray(a.asnumpy() if hasattr(a, "asnumpy") else
                         (a.detach().cpu().numpy() if hasattr(a, "detach") else a)) for a in items]
    inputs, out = block._cached_graph
    input_names = [i.name for i in inputs]
    from .symbol_nested import symbol_block_arrays
    _, save = symbol_block_arrays(block, out, lambda name: ValueError(
        f"translate: the SymbolBlock's parameter {name} has no value; load its weights first "
        f"(SymbolBlock.imports(..., param_file))"))
    with tempfile.TemporaryDirectory() as tmp:
        sym_path = os.path.join(tmp, "model-symbol.json")
        out.save(sym_path)
        par_path = os.path.join(tmp, "model-0000.params")
        mx.nd.save(par_path, save)
        return translate_symbol_file(sym_path, par_path, [a.shape for a in arrays], out_dir, name or "symbolblock",
                                     verify=verify, lr=lr, seed=seed, input_names=input_names,
                                     sample_inputs=arrays, force=force)
