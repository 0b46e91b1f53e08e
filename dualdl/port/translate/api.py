"""``translate(block, sample_inputs, out_dir)``: Gluon block -> PyTorch source, weights, proof."""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from ..verify import Check
from .publish import Staging, _hook
from .publish import default_name as _default_name, name_problem as _name_problem

__all__ = ["Staging", "TranslateReport", "translate"]


@dataclass
class TranslateReport:
    """What was written, how Gluon tensors map to torch keys, and every check with its numbers."""
    name: str
    class_name: str
    source_path: str
    weights_path: str
    report_path: str
    mapping: List[Dict[str, Any]] = field(default_factory=list)
    checks: List[Check] = field(default_factory=list)
    untranslated: List[Dict[str, str]] = field(default_factory=list)
    first_divergent: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    dtype: str = "float64"
    seconds: Dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Everything translated and every check (eval and train step) within tolerance."""
        return not self.untranslated and bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def max_abs_diff(self) -> Optional[float]:
        return _largest(self.checks, "max_abs_diff")

    @property
    def max_rel_diff(self) -> Optional[float]:
        return _largest(self.checks, "max_rel_diff")

    def to_dict(self) -> Dict[str, Any]:
        return {"ok": self.ok, "name": self.name, "class": self.class_name, "source": self.source_path,
                "weights": self.weights_path, "dtype_checked": self.dtype,
                "max_abs_diff": self.max_abs_diff, "max_rel_diff": self.max_rel_diff,
                "checks": [vars(c) for c in self.checks], "first_divergent_layer": self.first_divergent,
                "untranslated": self.untranslated, "notes": self.notes, "seconds": self.seconds,
                "mapping": self.mapping}

    def summary(self) -> str:
        status = "OK" if self.ok else ("NOT VERIFIED" if not self.checks and not self.untranslated else "NOT OK")
        lines = [f"translate {self.name}: {status} -> {self.source_path} "
                 f"(class {self.class_name}), {self.weights_path}"]
        for c in self.checks:
            own = (f", torch's own float32 rounding {c.rounding['torch']:.3g}, Gluon float32 vs torch "
                   f"float32 {c.float32_max_abs_diff:.3g}" if "torch" in c.rounding else "")
            lines.append(f"  check [{c.name}] by {c.evidence}: max abs diff {c.max_abs_diff:.3g}, max rel diff "
                         f"{c.max_rel_diff:.3g}, tolerance {c.tolerance:.3g}{own}: "
                         f"{'passed' if c.passed else 'FAILED'}{' - ' + c.detail if c.detail else ''}")
        if self.first_divergent:
            lines.append(f"  first divergent layer: {self.first_divergent}")
        for u in self.untranslated:
            lines.append(f"  NOT TRANSLATED: {u['block']} at {u['path'] or '(top)'!r}: {u['reason']}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = summary


def _largest(checks: List[Check], attr: str) -> Optional[float]:
    return max((getattr(c, attr) for c in checks), default=None)


def _as_arrays(sample_inputs: Any) -> List[Any]:
    """One numpy array per positional input; an input that is a list or tuple of arrays (begin
    states: ``[h, c]``, gluonnlp ELMo's list of (h, c) pairs) keeps its nesting, arrays inside."""
    items = sample_inputs if isinstance(sample_inputs, (list, tuple)) else [sample_inputs]
    return [_as_array(x, str(i)) for i, x in enumerate(items)]


def _as_array(x: Any, where: str) -> Any:
    if isinstance(x, (list, tuple)) and x and _holds_arrays(x):
        return type(x)(_as_array(v, f"{where}[{j}]") for j, v in enumerate(x))
    if hasattr(x, "asnumpy"):
        x = x.asnumpy()
    elif hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except ValueError as e:
        raise ValueError(f"translate: sample input {where} is not an array ({e})") from None
    if a.dtype == object:
        raise ValueError(f"translate: sample input {where} is not a numeric array (dtype object)")
    return a


def _shapes(arrays: Any) -> Any:
    """The shapes of (nested) sample inputs, for messages."""
    return [_shapes(a) if isinstance(a, (list, tuple)) else tuple(a.shape) for a in arrays]


def _holds_arrays(x: Any) -> bool:
    return any(hasattr(v, "shape") or (isinstance(v, (list, tuple)) and _holds_arrays(v)) for v in x)


def translate(block: Any, sample_inputs: Any, out_dir: str, name: Optional[str] = None, *,
              verify: bool = True, lr: float = 0.1, seed: int = 0,
              batchnorm: str = "torch", force: bool = False, train: bool = True) -> TranslateReport:
    """Write ``out_dir/<name>.py`` (a torch module mirroring the Gluon block tree),
    ``<name>.safetensors`` (its state_dict, from the block's current weights) and
    ``<name>.report.json``; return the report (``.ok`` only if every check passed).

    ``sample_inputs``: one array or a list of arrays (numpy, NDArray) as the block takes them.
    Verification runs both models in float64 (eval with randomised norms/biases, and one SGD step
    at ``lr`` in train mode); the block's weights are restored afterwards.

    ``train=False`` translates for inference: a block whose forward branches on
    ``autograd.is_training()`` gets its inference forward only (its training mode raises), and the
    proof's backward and SGD step run in inference mode. Needed where the training forward asks
    ``autograd.is_recording()`` (gluoncv's detectors compute targets and losses there).

    ``batchnorm``: ``"torch"`` writes ``nn.BatchNorm*d`` (running variance updated with torch's
    unbiased batch variance); ``"gluon"`` writes a BatchNorm that keeps Gluon's biased estimate.

    Files are staged and proven before they replace anything (see :class:`Staging`): a crash
    leaves the previous complete result or no report. An existing file of these names that
    translate did not write is refused (``FileExistsError``) unless ``force=True``.
    A ``SymbolBlock`` (an exported model) is translated from its graph (``translate_symbol_block``)."""
    import mxnet as mx
    from .codegen import Generator
    from .errors import TranslationError
    from .trace import gluon_inputs, record_calls, walk
    from .verify import load_generated, torch_state, verify as run_verify

    if not isinstance(block, mx.gluon.Block):
        raise TypeError(f"translate: expected a Gluon Block, got {type(block).__name__}")
    if isinstance(block, mx.gluon.SymbolBlock):
        from .symbol_file import translate_symbol_block
        return translate_symbol_block(block, sample_inputs, out_dir, name, verify=verify, lr=lr, seed=seed,
                                      batchnorm=batchnorm, force=force)
    if batchnorm not in ("torch", "gluon"):
        raise ValueError(f"translate: batchnorm must be 'torch' or 'gluon', got {batchnorm!r}")
    if not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"translate: lr must be a positive finite number (the verified SGD step), got {lr!r}")
    if name is None:
        name = _default_name(block)
    elif _name_problem(name):
        raise ValueError(f"translate: cannot use the name {name!r}: {_name_problem(name)}; choose another name")
    stage = Staging(out_dir, name, force=force)     # refuses before any work: file as out_dir, foreign files
    arrays = _as_arrays(sample_inputs)
    t0, c0 = time.perf_counter(), time.process_time()
    active = [(b, b._active) for _, b in walk(block) if getattr(b, "_active", False)]
    if active:
        block.hybridize(False)
    try:
        inputs = gluon_inputs(block, arrays)
        try:
            records = record_calls(block, inputs)
        except mx.gluon.parameter.DeferredInitializationError as e:
            raise ValueError(f"translate: the block's parameters are not initialised ({e}); call "
                             f"block.initialize() or load_parameters(...) first") from None
        except mx.base.MXNetError as e:      # the sample inputs do not fit the model
            first = next((ln.strip() for ln in str(e).splitlines() if "Error" in ln and "Traceback" not in ln),
                         str(e).strip().splitlines()[-1:] or [""])
            first = first if isinstance(first, str) else first[0]
            raise ValueError(f"translate: {type(block).__name__} does not run on sample inputs of shapes "
                             f"{_shapes(arrays)} ({first}); give the shapes it takes") from None
        except TranslationError:
            raise
        except Exception as e:               # the block's own Python code failed on the sample inputs
            raise ValueError(f"translate: {type(block).__name__} failed on sample inputs of shapes "
                             f"{_shapes(arrays)} ({type(e).__name__}: "
                             f"{' '.join(str(e).split())}); check the inputs it takes") from e
        gen = Generator(block, records, name, batchnorm=batchnorm, train=train)
        source = gen.source()
        _check_generated(source, gen.entries, name)
        t1 = time.perf_counter()
        paths = stage.paths
        report = TranslateReport(name, gen.top_class, paths[".py"], paths[".safetensors"],
                                 paths[".report.json"], untranslated=list(gen.untraced))
        from ..mapping import checkpoint_namer     # save_parameters keys, whatever a block overrides
        ckpt_key = checkpoint_namer(block)
        report.mapping = [{"torch": e.torch_key, "gluon": ckpt_key(e.gluon_key, e.param),
                           "shape": list(e.param.shape) if e.param is not None else [],
                           **({"tied_to": e.tied_to} if e.tied_to else {})} for e in gen.entries]
        stage.claim(gen.top_class, report.mapping)     # refuses another model's files
        with stage:
            stage.write_source(source)
            state = torch_state(gen.entries)
            stage.write_state(state)
            _hook("staged")
            if verify and not gen.untraced:
                cls = load_generated(stage.staged(".py"), gen.top_class)
                current = {id(e.param): state[e.torch_key].numpy() for e in gen.entries if e.param is not None}
                try:
                    checks, first, notes, report.dtype = run_verify(block, cls, gen.entries, arrays, gen.same_output,
                                                                    records, lr=lr, seed=seed, ops=gen.ops,
                                                                    current=current, train=train)
                except Exception as e:
                    _generated_failed(e, stage.staged(".py"), type(block).__name__)
                    raise
                report.checks, report.first_divergent, report.notes = checks, first, list(notes)
            else:     # not proven, but the file must still import and define its class
                try:
                    load_generated(stage.staged(".py"), gen.top_class)
                except Exception as e:
                    raise TranslationError(f"the generated file does not import ({type(e).__name__}: "
                                           f"{' '.join(str(e).split())}); this is a bug in dualdl translate: "
                                           f"please report it with the model's class") from None
                if gen.untraced:
                    report.notes.append("not verified: parts of the model were not translated")
            report.notes += list(getattr(gen, "notes", []))      # what codegen decided (renamed children, ...)
            report.seconds = {"translate": round(t1 - t0, 3), "verify": round(time.perf_counter() - t1, 3),
                              "cpu": round(time.process_time() - c0, 3)}
            stage.publish(report.to_dict())
    finally:
        for b, flag in active:
            b._active = flag
    return report


def _generated_failed(e: BaseException, source_path: str, block: str) -> None:
    """The generated module itself raised while it was proven (a construct translate wrote wrongly):
    a TranslationError naming the generated line, not the raw traceback of code the user never saw."""
    from .errors import TranslationError
    if isinstance(e, TranslationError):
        return
    msg = " ".join(str(e).split())[:200]
    if isinstance(e, RuntimeError) and "Long" in msg and ("same dtype" in msg or "scalar type" in msg):
        raise ValueError(f"translate: an integer sample input reaches a float layer (torch: {msg}); give that input "
                         f"as float32, as Gluon computes on it") from None
    tb, line = e.__traceback__, None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(source_path):
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return
    try:
        text = open(source_path, encoding="utf-8").read().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        text = ""
    if isinstance(e, IndexError) and "index out of range" in msg:     # MXNet clips such ids, torch refuses them
        raise ValueError(f"translate: the sample inputs hold ids beyond the rows of an embedding (torch: {msg}, at the "
                         f"generated line {line}: {text[:120]!r}); MXNet clips such ids, torch refuses them: give ids "
                         f"below the embedding's input_dim") from None
    raise TranslationError(f"the generated module raised {type(e).__name__} ({msg}) at its "
                           f"line {line}: {text[:160]!r}; this is a bug in dualdl translate: please report it with "
                           f"the model's class (nothing was written)", block=block) from None


def _check_generated(source: str, entries, name: str) -> None:
    """The last guard before anything is written: the source is what translate means (safe.check_source)
    and no two Gluon tensors share one torch key (one Gluon layer would load the other's weights)."""
    from .errors import TranslationError
    from .safe import check_source
    check_source(source, f"{name}.py")
    seen: Dict[str, Any] = {}
    for e in entries:
        other = seen.setdefault(e.torch_key, e)
        if other is not e and (e.param is None or other.param is not e.param):
            raise TranslationError(f"Gluon tensors {other.gluon_key or other.gluon_path!r} and "
                                   f"{e.gluon_key or e.gluon_path!r} would both become torch key {e.torch_key!r}; "
                                   f"rename one of the children or parameters")
