"""What a Gluon ``forward`` written for NDArrays needs to run on symbols while it is traced.

MXNet's symbols have no ``.shape``, no context and no data; a plain ``nn.Block`` (d2l's style)
calls ``np.*`` / ``npx.*`` / ``nd.*`` directly, reads ``x.shape``, asks ``rnn.begin_state`` for
zero arrays, ``param.data()`` for values and ``autograd.is_training()`` for the mode. While one
block is traced, :class:`TraceScope` answers each of these from the recorded call:

- ``sym.dtype``: MXNet type inference from the recorded input dtypes;
- ``sym.shape`` / ``sym.ndim``: MXNet shape inference from the shapes of the recorded inputs; the
  numbers are those of the sample input (``Dim``: an int that remembers which tensor and axis it
  came from, so ``x.reshape(x.shape[0], -1)`` is written as ``x.reshape(x.shape[0], -1)`` and
  ``x.reshape(y.shape)`` as ``x.reshape(y.shape)``; other uses keep the sample's numbers);
- ``np`` / ``npx`` / ``nd`` in the block's module (and ``mx.np`` / ``mx.npx`` / ``mx.nd``): the
  symbol function when an argument is a symbol;
- ``begin_state``: zero symbols (torch's default states); ``param.data()``: the parameter's symbol;
- ``ctx`` / ``as_in_ctx`` / ``copyto`` on symbols: no-ops (the translation has no device);
- arrays the block holds as plain attributes (d2l's positional-encoding table ``self.P``): symbols
  named ``__const_<attr>`` (``consts``), which the generated module keeps as buffers;
- ``np.zeros`` / ``np.arange``... called without a symbol argument: their symbol twins (constants
  in the graph rather than arrays that cannot meet a symbol);
- ``autograd.is_training()``: False (inference). The caller traces again with True when the
  block asked, and refuses when the two graphs differ.

Everything is restored on exit: the module globals, the MXNet classes and the blocks' attributes.
"""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Tuple

__all__ = ["Dim", "TraceScope", "ValueDependent", "as_legacy"]


class ValueDependent(Exception):
    """The block's Python code asked for the values of a tensor (not only its shape)."""


class Dim(int):
    """One size read from ``sym.shape``: the number of the sample input, with where it came from.
    MXNet writes op attributes with ``str()``: a Dim written that way is a size fixed in the graph
    (``baked``), which the trace reports."""
    src: int = 0      # handle of the symbol whose shape was read
    axis: int = 0

    def __str__(self) -> str:
        if _BAKED is not None:
            _BAKED.add(int(self))
        return int.__repr__(self)

    __repr__ = __str__


def _derived(op):
    def fn(self, *other):
        v = op(int(self), *[int(o) if isinstance(o, Dim) else o for o in other])
        return _dim(v, 0, -1) if isinstance(v, int) and not isinstance(v, bool) else v
    return fn


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__",
            "__rfloordiv__", "__mod__", "__neg__"):      # x.shape[1] - 1: still read from a shape
    setattr(Dim, _op, _derived(getattr(int, _op)))


_BAKED: "set | None" = None    # sizes from x.shape written into op attributes during the active trace


def _plain(spec):
    return tuple(int(d) if isinstance(d, Dim) else d for d in spec)


def _dim(v: int, src: int, axis: int) -> Dim:
    d = Dim(v)
    d.src, d.axis = src, axis
    return d


def _handle(s: Any) -> int:
    return int(s.handle.value or 0)


def _is_sym(x: Any) -> bool:
    import mxnet as mx
    if isinstance(x, mx.sym.Symbol):
        return True
    if isinstance(x, (list, tuple)):
        return any(_is_sym(v) for v in x)
    return False


_CREATE = {"zeros", "ones", "full", "arange", "eye"}
_SCOPE: "TraceScope | None" = None    # the active trace


def _broadcast_like(args, kwargs):
    """``np.broadcast_to(c, (X.shape[0], c.shape[0], c.shape[1]))`` (d2l's seq2seq decoder): sizes of
    ``c`` itself stay, sizes of one other tensor ``X`` become MXNet's broadcast_like on ``X``, written
    ``c.unsqueeze(0).expand(X.shape[0], -1, -1)`` (any length) instead of the sample's numbers."""
    import mxnet as mx
    if _SCOPE is None or kwargs or len(args) != 2 or not isinstance(args[0], mx.sym.Symbol):
        return None
    x, shape = args
    if not isinstance(shape, (tuple, list)):
        return None
    try:
        xs = x.shape
    except ValueDependent:
        return None
    pad = len(shape) - len(xs)
    h, lhs, rhs, other = _handle(x), [], [], None
    for i, d in enumerate(shape):
        if i >= pad and isinstance(d, Dim) and d.src == h and d.axis == i - pad:
            continue                              # x's own size, in place
        if isinstance(d, Dim) and d.src != h and (other is None or d.src == other) and d.src in _SCOPE._shaped:
            other = d.src
            lhs.append(i); rhs.append(d.axis)
            continue
        return None
    if other is None or pad < 0 or any(i >= pad and xs[i - pad] != 1 for i in lhs):
        return None
    y = as_legacy(x)
    for _ in range(pad):
        y = mx.sym.expand_dims(y, axis=0)
    return mx.sym.broadcast_like(y, as_legacy(_SCOPE._shaped[other]), lhs_axes=tuple(lhs),
                                 rhs_axes=tuple(rhs)).as_np_ndarray()


def _np_dtype(d):
    import numpy
    return numpy.dtype(d)


def _dtype_of(sym):
    import numpy
    try:
        _, outs, _ = sym.infer_type_partial()
    except Exception:   # noqa: BLE001
        outs = None
    return numpy.dtype(outs[0]) if outs and outs[0] is not None else numpy.dtype("float32")


def _slice_like(sym, key):
    """``p[:, :X.shape[1], :]`` (BERT's learned positions cut to the sequence length): MXNet's
    slice_like on X, written ``p[:, :X.shape[1]]`` (any length) instead of the sample's number."""
    import mxnet as mx
    if _SCOPE is None or not key or not all(isinstance(v, slice) for v in key):
        return None
    axes, other = [], None
    for i, v in enumerate(key):
        if v == slice(None):
            continue
        d = v.stop
        if (v.start in (None, 0) and v.step in (None, 1) and isinstance(d, Dim) and d.axis == i
                and (other is None or d.src == other) and d.src in _SCOPE._shaped and d.src != _handle(sym)):
            other = d.src
            axes.append(i)
            continue
        return None
    if other is None:
        return None
    return mx.sym.slice_like(as_legacy(sym), as_legacy(_SCOPE._shaped[other]), axes=tuple(axes)).as_np_ndarray()


def _arange_like(args, kwargs):
    """``np.arange(x.shape[i])`` / ``np.arange(0, x.shape[i])`` (d2l's MaskLM batch index): MXNet's
    arange_like on x, written ``torch.arange(x.shape[i], dtype=x.dtype, device=x.device)`` (any size,
    x's device) instead of a fixed ``torch.arange(2)``."""
    import mxnet as mx
    if _SCOPE is None or set(kwargs) - {"dtype", "ctx", "device"} or not 1 <= len(args) <= 3:
        return None
    start, stop = (0, args[0]) if len(args) == 1 else (args[0], args[1])
    step = args[2] if len(args) == 3 else 1
    if not (isinstance(stop, Dim) and not isinstance(start, Dim) and start == 0 and step == 1):
        return None
    src = _SCOPE._shaped.get(stop.src)
    if src is None:
        return None
    out = mx.sym.contrib.arange_like(as_legacy(src), axis=stop.axis)
    dtype = kwargs.get("dtype")
    if dtype is not None and _dtype_of(src) != _np_dtype(dtype):
        out = mx.sym.cast(out, dtype=_np_dtype(dtype).name)
    return out.as_np_ndarray() if mx.util.is_np_array() else out


class _Dispatch:
    """Stands for ``mxnet.numpy`` / ``numpy_extension`` / ``ndarray`` in a traced block's module:
    a function called with a symbol runs its symbol twin, anything else the real one."""

    def __init__(self, real: Any, sym: Any):
        self._real, self._sym = real, sym

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._real, name)
        twin = getattr(self._sym, name, None)
        if not callable(real) or twin is None or isinstance(real, type) or type(real).__name__ == "module":
            return real

        def call(*args, **kwargs):
            if name in ("arange", "broadcast_to"):
                like = (_arange_like if name == "arange" else _broadcast_like)(args, kwargs)
                if like is not None:
                    return like
            if name in _CREATE or _is_sym(args) or _is_sym(list(kwargs.values())):
                return twin(*args, **{k: v for k, v in kwargs.items() if k not in ("ctx", "device")})
            return real(*args, **kwargs)
        call.__name__ = name
        return call


def _twins():
    import mxnet as mx
    return [(mx.numpy, mx.sym.numpy), (mx.numpy_extension, mx.sym.numpy_extension), (mx.nd, mx.sym)]


class TraceScope:
    """Context manager; see the module docstring. ``blocks``: the traced block and its children
    (their ``begin_state`` is answered with zero symbols, their attributes restored)."""

    def __init__(self, block: Any, training: bool = False):
        self.block, self.training = block, training
        self.asked_training = False
        self.asked_recording = False    # autograd.is_recording(): answered False (nothing records a trace)
        self.consts: Dict[str, Tuple[str, Any]] = {}   # var name -> (attribute, numpy value)
        self._shaped: Dict[int, Any] = {}   # handle -> symbol whose shape the code read
        self._undo: List[Tuple[Any, str, Any, bool]] = []   # (owner, name, old value, existed)
        self._globals: List[Tuple[dict, str, Any]] = []
        self._dicts: List[Tuple[Any, dict]] = []

    # ---- patching helpers ----
    def _set(self, owner: Any, name: str, value: Any) -> None:
        existed = name in owner.__dict__
        self._undo.append((owner, name, owner.__dict__.get(name), existed))
        if isinstance(owner, type):
            setattr(owner, name, value)
        else:
            owner.__dict__[name] = value

    def replaced_state(self) -> Dict[str, Any]:
        """Arrays the block holds (not Parameters) that its forward replaced with a value computed from
        the old one, attribute -> the new value's symbol: state kept across calls in Python attributes
        (d2l's from-scratch BatchNorm moving stats; written as buffer updates); d2l's
        attention_weights, overwritten without being read, are not state."""
        import mxnet as mx
        out = {}
        for var, (attr, _) in self.consts.items():
            new = self.block.__dict__.get(attr)
            if isinstance(new, mx.sym.Symbol) and new.name != var and var in as_legacy(new).list_inputs():
                out[attr] = new     # the new value is computed from the old one: a running update
        return out

    @property
    def baked(self) -> List[int]:
        """Sizes read from ``x.shape`` that went into op attributes as the sample's numbers."""
        return sorted(self._baked)

    def __enter__(self) -> "TraceScope":
        global _BAKED, _SCOPE
        self._baked: set = set()
        _BAKED, _SCOPE = self._baked, self
        try:
            return self._enter()
        except BaseException:
            self.__exit__(None, None, None)    # undo what was patched before the failure
            raise

    def _enter(self) -> "TraceScope":
        import mxnet as mx
        from mxnet.gluon.parameter import Parameter
        from mxnet.symbol.numpy import _Symbol
        scope = self

        def shape(sym):
            try:
                _, outs, _ = sym.infer_shape_partial()
            except Exception as e:   # noqa: BLE001 - MXNet raises MXNetError / ValueError
                raise ValueDependent(f"the shape of {sym.name!r} could not be inferred ({str(e).splitlines()[0]})")
            s = outs[0] if outs else None
            if s is None or any(int(d) < 0 for d in s):
                raise ValueDependent(f"the shape of {sym.name!r} is not known from the recorded input shapes")
            h = _handle(sym)
            scope._shaped[h] = sym
            return tuple(_dim(int(d), h, i) for i, d in enumerate(s))

        def ctx(sym):
            return mx.current_context()

        def same(sym, *args, **kwargs):
            return sym

        def values(sym, *args, **kwargs):
            raise ValueDependent(f"the block's Python code reads the values of {sym.name!r}")

        np_reshape = _Symbol.reshape

        def reshape(sym, *args, **kwargs):
            spec = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            h = _handle(sym)
            srcs = {d.src for d in spec if isinstance(d, Dim)}
            if (spec and len(srcs) == 1 and all(isinstance(d, Dim) for d in spec) and h not in srcs
                    and [d.axis for d in spec] == list(range(len(spec)))):
                other = scope._shaped.get(srcs.pop())
                if other is not None and len(shape(other)) == len(spec):   # x.reshape(y.shape)
                    return mx.sym.reshape_like(as_legacy(sym), as_legacy(other)).as_np_ndarray()
            refs = [("d", d.axis) if isinstance(d, Dim) and d.src == h else None for d in spec]
            if any(refs):
                plain = tuple(int(d) if r else d for d, r in zip(spec, refs))
                with mx.AttrScope(__dualdl_dims__=repr(refs)):
                    return np_reshape(sym, plain, **kwargs)
            return np_reshape(sym, *args, **kwargs)

        for cls in (mx.sym.Symbol, _Symbol):
            self._set(cls, "dtype", property(_dtype_of))
            self._set(cls, "shape", property(shape))
            self._set(cls, "ndim", property(lambda s: len(shape(s))))
            self._set(cls, "ctx", property(ctx))
            self._set(cls, "context", property(ctx))
            for name in ("as_in_ctx", "as_in_context", "copyto", "detach"):
                self._set(cls, name, same)
            for name in ("asnumpy", "asscalar", "item", "__float__", "__int__", "__index__"):
                self._set(cls, name, values)
        self._set(_Symbol, "reshape", reshape)
        np_repeat = _Symbol.repeat

        def repeat(sym, repeats, axis=None):
            """v.repeat(X.shape[1]) on a 1-d v (d2l's masked_softmax): each entry X.shape[1] times,
            traced as broadcast_like + reshape so the count follows X."""
            other = scope._shaped.get(repeats.src) if isinstance(repeats, Dim) else None
            if other is not None and repeats.src != _handle(sym) and axis in (None, 0) and len(shape(sym)) == 1:
                wide = mx.sym.broadcast_like(mx.sym.expand_dims(as_legacy(sym), axis=1), as_legacy(other),
                                             lhs_axes=(1,), rhs_axes=(repeats.axis,))
                return np_reshape(wide.as_np_ndarray(), -1)
            return np_repeat(sym, repeats, axis)
        self._set(_Symbol, "repeat", repeat)
        nd_reshape = mx.sym.Symbol.reshape

        def legacy_reshape(sym, *args, **kwargs):
            """Legacy Reshape: a size read from the same axis of this tensor is MXNet's code 0 (copy)."""
            shp = kwargs.get("shape", args[0] if args else None)
            if isinstance(shp, (tuple, list)) and not kwargs.get("reverse") and any(isinstance(d, Dim) for d in shp):
                h = _handle(sym)
                codes = tuple(0 if isinstance(d, Dim) and d.src == h and d.axis == i else d for i, d in enumerate(shp))
                if args:
                    args = (codes,) + tuple(args[1:])
                else:
                    kwargs = dict(kwargs, shape=codes)
            return nd_reshape(sym, *args, **kwargs)
        self._set(mx.sym.Symbol, "reshape", legacy_reshape)
        # NDArray arithmetic broadcasts, legacy Symbol's (elemwise_*) does not: trace what the
        # forward computed on arrays (np symbols already broadcast)
        for dunder, op, swap in (("__add__", "broadcast_add", False), ("__radd__", "broadcast_add", True),
                                 ("__sub__", "broadcast_sub", False), ("__rsub__", "broadcast_sub", True),
                                 ("__mul__", "broadcast_mul", False), ("__rmul__", "broadcast_mul", True),
                                 ("__truediv__", "broadcast_div", False), ("__rtruediv__", "broadcast_div", True)):
            self._set(mx.sym.Symbol, dunder, _broadcasting(getattr(mx.sym.Symbol, dunder), getattr(mx.sym, op), swap))
        np_getitem = _Symbol.__getitem__

        def getitem(sym, key):
            k = key if isinstance(key, tuple) else (key,)
            like = _slice_like(sym, k)
            if like is not None:
                return like
            if k and all(isinstance(v, mx.sym.Symbol) for v in k):
                # x[i, j] with index tensors (d2l's MaskLM): MXNet 1.9 symbols refuse it; gather_nd is it
                idx = mx.sym.np.stack([_np(v) for v in k], axis=0)
                return mx.sym.npx.gather_nd(_np(sym), idx)
            ints = [isinstance(v, int) and not isinstance(v, bool) for v in k]
            if all(v is not Ellipsis and v is not None for v in k) and any(
                    i and v < 0 for i, v in zip(ints, k)):
                # MXNet 1.9 traces x[-1] of a symbol as x[-1:0] (empty): take x[-1:] and drop the axis
                new, drop, out_axis = [], [], 0
                for v, is_int in zip(k, ints):
                    if is_int and v < 0:
                        new.append(slice(int(v), int(v) + 1 if v < -1 else None))
                        drop.append(out_axis)
                        out_axis += 1
                    else:
                        new.append(v)
                        out_axis += 0 if is_int else 1
                part = np_getitem(sym, new[0] if len(new) == 1 else tuple(new))   # a bare slice: no reshape
                return mx.sym.np.squeeze(part, axis=drop[0] if len(drop) == 1 else tuple(drop))
            return np_getitem(sym, key)
        self._set(_Symbol, "__getitem__", getitem)

        def data(param, ctx=None):
            return param.var()
        self._set(Parameter, "data", data)

        def is_training():
            scope.asked_training = True
            return scope.training
        self._set(mx.autograd, "is_training", is_training)

        def is_recording():
            scope.asked_recording = True
            return False
        self._set(mx.autograd, "is_recording", is_recording)

        def foreach(body, data, init_states, name="foreach"):
            """MXNet's contrib.foreach (gluonnlp's ELMo runs its LSTM cell stacks with it), unrolled
            over the sample's time steps: ``body`` runs once per step, as it did on the sample input,
            so a child given as the body is recorded and translated as that many calls. The length
            is the sample's (reported with the other sizes written as numbers)."""
            seqs = list(data) if isinstance(data, (list, tuple)) else [data]
            try:
                _, outs, _ = as_legacy(seqs[0]).infer_shape_partial()
            except Exception as e:   # noqa: BLE001 - MXNet raises MXNetError / ValueError
                raise ValueDependent(f"contrib.foreach over {seqs[0].name!r}: its length could not be inferred "
                                     f"({str(e).splitlines()[0]})")
            if not outs or outs[0] is None or int(outs[0][0]) <= 0:
                raise ValueDependent(f"contrib.foreach over {seqs[0].name!r}: its length is not known")
            n = int(outs[0][0])
            scope._baked.add(n)
            np_style = [isinstance(s, _Symbol) for s in seqs]
            steps = [[_back(mx.sym.squeeze(mx.sym.slice_axis(as_legacy(s), axis=0, begin=t, end=t + 1), axis=0), np_)
                      for t in range(n)] for s, np_ in zip(seqs, np_style)]
            states, step_outs = init_states, []
            for t in range(n):
                x = [p[t] for p in steps] if isinstance(data, (list, tuple)) else steps[0][t]
                out, states = body(x, states)
                step_outs.append(out)

            def stack(items):
                if isinstance(items[0], (list, tuple)):
                    return [stack([it[k] for it in items]) for k in range(len(items[0]))]
                return _back(mx.sym.stack(*[as_legacy(i) for i in items], axis=0), isinstance(items[0], _Symbol))
            return stack(step_outs), states
        self._set(mx.sym.contrib, "foreach", foreach)

        # np / npx / nd as the block's module sees them
        for g in self._module_dicts():
            for name, value in list(g.items()):
                for real, sym in _twins():
                    if value is real:
                        self._globals.append((g, name, value))
                        g[name] = _Dispatch(real, sym)
        for name, (real, sym) in zip(("np", "npx", "nd"), _twins()):   # mx.nd.relu(x) in the forward
            self._globals.append((vars(mx), name, getattr(mx, name)))
            setattr(mx, name, _Dispatch(real, sym))
        # attributes the forward sets (d2l keeps attention weights) and begin_state of children
        self._dicts.append((self.block, dict(self.block.__dict__)))
        for name, value in list(self.block.__dict__.items()):
            if isinstance(value, mx.nd.NDArray) and name.isidentifier():
                var = mx.sym.var(f"__const_{name}", shape=tuple(value.shape), dtype=value.dtype)
                self.block.__dict__[name] = var.as_np_ndarray() if isinstance(value, mx.np.ndarray) else var
                self.consts[f"__const_{name}"] = (name, value.asnumpy())
        for child in self._descendants():
            if hasattr(child, "begin_state") and hasattr(child, "state_info"):
                self._set(child, "begin_state", _zero_states(child))
        return self

    def _descendants(self):
        stack = list(self.block._children.values())
        while stack:
            b = stack.pop()
            yield b
            stack += list(b._children.values())

    def _module_dicts(self) -> List[dict]:
        seen, out = set(), []
        for cls in type(self.block).__mro__:
            mod = sys.modules.get(cls.__module__)
            if mod is None or cls.__module__.startswith(("mxnet", "builtins")):
                continue
            for g in [vars(mod)] + [getattr(f, "__globals__", None) for f in vars(cls).values()]:
                if isinstance(g, dict) and id(g) not in seen:
                    seen.add(id(g))
                    out.append(g)
        return out

    def __exit__(self, *exc) -> None:
        global _BAKED, _SCOPE
        _BAKED, _SCOPE = None, None
        for g, name, value in reversed(self._globals):
            g[name] = value
        for owner, name, old, existed in reversed(self._undo):
            if isinstance(owner, type):
                if existed:
                    setattr(owner, name, old)
                else:
                    delattr(owner, name)
            elif existed:
                owner.__dict__[name] = old
            else:
                owner.__dict__.pop(name, None)
        for obj, saved in self._dicts:
            for k in [k for k in obj.__dict__ if k not in saved]:
                del obj.__dict__[k]
            obj.__dict__.update(saved)


def _np(s: Any) -> Any:
    from mxnet.symbol.numpy import _Symbol
    return s if isinstance(s, _Symbol) else s.as_np_ndarray()


def _broadcasting(original, op, swap):
    import mxnet as mx

    def fn(self, other):
        if isinstance(other, mx.sym.Symbol) and type(other) is type(self):
            return op(other, self) if swap else op(self, other)
        return original(self, other)
    return fn


def as_legacy(s: Any) -> Any:
    """A numpy-interface symbol as the legacy ``mx.sym`` one (any other value as it is)."""
    from mxnet.symbol.numpy import _Symbol
    return s.as_nd_ndarray() if isinstance(s, _Symbol) else s


def _back(s: Any, as_np: bool) -> Any:
    """A legacy symbol back as a numpy-interface one where the block works with those."""
    return s.as_np_ndarray() if as_np else s


def _zero_states(layer: Any):
    """``begin_state`` of a Gluon RNN layer / cell during the trace: zero symbols of the state
    shapes (MXNet's ``_zeros``, which the generated code leaves to torch's default states)."""
    import mxnet as mx
    original = type(layer).begin_state

    def begin_state(*args, **kwargs):
        kwargs.pop("func", None)
        np_mode = mx.util.is_np_array()

        def zeros(name=None, shape=None, dtype=None, **info):
            s = mx.sym.zeros(shape=tuple(int(d) for d in shape), dtype=dtype or "float32")
            return s.as_np_ndarray() if np_mode else s
        return original(layer, *args, func=zeros, **{k: v for k, v in kwargs.items() if k not in ("ctx", "device")})
    return begin_state
