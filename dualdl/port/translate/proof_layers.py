"""Where an eval check's difference comes from: the outputs of every layer the generated module
keeps, on both sides (forward hooks: Gluon's on blocks, torch's on modules), the first layer that
differs, and the first torch module that makes a NaN or inf from finite inputs with its cause.
Also torch's float32 rounding sampled again with the weights moved by one ulp, for an eval check
that failed on float32 evidence at a near-tie (a selection such as NMS), and Gluon's own rounding
measured by a second Gluon run (``gluon_other_run``) for a float32 check that missed torch's."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..verify import ROUNDING_FACTOR, Check, compare
from .proof_judge import EVAL_CHECK, Judge
from .proof_torch import TorchRun, flat
from .graph import walk

__all__ = ["layer_outputs", "first_divergent", "rounding_probe", "one_ulp", "judged_by_layers", "nonfinite_origin",
           "PROBES", "gluon_other_run", "gluon_other"]

#: float32 runs of the torch module with its weights moved by one ulp, sampled when an eval check
#: fails on float32 evidence (``rounding_probe``)
PROBES = 4


def layer_outputs(block, runs: List[TorchRun], gx, same_output) -> List[Tuple[str, list, list]]:
    """(Gluon path, Gluon outputs, the torch module's outputs in each run) of every layer whose
    output the generated module keeps (``same_output``), in Gluon's execution order; the first call
    of a layer called more than once."""
    _, g_seen = _gluon_layers(block, gx, same_output)
    seen = []
    for run in runs:
        mods = dict(run.model.named_modules())
        t_out: Dict[str, list] = {}

        def keep(t):
            def hook(m, a, o):      # returns None: a torch hook's return value would replace the output
                t_out.setdefault(t, [x.detach().numpy() for x in flat(o)])
            return hook
        th = [mods[t].register_forward_hook(keep(t)) for t in set(same_output.values()) if t in mods]
        try:
            run.forward()
        finally:
            for h in th:
                h.remove()
        seen.append(t_out)
    return [(path, outs, [s[same_output[path]] for s in seen]) for path, outs in g_seen
            if all(same_output[path] in s for s in seen)]


def _gluon_layers(block, gx, same_output) -> Tuple[List[np.ndarray], List[Tuple[str, list]]]:
    """One Gluon forward: (its outputs, [(path, outputs)] of every layer in ``same_output``, first calls)."""
    g_seen: List[Tuple[str, Any]] = []
    handles = []
    for path, b in walk(block):
        if path in same_output:
            handles.append(b.register_forward_hook(
                lambda blk, a, o, p=path: g_seen.append((p, [x.asnumpy() for x in flat(o)]))))
    try:
        out = [x.asnumpy() for x in flat(block(*gx))]
    finally:
        for h in handles:
            h.detach()
    return out, g_seen


@contextlib.contextmanager
def gluon_other(block, start: Dict[int, np.ndarray], internal: bool) -> Iterator[None]:
    """The block holding ``start`` (id(param) -> array) for Gluon's other run, cast to float32 first where
    ``internal``; afterwards its values, gradients and dtype as before (MXNet keeps them in the block)."""
    from .trace import gluon_array
    params = {id(p): p for p in block.collect_params().values()}
    keep = {i: (p.data().asnumpy(), p.grad().asnumpy() if p.grad_req != "null" else None) for i, p in params.items()}
    try:
        if internal:
            block.cast("float32")
        for i, p in params.items():
            p.set_data(gluon_array(start[i], p.dtype))
        yield
    finally:
        if internal:
            block.cast("float64")
        for i, p in params.items():
            p.set_data(gluon_array(keep[i][0], p.dtype))
            if keep[i][1] is not None:
                p.grad()[:] = gluon_array(keep[i][1], p.dtype)


def gluon_other_run(block, values: Dict[int, np.ndarray], gx, mode: str, same_output, seed: int
                    ) -> Optional[Tuple[List[np.ndarray], Dict[str, list]]]:
    """Gluon's own float32 rounding of the eval forward, measured by a second Gluon run (``GLUON_OWN``):
    mode "internal" (Gluon float64 with MXNet float32 inside): the block in full float32; a float32-only
    block: its weights moved by at most one float32 ulp (``gx``: the inputs moved as well). (outputs,
    layer path -> outputs, first calls); the block holds ``values`` again after; None where it does not run so (MXNet raised)."""
    import mxnet as mx
    rng = np.random.default_rng(seed + 13)
    internal = mode == "internal"
    start = {i: np.asarray(v).astype(np.float32) if internal and np.asarray(v).dtype.kind == "f" else
             np.asarray(v) if internal else one_ulp(v, rng) for i, v in values.items()}
    try:
        with gluon_other(block, start, internal):
            out, layers = _gluon_layers(block, gx, same_output)
            mx.nd.waitall()
    except (mx.base.MXNetError, ValueError, TypeError, RuntimeError):   # a block that refuses float32
        return None
    first: Dict[str, list] = {}
    for path, o in layers:
        first.setdefault(path, o)
    return out, first


def first_divergent(block, runs: List[TorchRun], gx, same_output, judge: Judge,
                    gluon: Optional[Dict[str, list]] = None) -> Optional[str]:
    """The first Gluon block (in execution order) whose output differs from its torch module's,
    judged as the eval check is (the torch module in every dtype it was run in; ``gluon``: each
    layer's outputs in Gluon's other run, ``gluon_other_run``)."""
    for path, outs, t in layer_outputs(block, runs, gx, same_output):
        if judge.layer_differs(outs, t, (gluon or {}).get(path)):
            return path or "(top block)"
    return None


def _finite(xs: Sequence[Any]) -> bool:
    import torch
    return all(bool(torch.isfinite(x).all()) for x in xs if isinstance(x, torch.Tensor) and x.is_floating_point())


def nonfinite_origin(run: TorchRun) -> Optional[str]:
    """The first torch module (in the order modules finish) whose output holds a NaN or inf while
    its inputs are finite, and why, as one phrase; None if every output is finite."""
    import torch
    found: List[Tuple[str, Any]] = []

    def hook(name):
        def fn(m, a, o):
            if not found and _finite(flat(a)) and not _finite(flat(o)):
                found.append((name, m))
        return fn
    handles = [m.register_forward_hook(hook(n)) for n, m in run.model.named_modules()]
    try:
        run.forward()
    finally:
        for h in handles:
            h.remove()
    if not found:
        return None
    name, m = found[0]
    where = f"torch's {name or '(top module)'} ({type(m).__name__})"
    var = getattr(m, "running_var", None)
    if isinstance(var, torch.Tensor) and bool((var < 0).any()):
        neg = int((var < 0).sum())
        return (f"{where} makes NaN from finite inputs: its running_var holds {neg} negative value(s) (min "
                f"{float(var.min()):.3g}), and the square root of a negative variance is NaN")
    bad = [k for k, v in m.state_dict().items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        return f"{where} makes NaN/inf from finite inputs: its {', '.join(bad[:3])} hold(s) NaN or inf"
    return (f"{where} makes NaN/inf from finite inputs (a value outside its domain: the log or square root of a "
            f"negative, 0/0, or an overflow)")


def rounding_probe(torch_cls, entries, values, inputs, runs: List[TorchRun], g_out, judge: Judge,
                   seed: int, label: str = EVAL_CHECK, gluon: Optional[list] = None
                   ) -> Optional[Tuple[Check, List[TorchRun]]]:
    """For an eval check that failed in float32 evidence: torch's own float32 rounding sampled
    again, PROBES times, with every weight moved by at most one float32 ulp at random. A selection
    at a near-tie (an NMS IoU of 0.69999975 against its 0.7 threshold in gluoncv Faster R-CNN's
    RPN) can agree with float64 in torch's one float32 run and not in Gluon's: if some probe
    departs from float64 as far as Gluon does, the outputs are sensitive to rounding and the check
    passes with every layer judged as well (``judged_by_layers``); else None (it stays failed)."""
    rng = np.random.default_rng(seed + 7)
    best = None
    for _ in range(PROBES):
        moved = {k: one_ulp(v, rng) for k, v in values.items()}
        run = TorchRun(torch_cls, entries, moved, inputs, np.float32)
        c = judge.outputs(g_out, [run.eval_out, runs[1].eval_out], label, gluon=gluon)
        if c.passed and (best is None or c.rounding["torch"] > best[0].rounding["torch"]):
            best = (c, run)
    if best is None:
        return None
    check, run = best
    check.sensitive = True
    first = compare(runs[0].eval_out, runs[1].eval_out).abs
    check.detail = (f"the outputs are sensitive to rounding: with its weights moved by one float32 ulp, torch's "
                    f"float32 run departs from its float64 by {check.rounding['torch']:.3g} (its first float32 run: "
                    f"{first:.3g}), as far as Gluon's does (a selection at a near-tie, such as an NMS IoU at its "
                    f"threshold); judged against that run")
    return check, [run, runs[1]]


def one_ulp(v: Any, rng, dtype=np.float32) -> Any:
    """A float array moved by at most one ulp of ``dtype`` per element, in the wider of its dtype and
    ``dtype`` (other arrays unchanged)."""
    a = np.asarray(v)
    if a.dtype.kind != "f" or not a.size:
        return v
    a32 = a.astype(dtype)
    toward = np.where(rng.random(a32.shape) < 0.5, -np.inf, np.inf).astype(dtype)
    moved = np.where(rng.random(a32.shape) < 0.5, np.nextafter(a32, toward), a32)
    return moved.astype(np.result_type(a.dtype, dtype))


def judged_by_layers(check: Check, block, runs: List[TorchRun], gx, same_output,
                     judge: Judge, gluon: Optional[Dict[str, list]] = None) -> Tuple[Check, Optional[str]]:
    """An eval check that passed on outputs sensitive to rounding (torch's own float32 far from its
    float64: a selection such as NMS over near-equal scores), where agreeing as closely as torch's
    own float32 proves little: every layer the module keeps is judged too, so the layers before the
    selection are held to their own, tight, rounding. (check, first layer that differs or None)."""
    layers = layer_outputs(block, runs, gx, same_output)
    loose = []
    for path, outs, t in layers:
        c = judge.outputs(outs, t, "", gluon=(gluon or {}).get(path))
        if not c.passed:
            check.passed = False
            own = ", ".join(f"{k} {v:.3g}" for k, v in c.rounding.items())
            check.detail += (f"; layer {path or '(top block)'} differs (max abs diff {c.max_abs_diff:.3g}, tolerance "
                             f"{c.tolerance:.3g}; own float32 rounding: {own})")
            return check, path or "(top block)"
        if c.sensitive:
            loose.append(path or "(top block)")
    if not layers:
        check.detail += "; the module keeps no layer before the selection to judge on its own"
        return check, None
    names = ", ".join(loose[:4]) + (", ..." if len(loose) > 4 else "")
    check.detail += (f"; each of the {len(layers)} layers the module keeps was judged as well: "
                     f"{len(layers) - len(loose)} within {ROUNDING_FACTOR:g}x their own insensitive float32 "
                     f"rounding" + (f" (the larger of torch's and Gluon's own: {judge.gluon_own})" if gluon else "")
                     + (f", {len(loose)} sensitive themselves: {names}" if loose else ""))
    return check, None
