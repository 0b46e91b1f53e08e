"""Port the weights of a native Gluon block onto a native PyTorch module of the same architecture
(or back), with proof: both models run on sample inputs and the output difference is reported."""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from .diagnose import activation_mismatches, layer_pairs, setting_mismatches
from .inputs import as_inputs, padding_lengths, unset_mask_parameters
from .mapping import Mapping
from .pairing import Pair, PairResult, pair_slots
from .rules import DEFAULT_RULES, Rule
from .sides import make_side
from .slots import RANDOMISED_ROLES, Slot
from .verify import Check, Verifier, first_divergent_layer

__all__ = ["PortReport", "port", "port_gluon_to_torch", "port_torch_to_gluon"]

_HIDDEN = ("something no parameter reveals differs: activation flavour (GELU erf vs tanh, "
           "RNN relu vs tanh), a norm eps (BERT LayerNorm uses 1e-12), stride/padding/pooling "
           "placement or ceil_mode, a layout (NTC vs TNC), an op order (pre- vs post-norm) - "
           "or two same-shaped tensors were paired in the wrong execution order (see report.pairs)")


@dataclass
class PortReport:
    """What paired, what did not, which rules acted, and how close the outputs are."""
    source_framework: str
    target_framework: str
    mapping: Mapping
    pairs: List[Pair]
    unpaired_source: List[Slot]
    unpaired_target: List[Slot]
    notes: List[str] = field(default_factory=list)
    checks: List[Check] = field(default_factory=list)
    loaded: bool = False
    message: str = ""
    conflicts: List[str] = field(default_factory=list)
    #: settings that differ between paired layers (norm eps, conv stride, GELU flavour)
    mismatches: List[str] = field(default_factory=list)
    #: what the failed verification points at (first divergent layer, left-out tensors...)
    diagnosis: List[str] = field(default_factory=list)

    @property
    def unpaired(self) -> Dict[str, List[str]]:
        return {"source": [s.label for s in self.unpaired_source],
                "target": [s.label for s in self.unpaired_target]}

    @property
    def complete(self) -> bool:
        return not self.unpaired_source and not self.unpaired_target and not self.conflicts

    @property
    def verified(self) -> bool:
        return bool(self.checks)

    @property
    def ok(self) -> bool:
        """Every tensor paired, loaded, and (if verified) every check within tolerance."""
        return self.complete and self.loaded and all(c.passed for c in self.checks)

    @property
    def max_abs_diff(self) -> Optional[float]:
        return max((c.max_abs_diff for c in self.checks), default=None)

    @property
    def max_rel_diff(self) -> Optional[float]:
        return max((c.max_rel_diff for c in self.checks), default=None)

    def to_dict(self) -> Dict[str, Any]:
        def slot(s):
            return {"key": s.label, "layer": s.layer, "role": s.role, "shape": list(s.shape),
                    "layer_ran": s.ran}
        return {
            "source_framework": self.source_framework, "target_framework": self.target_framework,
            "ok": self.ok, "loaded": self.loaded, "complete": self.complete,
            "message": self.message, "conflicts": self.conflicts,
            "mismatches": self.mismatches, "diagnosis": self.diagnosis, "max_abs_diff": self.max_abs_diff,
            "max_rel_diff": self.max_rel_diff, "checks": [vars(c) for c in self.checks],
            "notes": self.notes,
            "pairs": [{"source": p.source.label, "target": p.target.label, "role": p.target.role,
                       "shape": list(p.target.shape), "how": p.how} for p in self.pairs],
            "unpaired": {"source": [slot(s) for s in self.unpaired_source],
                         "target": [slot(s) for s in self.unpaired_target]},
            "mapping": self.mapping.to_dict(),
        }

    def save(self, path) -> None:
        """Write the report (with its mapping, reusable by ``Mapping.load``) as JSON."""
        from ..atomic import atomic_write_file
        data = json.dumps(self.to_dict(), indent=1, default=float).encode()
        atomic_write_file(path, lambda f: f.write(data))

    def summary(self) -> str:
        lines = [f"port {self.source_framework} -> {self.target_framework}: "
                 f"{'OK' if self.ok else 'NOT OK'} - {self.message}",
                 f"  paired {len(self.pairs)} tensors into {len(self.mapping.entries)} target tensors; "
                 f"unpaired: {len(self.unpaired_source)} source, {len(self.unpaired_target)} target"]
        for c in self.checks:
            lines.append(f"  check [{c.name}] by {c.evidence}: max abs diff {c.max_abs_diff:.3g}, "
                         f"max rel diff {c.max_rel_diff:.3g}, tolerance {c.tolerance:.3g}: "
                         f"{'passed' if c.passed else 'FAILED'}{' - ' + c.detail if c.detail else ''}")
            if c.float32_max_abs_diff is not None:
                r = ", ".join(f"{k} {v:.3g}" for k, v in c.rounding.items())
                lines.append(f"    float32: max abs diff {c.float32_max_abs_diff:.3g} (rel "
                             f"{c.float32_max_rel_diff:.3g}){'; float32 rounding: ' + r if r else ''}")
            if c.padded_max_abs_diff is not None:
                lines.append(f"    padded positions (not compared): max abs diff "
                             f"{c.padded_max_abs_diff:.3g}")
        lines += [f"  CONFLICT: {c}" for c in self.conflicts]
        lines += [f"  MISMATCH: {m}" for m in self.mismatches]
        lines += [f"  diagnosis: {d}" for d in self.diagnosis]
        for s in self.unpaired_source:
            lines.append(f"  unpaired source {s.label} role={s.role} shape={s.shape}"
                         f"{'' if s.ran else ' (its layer never ran)'}")
        for s in self.unpaired_target:
            lines.append(f"  unpaired target {s.label} role={s.role} shape={s.shape}"
                         f"{'' if s.ran else ' (its layer never ran)'}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = summary


def _randomised(src_slots: List[Slot], state: Dict[str, np.ndarray], seed: int) -> Dict[str, np.ndarray]:
    """Norm scales/shifts, biases and running stats replaced by random values (tied keys get the
    same value), so that a swapped LayerNorm or bias cannot hide behind 1/0 initial values."""
    rng = np.random.default_rng(seed)
    by_ident: Dict[int, np.ndarray] = {}
    out = {}
    for s in src_slots:
        if s.role not in RANDOMISED_ROLES or s.constant is not None or s.key in out:
            continue
        if s.ident not in by_ident:
            shape, dt = state[s.key].shape, state[s.key].dtype
            if s.role in ("scale", "running_var"):
                v = rng.uniform(0.5, 1.5, shape)
            else:
                v = rng.uniform(-0.5, 0.5, shape)
            by_ident[s.ident] = v.astype(dt)
        out[s.key] = by_ident[s.ident]
    return out


def port(source: Any, target: Any, sample_inputs: Any, rules: Optional[Sequence[Rule]] = None, *,
         verify: bool = True, allow_partial: bool = False, default_rules: bool = True,
         target_inputs: Any = None, source_forward: Optional[Callable] = None,
         target_forward: Optional[Callable] = None, rtol: float = 1e-5, atol: float = 1e-7,
         float64: bool = True, seed: int = 0, mapping: Any = None) -> PortReport:
    """Map ``source``'s tensors onto ``target`` (a Gluon block and a torch module, either way).

    ``sample_inputs``: one array, a tuple of positional inputs, a dict of keyword inputs (or a
    ``(tuple, dict)`` pair); lists inside (per-layer RNN states) stay lists. numpy arrays are
    converted per framework (integers: int64 for torch, float32 for Gluon). ``target_inputs``
    if the target needs different ones. ``source_forward(model, *args, **kwargs)`` /
    ``target_forward`` adapt calls and outputs. Nothing is loaded into ``target`` unless every
    tensor paired (or ``allow_partial``), paired layers agree in their settings (norm eps, conv
    stride/padding, GELU flavour) and, with ``verify``, the outputs agree by the evidence of
    :mod:`dualdl.port.verify` (float64 runs where the ops allow, else ``atol + rtol *
    max|output|``); a failed check restores the target's previous values.

    ``mapping``: a known mapping instead of pairing (a ``translate`` report, a ``PortReport``, a
    ``Mapping`` or the path of one: :func:`dualdl.port.mapping.as_mapping`); it is loaded and
    verified the same way, and tensors it leaves out are reported unpaired.
    """
    src, dst = make_side(source, "source"), make_side(target, "target")
    inputs = as_inputs(sample_inputs)
    t_inputs = inputs if target_inputs is None else as_inputs(target_inputs)
    all_rules = list(DEFAULT_RULES if default_rules else []) + list(rules or [])
    src_slots = src.trace(inputs, source_forward)
    dst_slots = dst.trace(t_inputs, target_forward)
    res = (pair_slots(src_slots, dst_slots, all_rules) if mapping is None else
           _given(mapping, src_slots, dst_slots, src.framework, dst.framework))
    src_state = src.state()
    unpaired_src = list(res.unpaired_source)
    for s in res.dropped_source:  # a Gluon center=False beta is droppable only if it is 0
        if s.constant == 0.0 and np.any(src_state[s.key] != 0):
            unpaired_src.append(s)
    notes = src.notes + dst.notes + res.notes
    notes += [f"{'source' if side is src_slots else 'target'} layer {s.layer or '<root>'} never "
              f"ran on the sample input; its tensors were placed after their parent's"
              for side in (src_slots, dst_slots) for s in side if not s.ran and s.name == _first(side, s)]
    mapping = Mapping(res.entries, src.framework, dst.framework, list(res.notes))
    report = PortReport(src.framework, dst.framework, mapping, res.pairs, unpaired_src,
                        res.unpaired_target, notes)
    report.conflicts = _tie_conflicts(dst_slots, mapping, src_state)
    if report.conflicts:
        report.message = "nothing loaded: " + "; ".join(report.conflicts)
        return report
    if not report.complete and not allow_partial:
        report.message = (f"nothing loaded: {len(unpaired_src)} source and "
                          f"{len(res.unpaired_target)} target tensors did not pair "
                          f"(pass allow_partial=True to load the rest)")
        return report
    layers = layer_pairs(res.pairs)
    src_h, dst_h = src.hyper(), dst.hyper()
    report.mismatches = (setting_mismatches(layers, src_h, dst_h) +
                         activation_mismatches(src.ran_paths, src_h, dst.ran_paths, dst_h))
    if not verify:
        dst.load(mapping.apply(src_state))
        report.loaded = True
        report.message = "loaded without verification"
        if report.mismatches:
            report.message += " although paired layers differ: " + "; ".join(report.mismatches)
        return report
    lengths = padding_lengths(inputs.named(source))
    if lengths is None:
        lengths = padding_lengths(t_inputs.named(target))
    verifier = Verifier(src, dst, inputs, t_inputs, source_forward, target_forward, rtol=rtol,
                        atol=atol, float64=float64, lengths=lengths)
    dst_before = dst.snapshot()
    rand = _randomised(src_slots, src_state, seed)
    # keep_dtype: computed tensors (a folded conv bias) reach the float64 run unrounded
    actual_t = mapping.apply(src_state, keep_dtype=True)
    touched = [e.target for e in mapping.entries if any(x["key"] in rand for x in e.sources)]
    rand_t = {e.target: e.compute(dict(src_state, **rand), keep_dtype=True) for e in mapping.entries
              if e.target in touched}

    def randomised():
        src.load(rand)
        dst.load(rand_t)

    def actual():
        src.load({k: src_state[k] for k in rand})
        dst.load({k: actual_t[k] for k in touched})
    try:
        dst.load(actual_t)
        report.checks = verifier.check_all([("randomised norms/biases", randomised),
                                            ("actual weights", actual)])
    except BaseException:
        src.load({k: src_state[k] for k in rand})
        dst.restore(dst_before)
        raise
    padded = [c.padded_max_abs_diff for c in report.checks if c.padded_max_abs_diff is not None]
    if padded:
        report.notes.append(
            f"outputs differ on padded positions only (max abs diff {max(padded):.3g}; valid "
            f"positions are compared): a masking/padding difference - e.g. gluonnlp BERT zeroes "
            f"its padded outputs, transformers keeps them")
    if all(c.passed for c in report.checks) and not report.mismatches:
        report.loaded = True
        worst = max(report.checks, key=lambda c: c.max_abs_diff / c.tolerance if c.tolerance else 0)
        report.message = (f"outputs agree: max abs diff {worst.max_abs_diff:.3g} (max rel "
                          f"{worst.max_rel_diff:.3g}, tolerance {worst.tolerance:.3g}, by "
                          f"{worst.evidence}); float32 max abs diff "
                          f"{max(c.float32_max_abs_diff or 0.0 for c in report.checks):.3g}")
        if padded:
            report.message += "; padded positions differ (see notes)"
        if not report.complete:
            report.message += " (partial port)"
        return report
    dst.restore(dst_before)
    failed = [c for c in report.checks if not c.passed]
    if report.mismatches:
        f = max(report.checks, key=lambda c: c.max_abs_diff)
        report.message = (f"the tensors paired but the layers are set up differently: "
                          f"{'; '.join(report.mismatches)} (outputs differ by {f.max_abs_diff:.3g}, "
                          f"tolerance {f.tolerance:.3g}, by {f.evidence}; check [{f.name}] "
                          f"{'passed: the inputs hide it' if f.passed else 'failed'}); target "
                          f"left unchanged")
    elif any(c.detail for c in failed):
        report.message = "outputs not comparable: " + failed[0].detail + "; target left unchanged"
    else:
        dst.load(actual_t)
        report.diagnosis = _diagnose(report, src, dst, inputs, t_inputs, source_forward,
                                     target_forward, layers, lengths)
        dst.restore(dst_before)
        f = failed[-1]
        head = (f"outputs differ by {f.max_abs_diff:.3g} (tolerance {f.tolerance:.3g}, by "
                f"{f.evidence}; check [{f.name}])")
        why = []
        if report.checks[-1].passed and not any("not ported" in d for d in report.diagnosis):
            why.append("it differs only with randomised norm scales/shifts and biases: a norm "
                       "layer or bias is paired with the wrong tensor (see report.pairs), or an "
                       "op order differs")
        why = "; ".join(why + report.diagnosis) or _HIDDEN
        report.message = f"{head} although the tensors paired: {why}; target left unchanged"
    warnings.warn("port verification failed: " + report.message, stacklevel=2)
    return report


def _diagnose(report: PortReport, src, dst, inputs, t_inputs, s_fwd, t_fwd, layers,
              lengths) -> List[str]:
    out = []
    left_out = [s.key for s in report.unpaired_source] + [
        n[len("ignored (source): "):] for n in report.notes if n.startswith("ignored (source): ")]
    if left_out:
        kinds = "biases" if all(k.endswith("bias") for k in left_out) else "tensors"
        out.append(f"{len(left_out)} source {kinds} not ported (dropped: their effect is missing "
                   f"in the target): {', '.join(left_out[:6])}{' ...' if len(left_out) > 6 else ''}")
    s_named, t_named = inputs.named(src.model), t_inputs.named(dst.model)
    if lengths is not None:
        for who, model, named in (("target", dst.model, t_named), ("source", src.model, s_named)):
            unset = unset_mask_parameters(model, named)
            if unset:
                out.append(f"missing attention mask: the {who}'s forward takes "
                           f"{', '.join(unset)} but it was not given, while the inputs mark "
                           f"padding (lengths {lengths.tolist()})")
    fail = next(c for c in report.checks if not c.passed)
    scale = fail.max_abs_diff / fail.max_rel_diff if fail.max_rel_diff else 1.0
    thr = max(10 * fail.tolerance / scale if scale else 0.0, 1e-4)
    found = first_divergent_layer(src, dst, inputs, t_inputs, s_fwd, t_fwd, layers, thr)
    if found:
        s, t, rel, prev = found
        where = (f"first divergent layer: source {s or '<root>'} / target {t or '<root>'} (output "
                 f"rel diff {rel:.3g}")
        where += (f"; the paired layer before it agreed to {prev:.3g})" if prev is not None
                  else "; it is the first paired layer)")
        rnn = any(p.source.layer == s and p.source.role.startswith("weight_") for p in report.pairs)
        if rnn:
            where += (": this RNN layer computes differently from its input on - gate order "
                      "(Gluon and torch both use LSTM i,f,g,o and GRU r,z,n; a hand-written "
                      "cell in i,f,o,g order or a permuted mapping differs), or activation")
        else:
            where += (": the difference arises in this layer or in what runs without "
                      "parameters right before it (activation such as GELU erf vs tanh, "
                      "masking, pooling, a dropped bias)")
        out.append(where)
    return out


def _tie_conflicts(dst_slots: List[Slot], mapping: Mapping, state: Dict[str, np.ndarray]) -> List[str]:
    """A tensor the target ties under two names must receive one value from the source."""
    groups: Dict[int, List[str]] = {}
    for s in dst_slots:
        if s.part is None and s.key not in groups.get(s.ident, []):
            groups.setdefault(s.ident, []).append(s.key)
    entries = {e.target: e for e in mapping.entries}
    out = []
    for keys in groups.values():
        keys = [k for k in keys if k in entries]
        if len(keys) < 2:
            continue
        vals = [entries[k].compute(state) for k in keys]
        for k, v in zip(keys[1:], vals[1:]):
            if v.shape != vals[0].shape or not np.array_equal(v, vals[0]):
                d = float(np.abs(v.astype(np.float64) - vals[0]).max()) if v.shape == vals[0].shape else float("inf")
                out.append(f"the target ties {keys[0]} and {k} (one tensor) but the source gives "
                           f"them different values (max diff {d:.3g}): the source does not tie them")
    return out


def _given(mapping: Any, src_slots: List[Slot], dst_slots: List[Slot], src_fw: str,
           dst_fw: str) -> PairResult:
    """A known mapping in place of pairing: its entries, the slot pairs of its plain copies (for
    the layer-settings comparison), and the slots it leaves out as unpaired."""
    from .mapping import as_mapping
    m = as_mapping(mapping)
    if (m.source_framework, m.target_framework) not in (("", ""), (src_fw, dst_fw)):
        raise ValueError(f"port: the mapping goes {m.source_framework} -> {m.target_framework}, "
                         f"this port {src_fw} -> {dst_fw}")
    src_by, dst_by = {s.key: s for s in src_slots}, {s.key: s for s in dst_slots}
    missing = sorted({x["key"] for e in m.entries for x in e.sources} - set(src_by))
    if missing:
        raise ValueError(f"port: the mapping reads source tensors the source model does not have: "
                         f"{missing[:5]} (a mapping made for another model?)")
    used = {x["key"] for e in m.entries for x in e.sources}
    pairs = [Pair(src_by[e.sources[0]["key"]], dst_by[e.target], "mapping")
             for e in m.entries if e.transform == "copy" and len(e.sources) == 1
             and e.target in dst_by]
    return PairResult(pairs, list(m.entries), [s for s in src_slots if s.key not in used],
                      [s for s in dst_slots if s.key not in set(m.target_keys)],
                      [f"mapping given ({len(m.entries)} target tensors); no pairing"])


def _first(side: List[Slot], s: Slot) -> str:
    return next(o.name for o in side if o.layer == s.layer)


def port_gluon_to_torch(gluon_block: Any, torch_module: Any, sample_inputs: Any,
                        rules: Optional[Sequence[Rule]] = None, **kwargs) -> PortReport:
    """Port a Gluon block's weights onto a torch module of the same architecture (see :func:`port`)."""
    return port(gluon_block, torch_module, sample_inputs, rules, **kwargs)


def port_torch_to_gluon(torch_module: Any, gluon_block: Any, sample_inputs: Any,
                        rules: Optional[Sequence[Rule]] = None, **kwargs) -> PortReport:
    """Port a torch module's weights onto a Gluon block of the same architecture (see :func:`port`)."""
    return port(torch_module, gluon_block, sample_inputs, rules, **kwargs)
