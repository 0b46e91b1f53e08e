"""Run the Gluon block and the generated torch module side by side: eval mode with randomised
norms/biases, then one SGD step in train mode (batch statistics, gradients, weights after the
step, running statistics). Gluon's per-sample sum loss with ``trainer.step(N)`` is compared with
torch's mean loss (the two frameworks' ways of averaging a batch gradient)."""
from __future__ import annotations

import importlib.util
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..verify import Check, check_outputs
from ..slots import RANDOMISED_ROLES, gluon_role
from .codegen import MapEntry
from .trace import walk

__all__ = ["load_generated", "verify", "torch_state", "TOLERANCE"]

#: float64 on both sides: differences are rounding only. Measured: <= 3e-14 relative on the model
#: zoo (eval) and <= 2e-12 on gradients after one step; the tolerance leaves room for deeper nets.
TOLERANCE = {"float64": 1e-8, "float32": 2e-4}


#: MXNet keeps BatchNorm's momentum as a float32 attribute: 1 - float32(0.9) = 0.10000002, so its
#: running-statistic update differs from torch's exact 0.1 by up to 2.4e-7 relative (measured
#: 1.7e-7 on resnet18_v1).
#: MXNet passes lr and rescale_grad (1/N) to its update op as float32: 1/3 becomes 0.33333334,
#: so an update can differ from torch's exact one by ~6e-8 of its size (measured 3e-8 at N=3).
UPDATE_TOLERANCE = 2.4e-7
RUNNING_TOLERANCE = {"float64": 1e-6, "float32": 1e-4}


def load_generated(path: str, class_name: str):
    """Import the generated file afresh from its path (no dualdl, no mxnet) and return the class."""
    name = f"_dualdl_translated_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(name, None)
    spec.loader.exec_module(module)
    return getattr(module, class_name)


def torch_state(entries: List[MapEntry], dtype=None) -> Dict[str, Any]:
    """The torch state_dict built from the current Gluon values (tied entries share one tensor)."""
    import torch
    out, by_param = {}, {}
    for e in entries:
        if e.param is not None:
            if id(e.param) not in by_param:
                a = e.param.data().asnumpy()
                by_param[id(e.param)] = torch.from_numpy(a.astype(dtype, copy=False) if dtype else a)
            out[e.torch_key] = by_param[id(e.param)]
        else:
            out[e.torch_key] = torch.tensor(e.value, dtype=torch.long)
    return out


def _randomise(entries: List[MapEntry], rng) -> None:
    import mxnet as mx
    done = set()
    for e in entries:
        if e.param is None or id(e.param) in done:
            continue
        local = e.gluon_key.rsplit(".", 1)[-1]
        role, _ = gluon_role(local, len(e.param.shape))
        if role not in RANDOMISED_ROLES or (role in ("scale", "shift") and e.param.grad_req == "null"):
            continue
        done.add(id(e.param))
        shape = e.param.shape
        v = rng.uniform(0.5, 1.5, shape) if role in ("scale", "running_var") else rng.uniform(-0.5, 0.5, shape)
        e.param.set_data(mx.nd.array(v, dtype=e.param.dtype))


def _gluon_inputs(inputs, dtype):
    import mxnet as mx
    return [mx.nd.array(np.asarray(x, dtype=dtype), dtype=dtype) for x in inputs]


def _torch_inputs(inputs, dtype):
    import torch
    out = []
    for x in inputs:
        a = np.asarray(x)
        out.append(torch.from_numpy(a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(dtype)))
    return out


def _np(outs, fw):
    if fw == "torch":
        return [o.detach().numpy() for o in _flat(outs)]
    return [o.asnumpy() for o in _flat(outs)]


def _flat(o):
    if isinstance(o, (list, tuple)):
        return [v for e in o for v in _flat(e)]
    return [o]


def verify(block: Any, torch_cls: Any, entries: List[MapEntry], inputs: Sequence[np.ndarray],
           same_output: Dict[str, str], records: Dict[int, list], *, lr: float = 0.1, seed: int = 0,
           dtype: str = "float64") -> Tuple[List[Check], Optional[str], List[str]]:
    """(checks, first divergent layer or None, notes); the Gluon block is left as it was."""
    import mxnet as mx
    import torch
    from mxnet import autograd, gluon

    params = block.collect_params()
    mx.nd.waitall()   # MKLDNN may still be reordering a weight in place after the last forward
    # numpy copies: an NDArray copy of a weight MKLDNN has reordered is not always restored exactly
    saved = {name: (p.data().asnumpy(), p.dtype) for name, p in params.items()}
    dropouts = [(b, b._rate) for _, b in walk(block) if type(b).__name__ == "Dropout"]
    rnn_drop = [(b, b._dropout) for _, b in walk(block) if hasattr(b, "_dropout") and hasattr(b, "_mode")]
    orig_dtype = next(iter(saved.values()))[1] if saved else np.float32
    notes, checks = [], []
    tol = TOLERANCE[dtype]
    first = None
    try:
        _randomise(entries, np.random.default_rng(seed))
        if dtype == "float64":
            block.cast("float64")
        state = torch_state(entries, np.float64 if dtype == "float64" else np.float32)
        if any(e.tied_to for e in entries):
            model = torch_cls()
            model.load_state_dict(state, strict=True)
        else:   # skip torch's weight init (seconds on resnet50): build on meta, then take our tensors
            with torch.device("meta"):
                model = torch_cls()
            model.load_state_dict(state, strict=True, assign=True)
        if dtype == "float64":
            model.double()
        gx = _gluon_inputs(inputs, dtype)
        tx = _torch_inputs(inputs, dtype)
        # --- eval mode ---
        g_out = _np(block(*gx), "mx")
        model.eval()
        with torch.no_grad():
            t_out = _np(model(*tx), "torch")
        checks.append(check_outputs(g_out, t_out, "eval outputs (randomised norms/biases)", tol, 0.0))
        if not checks[-1].passed:
            first = _first_divergent(block, model, gx, tx, same_output, tol)
        # --- one SGD step in train mode ---
        for b, _ in dropouts:
            b._rate = 0.0
        for b, _ in rnn_drop:
            b._dropout = 0.0
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
            if isinstance(m, torch.nn.RNNBase):
                m.dropout = 0.0
        if any(r for _, r in dropouts + rnn_drop):
            notes.append("dropout set to 0 on both sides for the train-mode check (random masks differ)")
        rng = np.random.default_rng(seed + 1)
        proj = [rng.standard_normal(o.shape) for o in g_out]
        n = int(np.asarray(inputs[0]).shape[0]) if np.asarray(inputs[0]).ndim else 1
        before = {id(p): p.data().asnumpy() for p in params.values()}
        blocks = dict(walk(block))
        trainable = {k: p for k, p in params.items() if p.grad_req != "null"}
        trainer = gluon.Trainer(trainable, "sgd", {"learning_rate": lr}, kvstore=None)
        with autograd.record():
            outs = _flat(block(*gx))
            loss = sum((o * mx.nd.array(r, dtype=dtype)).sum() for o, r in zip(outs, proj))
        loss.backward()
        g_train = [o.asnumpy() for o in outs]
        g_grads = {id(p): p.grad().asnumpy() / n for p in trainable.values()}
        trainer.step(n, ignore_stale_grad=True)
        model.train()
        t_outs = _flat(model(*tx))
        t_loss = sum((o * torch.from_numpy(r.astype(np.float64 if dtype == "float64" else np.float32))).sum()
                     for o, r in zip(t_outs, proj)) / n
        model.zero_grad()
        t_loss.backward()
        checks.append(check_outputs(g_train, [o.detach().numpy() for o in t_outs],
                               "train-mode outputs (batch statistics)", tol, 0.0))
        named = dict(model.named_parameters(remove_duplicate=False))
        owners = _owners(entries)
        ga, ta, names = [], [], []
        for e in owners:
            if e.torch_key in named and id(e.param) in g_grads:
                grad = named[e.torch_key].grad
                ga.append(g_grads[id(e.param)])
                ta.append(np.zeros_like(ga[-1]) if grad is None else grad.numpy())
                names.append(e.torch_key)
        checks.append(_worst(ga, ta, names, "gradients after one backward", tol))
        with torch.no_grad():   # what torch.optim.SGD(lr) does without momentum (importing torch.optim
            step = float(np.float32(lr))   # costs seconds); MXNet's lr is a float32 attribute
            for p in model.parameters():
                if p.grad is not None:
                    p.add_(p.grad, alpha=-step)
        sd = model.state_dict()
        ga, ta, names = [], [], []
        rs_g, rs_t, rs_names, raw, steps = [], [], [], 0.0, []
        counts = _bn_counts(block, records)
        for e in owners:
            gv = e.param.data().asnumpy()
            tv = sd[e.torch_key].numpy()
            if e.torch_key.endswith("running_var"):
                raw = max(raw, float(np.abs(gv - tv).max()))
                bn = blocks[e.gluon_path]
                old = before[id(e.param)]
                rs_g.append(gv if np.array_equal(gv, old) else   # not updated by MXNet (momentum=0 in torch)
                            _unbiased_expected(gv, old, float(bn._kwargs["momentum"]), counts[e.gluon_path]))
                rs_t.append(tv)
                rs_names.append(e.torch_key)
            elif e.torch_key.endswith("running_mean"):
                rs_g.append(gv); rs_t.append(tv); rs_names.append(e.torch_key)
            else:
                ga.append(gv); ta.append(tv); names.append(e.torch_key)
                steps.append(float(np.abs(gv - before[id(e.param)]).max()) if gv.size else 0.0)
        c = _worst(ga, ta, names, f"weights after one SGD step (lr {lr})", tol, [UPDATE_TOLERANCE * s for s in steps])
        c.detail += (f"; tolerance also allows {UPDATE_TOLERANCE:g} of each tensor's update (MXNet's float32 "
                     f"lr and rescale_grad=1/N attributes)")
        checks.append(c)
        if rs_names:
            c = _worst(rs_g, rs_t, rs_names, "running statistics after the step", RUNNING_TOLERANCE[dtype])
            c.detail = (c.detail + "; " if c.detail else "") + (
                f"torch's running_var uses the unbiased batch variance, MXNet's the biased one "
                f"(factor n/(n-1) on the batch term): compared to MXNet's update with that factor "
                f"applied; raw max difference {raw:.3g}")
            checks.append(c)
    finally:
        for b, r in dropouts:
            b._rate = r
        for b, r in rnn_drop:
            b._dropout = r
        if dtype == "float64":
            block.cast(orig_dtype)
        _restore(params, saved)
    return checks, first, notes


def _restore(params, saved) -> None:
    """Put the block's own weights back: fresh arrays (as load_parameters does), not writes into
    arrays MKLDNN may hold in a reordered layout; detached from the verification Trainer."""
    import mxnet as mx
    mx.nd.waitall()
    for name, (value, _) in saved.items():
        p = params[name]
        p._set_trainer(None)
        p._load_init(mx.nd.array(value, dtype=value.dtype), p.list_ctx())
        if not np.array_equal(p.data().asnumpy(), value):
            raise RuntimeError(f"translate: could not restore Gluon parameter {name} after verification")


def _owners(entries: List[MapEntry]) -> List[MapEntry]:
    seen, out = set(), []
    for e in entries:
        if e.param is not None and id(e.param) not in seen:
            seen.add(id(e.param))
            out.append(e)
    return out


def _bn_counts(block, records) -> Dict[str, int]:
    out = {}
    for path, b in walk(block):
        recs = records.get(id(b))
        if type(b).__name__ == "BatchNorm" and recs:
            shape = recs[0].args[0].shape
            out[path] = int(np.prod(shape) // shape[1])
    return out


def _unbiased_expected(gluon_new, old, mom, n) -> np.ndarray:
    """MXNet: new = m*old + (1-m)*biased; torch: new = m*old + (1-m)*biased*n/(n-1)."""
    batch = (gluon_new - mom * old) / (1 - mom)
    return mom * old + (1 - mom) * batch * n / (n - 1)


def _worst(a, b, names, label, tol, extra=None) -> Check:
    """One check over many tensors: the largest abs / rel difference and the tensor it is in."""
    if not a:
        return Check(label, 0.0, 0.0, tol, True, "nothing to compare")
    mad, rel, passed, worst = 0.0, 0.0, True, ""
    # a tensor whose true value is ~0 (the bias of a conv followed by BatchNorm has gradient 0)
    # holds rounding noise only: its scale is floored at 1e-4 of the largest tensor's
    floor = 1e-4 * max(float(np.abs(x).max()) if x.size else 0.0 for x in a)
    extra = extra or [0.0] * len(a)
    for x, y, nm, ex in zip(a, b, names, extra):
        if x.shape != y.shape:
            return Check(label, float("inf"), float("inf"), tol, False, f"{nm}: shape {x.shape} vs {y.shape}")
        if not x.size:
            continue
        d = float(np.abs(x - y).max())
        d = float("inf") if d != d else d   # NaN counts as a failure
        scale = max(float(np.abs(x).max()), floor)
        r = d / max(scale, 1e-300)
        passed = passed and d <= tol * scale + ex
        if r >= rel:
            rel, worst = r, nm
        mad = max(mad, d)
    return Check(label, mad, rel, tol, passed, f"{len(a)} tensors; largest relative difference in {worst}")


def _first_divergent(block, model, gx, tx, same_output, tol) -> Optional[str]:
    """The first Gluon block (in execution order) whose output differs from its torch module's."""
    import torch
    g_seen: List[Tuple[str, Any]] = []
    handles = []
    for path, b in walk(block):
        if path in same_output:
            handles.append(b.register_forward_hook(
                lambda blk, a, o, p=path: g_seen.append((p, [x.asnumpy() for x in _flat(o)]))))
    try:
        block(*gx)
    finally:
        for h in handles:
            h.detach()
    mods = dict(model.named_modules())
    t_out: Dict[str, list] = {}
    def keep(t):
        def hook(m, a, o):      # returns None: a torch hook's return value would replace the output
            t_out.setdefault(t, [x.detach().numpy() for x in _flat(o)])
        return hook
    th = [mods[t].register_forward_hook(keep(t)) for t in set(same_output.values()) if t in mods]
    try:
        with torch.no_grad():
            model(*tx)
    finally:
        for h in th:
            h.remove()
    for path, outs in g_seen:
        t = same_output[path]
        if t in t_out and not check_outputs(outs, t_out[t], "", tol, 0.0).passed:
            return path or "(top block)"
    return None
