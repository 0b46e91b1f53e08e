"""Pair source tensors with target tensors: execution order first, then role and shape.

Both models' tensors arrive sorted by the rank at which their layer first ran on the sample
input (definition order is wrong for many real models: ResNet shortcuts defined before the main
branch, LayerNorms defined before the attention they follow). Each target tensor takes the first
unpaired source tensor, in that order, with a compatible role and the same shape. Rules
(:mod:`dualdl.port.rules`) add what pairing cannot see.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from .mapping import Entry
from .rules import (Fused, FoldConvBias, Ignore, Rename, Rule, Transpose, ZeroMissingBias)
from .slots import Slot, compatible


@dataclass
class Pair:
    source: Slot
    target: Slot
    how: str


@dataclass
class PairResult:
    pairs: List[Pair]
    entries: List[Entry]
    unpaired_source: List[Slot]
    unpaired_target: List[Slot]
    notes: List[str] = field(default_factory=list)
    dropped_source: List[Slot] = field(default_factory=list)   # constants / tied aliases


def _expand(slots: List[Slot], rules: List[Rule], side: str, notes: List[str]) -> List[Slot]:
    out = []
    for s in slots:
        if any(isinstance(r, Ignore) and r.matches(s.key) for r in rules):
            notes.append(f"ignored ({side}): {s.key}")
            continue
        t = next((r for r in rules if isinstance(r, Transpose) and r.matches(s.key)), None)
        if t is not None:
            s = copy.copy(s)
            s.shape, s.transposed = tuple(reversed(s.shape)), True
            notes.append(f"rule transpose ({side}): {s.key} stored transposed")
        f = next((r for r in rules if isinstance(r, Fused) and r.matches(s.key)), None)
        if f is not None and s.shape and s.shape[f.axis] % f.parts == 0:
            notes.append(f"rule fused ({side}): {s.key} is {f.parts} tensors along axis {f.axis}")
            for i in range(f.parts):
                p = copy.copy(s)
                shape = list(s.shape)
                shape[f.axis] //= f.parts
                p.shape, p.part = tuple(shape), (i, f.parts, f.axis)
                p.rank = s.rank + (i,)
                out.append(p)
            continue
        out.append(s)
    return out


def pair_slots(src: List[Slot], dst: List[Slot], rules: List[Rule]) -> PairResult:
    notes: List[str] = []
    src = _expand(src, rules, "source", notes)
    dst = _expand(dst, rules, "target", notes)
    src_used = [False] * len(src)
    match: Dict[int, Tuple[int, str]] = {}   # dst index -> (src index, how)

    # 1. explicit renames
    failed: List[int] = []
    for rule in (r for r in rules if isinstance(r, Rename)):
        for i, s in enumerate(src):
            if src_used[i] or s.part is not None:
                continue
            key = rule.target_for(s.key)
            if key is None:
                continue
            j = next((j for j, d in enumerate(dst) if d.key == key and j not in match), None)
            if j is None:  # a user rule that cannot apply is an error, not a fallback
                notes.append(f"rule {rule!r}: target {key!r} (from {s.key}) does not exist "
                             f"or is already paired; {s.key} left unpaired")
                src_used[i] = True
                failed.append(i)
                continue
            src_used[i] = True
            match[j] = (i, f"rule rename ({rule.transform})")
            notes.append(f"rule rename ({rule.transform}): {s.key} -> {key}")

    # 2. execution order, role, shape
    for j, d in enumerate(dst):
        if j in match:
            continue
        for i, s in enumerate(src):
            if not src_used[i] and s.shape == d.shape and compatible(s.role, d.role):
                src_used[i] = True
                match[j] = (i, "order")
                break

    # 3. conv bias present on the source only -> fold into the next BatchNorm's running mean
    folds: Dict[int, int] = {}   # dst running_mean index -> src bias index
    if any(isinstance(r, FoldConvBias) for r in rules):
        src_of = {i: j for j, (i, _) in match.items()}
        for i, s in enumerate(src):
            if src_used[i] or s.role != "bias" or s.part is not None:
                continue
            if not any(o.layer == s.layer and o.role == "weight" and len(o.shape) >= 3 for o in src):
                continue
            nxt = next((k for k in range(i + 1, len(src)) if src[k].layer != s.layer), None)
            if nxt is None:
                continue
            # the BatchNorm must be the very next layer to run after the conv
            nxt = next((k for k in range(nxt, len(src)) if src[k].layer == src[nxt].layer
                        and src[k].role == "running_mean" and src[k].shape == s.shape), None)
            if nxt is not None and nxt in src_of and src_of[nxt] not in folds:
                folds[src_of[nxt]] = i
                src_used[i] = True
                notes.append(f"rule fold_conv_bias: {s.key} folded into "
                             f"{dst[src_of[nxt]].key} (= {src[nxt].key} - {s.key}; exact in eval mode)")

    # 4. bias on the target only -> zeros
    fills: Dict[int, float] = {}
    if any(isinstance(r, ZeroMissingBias) for r in rules):
        for j, d in enumerate(dst):
            if j in match or d.role != "bias":
                continue
            w = next((k for k, o in enumerate(dst) if o.layer == d.layer and o.role == "weight"
                      and k in match), None)
            if w is None:
                continue
            s_layer = src[match[w][0]].layer
            if not any(o.layer == s_layer and o.role == "bias" for o in src):
                fills[j] = 0.0
                notes.append(f"rule zero_missing_bias: {d.key} set to 0 (source layer "
                             f"{s_layer or '<root>'} has no bias)")

    # 5. Gluon constants (fixed gamma/beta) on the target -> their value
    for j, d in enumerate(dst):
        if j not in match and j not in fills and d.constant is not None:
            fills[j] = d.constant
            notes.append(f"{d.key} set to {d.constant:g}: {'; '.join(d.notes)}")

    # unpaired, after forgiving tied aliases and droppable constants
    paired_src_ids = {src[i].ident for i, _ in match.values()}
    paired_dst_ids = {dst[j].ident for j in match} | {dst[j].ident for j in fills}
    unpaired_src, dropped = [src[i] for i in failed], []
    for i, s in enumerate(src):
        if src_used[i]:
            continue
        if s.ident in paired_src_ids and s.part is None:
            dropped.append(s)
            notes.append(f"tied (source): {s.key} is the same tensor as a paired one")
        elif s.constant is not None:
            dropped.append(s)
            notes.append(f"dropped {s.key}: {'; '.join(s.notes)}")
        else:
            unpaired_src.append(s)
    unpaired_dst = []
    for j, d in enumerate(dst):
        if j in match or j in fills:
            continue
        if d.ident in paired_dst_ids and d.part is None:
            notes.append(f"tied (target): {d.key} is the same tensor as a paired one")
            continue
        unpaired_dst.append(d)

    # fused parts pair only if every part paired
    by_key: Dict[str, List[int]] = {}
    for j, d in enumerate(dst):
        by_key.setdefault(d.key, []).append(j)
    for key, js in by_key.items():
        if len(js) > 1 and not all(j in match for j in js) and any(j in match for j in js):
            for j in js:
                if j in match:
                    i = match.pop(j)[0]
                    unpaired_src.append(src[i])
                    unpaired_dst.append(dst[j])
                elif j not in fills and dst[j] not in unpaired_dst:
                    unpaired_dst.append(dst[j])

    # entries and pair list
    pairs: List[Pair] = []
    entries: List[Entry] = []
    for key, js in by_key.items():
        if any(j in fills for j in js) and len(js) == 1:
            d = dst[js[0]]
            entries.append(Entry(key, list(_real_shape(d)), d.dtype, [], "fill",
                                 {"value": fills[js[0]]}, reason="fill"))
            continue
        if not all(j in match for j in js):
            continue
        sources, hows = [], []
        for j in sorted(js, key=lambda j: dst[j].part[0] if dst[j].part else 0):
            i, how = match[j]
            s, d = src[i], dst[j]
            pairs.append(Pair(s, d, how))
            hows.append(how)
            sources.append({"key": s.key, "part": list(s.part) if s.part else None,
                            "transpose": s.transposed})
        d0 = dst[js[0]]
        transform, args = "copy", {}
        if d0.part is not None:
            transform, args = "concat", {"axis": d0.part[2]}
        if hows[0].startswith("rule rename"):
            transform = hows[0][len("rule rename ("):-1]
        s0 = src[match[js[0]][0]]
        if s0.constant is not None and s0.constant == 1.0 and s0.name == "gamma" and transform == "copy":
            transform, args, sources = "fill", {"value": 1.0}, []
            notes.append(f"{key} set to 1: source {s0.key} is {'; '.join(s0.notes)}")
        if js[0] in folds:
            b = src[folds[js[0]]]
            sources.append({"key": b.key, "part": None, "transpose": False})
            transform = "fold_bias"
        reason = ", ".join(sorted(set(hows))) + f"; role {d0.role}"
        entries.append(Entry(key, list(_real_shape(d0)), d0.dtype, sources, transform, args,
                             transpose=d0.transposed, reason=reason))
    unpaired_src.sort(key=lambda s: s.rank)
    unpaired_dst.sort(key=lambda s: s.rank)
    return PairResult(pairs, entries, unpaired_src, unpaired_dst, notes, dropped)


def _real_shape(d: Slot) -> Tuple[int, ...]:
    shape = list(d.shape)
    if d.part is not None:
        shape[d.part[2]] *= d.part[1]
    if d.transposed:
        shape = list(reversed(shape))
    return tuple(shape)
