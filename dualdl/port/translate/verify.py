"""Run the Gluon block and the generated torch module side by side: eval mode on the block's own
weights and with randomised norms/biases, then one SGD step in train mode (batch statistics,
gradients, weights after the step, running statistics). Gluon's per-sample sum loss with
``trainer.step(N)`` is compared with torch's mean loss (the two frameworks' ways of averaging a
batch gradient).

Evidence (``proof_judge``): float64 on both sides within TOLERANCE; models with MXNet ops that
compute in float32 (FLOAT32_ONLY_OPS, FLOAT32_INTERNAL_OPS) within 8x torch's own float32
rounding, and a check that misses it within 8x the larger of torch's and Gluon's own (a second
Gluon run: full float32, or float32 with weights and inputs one ulp away); a float64 check that
misses TOLERANCE is judged again by its conditioning, measured by moving torch's weights and
inputs by a few float64 ulps. The torch side is ``proof_torch``, the
train step ``proof_train``, the layer-by-layer search ``proof_layers``."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..slots import RANDOMISED_ROLES, gluon_role
from ..verify import ROUNDING_FACTOR, Check
from .errors import TranslationError
from .proof_judge import CLOSE_CALL, EVAL_CHECK, GLUON_OWN, MOVE_ULPS, TOLERANCE, USER_CHECK, Judge, maxabs
from .proof_layers import first_divergent, gluon_other, gluon_other_run, judged_by_layers, nonfinite_origin, one_ulp, rounding_probe
from .proof_torch import TorchRun, as_numpy, flat, load_generated, torch_inputs, torch_state
from .proof_train import TRAIN_OUTPUTS, GluonSide, batch_of_two, bn_counts, is_a, owners, train_steps, updated_state
from .oplib import float32_ops
from .graph import walk
from .trace import gluon_array, held_arrays, put_back

__all__ = ["load_generated", "verify", "torch_state", "TOLERANCE", "FLOAT32_ONLY_OPS", "FLOAT32_INTERNAL_OPS",
           "float32_internal", "gluon_inputs"]

#: MXNet 1.9.1 ops that refuse float64 on CPU ("Only FP32 is supported on CPU at the moment"):
#: a model using one is verified in float32 without first casting it to float64 to find out.
#: Each op's fact lives in its op registry entry (``float32_only``, dualdl/port/translate/oplib).
FLOAT32_ONLY_OPS = float32_ops("only")

#: MXNet 1.9.1 ops that take and return float64 but compute in float32 (measured on float64 data
#: against torch float64, tests/test_translate_ops.py): LeakyReLU's forward for act_type leaky
#: (1.0e-7 at slope 0.25, exact in float32), prelu (3.7e-7) and gelu (5.7e-7), its elu keeping the
#: slope as a float32 attribute (1.2e-8); the RNN op in mode rnn_relu (outputs 3.7e-8, weight
#: gradients 1.8e-7; rnn_tanh, lstm, gru: <= 2e-15). A model with one is run in float64 on both
#: sides and judged by evidence: Gluon within ROUNDING_FACTOR x torch's own float32 rounding of
#: the torch float64 result (``rounding_tolerance``, as for FLOAT32_ONLY_OPS). Every other op
#: measured stays under the float64 TOLERANCE (relu, sigmoid, tanh, softrelu, erf, softmax...).
#: Each op's fact lives in its op registry entry (``float32_internal``, measured by
#: tests/test_translate_op_values.py).
FLOAT32_INTERNAL_OPS = float32_ops("internal")


def float32_internal(block: Any, ops: Sequence[str]) -> List[str]:
    """The float32-internal MXNet computations (FLOAT32_INTERNAL_OPS) a model runs: traced ops, and
    Gluon layers translated whole (LeakyReLU, PReLU, GELU call LeakyReLU; RNN(relu) the RNN op).
    Gluon's ELU also calls LeakyReLU but computes in float64 (only its slope is float32: 1.2e-8)."""
    from mxnet.gluon import nn, rnn
    found = set(FLOAT32_INTERNAL_OPS.intersection(ops))
    if "RNN:rnn_relu" in ops:     # exported symbol files name the fused RNN op with its mode
        found.add("RNN(mode='rnn_relu')")
    leaky = tuple(getattr(nn, n) for n in ("LeakyReLU", "PReLU", "GELU") if hasattr(nn, n))
    for _, b in walk(block):
        if isinstance(b, leaky):
            found.add(f"LeakyReLU ({type(b).__name__})")
        elif isinstance(b, rnn.RNN) and getattr(b, "_mode", "") == "rnn_relu":
            found.add("RNN(mode='rnn_relu')")
    return sorted(found)


_RUNNING_STATS = ("running_mean", "running_var", "moving_mean", "moving_var")


def _local_name(gluon_key: str) -> str:
    """The name a parameter's role is read from. An exported graph (a SymbolBlock, nested or from
    files) keeps its node's prefix on the running statistics (``ssd0_expand_bn0_moving_var``):
    they are randomised like a BatchNorm child's, or an initializer's values (a normal init gives
    negative variances: NaN in both frameworks, which MXNet's relu then maps to 0 and torch's keeps)
    would be what the randomised check compares."""
    local = gluon_key.rsplit(".", 1)[-1]
    return next((s for s in _RUNNING_STATS if local.endswith("_" + s)), local)


def _randomise(entries: List[Any], rng, dtypes: Dict[int, Any]) -> Dict[int, np.ndarray]:
    """Random norms/biases set into the block, drawn in each parameter's own dtype (``dtypes``:
    id(param) -> dtype before the float64 cast); returns them by id(param)."""
    done = {}
    for e in entries:
        if e.param is None or id(e.param) in done:
            continue
        role, _ = gluon_role(_local_name(e.gluon_key), len(e.param.shape))
        if role not in RANDOMISED_ROLES or (role in ("scale", "shift") and e.param.grad_req == "null"):
            continue
        shape = e.param.shape
        v = rng.uniform(0.5, 1.5, shape) if role in ("scale", "running_var") else rng.uniform(-0.5, 0.5, shape)
        v = v.astype(dtypes.get(id(e.param), e.param.dtype))
        done[id(e.param)] = v
        e.param.set_data(gluon_array(v, e.param.dtype))
    return done


def gluon_inputs(inputs: Sequence[Any], dtype) -> List[Any]:
    """The sample inputs as Gluon arrays of ``dtype`` (ids too: Gluon feeds them as floats); lists of
    arrays (begin states) keep their nesting."""
    return [gluon_inputs(x, dtype) if isinstance(x, (list, tuple)) else
            gluon_array(np.asarray(x, dtype=dtype), dtype) for x in inputs]


def _restore(params, saved) -> None:
    """Put the block's own weights back: fresh arrays (as load_parameters does), not writes into
    arrays MKLDNN may hold in a reordered layout; detached from the verification Trainer."""
    import mxnet as mx
    mx.nd.waitall()
    for name, (value, _) in saved.items():
        p = params[name]
        p._set_trainer(None)
        p._load_init(gluon_array(value, value.dtype), p.list_ctx())
        if not np.array_equal(p.data().asnumpy(), value, equal_nan=value.dtype.kind == "f"):
            raise RuntimeError(f"translate: could not restore Gluon parameter {name} after verification")


def _refuse_nonfinite(saved: Dict[str, Tuple[np.ndarray, Any]]) -> None:
    """A weight holding NaN or inf proves nothing (NaN outputs agree with NaN outputs): refused, naming it."""
    for name, (v, _) in saved.items():
        if v.dtype.kind == "f" and v.size and not np.isfinite(v.max() + v.min()) and not np.isfinite(v).all():
            raise TranslationError(f"the Gluon parameter {name} holds NaN or inf values: the proof cannot compare "
                                   f"them; load or initialise finite weights and translate again")


def _eval_check(label: str, block, torch_cls, entries, values, inputs, same_output, dtype: str,
                dtypes, mode: str, seed: int, g_out: Optional[list] = None, runs: Optional[List[TorchRun]] = None,
                layers: bool = True) -> Tuple[Check, Optional[str], List[TorchRun], Judge, list]:
    """One eval-mode check of the Gluon block (it holds ``values``) against the torch module built
    from ``values``, in each of ``dtypes``; a failure on float32 evidence is sampled again
    (``rounding_probe``), sensitive outputs are judged layer by layer, and a failed check names the
    first layer that differs. (check, first divergent layer, torch runs, judge). Each Gluon forward
    gets fresh inputs: a forward may write into a list it was given (gluonnlp's BiLMEncoder stores
    its final states into the begin-state list)."""
    if g_out is None:
        g_out = as_numpy(block(*gluon_inputs(inputs, dtype)), "mx")
    gx = gluon_inputs(inputs, dtype)
    if runs is None:
        runs = [TorchRun(torch_cls, entries, values, inputs, t) for t in dtypes]
    else:           # the modules of an earlier check, given these values
        for r in runs:
            r.load(entries, values)
    judge = Judge(dtype, runs, mode)

    def judged(alt) -> Tuple[Check, Optional[str]]:
        """The check, and its layers where sensitive; ``alt``: Gluon's other run (``gluon_other_run``)."""
        out, lay = alt or (None, None)
        check = judge.outputs(g_out, [r.eval_out for r in runs], label, gluon=out)
        by_layers = runs if check.passed and check.sensitive and layers else None
        if check.passed and check.sensitive and not layers:
            check.detail += "; judged as a whole (each layer is judged on its own in the randomised check)"
        if not check.passed and len(runs) == 2 and np.isfinite(check.max_abs_diff):
            # one float32 run is one sample of rounding: a selection at a near-tie may agree in it by chance
            probe = rounding_probe(torch_cls, entries, values, inputs, runs, g_out, judge, seed, label, out)
            if probe is not None:
                check, by_layers = probe
        if by_layers is not None:
            return judged_by_layers(check, block, by_layers, gluon_inputs(inputs, dtype), same_output, judge, lay)
        return check, None

    check, first = judged(None)
    alt = None
    if not check.passed and len(runs) == 2 and np.isfinite(check.max_abs_diff):
        # torch's rounding is not Gluon's: MXNet's float32 kernels can round worse on this CPU
        moved = inputs if mode == "internal" else _moved_inputs(inputs, lambda x: one_ulp(x, np.random.default_rng(seed + 17)))
        alt = gluon_other_run(block, values, gluon_inputs(moved, "float32"), mode, same_output, seed)
        if alt is not None:
            check, first = judged(alt)
    if not check.passed:
        first = first or first_divergent(block, runs, gx, same_output, judge, alt[1] if alt else None)
    return check, first, runs, judge, g_out


def _moved_inputs(xs: Sequence[Any], move) -> List[Any]:
    """The sample inputs with ``move`` applied to each float array that is not integral (ids stay ids)."""
    return [_moved_inputs(x, move) if isinstance(x, (list, tuple)) else
            move(x) if np.asarray(x).dtype.kind == "f" and not np.array_equal(np.asarray(x), np.round(np.asarray(x)))
            else x for x in xs]


def _gluon_loss(outs, proj):
    """Gluon's side of the proof's loss, sum(out * proj): each output times its projection in the
    output's own dtype (float32 indices stay float32), the terms summed in float64 when the outputs'
    dtypes differ: MXNet refuses float32 + float64 where torch promotes (gluoncv's CenterNetDecoder
    returns float32 classes and boxes and float64 scores from a float64 run)."""
    terms = [(o * gluon_array(r, o.dtype)).sum() for o, r in zip(outs, proj)]
    if len({t.dtype for t in terms}) > 1:
        terms = [t.astype("float64") for t in terms]
    return sum(terms)


def _gluon_float32_step(block, entries, records, gluon_side: GluonSide, train_inputs, proj, mode: str,
                        seed: int) -> Optional[GluonSide]:
    """Gluon's own float32 rounding of the train step (``proof_judge.GLUON_OWN``): the same step again in
    full float32 (mode "internal"), or a float32-only block with its weights and float inputs moved by one
    float32 ulp; returned as a GluonSide to judge with (``GluonSide.checks(other=...)``). The block is left
    as it was (values, gradients, dtype); None where the block does not run so (MXNet raised)."""
    import mxnet as mx
    rng = np.random.default_rng(seed + 19)
    internal = mode == "internal"
    move = (lambda v: v.astype(np.float32) if v.dtype.kind == "f" else v) if internal else (lambda v: one_ulp(v, rng))
    start = {i: move(np.asarray(v)) for i, v in gluon_side.before.items()}
    xs = train_inputs if internal else _moved_inputs(train_inputs, move)
    try:
        with gluon_other(block, start, internal):
            g_train, grads, now = _float32_step(block, start, xs, proj, gluon_side)
    except (mx.base.MXNetError, ValueError, TypeError, RuntimeError):   # a block that refuses float32
        return None
    other = GluonSide(block, entries, records, gluon_side.before, gluon_side.g_out, g_train, grads, gluon_side.n,
                      gluon_side.lr, gluon_side.scale)
    other.now = now
    return other


def _float32_step(block, start: Dict[int, np.ndarray], xs, proj, gluon_side: GluonSide):
    """One float32 train step of the block (it holds ``start``), as MXNet's SGD update computes it:
    (train outputs, id(param) -> gradient, id(param) -> value after the step)."""
    import mxnet as mx
    from mxnet import autograd
    params = {id(p): p for p in block.collect_params().values()}
    n, lr = gluon_side.n, gluon_side.lr
    with autograd.record():
        outs = flat(block(*gluon_inputs(xs, "float32")))
        loss = _gluon_loss(outs, proj)
    if any(p.grad_req != "null" for p in params.values()):
        loss.backward()
    g_train = [o.asnumpy() for o in outs]
    grads = {i: p.grad().copy() for i, p in params.items() if i in gluon_side.g_grads}
    now = {}
    for i, p in params.items():
        if i in grads:
            step = np.float32(lr * float(p.lr_mult))
            now[i] = (start[i] - step * (grads[i].asnumpy() / np.float32(n))).astype(start[i].dtype)
        else:      # running statistics: updated by the forward / backward
            now[i] = p.data().asnumpy()
    mx.nd.waitall()
    return g_train, grads, now


def _rounding_rejudge(block, entries, records, gluon_side, judge, runs, train_inputs, proj, mode, seed,
                      checks: List[Check], failed: List[int], notes: List[str]) -> None:
    """Float32-evidence train checks that missed torch's rounding judged again by the larger of both sides'
    own measured rounding (``_gluon_float32_step``); a note gives both numbers and the verdict."""
    other = _gluon_float32_step(block, entries, records, gluon_side, train_inputs, proj, mode, seed)
    if other is None:
        notes.append("Gluon's own float32 rounding of the train step could not be measured (MXNet raised in float32)")
        return
    again = gluon_side.checks(judge, runs, other=other)
    for i in failed:
        c, a = checks[i], again[i]
        t, g = a.rounding.get("torch", 0.0), a.rounding.get("gluon", 0.0)
        checks[i] = a
        said = (f"{c.name}: beyond {ROUNDING_FACTOR:g}x torch's own float32 rounding (max rel diff {c.max_rel_diff:.3g}, "
                f"tolerance {c.tolerance:.3g}); Gluon's own ({judge.gluon_own}) measured up to {g:.3g}, torch's "
                f"{t:.3g}: ")
        worst, ratio = judge.closest.get(c.name, ("", a.max_abs_diff / max(a.tolerance, 1e-300)))
        notes.append(said + (f"within {ROUNDING_FACTOR:g}x the larger (difference / tolerance "
                             f"{ratio:.2g}{' at ' + worst if worst else ''})" if a.passed else
                             f"beyond {ROUNDING_FACTOR:g}x the larger too: a real difference, not rounding"))


def _why_own_weights_differ(check: Check, run: TorchRun, g_out, t_out, saved, first: Optional[str],
                            dtype: str) -> None:
    """The user-weights check failed where the randomised one passed: what differs and why (a NaN or
    inf and where it starts, negative running variances in the block's own weights)."""
    origin = nonfinite_origin(run)
    neg = [name for name, (v, _) in saved.items()
           if _local_name(name) in ("running_var", "moving_var") and np.asarray(v).size and (np.asarray(v) < 0).any()]
    bad_g = sum(int((~np.isfinite(x)).sum()) for x in g_out if x.dtype.kind == "f")
    bad_t = sum(int((~np.isfinite(x)).sum()) for x in t_out if x.dtype.kind == "f")
    parts = [f"on the block's own weights the outputs differ (Gluon {bad_g}, torch {bad_t} NaN/inf output values)"]
    if first:
        parts.append(f"first at layer {first}")
    if origin:
        parts.append(origin)
    if neg:
        names = ", ".join(neg[:3]) + (", ..." if len(neg) > 3 else "")
        parts.append(f"{len(neg)} running variance(s) of the block hold negative values ({names}): not statistics of "
                     f"any data (an initializer such as mx.init.Normal draws them too)")
    if origin or neg:
        parts.append(("MXNet's float32 relu (oneDNN) returns 0 for NaN where torch's keeps NaN" if dtype == "float32"
                      else "the two frameworks carry a NaN differently") +
                     ", so the two part from there; load trained weights or initialise the running variances "
                     "positive (ones), and translate again")
    else:
        parts.append("the randomised check passed, so the difference comes from the block's own values (their range "
                     "or a value a layer treats specially); compare the layer named above")
    check.detail = "; ".join(parts + ([check.detail] if check.detail else []))




def _nudged(v: Any, rng) -> Any:
    """A float array in float64, each element moved by up to MOVE_ULPS float64 ulps at random; others as they are."""
    a = np.asarray(v)
    if a.dtype.kind != "f" or not a.size:
        return v
    return a.astype(np.float64) * (1.0 + rng.uniform(-MOVE_ULPS, MOVE_ULPS, a.shape) * 2.0 ** -52)


def _gluon_spread(block, entries, moved, train_inputs, proj, n, lr, gluon_side) -> Dict[str, Dict[str, float]]:
    """ROUNDING_FACTOR x how far Gluon's own train step moves, tensor by tensor, when its weights and
    inputs move as torch's did (``GluonSide.checks``' ``allow``): an MXNet kernel can be less stable
    than torch's on the same input (a variance of near-equal values). The block is left as it was."""
    from mxnet import autograd
    own = owners(entries)
    now = {id(e.param): e.param.data().asnumpy() for e in own}
    grads = {i: g.asnumpy() for i, g in gluon_side.g_grads.items()}
    allow: Dict[str, Dict[str, float]] = {"grad": {}, "after": {}}
    try:
        for e in own:
            e.param.set_data(gluon_array(moved[id(e.param)], e.param.dtype))
        with autograd.record():
            outs = flat(block(*gluon_inputs(train_inputs, "float64")))
            loss = _gluon_loss(outs, proj)
        if grads:
            loss.backward()
        allow["after"][TRAIN_OUTPUTS] = ROUNDING_FACTOR * max(
            (maxabs(o.asnumpy(), g) for o, g in zip(outs, gluon_side.g_train)), default=0.0)
        for e in own:
            k, p = e.torch_key, e.param
            if id(p) in grads:
                gm = p.grad().asnumpy() / n
                allow["grad"][k] = ROUNDING_FACTOR * maxabs(gm, grads[id(p)] / n)
                step = float(np.float32(lr * float(p.lr_mult)))
                allow["after"][k] = ROUNDING_FACTOR * maxabs(np.asarray(moved[id(p)], np.float64) - step * gm, now[id(p)])
            else:    # running statistics: updated by the forward / backward
                allow["after"][k] = ROUNDING_FACTOR * maxabs(p.data().asnumpy(), now[id(p)])
    finally:
        for e in own:
            e.param.set_data(gluon_array(now[id(e.param)], e.param.dtype))
            if id(e.param) in grads:
                e.param.grad()[:] = gluon_array(grads[id(e.param)], e.param.dtype)
    return allow


def _conditioned(block, torch_cls, entries, before, inputs, train_inputs, proj, n, lr, mults, seed, runs, gluon_side,
                 checks: List[Check], failed: List[int], small_bn: List[str], notes: List[str],
                 close: Optional[Dict[int, float]] = None) -> None:
    """Float64 checks that missed TOLERANCE (or passed it at ``close[i]`` of it, CLOSE_CALL or more) judged
    again by their measured conditioning: torch float64 and Gluon's step with every weight and float input
    moved by MOVE_ULPS ulp; a check within ROUNDING_FACTOR x how far that moves passes. Either way a note
    says the check is ill-conditioned, where, and what to do."""
    close = close or {}
    rng = np.random.default_rng(seed + 5)

    def moved_in(xs):    # float inputs moved; ids (integral values) kept
        return _moved_inputs(xs, lambda x: _nudged(x, rng))
    moved = {k: _nudged(v, rng) for k, v in before.items()}
    moved_train = moved_in(train_inputs)
    r = TorchRun(torch_cls, entries, moved, moved_in(inputs), np.float64, train_inputs=moved_train)
    r.lr_mult = mults
    if train_steps([r], proj, n, lr):
        return
    allow = _gluon_spread(block, entries, moved, moved_train, proj, n, lr, gluon_side)
    judge = Judge("float64", [r, *runs], "conditioned")
    again = gluon_side.checks(judge, [r, *runs], allow)
    why = (f"; BatchNorm over few values per channel in training ({', '.join(small_bn[:3])}) divides by the variance of "
           f"near-equal values" if small_bn else "")
    todo = "prove with a larger input size (more values per channel) or another seed for a tighter check"
    for i in failed:
        c, a = checks[i], again[i]
        if i in close and not a.passed:    # the rule's floor is the fixed tolerance: not reached, kept as it was
            continue
        found = re.search(r"closest to its tolerance: ([^\s;(]+)", c.detail)
        where = found.group(1) if found else ""
        layer = where.rsplit(".", 1)[0] if where else ""
        at = f" at {where} (layer {layer})" if where else ""
        side = allow["grad"] if c.name.startswith("gradients") else allow["after"]
        moved = (f"torch's own float64 result moves by up to {a.rounding.get('torch_float64_moved', 0.0):.3g} and "
                 f"Gluon's by up to {max(side.values(), default=0.0) / ROUNDING_FACTOR:.3g} when their weights and "
                 f"inputs move by {MOVE_ULPS} ulp")
        if a.passed:
            checks[i] = a
            past = (f"passes {TOLERANCE['float64']:g} at {close[i]:.2g} of it (another CPU's rounding can cross "
                    f"it)" if i in close else f"> {TOLERANCE['float64']:g}")
            notes.append(f"{c.name}: ill-conditioned in float64{at}: max rel diff {c.max_rel_diff:.3g} {past}; "
                         f"{moved}; within {ROUNDING_FACTOR:g}x that (its measured conditioning){why}; {todo}")
        else:
            c.detail += f"; beyond {ROUNDING_FACTOR:g}x its measured float64 conditioning too ({a.detail})"
            notes.append(f"{c.name} fails in float64{at}: max rel diff {c.max_rel_diff:.3g}, more than "
                         f"{ROUNDING_FACTOR:g}x what rounding explains ({moved}): a real difference, not rounding{why}")


def verify(block: Any, torch_cls: Any, entries: List[Any], inputs: Sequence[np.ndarray],
           same_output: Dict[str, str], records: Dict[int, list], *, lr: float = 0.1, seed: int = 0,
           ops: Sequence[str] = (), current: Optional[Dict[int, np.ndarray]] = None,
           train: bool = True) -> Tuple[List[Check], Optional[str], List[str], str]:
    """(checks, first divergent layer or None, notes, dtype checked); the Gluon block is left as
    it was. ``current``: the block's values already read (id(param) -> array), reused as the copy
    the block is restored from. float64 on both sides where MXNet can; otherwise Gluon float32 is judged against the
    torch module in float64 by torch's own float32 rounding (port's rule, ``rounding_tolerance``);
    a model with FLOAT32_INTERNAL_OPS runs float64 on both sides under that same rule. The block's
    own weights are checked in eval mode too (``USER_CHECK``, the last check)."""
    import mxnet as mx
    from mxnet import autograd, gluon

    params = block.collect_params()
    mx.nd.waitall()   # MKLDNN may still be reordering a weight in place after the last forward
    # numpy copies: an NDArray copy of a weight MKLDNN has reordered is not always restored exactly
    current = current or {}
    saved = {name: (current[id(p)] if id(p) in current else p.data().asnumpy(), p.dtype)
             for name, p in params.items()}
    dropouts = [(b, b._rate) for _, b in walk(block) if is_a(b, "Dropout")]
    rnn_drop = [(b, b._dropout) for _, b in walk(block) if hasattr(b, "_dropout") and hasattr(b, "_mode")]
    # gluonnlp's WeightDropParameter drops weights at random in train mode (AWDRNN weight_drop)
    weight_drop = [(p, p._rate) for p in params.values() if type(p).__name__ == "WeightDropParameter"
                   and getattr(p, "_rate", 0)]
    # arrays blocks hold as attributes, which a forward may replace (d2l's scratch BatchNorm): restored after
    held = held_arrays(block)
    _refuse_nonfinite(saved)
    orig_dtype = next(iter(saved.values()))[1] if saved else np.float32
    notes, checks = [], []
    first, dtype, cast = None, "float64", False
    try:
        own = {id(p): saved[name][0] for name, p in params.items()}
        why = sorted(FLOAT32_ONLY_OPS.intersection(ops))
        why = f"{why[0]} has no float64 on CPU" if why else ""
        if not why:
            try:
                block.cast("float64")
                cast = True
                g_own = as_numpy(block(*gluon_inputs(inputs, dtype)), "mx")
            except mx.base.MXNetError as e:   # an MXNet op without float64
                try:
                    mx.nd.waitall()
                except mx.base.MXNetError:    # the engine raises the same pending error again (gluoncv SSD)
                    pass
                block.cast(orig_dtype)        # float32 -> float64 -> float32 is exact
                cast, why = False, str(e).strip().splitlines()[-1][:160]
        internal = [] if why else float32_internal(block, ops)
        if why:
            dtype = "float32"
            notes.append("Gluon verified in float32 against the torch module in float64: MXNet cannot run "
                         f"the model in float64 ({why}); a check beyond {ROUNDING_FACTOR:g}x torch's own float32 "
                         f"rounding is judged again by the larger of torch's and Gluon's own ({GLUON_OWN['float32']})")
            g_own = as_numpy(block(*gluon_inputs(inputs, dtype)), "mx")
        elif internal:
            notes.append(f"MXNet computes {', '.join(internal)} in float32 also on float64 data: Gluon float64 "
                         f"judged against the torch module in float64 within {ROUNDING_FACTOR:g}x torch's own "
                         f"float32 rounding, or where a check misses it, the larger of torch's and Gluon's own "
                         f"({GLUON_OWN['internal']})")
        # torch float32 beside the float64 reference where the judge needs torch's own float32 rounding
        dtypes = (np.float32, np.float64) if dtype == "float32" or internal else (np.float64,)
        mode = "internal" if internal else ""
        # --- the block's own weights, eval mode: one forward per side unless it fails ---
        own_check, own_first, own_runs, _, g_own = _eval_check(USER_CHECK, block, torch_cls, entries, own, inputs,
                                                               same_output, dtype, dtypes, mode, seed, g_own,
                                                               layers=False)
        if not own_check.passed:
            _why_own_weights_differ(own_check, own_runs[-1], g_own, own_runs[-1].eval_out, saved, own_first, dtype)
        elif "NaN/inf on both sides" in own_check.detail:
            notes.append(f"{USER_CHECK}: the outputs hold NaN/inf in both frameworks, at the same positions: "
                         f"{nonfinite_origin(own_runs[-1]) or 'from the inputs'}")
        # --- randomised norms/biases, eval mode ---
        randomised = _randomise(entries, np.random.default_rng(seed), {id(p): saved[k][1] for k, p in params.items()})
        before = {id(p): randomised.get(id(p), saved[name][0]) for name, p in params.items()}
        eval_check, first, runs, judge, g_out = _eval_check(EVAL_CHECK, block, torch_cls, entries, before, inputs,
                                                            same_output, dtype, dtypes, mode, seed, runs=own_runs)
        del own_runs
        if eval_check.passed and not own_check.passed:
            first = own_first
        if not train:   # translated for inference: the proof is the inference forward
            notes.append("translated for inference (train=False): the proof compares the inference forward; no "
                         "backward or SGD step is compared (MXNet's backward in inference mode is not what training "
                         "computes: its BatchNorm backward uses batch statistics, and it crashes on gluoncv's "
                         "Faster R-CNN)")
            return [eval_check, own_check], first, notes, dtype
        # --- one SGD step in train mode ---
        for b, _ in dropouts:
            b._rate = 0.0
        for b, _ in rnn_drop:
            b._dropout = 0.0
        for p, _ in weight_drop:
            p._rate = 0.0
        if any(r for _, r in dropouts + rnn_drop + weight_drop):
            notes.append("dropout set to 0 on both sides for the train-mode check (random masks differ)")
        counts = bn_counts(block, records)
        train_inputs, scale = inputs, 1
        one = [p or "(top block)" for p, c in counts.items() if 1 in c]
        two = batch_of_two(inputs, seed) if one else None
        rng = np.random.default_rng(seed + 1)
        trainable = {k: p for k, p in params.items() if p.grad_req != "null"}
        trainer = gluon.Trainer(trainable, "sgd", {"learning_rate": lr}, kvstore=None) if trainable else None
        for attempt in ([two, inputs] if two is not None else [inputs]):
            try:
                with autograd.record():
                    # fresh inputs: a forward may write into a list it was given (gluonnlp's BiLMEncoder stores its
                    # final states into the begin-state list), which the eval call above already did
                    outs = flat(block(*gluon_inputs(attempt, dtype)))
                    # from the train-mode outputs: a forward may return others in training (YOLOv3's output layer)
                    proj = [rng.standard_normal(o.shape) for o in outs]
                    loss = _gluon_loss(outs, proj)
                mx.nd.waitall()
            except mx.base.MXNetError as e:
                if attempt is inputs:
                    raise
                notes.append(f"train mode proven at the given batch of 1: the Gluon block does not run on a batch of 2 "
                             f"({str(e).strip().splitlines()[-1][:120]})")
                continue
            train_inputs, scale = attempt, (2 if attempt is two else 1)
            break
        if scale == 2:
            names = ", ".join(one[:3]) + (", ..." if len(one) > 3 else "")
            notes.append(f"train mode proven at batch 2: the sample has batch 1 and BatchNorm {names} sees one value per "
                         f"channel in training (torch refuses it, Gluon returns beta); the second sample is the first's "
                         f"values in a random order; the eval checks use the sample as given")
        n = int(np.asarray(train_inputs[0]).shape[0]) if np.asarray(train_inputs[0]).ndim else 1
        if trainable:             # without parameters nothing was recorded to differentiate
            loss.backward()
        g_train = [o.asnumpy() for o in outs]
        g_grads = {id(p): p.grad() for p in trainable.values()}   # read one at a time when compared
        if trainer is not None:   # a block without parameters (an attention cell) has no step
            trainer.step(n, ignore_stale_grad=True)
        gluon_side = GluonSide(block, entries, records, before, g_out, g_train, g_grads, n, lr, scale)
        gluon_side.state = updated_state(block, entries)
        mults = {e.torch_key: float(e.param.lr_mult) for e in owners(entries) if float(e.param.lr_mult) != 1.0}
        if mults:   # gluoncv's segmentation heads train at 10x the lr
            notes.append(f"the SGD step uses each Gluon parameter's lr_mult on both sides ({len(mults)} tensors, "
                         f"e.g. {next(iter(mults))} x{next(iter(mults.values())):g}); in torch that is an optimizer "
                         f"parameter group with that lr")
        for r in runs:
            r.lr_mult = mults
            if train_inputs is not inputs:
                r.train_inputs = torch_inputs(train_inputs, r.dtype)
        raised = train_steps(runs, proj, n, lr)
        if raised:
            checks = [eval_check, Check("train-mode outputs (batch statistics)", np.inf, np.inf, 0.0, False, raised,
                                        evidence=judge.evidence)]
        else:
            checks = gluon_side.checks(judge, runs)
            checks[0] = eval_check if checks[0].name == EVAL_CHECK else checks[0]
            failed = [i for i, c in enumerate(checks) if not c.passed and i > 0]
            if failed and (dtype == "float32" or internal):      # by both sides' own float32 rounding
                _rounding_rejudge(block, entries, records, gluon_side, judge, runs, train_inputs, proj, mode, seed,
                                  checks, failed, notes)
            elif dtype == "float64":   # missed or close to the fixed line: by the measured conditioning
                close = {i: judge.closest.get(c.name, ("", 0.0))[1]
                         for i, c in enumerate(checks) if i > 0 and c.passed}
                close = {i: v for i, v in close.items() if v >= CLOSE_CALL}
                small = [f"{p or '(top block)'} ({min(c) * scale} values)" for p, c in counts.items() if min(c) * scale <= 4]
                if failed or close:
                    _conditioned(block, torch_cls, entries, before, inputs, train_inputs, proj, n, lr, mults, seed,
                                 runs, gluon_side, checks, failed + sorted(close), small, notes, close)
        checks.append(own_check)
        if checks[0].passed and own_check.passed:
            first = None
    finally:
        for b, r in dropouts:
            b._rate = r
        for b, r in rnn_drop:
            b._dropout = r
        for p, r in weight_drop:
            p._rate = r
        if cast:
            block.cast(orig_dtype)
        _restore(params, saved)
        put_back(held)
    return checks, first, notes, dtype
