"""One model seen by the porting machinery: its tensors in execution order, reading, loading, running.

``GluonSide`` hides Gluon's specifics: structural ``save_parameters`` keys (``0.weight``,
``_unfused.0.l_cell.i2h_weight``), deferred shapes (known only after a forward), hybridized
blocks whose children's hooks do not fire (warned about, traced un-hybridized, restored), and
BatchNorm ``scale=False`` gammas that Gluon ignores. ``TorchSide`` hides torch's: buffers
(running stats) beside parameters, ``num_batches_tracked``, and modules whose weights a parent
uses functionally without calling them (``MultiheadAttention.out_proj``).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..backend import backend_of
from .hyper import gluon_hyper, torch_hyper
from .inputs import Inputs, gluon_leaf, guarded, torch_leaf
from .slots import Slot, gluon_role, torch_role, ROLE_RANK


class PortWarning(UserWarning):
    """Something the port cannot see well (hybridized Gluon block, layers that never ran)."""


# backend name -> the side's name in port reports
_SIDE_NAMES = {"torch": "torch", "mxnet": "gluon"}


def framework_of(model: Any) -> str:
    """``"torch"`` or ``"gluon"``: the side of a port ``model`` is on (``backend_of``)."""
    be = backend_of(model, default=None)
    if be is None or be.name not in _SIDE_NAMES:
        raise TypeError(f"{type(model).__name__} (from {type(model).__module__}) is neither a "
                        f"torch.nn.Module nor a Gluon Block")
    return _SIDE_NAMES[be.name]


def make_side(model: Any, who: str = "model") -> "Side":
    return GluonSide(model, who) if framework_of(model) == "gluon" else TorchSide(model, who)


def flatten_outputs(out: Any, to_numpy: Callable[[Any], np.ndarray]) -> List[np.ndarray]:
    """Nested tuples/lists/dicts of tensors -> flat list of numpy arrays (None and [] dropped)."""
    if out is None:
        return []
    if isinstance(out, dict):
        return [a for k in out for a in flatten_outputs(out[k], to_numpy)]
    if isinstance(out, (list, tuple)):
        return [a for o in out for a in flatten_outputs(o, to_numpy)]
    return [to_numpy(out)]


def _ordered_slots(layers: List[dict], ran_rank: Dict[str, int]) -> List[Slot]:
    """Give each layer's slots an execution rank. A layer that never ran joins its nearest
    ancestor that did, after everything that ancestor's subtree ran."""
    def ancestors(path):
        parts = path.split(".") if path else []
        for i in range(len(parts) - 1, -1, -1):
            yield ".".join(parts[:i])
    slots: List[Slot] = []
    for di, layer in enumerate(layers):
        path = layer["path"]
        if path in ran_rank:
            rank: Tuple = (ran_rank[path], 0, 0)
            ran = True
        else:
            ran = False
            anc = next((a for a in ancestors(path) if a in ran_rank), None)
            if anc is None:
                rank = (10 ** 9, 1, di)
            else:
                pre = anc + "." if anc else ""
                last = max(r for p, r in ran_rank.items() if p == anc or p.startswith(pre))
                rank = (last, 1, di)
        for ri, s in enumerate(layer["slots"]):
            s.rank = rank + s.rank + (ri,)
            s.ran = ran
            slots.append(s)
    slots.sort(key=lambda s: s.rank)
    return slots


class Float64Unavailable(Exception):
    """A model cannot run in float64 (its ops or dtypes do not allow it)."""


def _torch_numpy(t):
    t = t.detach().cpu()
    return t.double().numpy() if t.dtype.is_floating_point else t.numpy()


class Side:
    framework = ""

    def __init__(self, model: Any, who: str = "model"):
        self.model = model
        self.who = who
        self.notes: List[str] = []
        self.ran_paths: List[str] = []   # layers in the order they first ran (set by trace)

    # subclasses implement: trace(inputs, forward) -> List[Slot]; state() -> Dict[str, ndarray];
    # load(dict); run(inputs, forward) -> List[ndarray]


class TorchSide(Side):
    framework = "torch"

    def _tensor(self, a: np.ndarray):
        import torch
        dev = next((p.device for p in self.model.parameters()), None)
        t = torch.from_numpy(np.require(a, requirements="C"))
        return t.to(dev) if dev is not None and dev.type != "cpu" else t

    def _call(self, inputs: Inputs, forward: Optional[Callable], float64: bool = False):
        import torch
        conv = inputs.convert(lambda a: self._tensor(torch_leaf(float64)(a)))
        training = {m: m.training for m in self.model.modules()}
        self.model.eval()
        try:
            with torch.no_grad():
                return guarded(lambda: forward(self.model, *conv.args, **conv.kwargs) if forward
                               else self.model(*conv.args, **conv.kwargs), self.who, self.model,
                               inputs)
        finally:
            for m, t in training.items():
                m.training = t

    @contextlib.contextmanager
    def float64(self):
        """The model in float64: each float32 parameter/buffer's data is swapped for a float64
        copy and the original (untouched) tensors are swapped back afterwards - one conversion,
        no round trip."""
        import torch
        params = list(self.model.parameters())
        bufs = [(m, n, b) for m in self.model.modules() for n, b in m._buffers.items()
                if b is not None and b.dtype.is_floating_point]
        kinds = {t.dtype for t in params + [b for _, _, b in bufs] if t.dtype.is_floating_point}
        if kinds - {torch.float32}:
            raise Float64Unavailable(f"the torch model holds {sorted(map(str, kinds))} tensors")
        saved = [(p, p.data) for p in params]
        try:
            with torch.no_grad():
                for p, d in saved:
                    p.data = d.double()
                for m, n, b in bufs:
                    m._buffers[n] = b.double()
            yield
        finally:
            for p, d in saved:
                p.data = d
            for m, n, b in bufs:
                m._buffers[n] = b

    def hyper(self) -> Dict[str, Dict[str, Any]]:
        return torch_hyper(self.model)

    def snapshot(self) -> Dict[str, Any]:
        """A copy of every tensor, for :meth:`restore` (torch clones: no numpy round trip)."""
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def restore(self, snap: Dict[str, Any]) -> None:
        self.model.load_state_dict(snap, strict=True)

    def trace(self, inputs: Inputs, forward: Optional[Callable] = None) -> List[Slot]:
        import torch
        order: Dict[int, int] = {}
        handles = []

        def hook(mod, _args):
            order.setdefault(id(mod), len(order))
        for m in self.model.modules():
            handles.append(m.register_forward_pre_hook(hook))
        try:
            self._call(inputs, forward)
        finally:
            for h in handles:
                h.remove()
        paths = {id(m): p for p, m in self.model.named_modules()}
        self.ran_paths = [paths[i] for i in sorted(order, key=order.get) if i in paths]
        norm_types = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
        layers, ran_rank = [], {}
        for path, m in self.model.named_modules(remove_duplicate=False):
            if id(m) in order:
                ran_rank[path] = order[id(m)]
            own = [(n, p) for n, p in m._parameters.items() if p is not None]
            own += [(n, b) for n, b in m._buffers.items()
                    if b is not None and n not in m._non_persistent_buffers_set
                    and n != "num_batches_tracked"]
            if not own:
                continue
            w = m._parameters.get("weight")
            is_norm = isinstance(m, norm_types) or "running_mean" in m._buffers or (
                w is not None and w.dim() == 1 and "norm" in type(m).__name__.lower())
            slots = []
            for n, t in own:
                role, sub = torch_role(n, t.dim(), is_norm)
                slots.append(Slot(key=f"{path}.{n}" if path else n, layer=path, name=n, role=role,
                                  shape=tuple(t.shape), rank=sub + (ROLE_RANK.get(role, 9),) if sub
                                  else (0, 0, ROLE_RANK.get(role, 9)),
                                  ident=id(t),
                                  dtype=str(t.dtype).replace("torch.", "")))
            layers.append({"path": path, "slots": slots})
        return _ordered_slots(layers, ran_rank)

    def state(self) -> Dict[str, np.ndarray]:
        import torch
        out = {}
        for k, v in self.model.state_dict(keep_vars=True).items():
            if k.endswith("num_batches_tracked"):
                continue
            t = v.detach().cpu()
            out[k] = (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy()
        return out

    def load(self, tensors: Dict[str, np.ndarray]) -> None:
        """Copy ``tensors`` in, all or nothing (every shape is checked before anything changes)."""
        import torch
        sd = self.model.state_dict()
        for k, v in tensors.items():
            if k not in sd:
                raise KeyError(f"target torch module has no tensor {k!r}")
            if tuple(sd[k].shape) != tuple(np.shape(v)):
                raise ValueError(f"{k}: shape {tuple(np.shape(v))} does not fit the target's "
                                 f"{tuple(sd[k].shape)}")
        with torch.no_grad():   # only the given tensors are copied (in place, tied ones once)
            for k, v in tensors.items():
                sd[k].copy_(torch.as_tensor(np.require(np.asarray(v), requirements="C")))

    def run(self, inputs: Inputs, forward: Optional[Callable] = None,
            float64: bool = False) -> List[np.ndarray]:
        out = self._call(inputs, forward, float64)
        return flatten_outputs(out, _torch_numpy)

    def capture(self, inputs: Inputs, forward: Optional[Callable], layers: Sequence[str],
                float64: bool = False) -> Dict[str, np.ndarray]:
        """First output array of each layer in ``layers`` (its first call) on ``inputs``."""
        mods = dict(self.model.named_modules(remove_duplicate=False))
        return _first_outputs(mods, layers, _torch_numpy,
                              lambda: self._call(inputs, forward, float64))


def _first_outputs(layers_by_path: Dict[str, Any], layers: Sequence[str],
                   to_numpy: Callable[[Any], np.ndarray], run: Callable[[], Any]) -> Dict[str, np.ndarray]:
    """Forward hooks (torch modules and Gluon blocks alike) keep the first output array of each
    layer in ``layers`` while ``run()`` runs; the hooks are removed afterwards."""
    out: Dict[str, np.ndarray] = {}
    handles = []
    for path in layers:
        if path in layers_by_path:
            def hook(_m, _a, o, path=path):
                if path not in out:
                    arrs = flatten_outputs(o, to_numpy)
                    if arrs:
                        out[path] = arrs[0]
            handles.append(layers_by_path[path].register_forward_hook(hook))
    try:
        run()
    finally:
        for h in handles:
            h.remove() if hasattr(h, "remove") else h.detach()
    return out


def _float32_only_blocks(blocks) -> List[str]:
    import inspect
    out, seen = [], {}
    for path, b in blocks:
        cls = type(b)
        if cls not in seen:
            try:
                src = inspect.getsource(cls.hybrid_forward) if hasattr(cls, "hybrid_forward") else ""
            except (OSError, TypeError):
                src = ""
            seen[cls] = "interleaved_matmul" in src
        if seen[cls]:
            out.append(f"{path} ({cls.__name__})")
    return out


class GluonSide(Side):
    framework = "gluon"

    def _blocks(self):
        """(path, block) for every block, definition order, shared blocks under every path."""
        out = []

        def walk(path, b):
            out.append((path, b))
            for name, child in b._children.items():
                child = child() if callable(child) and not hasattr(child, "_children") else child
                walk(f"{path}.{name}" if path else name, child)
        walk("", self.model)
        return out

    def _ctx(self):
        for p in self.model.collect_params().values():
            try:
                return p.list_ctx()[0]
            except Exception:  # not initialized yet
                continue
        return None

    def _call(self, inputs: Inputs, forward, float64: bool = False):
        import mxnet as mx
        from mxnet import autograd
        ctx = self._ctx()
        leaf = gluon_leaf(float64)
        conv = inputs.convert(lambda a: mx.nd.array(leaf(a), dtype=leaf(a).dtype, ctx=ctx))

        def call():
            with autograd.pause(train_mode=False):  # inference: dropout off, BN running stats
                out = (forward(self.model, *conv.args, **conv.kwargs) if forward
                       else self.model(*conv.args, **conv.kwargs))
            for a in flatten_outputs(out, lambda t: t):
                if hasattr(a, "wait_to_read"):
                    a.wait_to_read()  # MXNet errors are asynchronous
            return out
        return guarded(call, self.who, self.model, inputs)

    @contextlib.contextmanager
    def float64(self):
        """The block cast to float64 (exact round trip from float32), cast back afterwards.
        Blocks calling ops known to be float32-only on CPU (``contrib.interleaved_matmul_*``,
        gluonnlp's BERT attention) are refused up front instead of casting 100M parameters
        to find out."""
        kinds = {np.dtype(p.dtype).name for p in self.model.collect_params().values()}
        if kinds - {"float32"}:
            raise Float64Unavailable(f"the Gluon block holds {sorted(kinds)} parameters")
        fp32_only = _float32_only_blocks(self._blocks())
        if fp32_only:
            raise Float64Unavailable(f"{fp32_only[0]} calls contrib.interleaved_matmul_*, "
                                     f"which MXNet runs in float32 only on CPU")
        self.model.cast("float64")
        try:
            yield
        finally:
            self.model.cast("float32")

    def hyper(self) -> Dict[str, Dict[str, Any]]:
        return gluon_hyper(self._blocks())

    def snapshot(self) -> Dict[str, Any]:
        """A copy of every parameter (NDArray copies: no numpy round trip), for :meth:`restore`."""
        return {k: p.data().copy() for k, p in self.params_by_key().items()}

    def restore(self, snap: Dict[str, Any]) -> None:
        params = self.params_by_key()
        for k, v in snap.items():
            params[k].set_data(v)

    def _hybridized(self):
        return [(p, b) for p, b in self._blocks() if getattr(b, "_active", False)]

    def trace(self, inputs: Inputs, forward: Optional[Callable] = None) -> List[Slot]:
        import mxnet as mx
        active = self._hybridized()
        saved = []
        if active:
            names = ", ".join(p or "<root>" for p, _ in active[:5])
            msg = (f"the Gluon block is hybridized ({names}): hooks on its children do not fire, "
                   f"so execution order cannot be observed. It is traced un-hybridized and "
                   f"re-hybridized afterwards; call .hybridize(False) yourself to silence this.")
            warnings.warn(msg, PortWarning, stacklevel=3)
            self.notes.append("WARNING: " + msg)
            saved = [(b, b._active, list(getattr(b, "_flags", []))) for _, b in self._blocks()
                     if hasattr(b, "_active")]
            self.model.hybridize(False)
        order: Dict[int, int] = {}
        handles = []

        def hook(block, _args):
            order.setdefault(id(block), len(order))
        blocks = self._blocks()
        for _, b in blocks:
            handles.append(b.register_forward_pre_hook(hook))
        try:
            self._call(inputs, forward)
        finally:
            for h in handles:
                h.detach()
            for b, act, flags in saved:
                b._active, b._flags = act, flags
        paths = {}
        for p, b in blocks:
            paths.setdefault(id(b), p)
        self.ran_paths = [paths[i] for i in sorted(order, key=order.get) if i in paths]
        keys_of = self._keys_by_block(blocks)
        layers, ran_rank = [], {}
        for path, b in blocks:
            if id(b) in order:
                ran_rank[path] = order[id(b)]
            own = list(b._reg_params.items())
            if not own:
                continue
            fix_gamma = bool(getattr(b, "_kwargs", {}).get("fix_gamma", False))
            slots = []
            for name, p in own:
                shape = tuple(p.shape)
                if any(d == 0 for d in shape) or p._data is None:
                    raise ValueError(f"Gluon parameter {p.name} ({keys_of[(path, name)]}) has no "
                                     f"value (shape {shape}) after the forward: initialize() the "
                                     f"block, and make sure the sample input runs its layer")
                role, sub = gluon_role(name, len(shape))
                s = Slot(key=keys_of[(path, name)], layer=path, name=name, role=role, shape=shape,
                         rank=sub + (ROLE_RANK.get(role, 9),) if sub else (0, 0, ROLE_RANK.get(role, 9)),
                         ident=id(p), dtype=np.dtype(p.dtype).name)
                if name == "gamma" and fix_gamma:
                    s.constant = 1.0
                    s.notes.append("ignored by Gluon (BatchNorm scale=False / fix_gamma=True): acts as 1")
                elif name == "beta" and p.grad_req == "null":
                    s.constant = 0.0
                    s.notes.append("fixed by Gluon (BatchNorm center=False): must be 0")
                slots.append(s)
            layers.append({"path": path, "slots": slots})
        return _ordered_slots(layers, ran_rank)

    def _keys_by_block(self, blocks) -> Dict[Tuple[str, str], str]:
        """(block path, registered name) -> the key save_parameters uses for it."""
        out = {}
        for path, b in blocks:
            if not b._reg_params:
                continue
            mine = b._collect_params_with_prefix(path)
            for cname, child in b._children.items():
                for k in child._collect_params_with_prefix(f"{path}.{cname}" if path else cname):
                    mine.pop(k, None)
            for name, p in b._reg_params.items():
                key = next((k for k, v in mine.items() if v is p), None)
                if key is None:
                    key = f"{path}.{name}" if path else name
                mine.pop(key, None)
                out[(path, name)] = key
        return out

    def params_by_key(self):
        return self.model._collect_params_with_prefix()

    def state(self) -> Dict[str, np.ndarray]:
        out = {}
        for k, p in self.params_by_key().items():
            try:
                out[k] = p.data().asnumpy()
            except Exception as e:  # not initialized / deferred
                raise ValueError(f"Gluon parameter {k} has no value yet ({type(e).__name__}); "
                                 f"initialize() the block and run one forward first") from None
        return out

    def load(self, tensors: Dict[str, np.ndarray]) -> None:
        """Copy ``tensors`` in, all or nothing (every shape is checked before anything changes)."""
        import mxnet as mx
        params = self.params_by_key()
        for k, v in tensors.items():
            if k not in params:
                raise KeyError(f"target Gluon block has no parameter {k!r}")
            if tuple(params[k].shape) != tuple(np.shape(v)):
                raise ValueError(f"{k}: shape {tuple(np.shape(v))} does not fit the target's "
                                 f"{tuple(params[k].shape)}")
        for k, v in tensors.items():
            p = params[k]
            p.set_data(mx.nd.array(np.asarray(v), dtype=p.dtype))

    def run(self, inputs: Inputs, forward: Optional[Callable] = None,
            float64: bool = False) -> List[np.ndarray]:
        out = self._call(inputs, forward, float64)
        return flatten_outputs(out, lambda t: t.asnumpy().astype(np.float64, copy=False)
                               if t.dtype in (np.float16, np.float32) else t.asnumpy())

    def capture(self, inputs: Inputs, forward: Optional[Callable], layers: Sequence[str],
                float64: bool = False) -> Dict[str, np.ndarray]:
        """First output array of each layer in ``layers`` (its first call), un-hybridized."""
        blocks = dict(self._blocks())
        saved = [(b, b._active, list(getattr(b, "_flags", []))) for b in blocks.values()
                 if getattr(b, "_active", False)]
        if saved:
            self.model.hybridize(False)
        try:
            return _first_outputs(blocks, layers, lambda t: t.asnumpy().astype(np.float64),
                                  lambda: self._call(inputs, forward, float64))
        finally:
            for b, act, flags in saved:
                b._active, b._flags = act, flags
