"""Walk a Gluon block tree and record what each block computes.

``record_calls`` runs the block once on the sample inputs with a forward hook on every block
(input / output shapes of each call). ``trace_block`` then calls one block on ``mx.sym.var``
inputs with each direct child replaced by a recorder that returns placeholder symbols: what
remains in the symbol graph are the block's own ops, and the child calls with their inputs.
"""
from __future__ import annotations

import inspect
import json
from typing import Any, Dict, List, Optional, Tuple

from .errors import TranslationError
from .graph import CallSite, Graph, Record, T, flatten_struct, nested_var_name, walk
from .trace_scope import TraceScope, ValueDependent, as_legacy

__all__ = ["T", "Record", "gluon_inputs", "gluon_array", "np_mode", "np_style", "CallSite", "Graph", "record_calls", "is_hybrid", "trace_block", "walk", "flatten_struct",
           "nested_var_name"]


def _struct(x: Any) -> Any:
    import mxnet as mx
    if isinstance(x, mx.nd.NDArray):
        return T(tuple(int(s) for s in x.shape), str(x.dtype.__name__ if hasattr(x.dtype, "__name__") else x.dtype))
    if isinstance(x, (list, tuple)):
        return type(x)(_struct(v) for v in x)
    return x


def np_mode() -> bool:
    """Is MXNet's numpy interface on (``npx.set_np()``: d2l, Sockeye 2, MXNet >= 1.6 code)? Blocks
    written for it take ``mx.np`` arrays and refuse legacy ``mx.nd`` ones (and the reverse)."""
    import mxnet as mx
    return bool(mx.util.is_np_array())


def gluon_array(a: Any, dtype: Any = None) -> Any:
    """A numpy array as the Gluon side takes it: ``mx.np.array`` under the numpy interface,
    ``mx.nd.array`` otherwise."""
    import mxnet as mx
    import numpy as np
    a = np.asarray(a)
    return (mx.np if np_mode() else mx.nd).array(a, dtype=dtype if dtype is not None else a.dtype)


def gluon_inputs(block: Any, arrays: List[Any]) -> List[Any]:
    """The sample inputs as the block takes them: ``mx.nd`` arrays, or ``mx.np`` arrays under the
    numpy interface (integer ids as float32 either way, as Gluon feeds them); nested lists / tuples
    (begin states) keep their structure, None stays None."""
    import numpy as np

    def conv(a):
        if a is None:
            return None
        if isinstance(a, (list, tuple)):
            return type(a)(conv(v) for v in a)
        a = np.asarray(a)
        return gluon_array(a, a.dtype if a.dtype.kind == "f" else np.float32)
    return [conv(a) for a in arrays]


class Records(dict):
    """id(block) -> its recorded calls; ``root_args``: the inputs as the top block was called with
    them (they differ from what its forward got when the class overrides ``__call__``).
    :meth:`for_training` gives the calls of a training-mode run (recorded once, when a forward
    branches on ``autograd.is_training()``: a child may return other outputs there)."""
    root_args: tuple = ()
    root: Any = None
    inputs: Any = None
    training: bool = False
    _train: Optional["Records"] = None

    def for_training(self) -> "Records":
        """The calls of one run in training mode (``autograd.train_mode()``, not recording): what
        YOLOv3's output layer returns there (7 tensors) differs from inference (1). The model's
        values (BatchNorm statistics) are restored afterwards; if the run fails, the inference calls."""
        if self.training or self.root is None:
            return self
        if self._train is None:
            try:
                self._train = record_calls(self.root, self.inputs, training=True)
            except Exception:       # the training forward needs more (targets): the caller refuses then
                self._train = self
        return self._train


def record_calls(root: Any, inputs: List[Any], training: bool = False) -> Records:
    """Run ``root`` once (not recording gradients) and keep every block's calls, keyed by id(block),
    in the order they started. The arguments are taken when the call starts: a block may append to a
    list it was given (gluoncv DLA's ``Tree`` appends to ``children``)."""
    import mxnet as mx
    records = Records()
    records.root_args = _struct(tuple(inputs))
    records.root, records.inputs, records.training = root, inputs, training
    handles = []
    trained = [False]   # has a layer with trainable parameters run yet (in execution order)?
    running: Dict[int, List[Record]] = {}

    for _, b in walk(root):
        def pre(block, args):
            rec = Record(_struct(tuple(args)), None)
            records.setdefault(id(block), []).append(rec)
            running.setdefault(id(block), []).append(rec)

        def hook(block, args, out):
            rec = running[id(block)].pop()
            rec.out = _struct(out)
            rec.after_trainable = trained[0]
            rec.skip_states = getattr(block, "skip_states", None)   # Gluon RNN layers: called without states
            if not block._children and any(p.grad_req != "null" for p in block._reg_params.values()):
                trained[0] = True
        handles += [b.register_forward_pre_hook(pre), b.register_forward_hook(hook)]
    saved = {k: [d.copy() for d in p.list_data()] for k, p in root.collect_params().items()} if training else {}
    attrs = held_arrays(root) if training else []
    try:
        if training:
            with mx.autograd.train_mode():
                root(*inputs)
        else:
            root(*inputs)
        mx.nd.waitall()   # MKLDNN reorders weights in place after a forward: let it finish
    except Exception as e:
        if not training:
            _mode_mismatch(root, e)
        raise
    finally:
        for h in handles:
            h.detach()
        for k, p in root.collect_params().items():
            for dst, src in zip(p.list_data() if k in saved else [], saved.get(k, [])):
                src.copyto(dst)
        put_back(attrs)
    return records


def held_arrays(root: Any) -> List[Tuple[Any, str, Any]]:
    """(block, attribute, copy) of every array a block holds as a plain attribute: a forward may
    replace them (d2l's from-scratch BatchNorm moving statistics); ``put_back`` restores them."""
    import mxnet as mx
    return [(b, k, v.copy()) for _, b in walk(root) for k, v in list(vars(b).items()) if isinstance(v, mx.nd.NDArray)]


def put_back(held: List[Tuple[Any, str, Any]]) -> None:
    for b, k, v in held:
        b.__dict__[k] = v


def np_style(block: Any) -> bool:
    """Is the block tree written for MXNet's numpy interface (a class whose module binds
    ``mxnet.numpy`` / ``mxnet.numpy_extension``, as ``from mxnet import np, npx`` does)?"""
    import sys
    import mxnet as mx
    mods = {type(b).__module__ for _, b in walk(block)}
    for name in mods:
        mod = sys.modules.get(name)
        if mod is not None and not name.startswith("mxnet.") and any(
                v is mx.numpy or v is mx.numpy_extension for v in vars(mod).values()):
            return True
    return False


def _mode_mismatch(root: Any, e: Exception) -> None:
    """The block failed on the sample inputs: say so when the numpy-interface mode is the cause."""
    text = f"{type(e).__name__}: {e}".lower()
    on = np_mode()
    if not on and (np_style(root) or "numpy" in text):
        raise TranslationError("MXNet's numpy interface is off but this model is written for it (its code uses "
                               "mxnet.numpy / npx) and fails on legacy arrays: call npx.set_np() before translate, "
                               f"as the model's own code does ({type(e).__name__}: {str(e).splitlines()[0][:160]})",
                               block=type(root).__name__) from None
    if on and ("legacy" in text or "numpy_extension' has no attribute" in text):
        raise TranslationError("MXNet's numpy interface is on (npx.set_np()) but this model is written (or its "
                               "parameters were initialised) for the legacy mx.nd interface: call npx.reset_np() "
                               "before translate "
                               f"({type(e).__name__}: {str(e).splitlines()[0][:160]})",
                               block=type(root).__name__) from None


def _own_call(block: Any) -> Optional[Any]:
    """The ``__call__`` a class defines over Gluon's (gluonnlp's RoBERTa / DistilBERT / BERTModel
    fill in default arguments there before Gluon's ``__call__`` runs ``forward``), or None."""
    for cls in type(block).__mro__:
        if "__call__" in vars(cls):
            return None if cls.__module__.startswith("mxnet.") else vars(cls)["__call__"]
    return None


def _gluon_call(block: Any) -> Any:
    for cls in type(block).__mro__:
        if "__call__" in vars(cls) and cls.__module__.startswith("mxnet."):
            return vars(cls)["__call__"]
    raise TypeError(f"{type(block).__name__} is not a Gluon Block")


def _traced_args(block: Any, path: str, records: Dict[int, List[Record]]) -> Tuple[tuple, bool]:
    """(input structure, through the class's own __call__?). The top block of a class with its own
    ``__call__`` is traced as the user calls it (the generated ``forward`` takes those arguments);
    any other block as its ``forward`` was called (its parent's code passed those)."""
    own = _own_call(block)
    root_args = getattr(records, "root_args", None)
    if own is not None and path == "" and root_args is not None:
        args = list(root_args)
        try:     # optional arguments the user left out stay optional (=None) in the generated forward
            params = list(inspect.signature(own).parameters.values())[1:]
        except (TypeError, ValueError):
            params = []
        for p in params[len(args):]:
            if p.kind != p.POSITIONAL_OR_KEYWORD or p.default is not None:
                break
            args.append(None)
        return tuple(args), True
    return records[id(block)][0].args, False


def _input_names(block: Any, n: int, via_call: bool = False) -> List[str]:
    fn = block.hybrid_forward if hasattr(block, "hybrid_forward") and is_hybrid(block) else block.forward
    if via_call:
        fn = _own_call(block).__get__(block)
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    if names and names[0] == "F" and is_hybrid(block):
        names = names[1:]
    names = [n_ for n_ in names if n_ != "self"]
    out = names[:n] if len(names) >= n else names + [f"x{i}" for i in range(len(names), n)]
    return [n_ if n_.isidentifier() and n_ not in ("self", "F", "torch", "nn") else f"x{i}" for i, n_ in enumerate(out)]


def is_hybrid(block: Any) -> bool:
    import mxnet as mx
    return isinstance(block, mx.gluon.HybridBlock)


def trace_block(block: Any, path: str, records: Dict[int, List[Record]], both_modes: bool = False,
                inference_only: bool = False) -> Graph:
    """Trace one block's own computation (see the module docstring). Under MXNet's numpy interface
    the inputs are numpy symbols (``as_np_ndarray``); Python code that reads shapes, asks
    ``begin_state`` or ``autograd.is_training()`` runs inside a :class:`TraceScope`.

    The graph is the inference one (``autograd.is_training()`` answers False). A forward that asked
    is traced again in training mode: if that computes something else, ``both_modes=True`` returns
    it as ``graph.train`` (for a generated ``if self.training:``), otherwise TranslationError.
    A training forward that asks ``autograd.is_recording()`` (gluoncv's detectors: targets and
    losses inside ``autograd.record()``) is refused: a torch forward cannot tell the two apart.
    ``inference_only``: the training mode is not traced; ``graph.inference_only`` says the block asked."""
    args, via_call = _traced_args(block, path, records)
    in_names = _input_names(block, len(args), via_call)
    out, calls, asked, consts, baked, updates = _run_traced(block, path, records, training=False)
    graph = _graph(block, path, records, args, in_names, out, calls, consts, updates)
    if baked:
        many = len(baked) > 1
        graph.notes.append(f"{'sizes' if many else 'size'} {', '.join(map(str, baked))} that "
                           f"{type(block).__name__}'s Python code read from x.shape "
                           f"{'are written as numbers' if many else 'is written as a number'} (the sample input's): "
                           f"the generated forward expects inputs of {'those sizes on those axes' if many else 'that size on that axis'}")
    if asked[0] and inference_only:
        graph.inference_only = True
    elif asked[0]:   # the forward branches on autograd.is_training(): one graph must serve both modes
        train_records = records.for_training() if isinstance(records, Records) else records
        out_t, calls_t, asked_t, consts_t, _, updates_t = _run_traced(block, path, train_records, training=True)
        if asked_t[1]:
            raise TranslationError("its training forward asks autograd.is_recording(): inside autograd.record() it "
                                   "computes something else than outside (gluoncv's detectors compute training "
                                   "targets and losses from extra inputs there), which one torch forward cannot "
                                   "tell apart; translate the model for inference: translate(..., train=False) "
                                   "(CLI --inference), which writes and proves the inference forward",
                                   block=type(block).__name__, path=path)
        if _signature(out, calls) != _signature(out_t, calls_t) or updates_t:
            if not both_modes:
                raise TranslationError("forward computes something else in training than in inference "
                                       "(it branches on autograd.is_training()); one generated forward cannot "
                                       "follow both: register a translation for this block or move the branch "
                                       "into a layer", block=type(block).__name__, path=path)
            graph.train = _graph(block, path, train_records, args, in_names, out_t, calls_t, consts_t, updates_t)
    return graph


def _graph(block, path, records, args, in_names, out, calls, consts, updates=None) -> Graph:
    import mxnet as mx
    out_struct = records[id(block)][0].out
    outs = flatten_struct(out)
    call_ins = [s for c in calls for s in flatten_struct(c.args) if s is not None]
    updates = dict(updates or {})
    for s in outs + call_ins:
        if not isinstance(s, mx.sym.Symbol):
            raise TranslationError(f"a value of type {type(s).__name__} flows between layers (only tensors are "
                                   f"traced{_const_hint(s)})", block=type(block).__name__, path=path)
    group = mx.sym.Group([as_legacy(s) for s in outs + call_ins + list(updates.values())])
    data = json.loads(group.tojson())
    heads = [(h[0], h[1]) for h in data["heads"]]
    params = {p.name: local for local, p in block._reg_params.items()}
    graph = Graph(data["nodes"], heads, len(outs), out_struct, in_names, args, calls, params)
    graph.shapes = _shapes(group, data["nodes"], block, args, calls)
    used = {n["name"] for n in data["nodes"] if n["op"] == "null"}
    graph.consts = {k: v for k, v in consts.items() if k in used}
    # the attributes the forward replaces (state): their new values are the last heads
    graph.updates = [(attr, heads[len(outs) + len(call_ins) + i]) for i, attr in enumerate(updates)]
    return graph


def _const_hint(s: Any) -> str:
    import mxnet as mx
    if isinstance(s, mx.nd.NDArray):
        if not s.asnumpy().any():
            return (f"; this is an array of zeros of shape {tuple(s.shape)} made outside the traced ops (a begin "
                    f"state from a func=nd.zeros default argument?): pass it as an input, or build it with "
                    f"F.zeros / np.zeros inside forward")
        return (f"; this is an array of shape {tuple(s.shape)} held by the block or made in its forward, not "
                f"computed from the inputs: make it a Parameter (self.params.get(..., grad_req='null')) so it "
                f"is translated as a buffer")
    return ""


def _signature(out: Any, calls: List[CallSite]) -> str:
    import mxnet as mx
    syms = [as_legacy(s) for s in flatten_struct(out) + [a for c in calls for a in flatten_struct(c.args)]
            if isinstance(s, mx.sym.Symbol)]
    return mx.sym.Group(syms).tojson() if syms else repr(out)


def _run_traced(block: Any, path: str, records: Dict[int, List[Record]], training: bool):
    """Call ``block`` on symbols with its children replaced by recorders: (outputs, call sites,
    whether the forward asked autograd.is_training())."""
    import mxnet as mx
    from mxnet.base import NotImplementedForSymbol
    args, via_call = _traced_args(block, path, records)
    as_np = np_mode()
    counter = [0]

    def var(name, shape, dtype=None):
        v = mx.sym.var(name, shape=shape, dtype=dtype)
        return v.as_np_ndarray() if as_np else v

    def make_vars(s, base):
        if isinstance(s, T):
            return var(base, s.shape, s.dtype)
        if isinstance(s, (list, tuple)):
            return type(s)(make_vars(v, f"{base}__{i}") for i, v in enumerate(s))
        if s is None:
            return None
        raise TranslationError(f"input of type {type(s).__name__} (only tensors, lists/tuples of tensors "
                               f"and None are traced)", block=type(block).__name__, path=path)

    in_syms = tuple(make_vars(s, f"__in{i}") for i, s in enumerate(args))
    calls: List[CallSite] = []
    seen: Dict[str, int] = {}

    def recorder(name, child):
        def fake(*args):
            k = seen.get(name, 0)
            seen[name] = k + 1
            recs = records.get(id(child), [])
            if k >= len(recs):
                raise TranslationError(f"child {name!r} is called more often on symbols than it ran on the "
                                       f"sample input", block=type(block).__name__, path=path)
            out_struct = recs[k].out
            idx = len(calls)
            counter[0] = 0

            def ph(s):
                if isinstance(s, T):
                    counter[0] += 1
                    return var(f"__call{idx}_{counter[0] - 1}", s.shape, s.dtype)
                if isinstance(s, (list, tuple)):
                    return type(s)(ph(v) for v in s)
                raise TranslationError(f"child {name!r} returned {type(s).__name__}",
                                       block=type(block).__name__, path=path)
            outs = ph(out_struct)
            calls.append(CallSite(name, args, outs, out_struct))
            return outs
        return fake

    patched = _patched_children(block, records)
    for name, child in patched:
        child.forward = recorder(name, child)
    kind = "HybridBlock" if is_hybrid(block) else "non-hybridizable Block"
    try:
        with mx.name.NameManager(), TraceScope(block, training) as scope:
            # a class's own __call__ runs for the top block only (it is how the user calls it);
            # below, the parent's code already went through it and the recorded call is forward's
            out = block(*in_syms) if via_call or _own_call(block) is None else _gluon_call(block)(block, *in_syms)
            replaced = scope.replaced_state()
    except TranslationError:
        raise
    except (ValueDependent, NotImplementedForSymbol) as e:
        raise TranslationError(f"forward's Python code depends on the values of a tensor, not only on shapes, "
                               f"so it cannot be traced ({str(e).splitlines()[0]}); register a translation for "
                               f"this block, or compute that branch with ops (np.where, npx.sequence_mask)",
                               block=type(block).__name__, path=path) from None
    except Exception as e:  # the block's Python code could not run on symbols
        msg = str(e).splitlines()[0] if str(e) else ""
        low = msg.lower()
        hint = ""
        if "but got <symbol" in low or "but got <_symbol" in low:
            hint = ("; forward calls an NDArray-only function on a traced value through a name the tracer does not "
                    "swap (only the np / npx / nd modules are): call it as nd.<op> / np.<op> / F.<op>")
        elif isinstance(e, TypeError) and "ndarray" in low:
            hint = ("; an MXNet array that is not an input (made in forward outside np/npx/nd, or kept on the "
                    "block) met a traced value: build it with np/npx/nd/F inside forward, or make it a Parameter")
        raise TranslationError(f"forward of this {kind} could not be traced on symbols ({type(e).__name__}: "
                               f"{msg}){hint}", block=type(block).__name__, path=path) from None
    finally:
        for _, child in patched:
            child.__dict__.pop("forward", None)
    return out, calls, (scope.asked_training, scope.asked_recording), scope.consts, scope.baked, replaced


# containers whose layers a parent's forward may run without calling the container itself
# (self.encoder[i]; gluonnlp ELMo's foreach over self.forward_layers[i], a cell of a cell stack)
_CONTAINERS = ("HybridSequential", "Sequential", "HybridSequentialRNNCell", "SequentialRNNCell")


def _patched_children(block: Any, records: Dict[int, List[Record]]) -> List[Tuple[str, Any]]:
    """The blocks whose calls the trace records: the direct children and, inside a container that
    never ran as a whole but whose layers did (gluonnlp's AWDRNN calls ``self.encoder[i]``, gluoncv's
    HRNet ``self.fuse_layers[i][j]``), its layers, at any depth (``fuse_layers.1.0``)."""
    patched = []

    def add(name, child):
        patched.append((name, child))
        if (type(child).__name__ in _CONTAINERS and id(child) not in records
                and _ran_inside(child, records)):
            for gname, g in child._children.items():
                add(f"{name}.{gname}", g)
    for name, child in block._children.items():
        add(name, child)
    return patched


def _ran_inside(block: Any, records: Dict[int, List[Record]]) -> bool:
    return any(id(b) in records for _, b in walk(block) if b is not block)




def _shapes(group, nodes, block, args, calls) -> Dict[Tuple[int, int], Optional[Tuple[int, ...]]]:
    known = {}
    for i, s in enumerate(args):
        for j, t in enumerate(flatten_struct(s)):
            if isinstance(t, T):
                known[f"__in{i}" if not isinstance(s, (list, tuple)) else nested_var_name(f"__in{i}", s, j)] = t.shape
    for ci, c in enumerate(calls):
        for j, t in enumerate(flatten_struct(c.out_struct)):
            known[f"__call{ci}_{j}"] = t.shape
    for p in block._reg_params.values():
        known[p.name] = p.shape
    internals = group.get_internals()
    try:
        _, out_shapes, _ = internals.infer_shape_partial(**{k: v for k, v in known.items()
                                                            if k in internals.list_arguments()})
    except Exception:
        return {}
    names = internals.list_outputs()
    by_name = dict(zip(names, out_shapes))
    result = {}
    for nid, n in enumerate(nodes):
        if n["op"] == "null":
            result[(nid, 0)] = tuple(by_name.get(n["name"]) or ()) or None
            continue
        k = 0
        while True:
            key = f"{n['name']}_output{k}" if f"{n['name']}_output{k}" in by_name else (
                f"{n['name']}_output" if k == 0 else None)
            if key is None or key not in by_name:
                break
            shp = by_name[key]
            result[(nid, k)] = tuple(shp) if shp else None
            k += 1
    return result
