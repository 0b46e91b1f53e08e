"""The train-mode part of the proof: one SGD step on both sides, compared tensor by tensor.
Hides three framework differences: Gluon sums the per-sample loss and steps with ``trainer.step(N)``
where torch takes the mean; MXNet's running variance uses the biased batch variance, torch's the
unbiased one (factor n/(n-1)); torch's BatchNorm refuses one value per channel in training where
Gluon returns beta, so a batch-1 sample is proven at batch 2 (``batch_of_two``)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..verify import Check
from .proof_judge import EVAL_CHECK, TOLERANCE, Judge, Lazy, absmax, divided, maxabs
from .proof_torch import TorchRun
from .graph import walk

__all__ = ["UPDATE_TOLERANCE", "RUNNING_TOLERANCE", "TRAIN_OUTPUTS", "GluonSide", "train_steps", "bn_counts", "is_a", "owners",
           "updated_state", "batch_of_two"]

#: MXNet keeps BatchNorm's momentum as a float32 attribute: 1 - float32(0.9) = 0.10000002, so its
#: running-statistic update differs from torch's exact 0.1 by up to 2.4e-7 relative (measured
#: 1.7e-7 on resnet18_v1).
#: MXNet passes lr and rescale_grad (1/N) to its update op as float32: 1/3 becomes 0.33333334,
#: so an update can differ from torch's exact one by ~6e-8 of its size (measured 3e-8 at N=3).
UPDATE_TOLERANCE = 2.4e-7
RUNNING_TOLERANCE = {"float64": 1e-6, "float32": 1e-4}
#: the key of the train-mode outputs in ``GluonSide.checks``' ``allow``
TRAIN_OUTPUTS = "(train-mode outputs)"


def is_a(b: Any, name: str) -> bool:
    """A Gluon layer of that class or a subclass (gluoncv's BatchNormCudnnOff), or a stand-in of
    that class name (symbol_verify's proxies of an exported model)."""
    from mxnet.gluon import nn
    return type(b).__name__ == name or isinstance(b, getattr(nn, name))


def bn_counts(block, records) -> Dict[str, List[int]]:
    """Per BatchNorm (Gluon path): the number of values per channel of each call in one forward."""
    out = {}
    for path, b in walk(block):
        recs = records.get(id(b))
        if is_a(b, "BatchNorm") and recs:
            out[path] = [int(np.prod(r.args[0].shape) // r.args[0].shape[1]) for r in recs]
    return out


def batch_of_two(inputs: Sequence[Any], seed: int) -> Optional[List[Any]]:
    """The sample with a second sample beside the first (axis 0 of every array whose batch is 1):
    the first's values in a random order, so ids stay valid ids. None where no array has batch 1."""
    rng = np.random.default_rng(seed + 11)
    grown = False

    def two(x):
        nonlocal grown
        if isinstance(x, (list, tuple)):
            return type(x)(two(v) for v in x)
        a = np.asarray(x)
        if a.ndim < 2 or a.shape[0] != 1:
            return x
        grown = True
        return np.concatenate([a, rng.permutation(a.reshape(-1)).reshape(a.shape)])
    out = [two(x) for x in inputs]
    return out if grown else None


def owners(entries: List[Any]) -> List[Any]:
    """The map entries that own a Gluon parameter (one per parameter, tied names left out)."""
    seen, out = set(), []
    for e in entries:
        if e.param is not None and id(e.param) not in seen:
            seen.add(id(e.param))
            out.append(e)
    return out


def updated_state(block, entries) -> Dict[str, np.ndarray]:
    """Torch key -> the value now held by the Gluon attribute a buffer comes from, where the forward
    replaced it (a value other than the one written into the weights)."""
    blocks = dict(walk(block))
    out = {}
    for e in entries:
        b = blocks.get(e.gluon_path) if e.gluon_attr else None
        v = b.__dict__.get(e.gluon_attr) if b is not None else None
        if v is not None and hasattr(v, "asnumpy"):
            now = v.asnumpy()
            if now.shape != np.shape(e.value) or not np.array_equal(now, e.value):
                out[e.torch_key] = now
    return out


def train_steps(runs: List[TorchRun], proj, n: int, lr: float) -> str:
    """Run each torch module's train step; what torch refused, as a check's detail ("" if none)."""
    for r in runs:
        try:
            r.train_step(proj, n, lr)
        except ValueError as e:   # nn.BatchNorm in train mode on one value per channel
            msg = str(e).strip().splitlines()[0][:200]
            hint = (" (Gluon's BatchNorm normalises a batch of one value per channel to beta; torch's "
                    "refuses it: prove the translation with a sample batch of 2 or more, or a larger input)"
                    if "more than 1 value per channel" in msg else "")
            return f"the torch module raised in train mode: ValueError: {msg}{hint}"
    return ""


def _unbiased_expected(gluon_new, old, mom, n) -> np.ndarray:
    """MXNet: new = m*old + (1-m)*biased; torch: new = m*old + (1-m)*biased*n/(n-1)."""
    batch = (gluon_new - mom * old) / (1 - mom)
    return mom * old + (1 - mom) * batch * n / (n - 1)


class GluonSide:
    """What the Gluon block gave in the train step, compared with torch runs by a judge (can be
    judged again by another judge with more runs). ``scale``: the batch-2 sample's values per
    channel over the recorded sample's (1 when the sample was not grown)."""

    state: Dict[str, np.ndarray] = {}   # torch key -> a held array the Gluon forward replaced (after it)
    #: id(param) -> its value after the step, where this side is not the live block (Gluon's other run)
    now: Optional[Dict[int, np.ndarray]] = None

    def __init__(self, block, entries, records, before, g_out, g_train, g_grads, n, lr, scale: int = 1):
        self.block, self.before, self.g_out, self.g_train, self.g_grads = block, before, g_out, g_train, g_grads
        self.n, self.lr, self.scale = n, lr, scale
        self.owners = owners(entries)
        self.counts = {k: [c * scale for c in v] for k, v in bn_counts(block, records).items()}
        self.blocks = dict(walk(block))

    def data(self, p) -> np.ndarray:
        """A parameter's value after the step on this side."""
        return p.data().asnumpy() if self.now is None else self.now[id(p)]

    def checks(self, judge: Judge, runs: List[TorchRun], allow: Optional[Dict[str, Dict[str, float]]] = None,
               other: Optional["GluonSide"] = None) -> List[Check]:
        """The train-step checks. ``allow``: ``{"grad": {torch key: x}, "after": {torch key or
        TRAIN_OUTPUTS: x}}``, a tolerance added per tensor (the conditioned re-judge: how far Gluon's own
        result moves with its weights and inputs moved). ``other``: the same step in Gluon's other run
        (``proof_judge.GLUON_OWN``): each tolerance then takes the larger of both sides' measured rounding."""
        grad_allow, after_allow = (allow or {}).get("grad", {}), (allow or {}).get("after", {})
        n, lr, before, g_grads = self.n, self.lr, self.before, self.g_grads
        tol = TOLERANCE[judge.dtype]
        out = [judge.outputs(self.g_out, [r.eval_out for r in runs], EVAL_CHECK),
               judge.outputs(self.g_train, [r.train_out for r in runs], "train-mode outputs (batch statistics)",
                             after_allow.get(TRAIN_OUTPUTS, 0.0), gluon=other and other.g_train)]
        owned = self.owners
        with_grad = [e for e in owned if e.torch_key in runs[0].grads and id(e.param) in g_grads]
        grad_keys = [e.torch_key for e in with_grad]
        by_key = {e.torch_key: e.param for e in owned}
        out.append(judge.tensors(
            Lazy(grad_keys, lambda k: divided(g_grads[id(by_key[k])].asnumpy(), n)),
            [[r.grad(e.torch_key, e.param.shape) for e in with_grad] for r in runs], grad_keys,
            "gradients after one backward", tol, [grad_allow.get(k, 0.0) for k in grad_keys],
            floor=1e-4 * max((absmax(runs[-1].grad(k, by_key[k].shape)) for k in grad_keys), default=0.0),
            gluon=other and Lazy(grad_keys, lambda k: divided(other.g_grads[id(by_key[k])].asnumpy(), n))))
        names, steps, rs_g, rs_o, rs_names, multi, raw = [], [], [], [], [], [], 0.0
        for e in owned:
            if e.torch_key.endswith(("running_var", "running_mean")):
                gv = self.data(e.param)
                ov = other.data(e.param) if other else gv
            if e.torch_key.endswith("running_var"):
                raw = max(raw, maxabs(gv, runs[-1].after(e.torch_key)))
                nested = getattr(e, "nested_bn", None)   # a nested SymbolBlock's BatchNorm node (symbol_nested.py)
                bn = self.blocks[e.gluon_path] if nested is None else None
                old = before[id(e.param)]
                biased = runs[-1].keeps_biased(e.torch_key)
                counts = self.counts[e.gluon_path] if nested is None else [nested[1] * self.scale]
                if len(counts) > 1:
                    multi.append(f"{e.gluon_path} ({len(counts)} calls)")
                mom = float(bn._kwargs["momentum"] if bn is not None else nested[0])
                same = biased or np.array_equal(gv, old)     # not updated by MXNet (momentum=0 in torch)
                rs_g.append(gv if same else _unbiased_expected(gv, old, mom, counts[0]))
                rs_o.append(ov if same else _unbiased_expected(ov, old, mom, counts[0]))
                rs_names.append(e.torch_key)
            elif e.torch_key.endswith("running_mean"):
                rs_g.append(gv); rs_o.append(ov); rs_names.append(e.torch_key)
            else:
                names.append(e.torch_key)    # the update's size: lr x the gradient (torch's, already read)
                g = runs[-1].grads.get(e.torch_key) if id(e.param) in g_grads else None
                steps.append(runs[-1].step(e.torch_key) * absmax(g) if g is not None else 0.0)
        c = judge.tensors(Lazy(names, lambda k: self.data(by_key[k])), [Lazy(names, r.after) for r in runs],
                          names, f"weights after one SGD step (lr {lr})", tol,
                          [UPDATE_TOLERANCE * s + after_allow.get(k, 0.0) for s, k in zip(steps, names)],
                          floor=1e-4 * max((absmax(before[id(by_key[k])]) for k in names), default=0.0),
                          gluon=other and Lazy(names, lambda k: other.data(by_key[k])))
        c.detail += (f"; tolerance also allows {UPDATE_TOLERANCE:g} of each tensor's update (MXNet's float32 "
                     f"lr and rescale_grad=1/N attributes)")
        out.append(c)
        if self.state:      # arrays the forward replaced (d2l's scratch BatchNorm): the torch buffers after it
            keys = sorted(self.state)
            out.append(judge.tensors([self.state[k] for k in keys], [[r.state[k].numpy() for k in keys] for r in runs],
                                     keys, "state the forward replaces (buffers) after the step",
                                     RUNNING_TOLERANCE[judge.dtype], [after_allow.get(k, 0.0) for k in keys]))
        if rs_names:
            c = judge.tensors(rs_g, [Lazy(rs_names, r.after) for r in runs], rs_names,
                              "running statistics after the step", RUNNING_TOLERANCE[judge.dtype],
                              [after_allow.get(k, 0.0) for k in rs_names], gluon=rs_o if other else None)
            c.detail = (c.detail + "; " if c.detail else "") + (
                f"torch's running_var uses the unbiased batch variance, MXNet's the biased one "
                f"(factor n/(n-1) on the batch term): compared to MXNet's update with that factor "
                f"applied (not for a module that keeps the biased estimate); raw max difference {raw:.3g}")
            if multi and not c.passed:
                c.detail += (f"; BatchNorm called more than once per forward: {', '.join(multi)}. MXNet updates "
                             f"running statistics in backward, in reverse call order, torch in forward order, "
                             f"so the statistics differ after training by design: give each call its own "
                             f"BatchNorm in the Gluon block, or copy Gluon's statistics after training")
            out.append(c)
        return out
