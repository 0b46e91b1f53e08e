"""``assert_parity``: build a model on torch and on MXNet with the same weights, train both for a few
steps on the same data, and compare everything (outputs, loss, every gradient, weights and buffers
after each optimizer step); when they disagree, name the first layer whose output diverges.

Torch's semantics are the contract, so torch's values are the reference ``b`` in
``|a - b| <= atol + rtol |b|``, and the optional float64 reference is the torch build in float64.
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from ..backend import _using, backend_of, get_backend
from .capture import capture, capture_grads, flatten, leaf_calls, pair_calls, replay
from .report import Diff, LayerDiff, ParityError, ParityReport, compare_arrays, max_abs
from .runners import LossSpec, adapter, runner_for

__all__ = ["assert_parity", "check_parity", "build", "randomize_state", "LOSSES", "OPTIMIZERS"]

# short names accepted for ``loss=`` (also any dualdl.losses class name, e.g. "CrossEntropyLoss")
LOSSES = {
    "mse": "MSELoss", "l1": "L1Loss", "smooth_l1": "SmoothL1Loss", "huber": "HuberLoss",
    "cross_entropy": "CrossEntropyLoss", "ce": "CrossEntropyLoss", "nll": "NLLLoss",
    "bce_with_logits": "BCEWithLogitsLoss", "bce": "BCEWithLogitsLoss", "kl_div": "KLDivLoss",
}
OPTIMIZERS = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop"}
_CLASS_LOSSES = ("CrossEntropyLoss", "NLLLoss")

OptimizerSpec = Union[None, str, Tuple[str, Dict[str, Any]], Callable[[Any], Any]]


# ---- building -----------------------------------------------------------------------------------
def build(factory: Callable[..., Any], backend: str) -> Any:
    """Call ``factory`` with ``backend`` active (passing ``backend=`` when it declares that keyword)
    and check it returned a model of that backend's framework."""
    kwargs = {}
    try:
        params = inspect.signature(factory).parameters
        if "backend" in params and params["backend"].kind in (inspect.Parameter.KEYWORD_ONLY,
                                                              inspect.Parameter.POSITIONAL_OR_KEYWORD):
            kwargs["backend"] = backend
    except (TypeError, ValueError):
        pass
    with _using(backend) as active:
        model = factory(**kwargs)
    owner = backend_of(model, None)
    if owner is None or owner.name != active.name:
        raise TypeError(f"the model factory returned a {type(model).__name__} under backend {backend!r}; "
                        f"expected a {active.framework} model (a dualdl.nn.Module built with that backend active)")
    if not hasattr(model, "named_parameters"):
        raise TypeError(f"{type(model).__name__} has no named_parameters(): on MXNet, parity checks need "
                        f"dualdl modules (native Gluon blocks: use dualdl.port)")
    return model


def randomize_state(model: Any, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """Random values of order 1 for every float tensor of a model of any backend (norm scales
    around 1, biases and shifts nonzero, positive running variances), loaded into it and returned
    as float32 numpy. Default initialisations hide mistakes (zero biases, unit norm scales)."""
    from ..state import state_dict, load_state_dict
    from ..tensor import to_numpy
    state = {}
    for k, v in state_dict(model).items():
        shape = tuple(v.shape)
        if to_numpy(v).dtype.kind != "f":
            continue
        if k.endswith("running_var"):
            a = 0.5 + rng.random(shape)
        elif len(shape) >= 2:
            a = rng.standard_normal(shape) / np.sqrt(max(1, int(np.prod(shape[1:]))))
        elif k.endswith(("weight", "scale")):
            a = 1.0 + 0.3 * rng.standard_normal(shape)
        else:
            a = 0.3 * rng.standard_normal(shape)
        state[k] = a.astype(np.float32)
    load_state_dict(model, state, strict=False)
    return {k: to_numpy(v).copy() for k, v in state_dict(model).items()}


def _arrays(inputs: Any) -> List[Any]:
    """Inputs as a list of numpy arrays (a single array or a tuple/list of them; native tensors
    of either backend are read back to numpy)."""
    items = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    out = []
    for x in items:
        if x is None or isinstance(x, np.ndarray):
            out.append(x)
        elif isinstance(x, (int, float, bool)):
            out.append(x)
        else:
            from ..tensor import to_numpy
            out.append(to_numpy(x))
    if not out:
        raise ValueError("inputs is empty: give the model's input as a numpy array or a tuple of arrays")
    return out


def _loss_spec(loss: Any, targets: Any, probe_outputs: List[np.ndarray], rng: np.random.Generator
               ) -> Tuple[LossSpec, Any]:
    """Resolve ``loss`` (None, a name, a dualdl loss, a callable) and ``targets`` (None -> random
    targets that fit the loss and the model's first output)."""
    from .. import losses as L
    if loss is None and targets is None:
        proj = [rng.standard_normal(o.shape) for o in probe_outputs]
        return LossSpec(None, "sum(output * fixed random tensor)", proj), None
    if loss is None:
        t = np.asarray(targets)
        loss = "cross_entropy" if t.dtype.kind in "iu" else "mse"
    if isinstance(loss, str):
        cls_name = LOSSES.get(loss.lower().replace("-", "_"), loss)
        cls = getattr(L, cls_name, None)
        if not (isinstance(cls, type) and issubclass(cls, L.Loss)):
            raise ValueError(f"unknown loss {loss!r}; expected one of {', '.join(LOSSES)}, a dualdl.losses "
                             f"class name, a dualdl loss object or a callable (output, target) -> scalar")
        loss = cls()
    label = repr(loss) if isinstance(loss, L.Loss) else getattr(loss, "__name__", type(loss).__name__)
    if targets is None:
        if not probe_outputs:
            raise ValueError("cannot make random targets: the model returned no tensor")
        out = probe_outputs[0]
        if isinstance(loss, L.Loss) and type(loss).__name__ in _CLASS_LOSSES:
            if out.ndim < 2:
                raise ValueError(f"{type(loss).__name__} needs outputs (N, C, ...); got {out.shape}")
            targets = rng.integers(0, out.shape[1], (out.shape[0],) + out.shape[2:]).astype(np.int64)
        elif isinstance(loss, L.BCEWithLogitsLoss):
            targets = rng.random(out.shape).astype(np.float32)
        elif isinstance(loss, L.KLDivLoss):
            p = rng.random(out.shape) + 0.1
            targets = (p / p.sum(axis=-1, keepdims=True)).astype(np.float32)
        else:
            targets = rng.standard_normal(out.shape).astype(np.float32)
    else:
        targets = _arrays(targets)[0] if not isinstance(targets, np.ndarray) else targets
    if isinstance(loss, L.Loss):
        fn = lambda out, tgt, _l=loss: _l(flatten(out)[0], tgt)   # noqa: E731  (first output)
    elif callable(loss):
        fn = loss
    else:
        raise TypeError(f"loss must be a name, a dualdl loss or a callable, got {type(loss).__name__}")
    return LossSpec(fn, label), targets


def _optimizer_factory(optimizer: OptimizerSpec, lr: Optional[float]) -> Tuple[Callable[[Any], Any], str]:
    from .. import optim
    if callable(optimizer) and not isinstance(optimizer, (str, tuple)):
        name = getattr(optimizer, "__name__", "")
        return optimizer, (name if name and name != "<lambda>" else "custom factory")
    if optimizer is None:
        optimizer = "sgd"
    name, kwargs = (optimizer, {}) if isinstance(optimizer, str) else optimizer
    kwargs = dict(kwargs)
    if lr is not None:
        kwargs["lr"] = lr
    kwargs.setdefault("lr", 0.1 if name.lower() == "sgd" else 1e-3)
    cls_name = OPTIMIZERS.get(str(name).lower())
    if cls_name is None:
        raise ValueError(f"unknown optimizer {name!r}; expected one of {', '.join(OPTIMIZERS)} or a factory "
                         f"lambda params: dl.optim.SGD(params, lr=0.1)")
    cls = getattr(optim, cls_name)
    label = f"{cls_name}(" + ", ".join(f"{k}={v}" for k, v in kwargs.items()) + ")"
    return (lambda params: cls(params, **kwargs)), label


def _model_label(factory: Any) -> str:
    name = getattr(factory, "__qualname__", None) or type(factory).__name__
    return name if name != "<lambda>" else "lambda"


# ---- the check ----------------------------------------------------------------------------------
def check_parity(model_factory: Callable[..., Any], inputs: Any, targets: Any = None, loss: Any = None,
                 optimizer: OptimizerSpec = None, steps: int = 1, rtol: float = 1e-4, atol: float = 1e-5,
                 train: bool = True, float64_reference: bool = False, seed: int = 0,
                 randomize: bool = True, forward: Optional[Callable[..., Any]] = None, lr: Optional[float] = None,
                 backward: bool = True, hybridize: bool = False, locate: bool = True,
                 reference: str = "torch", candidate: str = "mxnet") -> ParityReport:
    """Run the parity check and return the :class:`ParityReport` (never raises on a mismatch).

    ``model_factory()`` is called with each backend active (or ``model_factory(backend=...)``).
    ``inputs``: an array or a tuple of arrays (positional inputs). ``loss``: None (with no targets:
    ``sum(output * R)`` for a fixed random ``R``), a name (``"mse"``, ``"cross_entropy"``...), a dualdl
    loss object or a callable ``(output, target) -> scalar``; with ``targets=None`` random targets
    that fit the loss are drawn. ``optimizer``: a factory ``lambda params: dl.optim.Adam(params)``,
    a name (``"sgd"``) or ``(name, kwargs)``. ``steps``: optimizer steps (0: one forward/backward).
    ``train``: module mode (``model.train()``/``eval()``); use Dropout p=0 in train mode.
    ``float64_reference``: also run the torch build in float64 and report each side's distance to it.
    ``forward(model, *inputs)``: how to call the model (default ``model(*inputs)``).
    ``backward=False``: compare forward outputs only (inference parity; needs ``steps=0``).
    ``hybridize=True`` runs the MXNet model hybridized (the per-layer search always runs it
    imperatively: hooks do not fire inside a cached graph).
    ``randomize=False`` keeps the factory's initial weights; ``locate=False`` skips the per-layer
    search for the first divergent layer.
    ``reference`` / ``candidate``: the backends compared, by name (torch's values are the contract,
    so torch is the default reference, MXNet the candidate); ``candidate="mxnet:hybridized"`` is
    ``hybridize=True``. The report's ``torch``/``mxnet`` fields hold the reference's/candidate's values.
    """
    import dualdl as dl
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if not backward and steps:
        raise ValueError(f"backward=False compares forward outputs only: steps must be 0, got {steps}")
    if rtol < 0 or atol < 0:
        raise ValueError(f"rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    xs = _arrays(inputs)
    candidate, hyb = (candidate.split(":", 1) + [""])[:2]
    if hyb not in ("", "hybridized"):
        raise ValueError(f"candidate {candidate}:{hyb}: the only variant is ':hybridized'")
    hybridize = hybridize or bool(hyb)
    ref_b, cand_b = get_backend(reference).name, get_backend(candidate).name
    rng = np.random.default_rng(seed)
    dl.seed(seed)
    models = {"reference": build(model_factory, ref_b), "candidate": build(model_factory, cand_b)}
    side = {"reference": ref_b, "candidate": cand_b, "ref": ref_b}     # role -> backend name
    if randomize:
        init = randomize_state(models["reference"], rng)
    else:
        init = {k: dl.to_numpy(v) for k, v in dl.state_dict(models["reference"]).items()}
    dl.load_state_dict(models["candidate"], init)
    if hybridize:
        models["candidate"].hybridize()
    runners = {b: runner_for(side[b], m) for b, m in models.items()}
    ref = None
    if float64_reference:
        ref_model = adapter(ref_b).cast_model(build(model_factory, ref_b), np.float64)
        dl.load_state_dict(ref_model, {k: v.astype(np.float64) if v.dtype.kind == "f" else v
                                       for k, v in init.items()})
        ref = runner_for(ref_b, ref_model, np.float64)
        runners["ref"] = ref
    for r in runners.values():
        r.set_mode(train)

    # loss and targets (probing the output shapes on a throw-away torch forward when needed)
    probe: List[np.ndarray] = []
    if targets is None and backward:
        probe_model = build(model_factory, ref_b)
        dl.load_state_dict(probe_model, init)
        probe_model.train(train)
        _, probe = capture(probe_model, ref_b, [runners["reference"].native(x) for x in xs], forward, train)
    spec, tgt = _loss_spec(loss, targets, probe, rng) if backward else (LossSpec(None, "none (forward only)"), None)
    opt_factory, opt_label = _optimizer_factory(optimizer, lr) if steps > 0 else (None, "none")
    opts = {b: (opt_factory(list(r.parameters())) if opt_factory else None) for b, r in runners.items()}

    report = ParityReport(model=_model_label(model_factory), rtol=rtol, atol=atol, steps=steps, train=train,
                          optimizer=opt_label, loss=spec.label, float64_reference=float64_reference)
    if (ref_b, cand_b) != ("torch", "mxnet"):
        report.notes.append(f"reference {ref_b}, candidate {cand_b}")
    if hybridize:
        report.notes.append(f"{cand_b} model hybridized")
    names_t, names_m = runners["reference"].param_names(), runners["candidate"].param_names()
    if names_t != names_m:
        report.notes.append(f"parameter names differ: torch only {sorted(set(names_t) - set(names_m))}, "
                            f"mxnet only {sorted(set(names_m) - set(names_t))}")

    def add(step, phase, name, a, b, r=None):
        a_ = np.zeros_like(b) if a is None and b is not None else a
        b_ = np.zeros_like(a) if b is None and a is not None else b
        if a_ is None:
            return
        c = compare_arrays(a_, b_, rtol, atol)
        d = Diff(step=step, phase=phase, name=name, shape=tuple(np.shape(b_)), **c)
        if (a is None) != (b is None):
            d.note = (d.note + " " if d.note else "") + ("no gradient on " + (cand_b if a is None else ref_b))
        if r is not None:
            d.ref_torch, d.ref_mxnet = max_abs(b_, r), max_abs(a_, r)
        report.diffs.append(d)

    for step in range(1, max(steps, 1) + 1):
        res = {b: (runners[b].step(xs, tgt, spec, forward, opts[b]) if backward else runners[b].infer(xs, forward))
               for b in runners}
        t, m, f = res["reference"], res["candidate"], res.get("ref")
        if len(t.outputs) != len(m.outputs):
            report.diffs.append(Diff(step, "forward", "output count", (), math.inf, math.inf, math.inf, False,
                                     f"torch returned {len(t.outputs)} tensors, mxnet {len(m.outputs)}"))
        for i, (bo, ao) in enumerate(zip(t.outputs, m.outputs)):
            add(step, "forward", f"output[{i}]", ao, bo, f.outputs[i] if f else None)
        if not backward:
            continue
        add(step, "forward", "loss", np.float64(m.loss), np.float64(t.loss), np.float64(f.loss) if f else None)
        for i, (bg, ag) in enumerate(zip(t.input_grads, m.input_grads)):
            if bg is not None or ag is not None:
                add(step, "backward", f"grad input[{i}]", ag, bg, f.input_grads[i] if f else None)
        for k in names_t:
            if k in m.grads:
                add(step, "backward", f"grad {k}", m.grads[k], t.grads[k], f.grads[k] if f else None)
        if steps > 0:
            st, sm = runners["reference"].state(), runners["candidate"].state()
            sf = ref.state() if ref else {}
            pset = set(names_t)
            for k in st:
                if k in sm:
                    kind = "param" if k in pset else "buffer"
                    add(step, "update", f"{kind} {k}", sm[k], st[k], sf.get(k))
    if locate and not report.passed:
        located = _locate(report, model_factory, init, xs, train, forward, rtol, atol, float64_reference, side)
        if located and report.first_divergent_layer is None and backward:
            _locate_backward(report, model_factory, init, xs, tgt, spec, train, forward, rtol, atol,
                             float64_reference, hybridize, side)
    return report


def _locate_backward(report: ParityReport, factory, init, xs, tgt, spec, train, forward, rtol, atol,
                     f64: bool, hybridize: bool, side: Dict[str, str]) -> None:
    """When every layer's forward agrees: take each layer call's inputs and output gradients from a
    torch training step, replay that layer alone on both backends, and compare input and parameter
    gradients. The first failing layer in backward order is where the gradients start to diverge.
    With ``hybridize`` the MXNet layers are replayed hybridized (cached graphs behave differently)."""
    import dualdl as dl
    try:
        models = {}
        for b in ("reference", "candidate", "probe") + (("ref",) if f64 else ()):
            m = build(factory, side.get(b, side["reference"]))
            if b == "ref":
                m = adapter(side["ref"]).cast_model(m, np.float64)
            dl.load_state_dict(m, init)
            m.train(train)
            if b == "candidate" and hybridize:
                m.hybridize()            # each layer then runs its own cached graph, as in the check
            models[b] = m
        probe = runner_for(side["reference"], models["probe"])
        calls = capture_grads(models["probe"], lambda: probe.step(xs, tgt, spec, forward), side["reference"])
        mods = {b: dict(m.named_modules()) for b, m in models.items()}
        for c in reversed(leaf_calls(calls)):
            if c.name not in mods["candidate"] or c.name not in mods["reference"]:
                continue
            dxt, gt = replay(mods["reference"][c.name], side["reference"], c.inputs, c.grad_outputs, train)
            dxm, gm = replay(mods["candidate"][c.name], side["candidate"], c.inputs, c.grad_outputs, train)
            res, notes = [], []
            for i, (a, bb) in enumerate(zip(dxm, dxt)):
                if a is not None and bb is not None:
                    r = compare_arrays(a, bb, rtol, atol)
                    res.append(r)
                    if not r["passed"]:
                        notes.append(f"input[{i}] grad {_fmt_abs(r['max_abs'])}")
            for k in gt:
                r = compare_arrays(gm.get(k, np.zeros_like(gt[k])), gt[k], rtol, atol)
                res.append(r)
                if not r["passed"]:
                    notes.append(f"{k} grad {_fmt_abs(r['max_abs'])}")
            ld = LayerDiff(name=c.name or "<model>", call=c.call, torch_type=c.type,
                           mxnet_type=type(mods["candidate"][c.name]).__name__, input_max_abs=0.0,
                           output_max_abs=max((r["max_abs"] for r in res), default=0.0),
                           output_max_rel=max((r["max_rel"] for r in res), default=0.0),
                           usage=max((r["usage"] for r in res), default=0.0),
                           passed=all(r["passed"] for r in res), note=", ".join(notes), phase="backward")
            if f64:
                dxr, gr = replay(mods["ref"][c.name], side["ref"], c.inputs, c.grad_outputs, train, np.float64)
                ref_t = [max_abs(a, r) for a, r in zip(dxt, dxr) if a is not None and r is not None]
                ref_m = [max_abs(a, r) for a, r in zip(dxm, dxr) if a is not None and r is not None]
                ref_t += [max_abs(gt[k], gr[k]) for k in gt if k in gr]
                ref_m += [max_abs(gm[k], gr[k]) for k in gt if k in gr and k in gm]
                ld.ref_torch, ld.ref_mxnet = max(ref_t, default=0.0), max(ref_m, default=0.0)
            report.backward_layers.append(ld)
            if not ld.passed and report.first_divergent_layer is None:
                report.first_divergent_layer = ld
    except Exception as e:  # a replay problem must not hide the measured report
        report.notes.append(f"per-layer backward replay failed: {type(e).__name__}: {e}")


def _fmt_abs(v: float) -> str:
    return f"{v:.2e}"


def _locate(report: ParityReport, factory, init, xs, train, forward, rtol, atol, f64,
            side: Dict[str, str]) -> bool:
    """Per-layer capture on fresh builds at the initial weights: the first layer (execution order)
    whose output is outside tolerance is the first divergent one."""
    import dualdl as dl
    runs = {}
    for b in ("reference", "candidate") + (("ref",) if f64 else ()):
        model = build(factory, side[b])
        if b == "ref":
            model = adapter(side[b]).cast_model(model, np.float64)
        dl.load_state_dict(model, init)
        model.train(train)
        r = runner_for(side[b], model, np.float64 if b == "ref" else np.float32)
        try:
            runs[b], _ = capture(model, side[b], [r.native(x) for x in xs], forward, train)
        except Exception as e:  # a capture problem must not hide the measured report
            report.notes.append(f"per-layer capture failed on {b}: {type(e).__name__}: {e}")
            return False
    ref_calls = {(c.name, c.call): c for c in runs.get("ref", [])}
    for cm, ct in pair_calls(runs["candidate"], runs["reference"]):      # torch's execution order
        outs = list(zip(cm.outputs, ct.outputs))
        res = [compare_arrays(a, b, rtol, atol) for a, b in outs]
        ins = [max_abs(a, b) for a, b in zip(cm.inputs, ct.inputs)]
        ins_ok = all(compare_arrays(a, b, rtol, atol)["passed"] for a, b in zip(cm.inputs, ct.inputs))
        note = ""
        if len(cm.outputs) != len(ct.outputs):
            note = f"{len(ct.outputs)} outputs on torch, {len(cm.outputs)} on mxnet"
        elif not ins_ok:
            note = "its inputs already differ: the difference arises before it (e.g. in a parent's forward code)"
        ld = LayerDiff(name=ct.name or "<model>", call=ct.call, torch_type=ct.type, mxnet_type=cm.type,
                       input_max_abs=max(ins) if ins else 0.0,
                       output_max_abs=max((r["max_abs"] for r in res), default=0.0),
                       output_max_rel=max((r["max_rel"] for r in res), default=0.0),
                       usage=max((r["usage"] for r in res), default=0.0),
                       passed=all(r["passed"] for r in res) and len(cm.outputs) == len(ct.outputs),
                       note="; ".join([note] * bool(note) + [r["note"] for r in res if r["note"]]))
        rc = ref_calls.get((ct.name, ct.call))
        if rc is not None and len(rc.outputs) == len(ct.outputs) == len(cm.outputs) and rc.outputs:
            ld.ref_torch = max(max_abs(b, r) for b, r in zip(ct.outputs, rc.outputs))
            ld.ref_mxnet = max(max_abs(a, r) for a, r in zip(cm.outputs, rc.outputs))
        report.layers.append(ld)
        if not ld.passed and report.first_divergent_layer is None:
            report.first_divergent_layer = ld
    return True


def assert_parity(model_factory: Callable[..., Any], inputs: Any, targets: Any = None, loss: Any = None,
                  optimizer: OptimizerSpec = None, steps: int = 1, rtol: float = 1e-4, atol: float = 1e-5,
                  train: bool = True, float64_reference: bool = False, seed: int = 0, **kwargs: Any) -> ParityReport:
    """:func:`check_parity`, raising :class:`ParityError` (an AssertionError whose message is the report
    table) when any tensor is outside tolerance; returns the report when all agree."""
    report = check_parity(model_factory, inputs, targets=targets, loss=loss, optimizer=optimizer, steps=steps,
                          rtol=rtol, atol=atol, train=train, float64_reference=float64_reference, seed=seed,
                          **kwargs)
    if not report.passed:
        raise ParityError(report)
    return report
