"""The base of dualdl's modules on MXNet/Gluon: ``Module`` (write-once models), ``Layer`` (built-in
layers), ``make_parameter`` and small helpers of the layer families.

Each layer is a Gluon ``HybridBlock`` with PyTorch's constructor signature, parameter names
(``weight``/``bias``/``running_mean``, never ``gamma``/``beta``), shapes, default initialisation
and train/eval behaviour, so a state dict moves between backends unchanged.

Differences hidden here (see docs/porting-guide.md):
- parameters are created at construction (PyTorch style): no deferred ``in_units`` inference;
- ``train()``/``eval()`` on the module decide Dropout/BatchNorm behaviour, not
  ``autograd.record()``/``train_mode()`` as in Gluon;
- gradients accumulate over backward calls until ``zero_grad()`` (``grad_req='add'``), as in
  PyTorch; Gluon's default ``'write'`` overwrites them on every backward;
- initialisation follows PyTorch's defaults (U(+-1/sqrt(fan_in)) for Linear/Conv weights and
  biases), drawn from MXNet's RNG; Gluon's default is Uniform(0.07) with zero biases.
"""
from __future__ import annotations

import contextlib
import inspect
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd
from mxnet.gluon import HybridBlock

from dualdl.devices import device as _parse_device
from dualdl.tensor import _dtype
from dualdl.nn import checks as _checks
from dualdl.nn.registry import register
from .core import native_device
from .grads import zero_grad as _zero_grads
from .fast.invoke import PreparedCall, kept
from .torch_style import _SYMBOL_DTYPES, run_forward

__all__ = ["Module", "Layer", "make_parameter", "shape_error", "is_ndarray", "factory_kwargs"]

_FACTORY = threading.local()        # the dtype of parameters created inside factory_kwargs' scope


@contextlib.contextmanager
def _factory_scope(ctx: Optional[mx.Context], dtype: Optional[str]) -> Iterator[None]:
    prev = getattr(_FACTORY, "dtype", None)
    _FACTORY.dtype = dtype or prev
    try:
        with (ctx or contextlib.nullcontext()):
            yield
    finally:
        _FACTORY.dtype = prev


def factory_kwargs(layer: str, device: Any, dtype: Any) -> Tuple[Optional[mx.Context], Optional[str], Any]:
    """torch's ``device=``/``dtype=`` factory arguments on MXNet: the context and dtype of every
    parameter (and buffer) the layer and its children create. Returns the native values and the
    scope to build the layer in (Gluon layers take neither argument; ``ctx=`` goes to ``initialize``)."""
    ctx = None if device is None else (device if isinstance(device, mx.Context)
                                       else native_device(_parse_device(device)))
    name = None
    if dtype is not None:
        name = _dtype(dtype).name
        if name not in ("float16", "float32", "float64"):
            raise ValueError(f"{layer}(dtype={dtype!r}): parameters must have a floating-point dtype "
                             f"(float16, float32 or float64)")
    return ctx, name, _factory_scope(ctx, name)


class _ParameterSpec:
    """What ``dl.nn.Parameter`` returns on MXNet, until assigned to a module attribute."""
    __slots__ = ("data", "requires_grad")

    def __init__(self, data: np.ndarray, requires_grad: bool):
        self.data, self.requires_grad = data, requires_grad


def make_parameter(data: Any, requires_grad: bool = True) -> _ParameterSpec:
    if isinstance(data, nd.NDArray):
        data = data.asnumpy()
    if not isinstance(data, np.ndarray):
        raise TypeError(f"nn.Parameter expects a numpy array or an NDArray on the mxnet backend, "
                        f"got {type(data).__name__}")
    return _ParameterSpec(np.array(data, copy=True), requires_grad)


def _bind_and_call(block: "Module", fn, args: tuple, params: Dict[str, Any], symbolic: bool = False):
    """Run ``fn(block, *args)`` with parameter attributes holding their bound NDArray/Symbol
    (dualdl_mx/torch_style.py: in-place operators, torch-method errors, made tensors)."""
    d = block.__dict__
    if not params:
        return run_forward(fn, symbolic, block, *args)
    saved = {k: d[k] for k in params}
    d.update(params)
    try:
        return run_forward(fn, symbolic, block, *args)
    finally:
        d.update(saved)


_GRAPH_STATE_WRITES: List[list] = []   # one list per outermost dualdl graph being traced (see Module)


def graph_writes_state() -> bool:
    """True while an outermost dualdl graph is traced, which can :func:`write_state_after_call`
    (a native Gluon parent's graph cannot)."""
    return bool(_GRAPH_STATE_WRITES)


def state_in_graph(param: gluon.Parameter, symbol: Any) -> Any:
    """``param``'s value at this point of the graph being traced: the last value written to it
    earlier in the same graph (a layer called twice in one forward), else its input ``symbol``."""
    for p, v in reversed(_GRAPH_STATE_WRITES[-1] if _GRAPH_STATE_WRITES else ()):
        if p is param:
            return v
    return symbol


def write_state_after_call(param: gluon.Parameter, value: Any) -> None:
    """Have the outermost dualdl graph being traced output ``value`` (in ``param``'s dtype, with
    its number of elements) and copy it into ``param`` after every call of the graph: in forward
    and in call order, as torch assigns its buffers (a graph cannot assign)."""
    _GRAPH_STATE_WRITES[-1].append((param, value))


class _StateWritingOp:
    """A ``CachedOp`` whose last outputs are the new values of parameters (buffers), one flat
    vector per dtype (:func:`_group_state_writes`): after each call one ``split`` per vector
    writes them into the parameters' arrays (one eager dispatch, not one copy per buffer),
    prepared once per context and kept while the parameters' arrays are the same ones
    (:class:`~dualdl_mx.fast.invoke.PreparedCall`: 176 us of Python a call for the demo CRNN's 8
    buffers, built each time, of which Gluon's ``Parameter.data`` and a reshape per buffer)."""

    def __init__(self, op: Any, groups: List[List[gluon.Parameter]]) -> None:
        self._op, self._groups = op, groups
        self._indices = [tuple(int(i) for i in np.cumsum([0] + [int(np.prod(p.shape)) for p in g[:-1]]))
                         for g in groups]
        self._writers: Dict[Any, Any] = {}

    def __call__(self, *args: Any) -> Any:
        out = self._op(*args)
        n = len(out) - len(self._groups)
        with autograd.pause():
            for i, flat in enumerate(out[n:]):
                write = self._writer(i, flat)
                write.set_input(0, flat)
                write()
        return out[0] if n == 1 else out[:n]

    def _writer(self, i: int, flat: nd.NDArray) -> PreparedCall:
        """The prepared copy (one buffer) or split of group ``i``'s vector into its parameters'
        arrays on ``flat``'s context."""
        ctx, params = flat.context, self._groups[i]
        arrays = [p._data for p in params]
        key = tuple(id(a) for a in arrays) + tuple(id(d) for a in arrays if a is not None for d in a)

        def build():
            dst = [_flat_view(p.data(ctx)) for p in params]
            call = (PreparedCall("_copyto", [flat], dst) if len(dst) == 1 else
                    PreparedCall("_split_v2", [flat], dst, indices=self._indices[i], axis=0, squeeze_axis=False))
            return call, arrays
        return kept(self._writers.setdefault((i, ctx), {}), "write", key, build)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._op, name)


def _flat_view(a: nd.NDArray) -> nd.NDArray:
    return a if len(a.shape) == 1 else a.reshape((-1,))


def _group_state_writes(writes: List[tuple]) -> Tuple[List[List[gluon.Parameter]], List[Any]]:
    """The last write of each parameter, grouped by the parameter's dtype, each group's values
    flattened and concatenated into one graph output (the values have their parameter's dtype)."""
    last = {id(p): i for i, (p, _) in enumerate(writes)}        # a buffer written twice: its last value
    groups: Dict[str, list] = {}
    for i, (p, v) in enumerate(writes):
        if last[id(p)] == i:
            groups.setdefault(np.dtype(p.dtype).name, []).append((p, v))
    params = [[p for p, _ in g] for g in groups.values()]
    flats = [mx.sym.concat(*[mx.sym.reshape(v, shape=(-1,)) for _, v in g], dim=0) if len(g) > 1
             else mx.sym.reshape(g[0][1], shape=(-1,)) for g in groups.values()]
    return params, flats


_TRAIN_MODE_CALLS = [0]       # depth of outermost module calls run under train_mode() (see _call)


def train_mode_follows_module() -> bool:
    """True while an outermost dualdl module call in train mode runs (and builds its graphs) with
    MXNet's ``is_train`` on, whatever ``autograd.record()`` says: a hybridized graph built then
    may use operators whose train-mode behaviour depends on ``is_train`` (BatchNorm's)."""
    return _TRAIN_MODE_CALLS[0] > 0


def _call(block: HybridBlock, args: tuple):
    """``HybridBlock.__call__``; an outermost call (NDArray inputs, not a graph being traced) of a
    module in train mode runs under ``autograd.train_mode()``: train()/eval() decide, as in torch,
    also for operators inside a hybridized graph, which read MXNet's ``is_train`` flag."""
    if not block.training or (args and isinstance(args[0], mx.sym.Symbol)):
        return HybridBlock.__call__(block, *args)
    _TRAIN_MODE_CALLS[0] += 1
    try:
        if autograd.is_training():
            return HybridBlock.__call__(block, *args)
        with autograd.train_mode():
            return HybridBlock.__call__(block, *args)
    finally:
        _TRAIN_MODE_CALLS[0] -= 1


def _refuse_empty_inputs(block: "Module", args: tuple) -> None:
    """Hides: torch runs an empty batch; MXNet 1.x's operators (and a hybridized cached graph)
    raise their own error on an NDArray with a 0 in its shape (even ``x * 2`` or ``attach_grad``).
    Checked on the NDArray arguments before MXNet runs: dualdl's ``empty_batch_error``."""
    for a in args:
        if isinstance(a, nd.NDArray) and 0 in a.shape:
            raise _checks.empty_batch_error(block._dl_empty_who(), a.shape)


class Module(HybridBlock):
    """Base of every dualdl module on MXNet: a HybridBlock with PyTorch's module API
    (``train/eval``, ``named_parameters``, ``named_buffers``, ``state_dict``, ``to``...)."""

    def __init__(self) -> None:
        super().__init__()
        self.training = True

    _dl_refuses_empty = False
    """Eager NDArray calls refused on an input with no elements by this base class (the layer's
    own check is elsewhere); hybridized calls always are: the cached graph cannot run one."""

    def __call__(self, *args):
        if self._active or self._dl_refuses_empty:
            _refuse_empty_inputs(self, args)
        return _call(self, args)

    # ---- hybridized: buffers assigned in forward (write_state_after_call) --------------------
    def _get_graph(self, *args):
        if self._cached_graph:
            return self._cached_graph
        _GRAPH_STATE_WRITES.append([])
        self.__dict__["_dl_arg_dtypes"] = [getattr(a, "dtype", None) for a in _leaves(args)]
        try:
            inputs, out = HybridBlock._get_graph(self, *args)
        finally:
            writes = _GRAPH_STATE_WRITES.pop()
            if self.__dict__.pop("_dl_arg_dtypes", None) is not None and not _GRAPH_STATE_WRITES:
                _SYMBOL_DTYPES.clear()
        groups, flats = _group_state_writes(writes)
        object.__setattr__(self, "_dl_state_writes", groups)
        if groups:
            self._cached_graph = inputs, mx.sym.Group(list(out) + flats)
        return self._cached_graph

    def _build_cache(self, *args):
        HybridBlock._build_cache(self, *args)
        if getattr(self, "_dl_state_writes", None):
            self._cached_op = _StateWritingOp(self._cached_op, self._dl_state_writes)

    def _dl_empty_who(self) -> str:
        return getattr(self, "_dl_layer", None) or type(self).__name__

    # ---- write-once classes: route HybridBlock.forward -> hybrid_forward -> user's forward ----
    @classmethod
    def _dl_native_namespace(cls, user_cls: type) -> dict:
        user_forward = getattr(user_cls, "forward", None)
        if user_forward is None and issubclass(cls, Layer):
            return {}                    # a subclass of a built-in layer that keeps its forward
        if user_forward is None or user_forward is Module.forward or user_forward is HybridBlock.forward:
            raise TypeError(f"{user_cls.__name__} must define forward(self, ...)")
        sig = inspect.signature(user_forward)

        names = [p.name for p in sig.parameters.values()][1:]

        def positional(self, args, kwargs):
            # Gluon's Block.__call__ and HybridBlock.forward are positional-only: bind keywords to
            # positions, filling defaults only up to the last argument given (Gluon's hybridized
            # inputs must be tensors or None, so trailing non-tensor defaults are left out)
            bound = sig.bind(self, *args, **kwargs)
            given = [i for i, n in enumerate(names) if n in bound.arguments]
            bound.apply_defaults()
            return tuple(bound.arguments[n] for n in names[:max(given) + 1]) if given else ()

        def __call__(self, *args, **kwargs):
            args = positional(self, args, kwargs) if kwargs else args
            if self._active:
                _refuse_empty_inputs(self, args)
            return _call(self, args)

        def forward(self, *args, **kwargs):
            return HybridBlock.forward(self, *(positional(self, args, kwargs) if kwargs else args))

        def hybrid_forward(self, F, *args, **params):
            d = self.__dict__
            if F is mx.sym and d.get("_dl_arg_dtypes"):      # the graph's inputs: their arrays' dtypes
                _mark_dtypes(_leaves(args), d["_dl_arg_dtypes"])
            d["_dl_in_forward"] = True           # a layer subclass's super().forward(x): Layer.forward
            try:
                return _bind_and_call(self, user_forward, args, params, F is mx.sym)
            finally:
                d["_dl_in_forward"] = False

        forward.__doc__ = user_forward.__doc__
        return {"__call__": __call__, "forward": forward, "hybrid_forward": hybrid_forward}

    # ---- attribute registration --------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, _ParameterSpec):
            value = self._dl_new_param(name, value.data.shape, value.data.dtype,
                                       data=value.data, requires_grad=value.requires_grad)
            return
        if isinstance(value, gluon.Parameter) and self._reg_params.get(name) is value:
            return                       # already registered by _dl_new_param
        if isinstance(value, gluon.Parameter) and name in self._reg_params:
            return self._dl_tie(name, value)
        if isinstance(value, HybridBlock) and isinstance(self._children.get(name), HybridBlock):
            self.register_child(value, name)      # torch replaces a child by any module (Gluon: same type only)
            object.__setattr__(self, name, value)
            return self._clear_cached_op()
        super().__setattr__(name, value)

    def _dl_tie(self, name: str, param: gluon.Parameter) -> None:
        """``self.decoder.weight = self.encoder.weight`` (weight tying; Gluon asserts "Overriding
        Parameter attribute"): the attribute becomes the other module's Parameter, one array whose
        gradient sums both uses, listed under both names in the state dict as torch's is."""
        old = self._reg_params[name]
        self._reg_params[name] = param
        self._params._params.pop(old.name, None)
        self._params._params[param.name] = param   # so this block alone hybridizes with it too
        object.__setattr__(self, name, param)
        self._clear_cached_op()

    def _dl_new_param(self, name: str, shape: Tuple[int, ...], dtype: Any = None,
                      init: Optional[mx.init.Initializer] = None, data: Optional[np.ndarray] = None,
                      requires_grad: bool = True, buffer: bool = False) -> gluon.Parameter:
        """Create, initialise (on the module's current context) and register a parameter; its dtype
        is ``dtype``, else the one ``factory_kwargs`` set for this construction, else float32."""
        dtype = dtype or getattr(_FACTORY, "dtype", None) or "float32"
        p = self.params.get(name, shape=tuple(int(s) for s in shape), dtype=np.dtype(dtype).name,
                            grad_req="add" if requires_grad and not buffer else "null",
                            init=init or mx.init.Zero(), allow_deferred_init=False,
                            differentiable=requires_grad and not buffer)
        p._dl_buffer = buffer
        p.initialize(ctx=self._dl_contexts())
        if data is not None:
            p.set_data(nd.array(data, dtype=np.dtype(dtype).name))
        HybridBlock.__setattr__(self, name, p)
        return p

    def _dl_contexts(self) -> List[mx.Context]:
        return getattr(self, "_dl_ctx", None) or [mx.current_context()]

    def register_buffer(self, name: str, tensor: Any, persistent: bool = True) -> None:
        """A non-learnable state tensor (grad_req='null'), saved in the state dict like torch's."""
        arr = tensor.asnumpy() if isinstance(tensor, nd.NDArray) else np.asarray(tensor)
        self._dl_new_param(name, arr.shape, arr.dtype, data=arr, buffer=True)

    def register_parameter(self, name: str, param: Any) -> None:
        setattr(self, name, param)

    # ---- PyTorch's module API ------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set train/eval mode on this module and its children (Dropout, BatchNorm). Unlike Gluon,
        the mode does not depend on ``autograd.record()``; a hybridized graph is rebuilt."""
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
            if isinstance(m, HybridBlock):
                m._clear_cached_op()
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def named_children(self) -> Iterator[Tuple[str, HybridBlock]]:
        return iter(self._children.items())

    def children(self) -> Iterator[HybridBlock]:
        return iter(self._children.values())

    def named_modules(self, prefix: str = "") -> Iterator[Tuple[str, HybridBlock]]:
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop(0)
            if id(m) in seen:
                continue
            seen.add(id(m))
            yield name, m
            stack[0:0] = [((name + "." if name else "") + k, c) for k, c in m._children.items()]

    def modules(self) -> Iterator[HybridBlock]:
        for _, m in self.named_modules():
            yield m

    def _dl_named_tensors(self, prefix: str, buffers: bool, recurse: bool = True
                          ) -> Iterator[Tuple[str, gluon.Parameter]]:
        """Parameters or buffers by structural name; ``recurse=False``: this module's own only
        (Gluon's ``collect_params`` always recurses)."""
        seen = set()
        if recurse:
            items = self._collect_params_with_prefix(prefix).items()
        else:
            items = (((prefix + "." if prefix else "") + k, p) for k, p in self._reg_params.items())
        for name, p in items:
            if bool(getattr(p, "_dl_buffer", False)) == buffers and id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[Tuple[str, gluon.Parameter]]:
        """Structural dotted names (``features.0.weight``), as ``torch.nn.Module.named_parameters``."""
        return self._dl_named_tensors(prefix, buffers=False, recurse=recurse)

    def parameters(self, recurse: bool = True) -> Iterator[gluon.Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[Tuple[str, gluon.Parameter]]:
        return self._dl_named_tensors(prefix, buffers=True, recurse=recurse)

    def buffers(self, recurse: bool = True) -> Iterator[gluon.Parameter]:
        for _, p in self.named_buffers(recurse=recurse):
            yield p

    def state_dict(self) -> Dict[str, nd.NDArray]:
        """Parameters then buffers by structural name, as NDArrays (first context's copy), once
        MKLDNN's pending in-place weight reorders are done (see :func:`dualdl_mx.state.state_dict`)."""
        nd.waitall()
        out = {}
        for name, p in self._collect_params_with_prefix().items():
            out[name] = p.data(p.list_ctx()[0])
        return out

    def load_state_dict(self, state_dict: Dict[str, Any], strict: bool = True):
        from dualdl.state import load_state_dict
        return load_state_dict(self, state_dict, strict=strict)

    def to(self, device: Any) -> "Module":
        """Move every parameter to a device (``reset_ctx``); a list of devices replicates them
        (MXNet data parallelism: one copy per context). A dtype (``"float64"``, a numpy or torch
        dtype) casts the floating parameters and buffers instead, as torch's ``model.to(dtype)``."""
        if _is_dtype(device):
            from dualdl.params import to_dtype
            return to_dtype(self, device)
        devs = device if isinstance(device, (list, tuple)) else [device]
        ctxs = [d if isinstance(d, mx.Context) else native_device(_parse_device(d)) for d in devs]
        for m in self.modules():
            object.__setattr__(m, "_dl_ctx", ctxs)
        self.collect_params().reset_ctx(ctxs)
        return self

    def double(self) -> "Module":
        """torch's ``model.double()`` (Gluon: ``cast('float64')``, buffers too)."""
        return self.to("float64")

    def float(self) -> "Module":
        """torch's ``model.float()``."""
        return self.to("float32")

    def half(self) -> "Module":
        """torch's ``model.half()``."""
        return self.to("float16")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the gradients and mark them stale (torch's ``None``): an optimizer step skips a
        parameter with no backward since the last ``zero_grad``."""
        _zero_grads(list(self.parameters()))

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = [f"{type(self).__name__}({extra}" + (")" if not self._children else "")]
        if self._children:
            for k, c in self._children.items():
                sub = repr(c).replace("\n", "\n  ")
                lines.append(f"  ({k}): {sub}")
            lines.append(")")
        return "\n".join(lines)


class Layer(Module):
    """Base of dualdl's built-in MXNet layers: they implement ``hybrid_forward(F, x, **params)``
    directly (no user-forward binding). A public subclass defined in ``dualdl_mx`` registers as the
    dualdl layer of its class name (``_dl_layer``, ``backend.module("nn").<name>``; see
    dualdl/nn/registry.py)."""

    _dl_unbatched_ndim: Optional[int] = None
    """The rank of torch's unbatched input (``Conv2d``: 3, ``(C, H, W)``), if the layer takes one:
    hides that torch accepts an input without its batch axis where MXNet's operators need it. An
    NDArray first argument of that rank is run as a batch of one and the batch axis removed from
    every output (eager and hybridized alike: the cached graph only ever sees batched inputs)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register(cls, __package__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            args = _positional(self, args, kwargs)
        n = self._dl_unbatched_ndim
        if n is not None and args and isinstance(args[0], nd.NDArray) and args[0].ndim == n:
            out = Module.__call__(self, args[0].expand_dims(0), *args[1:])
            return _unbatch(out)
        return Module.__call__(self, *args)

    def forward(self, *args: Any) -> Any:
        """Gluon's ``HybridBlock.forward``; called as ``super().forward(x)`` from the forward of a
        write-once subclass of this layer (``class Block(nn.Sequential)``), the layer's own
        ``hybrid_forward`` with the parameters the running forward has bound (Gluon's would trace
        the block a second time inside its own graph)."""
        d = self.__dict__
        if not d.get("_dl_in_forward"):
            return HybridBlock.forward(self, *args)
        F = mx.sym if args and isinstance(args[0], mx.sym.Symbol) else nd
        own = next(c.__dict__["hybrid_forward"] for c in type(self).__mro__
                   if "hybrid_forward" in c.__dict__ and "_dl_native_for" not in c.__dict__)
        return own(self, F, *args, **{k: d[k] for k in self._reg_params})

    @staticmethod
    def _uniform(bound: float) -> mx.init.Initializer:
        return mx.init.Uniform(scale=bound)


def _leaves(args: Any) -> List[Any]:
    """The tensors of nested argument lists/tuples, in order (Gluon flattens a graph's inputs so)."""
    if isinstance(args, (list, tuple)):
        return [t for a in args for t in _leaves(a)]
    return [args]


def _mark_dtypes(symbols: List[Any], dtypes: List[Any]) -> None:
    """Record each input Symbol's array dtype for :func:`dualdl_mx.torch_style.symbol_dtype`."""
    for sym, dt in zip(symbols, dtypes):
        if isinstance(sym, mx.sym.Symbol) and dt is not None:
            _SYMBOL_DTYPES[id(sym)] = (sym, np.dtype(dt))


def _is_dtype(obj: Any) -> bool:
    """A dtype spelling (``"float64"``, ``np.float64``, ``torch.float64``), not a device."""
    if isinstance(obj, (list, tuple, mx.Context)):
        return False
    if isinstance(obj, str):
        return obj in ("float16", "float32", "float64", "half", "float", "double")
    if isinstance(obj, (np.dtype, type)):
        return True
    return type(obj).__module__ == "torch" and type(obj).__name__ == "dtype"


def _unbatch(out: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return type(out)(_unbatch(o) for o in out)
    return out.squeeze(axis=0) if isinstance(out, nd.NDArray) else out


_FORWARD_NAMES: Dict[type, Tuple[Tuple[str, Any], ...]] = {}


def _positional(block: "Layer", args: tuple, kwargs: Dict[str, Any]) -> tuple:
    """Keyword arguments of a built-in layer's call as positions (Gluon's ``__call__`` is
    positional only): named as in its ``hybrid_forward(F, ...)``; torch's name of the first tensor
    argument, ``input``, is accepted for it whatever the MXNet code calls it (``m(input=x)``)."""
    cls = type(block)
    names = _FORWARD_NAMES.get(cls)
    if names is None:
        sig = inspect.signature(cls.hybrid_forward)
        names = _FORWARD_NAMES[cls] = tuple(
            (p.name, p.default) for p in list(sig.parameters.values())[2:]
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY))
    kwargs = dict(kwargs)
    known = {n for n, _ in names} | {"input"}
    unknown = [k for k in kwargs if k not in known]
    if unknown:
        raise TypeError(f"{cls.__name__}.forward() got an unexpected keyword argument {unknown[0]!r}")
    if "input" in kwargs and names and names[0][0] != "input" and not args:
        args = (kwargs.pop("input"),)
    out = list(args)
    for name, default in names[len(args):]:
        if not kwargs:
            break
        if name not in kwargs and default is inspect.Parameter.empty:
            raise TypeError(f"{cls.__name__}.forward() missing argument {name!r} before "
                            f"{', '.join(map(repr, kwargs))}")
        out.append(kwargs.pop(name, default))
    if kwargs:
        raise TypeError(f"{cls.__name__}.forward() got an unexpected keyword argument {next(iter(kwargs))!r}")
    return tuple(out)


def shape_error(layer: str, expected: str, x: Any) -> ValueError:
    return _checks.shape_error(layer, expected, x.shape)


def is_ndarray(x: Any) -> bool:
    return isinstance(x, nd.NDArray)
