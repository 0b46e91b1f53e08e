"""Stage -> write -> load -> prove -> publish, written once for both readers: ``translate``
(a traced Gluon block, api.py) and ``translate_symbol_file`` / ``translate_symbol_block`` (an
exported symbol, symbol_file.py) hand over what their writer produced (source, top class, the
state-dict map) and how to prove it; the files are staged, the source checked by the last guard,
the weights written, the module loaded and proven, and the three files published together (a crash
leaves the previous complete result or no report), with one report either way."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..verify import Check
from .errors import TranslationError
from .proof_torch import load_generated, skip_random_init, torch_state
from .publish import Staging, reached
from .safe import check_source

__all__ = ["TranslateReport", "check_generated", "check_loads", "generated_failed", "stage_prove_publish"]


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


def generated_failed(e: BaseException, source_path: str, block: str) -> None:
    """The generated module itself raised while it was proven (a construct translate wrote wrongly):
    a TranslationError naming the generated line, not the raw traceback of code the user never saw."""
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


def check_generated(source: str, entries, name: str) -> None:
    """The last guard before anything is written: the source is what translate means (safe.check_source)
    and no two Gluon tensors share one torch key (one Gluon layer would load the other's weights)."""
    check_source(source, f"{name}.py")
    seen: Dict[str, Any] = {}
    for e in entries:
        other = seen.setdefault(e.torch_key, e)
        if other is not e and (e.param is None or other.param is not e.param):
            raise TranslationError(f"Gluon tensors {other.gluon_key or other.gluon_path!r} and "
                                   f"{e.gluon_key or e.gluon_path!r} would both become torch key {e.torch_key!r}; "
                                   f"rename one of the children or parameters")


def check_loads(text: str, top_class: str, entries: Sequence[Any], block: str) -> None:
    """Build the generated module once (no weights drawn; after :func:`check_generated` accepted the
    source) and check its ``state_dict`` keys and shapes are the mapping's: code that cannot load its
    own weights is refused, not written."""
    import numpy as np
    import torch
    ns: Dict[str, Any] = {"__name__": "_dualdl_translate_check"}
    try:
        exec(compile(text, f"<translation of {block}>", "exec"), ns)
        with skip_random_init(), torch.no_grad():
            model = ns[top_class]()
        state = model.state_dict()
    except Exception as e:   # a bug here, not the user's: say so, with the construct
        raise TranslationError(f"the generated module could not be built ({type(e).__name__}: {e}); "
                               f"please report this model", block=block) from None
    want = {e.torch_key: tuple(e.param.shape) if e.param is not None else tuple(np.shape(e.value)) for e in entries}
    missing = [k for k in want if k not in state]
    extra = [k for k in state if k not in want]
    wrong = [k for k in want if k in state and tuple(state[k].shape) != want[k]]
    if missing or extra or wrong:
        detail = "; ".join(s for s in (
            f"missing {missing[:3]}" if missing else "", f"unexpected {extra[:3]}" if extra else "",
            f"shape of {wrong[0]} is {tuple(state[wrong[0]].shape)}, the weight's {want[wrong[0]]}" if wrong
            else "") if s)
        raise TranslationError(f"the generated module would not load its own weights ({detail}); nothing "
                               f"was written, please report this model", block=block)


#: ``prove(report, cls, state, current)``: run the proof on the loaded class ``cls`` with the
#: written ``state`` (torch key -> tensor; ``current``: id(Gluon parameter) -> its written value) and
#: fill ``report.checks`` / ``first_divergent`` / ``notes`` / ``dtype``
Prove = Callable[["TranslateReport", Any, Dict[str, Any], Dict[int, Any]], None]


def stage_prove_publish(stage: Staging, name: str, top_class: str, source: str, entries: Sequence[Any],
                        gluon_key: Callable[[Any], Optional[str]], *, prove: Optional[Prove], block: str,
                        unproven_note: str, notes: Sequence[str] = (), untranslated: Sequence[Dict[str, str]] = (),
                        t0: float, c0: float) -> "TranslateReport":
    """Check ``source`` (the last guard) and that it loads its own weights, claim the output names, write source and weights into
    ``stage``, load the module and ``prove`` it (None: only load it, and say ``unproven_note``),
    add ``notes``, publish the three files; return the report. ``gluon_key(entry)`` is the Gluon
    name a mapping row shows; ``t0``/``c0`` the wall/CPU clocks at the start of the translation."""
    check_generated(source, entries, name)
    if not untranslated:      # a part left untranslated raises NotImplementedError where it would run
        check_loads(source, top_class, entries, block)
    t1 = time.perf_counter()
    paths = stage.paths
    report = TranslateReport(name, top_class, paths[".py"], paths[".safetensors"], paths[".report.json"],
                             untranslated=list(untranslated))
    report.mapping = [{"torch": e.torch_key, "gluon": gluon_key(e),
                       "shape": list(e.param.shape) if e.param is not None else [],
                       **({"tied_to": e.tied_to} if e.tied_to else {})} for e in entries]
    stage.claim(top_class, report.mapping)     # refuses another model's files
    with stage:
        stage.write_source(source)
        state = torch_state(entries)
        stage.write_state(state)
        reached("staged")
        if prove is not None:
            cls = load_generated(stage.staged(".py"), top_class)
            current = {id(e.param): state[e.torch_key].numpy() for e in entries if e.param is not None}
            try:
                prove(report, cls, state, current)
            except Exception as e:
                generated_failed(e, stage.staged(".py"), block)
                raise
        else:     # not proven, but the file must still import and define its class
            try:
                load_generated(stage.staged(".py"), top_class)
            except Exception as e:
                raise TranslationError(f"the generated file does not import ({type(e).__name__}: "
                                       f"{' '.join(str(e).split())}); this is a bug in dualdl translate: "
                                       f"please report it with the model's class") from None
            if unproven_note:
                report.notes.append(unproven_note)
        report.notes += list(notes)
        report.seconds = {"translate": round(t1 - t0, 3), "verify": round(time.perf_counter() - t1, 3),
                          "cpu": round(time.process_time() - c0, 3)}
        stage.publish(report.to_dict())
    return report
