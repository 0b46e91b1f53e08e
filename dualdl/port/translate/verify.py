"""Run the Gluon block and the generated torch module side by side: eval mode with randomised
norms/biases, then one SGD step in train mode (batch statistics, gradients, weights after the
step, running statistics). Gluon's per-sample sum loss with ``trainer.step(N)`` is compared with
torch's mean loss (the two frameworks' ways of averaging a batch gradient).

Evidence: float64 on both sides within TOLERANCE; models with MXNet ops that compute in float32
(FLOAT32_ONLY_OPS, FLOAT32_INTERNAL_OPS) within 8x torch's own float32 rounding; a float64 check
that misses TOLERANCE is judged again by its measured conditioning (FLOAT64_PER_FLOAT32)."""
from __future__ import annotations

import importlib.util
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..verify import RTOL_FLOOR, ROUNDING_FACTOR, Check, check_outputs, compare, rounding_tolerance
from ..slots import RANDOMISED_ROLES, gluon_role
from .codegen import MapEntry
from .trace import gluon_array, held_arrays, put_back, walk

__all__ = ["load_generated", "verify", "torch_state", "TOLERANCE"]

#: float64 on both sides (where MXNet's ops allow it): differences are rounding only. Measured: <= 3e-14 relative on the model
#: zoo (eval) and <= 2e-12 on gradients after one step; the tolerance leaves room for deeper nets.
#: A float64 check that misses it is judged again by the computation's measured conditioning
#: (``CONDITIONED``), never by a looser fixed number.
TOLERANCE = {"float64": 1e-8, "float32": 2e-4}
#: torch's own float32 outputs further than this (of their scale) from its float64 ones: the outputs
#: are sensitive to rounding (a selection over near-equal values), and the eval check says so
SENSITIVE_REL = 1e-3
EVAL_CHECK = "eval outputs (randomised norms/biases)"
#: float32 runs of the torch module with its weights moved by one ulp, sampled when an eval check
#: fails on float32 evidence (``_rounding_probe``)
PROBES = 4

#: Ill-conditioned float64 results (gradients that are sums of large terms cancelling to a small
#: value: model-zoo resnet34_v1 at 32x32 input, 1.19e-8 relative): first-order rounding error is
#: the conditioning times the unit roundoff, so torch's own float32 rounding of a tensor (its
#: float32 vs float64 result, same input) measures it, and the float64 difference may reach
#: ROUNDING_FACTOR x that rounding scaled by the unit roundoffs' ratio (2^-53 / 2^-24 = 2^-29).
#: Only a check that fails TOLERANCE is re-judged this way (the report names the rule).
FLOAT64_PER_FLOAT32 = 2.0 ** -29


#: MXNet keeps BatchNorm's momentum as a float32 attribute: 1 - float32(0.9) = 0.10000002, so its
#: running-statistic update differs from torch's exact 0.1 by up to 2.4e-7 relative (measured
#: 1.7e-7 on resnet18_v1).
#: MXNet passes lr and rescale_grad (1/N) to its update op as float32: 1/3 becomes 0.33333334,
#: so an update can differ from torch's exact one by ~6e-8 of its size (measured 3e-8 at N=3).
UPDATE_TOLERANCE = 2.4e-7
RUNNING_TOLERANCE = {"float64": 1e-6, "float32": 1e-4}

#: MXNet 1.9.1 ops that refuse float64 on CPU ("Only FP32 is supported on CPU at the moment"):
#: a model using one is verified in float32 without first casting it to float64 to find out.
FLOAT32_ONLY_OPS = frozenset({"_contrib_interleaved_matmul_selfatt_qk", "_contrib_interleaved_matmul_selfatt_valatt",
                              "_contrib_interleaved_matmul_encdec_qk", "_contrib_interleaved_matmul_encdec_valatt"})

#: MXNet 1.9.1 ops that take and return float64 but compute in float32 (measured on float64 data
#: against torch float64, tests/test_translate_ops.py): LeakyReLU's forward for act_type leaky
#: (1.0e-7 at slope 0.25, exact in float32), prelu (3.7e-7) and gelu (5.7e-7), its elu keeping the
#: slope as a float32 attribute (1.2e-8); the RNN op in mode rnn_relu (outputs 3.7e-8, weight
#: gradients 1.8e-7; rnn_tanh, lstm, gru: <= 2e-15). A model with one is run in float64 on both
#: sides and judged by evidence: Gluon within ROUNDING_FACTOR x torch's own float32 rounding of
#: the torch float64 result (``rounding_tolerance``, as for FLOAT32_ONLY_OPS). Every other op
#: measured stays under the float64 TOLERANCE (relu, sigmoid, tanh, softrelu, erf, softmax...).
FLOAT32_INTERNAL_OPS = frozenset({"LeakyReLU"})


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


def load_generated(path: str, class_name: str):
    """Import the generated file afresh from its path (no dualdl, no mxnet) and return the class."""
    name = f"_dualdl_translated_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(name, None)
    spec.loader.exec_module(module)
    return getattr(module, class_name)


def torch_state(entries: List[MapEntry], dtype=None, values: Optional[Dict[int, np.ndarray]] = None
                ) -> Dict[str, Any]:
    """The torch state_dict built from the current Gluon values, or from ``values`` (id(param) ->
    array; shared where the dtype matches, except non-trainable ones, which torch's train forward
    updates in place); tied entries share one tensor."""
    import torch
    out, by_param = {}, {}
    for e in entries:
        if e.param is not None:
            if id(e.param) not in by_param:
                a = e.param.data().asnumpy() if values is None else values[id(e.param)]
                copy = values is not None and e.param.grad_req == "null"
                by_param[id(e.param)] = torch.from_numpy(a.astype(dtype or a.dtype, copy=copy))
            out[e.torch_key] = by_param[id(e.param)]
        elif isinstance(e.value, np.ndarray):   # an array the block holds (a position table) as a buffer
            a = np.array(e.value)
            out[e.torch_key] = torch.from_numpy(a.astype(dtype or a.dtype) if a.dtype.kind == "f" else a)
        else:                                    # num_batches_tracked
            out[e.torch_key] = torch.tensor(e.value, dtype=torch.long)
    return out


_RUNNING_STATS = ("running_mean", "running_var", "moving_mean", "moving_var")


def _local_name(gluon_key: str) -> str:
    """The name a parameter's role is read from. An exported graph (a SymbolBlock, nested or from
    files) keeps its node's prefix on the running statistics (``ssd0_expand_bn0_moving_var``):
    they are randomised like a BatchNorm child's, or an initializer's values (a normal init gives
    negative variances: NaN in both frameworks, which MXNet's relu then maps to 0 and torch's keeps)
    would be what the proof compares."""
    local = gluon_key.rsplit(".", 1)[-1]
    return next((s for s in _RUNNING_STATS if local.endswith("_" + s)), local)


def _randomise(entries: List[MapEntry], rng) -> Dict[int, np.ndarray]:
    """Random norms/biases set into the block; returns them by id(param)."""
    import mxnet as mx
    done = {}
    for e in entries:
        if e.param is None or id(e.param) in done:
            continue
        local = _local_name(e.gluon_key)
        role, _ = gluon_role(local, len(e.param.shape))
        if role not in RANDOMISED_ROLES or (role in ("scale", "shift") and e.param.grad_req == "null"):
            continue
        shape = e.param.shape
        v = rng.uniform(0.5, 1.5, shape) if role in ("scale", "running_var") else rng.uniform(-0.5, 0.5, shape)
        v = v.astype(e.param.dtype)
        done[id(e.param)] = v
        e.param.set_data(gluon_array(v, e.param.dtype))
    return done


def _gluon_inputs(inputs, dtype):
    """The sample inputs as Gluon arrays of ``dtype`` (ids too: Gluon feeds them as floats); lists of
    arrays (begin states) keep their nesting."""
    return [_gluon_inputs(x, dtype) if isinstance(x, (list, tuple)) else
            gluon_array(np.asarray(x, dtype=dtype), dtype) for x in inputs]


def _torch_inputs(inputs, dtype):
    """The sample inputs as torch tensors (integer ids int64, the rest ``dtype``), nesting kept."""
    import torch
    out = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            out.append(type(x)(_torch_inputs(x, dtype)))
            continue
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


def _skip_random_init():
    """A torch function mode in which ``Tensor.normal_`` / ``uniform_`` (what torch's layer init
    draws) do nothing: the module's memory stays untouched until our values replace it. Unlike
    building on the ``meta`` device, values a module computes in ``__init__`` stay real, and torch
    does not import ``torch._dynamo`` (1.5 s) for meta-device ``normal_``."""
    import torch
    from torch.overrides import TorchFunctionMode
    skip = {torch.Tensor.normal_, torch.Tensor.uniform_}

    class SkipRandomInit(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in skip:
                return args[0]
            return func(*args, **(kwargs or {}))

    return SkipRandomInit()


def _no_functional_dropout():
    """A torch function mode in which ``F.dropout`` calls written in a generated forward (MXNet's
    Dropout op) return their input, as ``nn.Dropout`` modules get p = 0 for the train check."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode
    skip = {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout}

    class NoDropout(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in skip:
                return args[0] if args else kwargs["input"]
            return func(*args, **(kwargs or {}))

    return NoDropout()


class _TorchRun:
    """The generated module in one dtype: built from the Gluon values, run in eval mode, then one
    backward and one plain SGD step in train mode (what ``torch.optim.SGD(lr)`` does without
    momentum; importing torch.optim costs seconds)."""

    def __init__(self, torch_cls, entries, values, inputs, dtype):
        import torch
        self.dtype = dtype
        state = torch_state(entries, dtype, values)
        with _skip_random_init():   # seconds on resnet50 / BERT-base; every value is replaced below
            self.model = torch_cls()
        if any(e.tied_to for e in entries):
            self.model.load_state_dict(state, strict=True)
        else:   # take our tensors as they are
            self.model.load_state_dict(state, strict=True, assign=True)
        if dtype == np.float64:
            self.model.double()
        self.inputs = _torch_inputs(inputs, dtype)
        self.lr_mult: Dict[str, float] = {}   # torch key -> the Gluon parameter's lr_mult
        self.model.eval()
        with torch.no_grad():
            self.eval_out = _np(self.model(*self.inputs), "torch")

    def train_step(self, proj, n, lr):
        import torch
        for m in self.model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
            if isinstance(m, torch.nn.RNNBase):
                m.dropout = 0.0
        self.model.train()
        with _no_functional_dropout():   # dropout set to 0 on both sides (random masks differ)
            outs = _flat(self.model(*self.inputs))
        loss = sum((o * torch.from_numpy(r.astype(self.dtype))).sum() for o, r in zip(outs, proj)) / n
        self.model.zero_grad()
        if loss.requires_grad:    # outputs that no parameter reaches (a topk mask) have no gradient
            loss.backward()
        self.train_out = [o.detach().numpy() for o in outs]
        named = dict(self.model.named_parameters(remove_duplicate=False))
        self.grads = {k: None if p.grad is None else p.grad.numpy() for k, p in named.items()}
        self.lr = lr
        self.named, self.state = named, self.model.state_dict()

    def step(self, key: str) -> float:
        """MXNet's update uses lr x the parameter's lr_mult, as a float32 attribute."""
        return float(np.float32(self.lr * self.lr_mult.get(key, 1.0)))

    def after(self, key: str) -> np.ndarray:
        """A tensor after the SGD step, computed when compared (the weights are not stepped in
        place: they may share memory with the Gluon values the checks still need)."""
        import torch
        p = self.named.get(key)
        if p is not None and p.grad is not None:
            return torch.add(p.detach(), p.grad, alpha=-self.step(key)).numpy()
        return self.state[key].numpy()


class _Lazy:
    """A list whose items are computed when read (one full-size tensor at a time)."""

    def __init__(self, keys: List[str], fn: Callable[[str], np.ndarray]):
        self.keys, self.fn = keys, fn

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.fn(self.keys[i])

    def __iter__(self):
        return (self.fn(k) for k in self.keys)


def verify(block: Any, torch_cls: Any, entries: List[MapEntry], inputs: Sequence[np.ndarray],
           same_output: Dict[str, str], records: Dict[int, list], *, lr: float = 0.1, seed: int = 0,
           ops: Sequence[str] = (), current: Optional[Dict[int, np.ndarray]] = None,
           train: bool = True) -> Tuple[List[Check], Optional[str], List[str], str]:
    """(checks, first divergent layer or None, notes, dtype checked); the Gluon block is left as
    it was. ``current``: the block's values already read (id(param) -> array), reused as the copy
    the block is restored from. float64 on both sides where MXNet can; otherwise Gluon float32 is judged against the
    torch module in float64 by torch's own float32 rounding (port's rule, ``rounding_tolerance``);
    a model with FLOAT32_INTERNAL_OPS runs float64 on both sides under that same rule."""
    import mxnet as mx
    from mxnet import autograd, gluon

    params = block.collect_params()
    mx.nd.waitall()   # MKLDNN may still be reordering a weight in place after the last forward
    # numpy copies: an NDArray copy of a weight MKLDNN has reordered is not always restored exactly
    current = current or {}
    saved = {name: (current[id(p)] if id(p) in current else p.data().asnumpy(), p.dtype)
             for name, p in params.items()}
    dropouts = [(b, b._rate) for _, b in walk(block) if _is_a(b, "Dropout")]
    rnn_drop = [(b, b._dropout) for _, b in walk(block) if hasattr(b, "_dropout") and hasattr(b, "_mode")]
    # gluonnlp's WeightDropParameter drops weights at random in train mode (AWDRNN weight_drop)
    weight_drop = [(p, p._rate) for p in params.values() if type(p).__name__ == "WeightDropParameter"
                   and getattr(p, "_rate", 0)]
    # arrays blocks hold as attributes, which a forward may replace (d2l's scratch BatchNorm): restored after
    held = held_arrays(block)
    orig_dtype = next(iter(saved.values()))[1] if saved else np.float32
    notes, checks = [], []
    first, dtype, cast = None, "float64", False
    try:
        randomised = _randomise(entries, np.random.default_rng(seed))
        before = {id(p): randomised.get(id(p), saved[name][0]) for name, p in params.items()}
        why = sorted(FLOAT32_ONLY_OPS.intersection(ops))
        why = f"{why[0]} has no float64 on CPU" if why else ""
        if not why:
            try:
                block.cast("float64")
                cast = True
                gx = _gluon_inputs(inputs, dtype)
                g_out = _np(block(*gx), "mx")
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
                         f"the model in float64 ({why})")
            gx = _gluon_inputs(inputs, dtype)
            g_out = _np(block(*gx), "mx")
        elif internal:
            notes.append(f"MXNet computes {', '.join(internal)} in float32 also on float64 data: Gluon float64 "
                         f"judged against the torch module in float64 within {ROUNDING_FACTOR:g}x torch's own "
                         f"float32 rounding")
        # torch float32 beside the float64 reference where the judge needs torch's own float32 rounding
        runs = [_TorchRun(torch_cls, entries, before, inputs, t) for t in
                ((np.float32, np.float64) if dtype == "float32" or internal else (np.float64,))]
        judge = _Judge(dtype, runs, "internal" if internal else "")
        eval_check = judge.outputs(g_out, [r.eval_out for r in runs], EVAL_CHECK)
        by_layers = runs if eval_check.passed and eval_check.sensitive else None
        if not eval_check.passed and len(runs) == 2 and np.isfinite(eval_check.max_abs_diff):
            # one float32 run is one sample of rounding: a selection at a near-tie may agree in it by chance
            probe = _rounding_probe(torch_cls, entries, before, inputs, runs, g_out, judge, seed)
            if probe is not None:
                eval_check, by_layers = probe
        if by_layers is not None:   # before the train step changes the weights
            eval_check, first = _judged_by_layers(eval_check, block, by_layers, gx, same_output, judge)
        if not eval_check.passed:
            first = first or _first_divergent(block, runs, gx, same_output, judge)
        if not train:   # translated for inference: the proof is the inference forward
            notes.append("translated for inference (train=False): the proof compares the inference forward; no "
                         "backward or SGD step is compared (MXNet's backward in inference mode is not what training "
                         "computes: its BatchNorm backward uses batch statistics, and it crashes on gluoncv's "
                         "Faster R-CNN)")
            return [eval_check], first, notes, dtype
        # --- one SGD step in train mode ---
        for b, _ in dropouts:
            b._rate = 0.0
        for b, _ in rnn_drop:
            b._dropout = 0.0
        for p, _ in weight_drop:
            p._rate = 0.0
        if any(r for _, r in dropouts + rnn_drop + weight_drop):
            notes.append("dropout set to 0 on both sides for the train-mode check (random masks differ)")
        rng = np.random.default_rng(seed + 1)
        n = int(np.asarray(inputs[0]).shape[0]) if np.asarray(inputs[0]).ndim else 1
        trainable = {k: p for k, p in params.items() if p.grad_req != "null"}
        trainer = gluon.Trainer(trainable, "sgd", {"learning_rate": lr}, kvstore=None) if trainable else None
        with autograd.record():
            # fresh inputs: a forward may write into a list it was given (gluonnlp's BiLMEncoder stores its
            # final states into the begin-state list), which the eval call above already did
            outs = _flat(block(*_gluon_inputs(inputs, dtype)))
            # from the train-mode outputs: a forward may return others in training (YOLOv3's output layer)
            proj = [rng.standard_normal(o.shape) for o in outs]
            loss = sum((o * gluon_array(r, o.dtype)).sum() for o, r in zip(outs, proj))   # float32 indices stay float32
        if trainable:             # without parameters nothing was recorded to differentiate
            loss.backward()
        g_train = [o.asnumpy() for o in outs]
        g_grads = {id(p): p.grad() for p in trainable.values()}   # read one at a time when compared
        if trainer is not None:   # a block without parameters (an attention cell) has no step
            trainer.step(n, ignore_stale_grad=True)
        gluon_side = _GluonSide(block, entries, records, before, g_out, g_train, g_grads, n, lr)
        gluon_side.state = _updated_state(block, entries)
        mults = {e.torch_key: float(e.param.lr_mult) for e in _owners(entries) if float(e.param.lr_mult) != 1.0}
        if mults:   # gluoncv's segmentation heads train at 10x the lr
            notes.append(f"the SGD step uses each Gluon parameter's lr_mult on both sides ({len(mults)} tensors, "
                         f"e.g. {next(iter(mults))} x{next(iter(mults.values())):g}); in torch that is an optimizer "
                         f"parameter group with that lr")
        for r in runs:
            r.lr_mult = mults
        raised = _train_steps(runs, proj, n, lr)
        if raised:
            checks = [eval_check, Check("train-mode outputs (batch statistics)", np.inf, np.inf, 0.0, False, raised,
                                        evidence=judge.evidence)]
        else:
            checks = gluon_side.checks(judge, runs)
            checks[0] = eval_check if checks[0].name == EVAL_CHECK else checks[0]
            failed = [i for i, c in enumerate(checks) if not c.passed]
            if failed and dtype == "float64" and not internal:   # by the measured conditioning
                r32 = _TorchRun(torch_cls, entries, before, inputs, np.float32)
                r32.lr_mult = mults
                if not _train_steps([r32], proj, n, lr):
                    again = gluon_side.checks(_Judge(dtype, [r32, *runs], "conditioned"), [r32, *runs])
                    for i in failed:
                        if again[i].passed:
                            checks[i] = again[i]
                            notes.append(f"{again[i].name}: ill-conditioned in float64 (max rel diff "
                                         f"{again[i].max_rel_diff:.3g} > {TOLERANCE['float64']:g}); within what "
                                         f"its measured conditioning allows")
        if checks[0].passed:
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


def _train_steps(runs: List["_TorchRun"], proj, n: int, lr: float) -> str:
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


class _GluonSide:
    """What the Gluon block gave in the train step, compared with torch runs by a judge (can be
    judged again by another judge with more runs)."""

    state: Dict[str, np.ndarray] = {}   # torch key -> a held array the Gluon forward replaced (after it)

    def __init__(self, block, entries, records, before, g_out, g_train, g_grads, n, lr):
        self.block, self.before, self.g_out, self.g_train, self.g_grads = block, before, g_out, g_train, g_grads
        self.n, self.lr = n, lr
        self.owners = _owners(entries)
        self.counts = _bn_counts(block, records)
        self.blocks = dict(walk(block))

    def checks(self, judge: "_Judge", runs: List["_TorchRun"]) -> List[Check]:
        n, lr, before, g_grads = self.n, self.lr, self.before, self.g_grads
        tol = TOLERANCE[judge.dtype]
        out = [judge.outputs(self.g_out, [r.eval_out for r in runs], EVAL_CHECK),
               judge.outputs(self.g_train, [r.train_out for r in runs], "train-mode outputs (batch statistics)")]
        owners = self.owners
        with_grad = [e for e in owners if e.torch_key in runs[0].grads and id(e.param) in g_grads]
        grad_keys = [e.torch_key for e in with_grad]
        by_key = {e.torch_key: e.param for e in owners}
        out.append(judge.tensors(
            _Lazy(grad_keys, lambda k: _divided(g_grads[id(by_key[k])].asnumpy(), n)),
            [[_grad(r, e.torch_key, e.param.shape) for e in with_grad] for r in runs], grad_keys,
            "gradients after one backward", tol,
            floor=1e-4 * max((_absmax(_grad(runs[-1], k, by_key[k].shape)) for k in grad_keys), default=0.0)))
        names, steps, rs_g, rs_names, multi, raw = [], [], [], [], [], 0.0
        for e in owners:
            if e.torch_key.endswith(("running_var", "running_mean")):
                gv = e.param.data().asnumpy()
            if e.torch_key.endswith("running_var"):
                raw = max(raw, _maxabs(gv, runs[-1].after(e.torch_key)))
                nested = getattr(e, "nested_bn", None)   # a nested SymbolBlock's BatchNorm node (symbol_nested.py)
                bn = self.blocks[e.gluon_path] if nested is None else None
                old = before[id(e.param)]
                biased = _keeps_biased(runs[-1], e.torch_key)
                counts = self.counts[e.gluon_path] if nested is None else [nested[1]]
                if len(counts) > 1:
                    multi.append(f"{e.gluon_path} ({len(counts)} calls)")
                rs_g.append(gv if biased or np.array_equal(gv, old) else   # not updated by MXNet (momentum=0 in torch)
                            _unbiased_expected(gv, old, float(bn._kwargs["momentum"] if bn is not None
                                                                   else nested[0]), counts[0]))
                rs_names.append(e.torch_key)
            elif e.torch_key.endswith("running_mean"):
                rs_g.append(gv); rs_names.append(e.torch_key)
            else:
                names.append(e.torch_key)    # the update's size: lr x the gradient (torch's, already read)
                g = runs[-1].grads.get(e.torch_key) if id(e.param) in g_grads else None
                steps.append(runs[-1].step(e.torch_key) * _absmax(g) if g is not None else 0.0)
        c = judge.tensors(_Lazy(names, lambda k: by_key[k].data().asnumpy()), [_Lazy(names, r.after) for r in runs],
                          names, f"weights after one SGD step (lr {lr})", tol, [UPDATE_TOLERANCE * s for s in steps],
                          floor=1e-4 * max((_absmax(before[id(by_key[k])]) for k in names), default=0.0))
        c.detail += (f"; tolerance also allows {UPDATE_TOLERANCE:g} of each tensor's update (MXNet's float32 "
                     f"lr and rescale_grad=1/N attributes)")
        out.append(c)
        if self.state:      # arrays the forward replaced (d2l's scratch BatchNorm): the torch buffers after it
            keys = sorted(self.state)
            out.append(judge.tensors([self.state[k] for k in keys], [[r.state[k].numpy() for k in keys] for r in runs],
                                     keys, "state the forward replaces (buffers) after the step",
                                     RUNNING_TOLERANCE[judge.dtype]))
        if rs_names:
            c = judge.tensors(rs_g, [_Lazy(rs_names, r.after) for r in runs], rs_names,
                              "running statistics after the step", RUNNING_TOLERANCE[judge.dtype])
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


def _updated_state(block, entries) -> Dict[str, np.ndarray]:
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


def _keeps_biased(run: "_TorchRun", key: str) -> bool:
    """A generated BatchNorm with ``running_var_estimate = "biased"`` (translate(batchnorm="gluon"))."""
    mods = run.__dict__.setdefault("_modules_by_name", dict(run.model.named_modules()))
    m = mods.get(key.rsplit(".", 1)[0] if "." in key else "")
    return getattr(m, "running_var_estimate", None) == "biased"


def _grad(run: _TorchRun, key: str, shape) -> np.ndarray:
    g = run.grads[key]
    return np.zeros(shape, run.dtype) if g is None else g


class _Judge:
    """Decides each check. float64 on both sides: a fixed tolerance (rounding is ~1e-15).
    Gluon float32 only, or Gluon float64 with FLOAT32_INTERNAL_OPS (``mode="internal"``): Gluon's
    difference to torch float64 must stay within ``rounding_tolerance`` of torch's own float32
    rounding, measured on the same input, per output / per tensor. ``mode="conditioned"``: float64
    on both sides, the fixed tolerance or what the measured conditioning allows (FLOAT64_PER_FLOAT32)."""

    def __init__(self, dtype: str, runs: List[_TorchRun], mode: str = ""):
        self.dtype, self.ref, self.mode = dtype, len(runs) > 1, mode
        gluon = "Gluon float64 (MXNet float32 inside)" if mode == "internal" else "Gluon float32"
        self.evidence = (f"{gluon} against torch float64, within {ROUNDING_FACTOR:g}x torch's own float32 rounding"
                         if self.ref else "float64 on both sides")
        if mode == "conditioned":
            self.evidence = (f"float64 on both sides, within {TOLERANCE[dtype]:g} of the scale or "
                             f"{ROUNDING_FACTOR:g}x torch's own float32 rounding x 2^-29 (the measured conditioning)")

    def _tol(self, rounding: float, scale: float, fixed: float) -> float:
        if self.mode == "conditioned":
            return max(fixed * scale, ROUNDING_FACTOR * rounding * FLOAT64_PER_FLOAT32)
        return rounding_tolerance(rounding, scale)

    def outputs(self, g: List[np.ndarray], t: List[List[np.ndarray]], label: str) -> Check:
        if not self.ref:
            c = check_outputs(g, t[0], label, TOLERANCE[self.dtype], 0.0)
            c.evidence = self.evidence
            return c
        d32, d, own = compare(g, t[0]), compare(g, t[1]), compare(t[0], t[1])
        if d32.detail or d.detail:
            return Check(label, np.inf, np.inf, 0.0, False, d32.detail or d.detail, evidence=self.evidence)
        tol = self._tol(own.abs, d.scale, TOLERANCE[self.dtype])
        sensitive = ""
        if own.rel > SENSITIVE_REL:
            sensitive = (f"the outputs are sensitive to rounding: torch's own float32 differs from its float64 by "
                         f"{own.rel:.2g} of their scale (a selection such as NMS or top-k over near-equal "
                         f"values); this check is as strong as torch's own float32 agreement")
        return Check(label, d.abs, d.rel, tol, d.abs <= tol, sensitive, evidence=self.evidence,
                     float32_max_abs_diff=d32.abs, float32_max_rel_diff=d32.rel, rounding={"torch": own.abs},
                     sensitive=bool(sensitive))

    def tensors(self, a, b: List[list], names, label, tol, extra=None, floor: Optional[float] = None) -> Check:
        """One check over many tensors: the largest abs / rel difference and the tensor it is in.
        ``a`` / ``b`` may be ``_Lazy``: each item is read once; ``floor`` then comes from the caller."""
        if not a:
            return Check(label, 0.0, 0.0, tol, True, "nothing to compare", evidence=self.evidence)
        # a tensor whose true value is ~0 (the bias of a conv followed by BatchNorm has gradient 0)
        # holds rounding noise only: its scale is floored at 1e-4 of the largest tensor's
        if floor is None:
            floor = 1e-4 * max(_absmax(x) for x in a)
        extra = extra or [0.0] * len(a)
        ref = b[1] if self.ref else b[0]
        mad, rel, worst, passed, ratio, f32, own, tol_w = 0.0, 0.0, "", True, -1.0, 0.0, 0.0, tol
        for i, (x, y, nm, ex) in enumerate(zip(a, ref, names, extra)):
            if x.shape != y.shape:
                return Check(label, np.inf, np.inf, tol, False, f"{nm}: shape {x.shape} vs {y.shape}",
                             evidence=self.evidence)
            if not x.size:
                continue
            d = _maxabs(x, y)
            scale = max(_absmax(x), floor)
            if self.ref:
                y32 = b[0][i]
                f32 = max(f32, _maxabs(x, y32))
                r = _maxabs(y32, y)
                own = max(own, r)
                t = self._tol(r, scale, tol) + ex
            else:
                t = tol * scale + ex
            passed = passed and d <= t
            mad, rel = max(mad, d), max(rel, d / max(scale, 1e-300))
            if d / max(t, 1e-300) >= ratio:
                ratio, worst, tol_w = d / max(t, 1e-300), nm, t
        if not self.ref:
            return Check(label, mad, rel, tol, passed, f"{len(a)} tensors; closest to its tolerance: {worst}",
                         evidence=self.evidence)
        rule = (f"the larger of {tol:g} of its scale and {ROUNDING_FACTOR:g}x torch's float32 rounding of that "
                f"tensor x 2^-29" if self.mode == "conditioned" else
                f"{ROUNDING_FACTOR:g}x torch's float32 rounding of that tensor, at least {RTOL_FLOOR:g} of its scale")
        return Check(label, mad, rel, tol_w, passed, f"{len(a)} tensors; closest to its tolerance: {worst} "
                     f"(tolerance {tol_w:.3g}: {rule})", evidence=self.evidence,
                     float32_max_abs_diff=f32, rounding={"torch": own})

    def layer_differs(self, g: List[np.ndarray], t: List[List[np.ndarray]]) -> bool:
        return not self.outputs(g, t, "").passed


def _divided(a: np.ndarray, n: int) -> np.ndarray:
    a /= n      # in place: no second copy of every gradient
    return a


_CHUNK = 1 << 18


def _absmax(x: np.ndarray) -> float:
    """max|x| without a full-size temporary."""
    return max(float(x.max()), -float(x.min())) if x.size else 0.0


def _maxabs(x: np.ndarray, y: np.ndarray) -> float:
    """max|x - y| in chunks: no full-size temporaries (on BERT-base, fresh 100M-element temporaries
    cost more in page faults than the arithmetic)."""
    if not x.size:
        return 0.0
    xf, yf = x.reshape(-1), y.reshape(-1)
    buf = np.empty(min(_CHUNK, xf.size), np.result_type(x, y))
    d = 0.0
    for i in range(0, xf.size, _CHUNK):
        b = buf[:min(_CHUNK, xf.size - i)]
        np.subtract(xf[i:i + _CHUNK], yf[i:i + _CHUNK], out=b)
        np.abs(b, out=b)
        d = max(d, float(b.max()))
    return float("inf") if d != d else d   # NaN counts as a failure


def _restore(params, saved) -> None:
    """Put the block's own weights back: fresh arrays (as load_parameters does), not writes into
    arrays MKLDNN may hold in a reordered layout; detached from the verification Trainer."""
    import mxnet as mx
    mx.nd.waitall()
    for name, (value, _) in saved.items():
        p = params[name]
        p._set_trainer(None)
        p._load_init(gluon_array(value, value.dtype), p.list_ctx())
        if not np.array_equal(p.data().asnumpy(), value):
            raise RuntimeError(f"translate: could not restore Gluon parameter {name} after verification")


def _owners(entries: List[MapEntry]) -> List[MapEntry]:
    seen, out = set(), []
    for e in entries:
        if e.param is not None and id(e.param) not in seen:
            seen.add(id(e.param))
            out.append(e)
    return out


def _is_a(b: Any, name: str) -> bool:
    """A Gluon layer of that class or a subclass (gluoncv's BatchNormCudnnOff), or a stand-in of
    that class name (symbol_verify's proxies of an exported model)."""
    from mxnet.gluon import nn
    return type(b).__name__ == name or isinstance(b, getattr(nn, name))


def _bn_counts(block, records) -> Dict[str, List[int]]:
    """Per BatchNorm (Gluon path): the number of values per channel of each call in one forward."""
    out = {}
    for path, b in walk(block):
        recs = records.get(id(b))
        if _is_a(b, "BatchNorm") and recs:
            out[path] = [int(np.prod(r.args[0].shape) // r.args[0].shape[1]) for r in recs]
    return out


def _unbiased_expected(gluon_new, old, mom, n) -> np.ndarray:
    """MXNet: new = m*old + (1-m)*biased; torch: new = m*old + (1-m)*biased*n/(n-1)."""
    batch = (gluon_new - mom * old) / (1 - mom)
    return mom * old + (1 - mom) * batch * n / (n - 1)


def _layer_outputs(block, runs: List[_TorchRun], gx, same_output) -> List[Tuple[str, list, list]]:
    """(Gluon path, Gluon outputs, the torch module's outputs in each run) of every layer whose
    output the generated module keeps (``same_output``), in Gluon's execution order; the first call
    of a layer called more than once."""
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
    seen = []
    for run in runs:
        mods = dict(run.model.named_modules())
        t_out: Dict[str, list] = {}
        def keep(t):
            def hook(m, a, o):      # returns None: a torch hook's return value would replace the output
                t_out.setdefault(t, [x.detach().numpy() for x in _flat(o)])
            return hook
        th = [mods[t].register_forward_hook(keep(t)) for t in set(same_output.values()) if t in mods]
        try:
            with torch.no_grad():
                run.model(*run.inputs)
        finally:
            for h in th:
                h.remove()
        seen.append(t_out)
    return [(path, outs, [s[same_output[path]] for s in seen]) for path, outs in g_seen
            if all(same_output[path] in s for s in seen)]


def _first_divergent(block, runs: List[_TorchRun], gx, same_output, judge: _Judge) -> Optional[str]:
    """The first Gluon block (in execution order) whose output differs from its torch module's,
    judged as the eval check is (the torch module in every dtype it was run in)."""
    for path, outs, t in _layer_outputs(block, runs, gx, same_output):
        if judge.layer_differs(outs, t):
            return path or "(top block)"
    return None


def _rounding_probe(torch_cls, entries, values, inputs, runs: List[_TorchRun], g_out, judge: _Judge,
                    seed: int) -> Optional[Tuple[Check, List[_TorchRun]]]:
    """For an eval check that failed in float32 evidence: torch's own float32 rounding sampled
    again, PROBES times, with every weight moved by at most one float32 ulp at random. A selection
    at a near-tie (an NMS IoU of 0.69999975 against its 0.7 threshold in gluoncv Faster R-CNN's
    RPN) can agree with float64 in torch's one float32 run and not in Gluon's: if some probe
    departs from float64 as far as Gluon does, the outputs are sensitive to rounding and the check
    passes with every layer judged as well (``_judged_by_layers``); else None (it stays failed)."""
    rng = np.random.default_rng(seed + 7)
    best = None
    for _ in range(PROBES):
        moved = {k: _one_ulp(v, rng) for k, v in values.items()}
        run = _TorchRun(torch_cls, entries, moved, inputs, np.float32)
        c = judge.outputs(g_out, [run.eval_out, runs[1].eval_out], EVAL_CHECK)
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


def _one_ulp(v: Any, rng) -> Any:
    """A float array moved by at most one float32 ulp per element (others unchanged)."""
    a = np.asarray(v)
    if a.dtype.kind != "f" or not a.size:
        return v
    a32 = a.astype(np.float32)
    toward = np.where(rng.random(a32.shape) < 0.5, -np.inf, np.inf).astype(np.float32)
    moved = np.where(rng.random(a32.shape) < 0.5, np.nextafter(a32, toward), a32)
    return moved.astype(a.dtype)


def _judged_by_layers(check: Check, block, runs: List[_TorchRun], gx, same_output,
                      judge: _Judge) -> Tuple[Check, Optional[str]]:
    """An eval check that passed on outputs sensitive to rounding (torch's own float32 far from its
    float64: a selection such as NMS over near-equal scores), where agreeing as closely as torch's
    own float32 proves little: every layer the module keeps is judged too, so the layers before the
    selection are held to their own, tight, rounding. (check, first layer that differs or None)."""
    layers = _layer_outputs(block, runs, gx, same_output)
    loose = []
    for path, outs, t in layers:
        c = judge.outputs(outs, t, "")
        if not c.passed:
            check.passed = False
            check.detail += f"; layer {path or '(top block)'} differs (max abs diff {c.max_abs_diff:.3g})"
            return check, path or "(top block)"
        if c.sensitive:
            loose.append(path or "(top block)")
    if not layers:
        check.detail += "; the module keeps no layer before the selection to judge on its own"
        return check, None
    names = ", ".join(loose[:4]) + (", ..." if len(loose) > 4 else "")
    check.detail += (f"; each of the {len(layers)} layers the module keeps was judged as well: "
                     f"{len(layers) - len(loose)} within {ROUNDING_FACTOR:g}x their own insensitive float32 "
                     f"rounding" + (f", {len(loose)} sensitive themselves: {names}" if loose else ""))
    return check, None
