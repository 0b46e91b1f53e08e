"""``translate(block, sample_inputs, out_dir)``: Gluon block -> PyTorch source, weights, proof."""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from ..verify import Check

__all__ = ["TranslateReport", "translate"]


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
        lines = [f"translate {self.name}: {'OK' if self.ok else 'NOT OK'} -> {self.source_path} "
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


def _default_name(block: Any) -> str:
    """The Gluon class name in lower case: ResNetV1 -> resnetv1, _MyNet -> mynet."""
    return re.sub(r"\W", "_", type(block).__name__.lower()).strip("_") or "model"


def _as_arrays(sample_inputs: Any) -> List[np.ndarray]:
    items = sample_inputs if isinstance(sample_inputs, (list, tuple)) else [sample_inputs]
    out = []
    for x in items:
        if hasattr(x, "asnumpy"):
            x = x.asnumpy()
        elif hasattr(x, "detach"):
            x = x.detach().cpu().numpy()
        out.append(np.asarray(x))
    return out


def translate(block: Any, sample_inputs: Any, out_dir: str, name: Optional[str] = None, *,
              verify: bool = True, lr: float = 0.1, seed: int = 0,
              batchnorm: str = "torch") -> TranslateReport:
    """Write ``out_dir/<name>.py`` (a torch module mirroring the Gluon block tree),
    ``<name>.safetensors`` (its state_dict, from the block's current weights) and
    ``<name>.report.json``; return the report (``.ok`` only if every check passed).

    ``sample_inputs``: one array or a list of arrays (numpy, NDArray) as the block takes them.
    Verification runs both models in float64 (eval with randomised norms/biases, and one SGD step
    at ``lr`` in train mode); the block's weights are restored afterwards.

    ``batchnorm``: ``"torch"`` writes ``nn.BatchNorm*d`` (running variance updated with torch's
    unbiased batch variance); ``"gluon"`` writes a BatchNorm that keeps Gluon's biased estimate."""
    import mxnet as mx
    from .codegen import Generator
    from .trace import gluon_inputs, record_calls, walk
    from .verify import load_generated, torch_state, verify as run_verify

    if not isinstance(block, mx.gluon.Block):
        raise TypeError(f"translate: expected a Gluon Block, got {type(block).__name__}")
    name = name or _default_name(block)
    if not name.isidentifier():
        raise ValueError(f"translate: name must be a valid Python identifier (the module name), got {name!r}")
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
        gen = Generator(block, records, name, batchnorm=batchnorm)
        source = gen.source()
        t1 = time.perf_counter()
        os.makedirs(out_dir, exist_ok=True)
        paths = {k: os.path.join(out_dir, f"{name}{k}") for k in (".py", ".safetensors", ".report.json")}
        report = TranslateReport(name, gen.top_class, paths[".py"], paths[".safetensors"],
                                 paths[".report.json"], untranslated=list(gen.untraced))
        report.mapping = [{"torch": e.torch_key, "gluon": e.gluon_key,
                           "shape": list(e.param.shape) if e.param is not None else [],
                           **({"tied_to": e.tied_to} if e.tied_to else {})} for e in gen.entries]
        from ...atomic import atomic_write_file
        atomic_write_file(paths[".py"], lambda f: f.write(source.encode()))
        state = torch_state(gen.entries)
        _save_weights(paths[".safetensors"], state, gen.entries)
        if verify and not gen.untraced:
            cls = load_generated(paths[".py"], gen.top_class)
            checks, first, notes, report.dtype = run_verify(block, cls, gen.entries, arrays, gen.same_output,
                                                            records, lr=lr, seed=seed, ops=gen.ops,
                                                            current={id(e.param): state[e.torch_key].numpy()
                                                                     for e in gen.entries if e.param is not None})
            report.checks, report.first_divergent, report.notes = checks, first, notes
        elif gen.untraced:
            report.notes.append("not verified: parts of the model were not translated")
        report.seconds = {"translate": round(t1 - t0, 3), "verify": round(time.perf_counter() - t1, 3),
                          "cpu": round(time.process_time() - c0, 3)}
    finally:
        for b, flag in active:
            b._active = flag
    data = json.dumps(report.to_dict(), indent=1, default=float).encode()
    atomic_write_file(paths[".report.json"], lambda f: f.write(data))
    return report


def _save_weights(path: str, state: Dict[str, Any], entries) -> None:
    """safetensors refuses shared storage: tied weights are written once per key (load_state_dict
    assigns both keys to the one shared torch Parameter)."""
    from safetensors.torch import save_file
    from ...atomic import atomic_write
    seen: set = set()
    flat = {}
    for k, v in state.items():
        flat[k] = v.clone() if id(v) in seen else v.contiguous()
        seen.add(id(v))
    atomic_write(path, lambda tmp: save_file(flat, tmp))
