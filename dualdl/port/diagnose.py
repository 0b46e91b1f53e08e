"""Naming what went wrong: settings that differ between paired layers (norm eps, conv stride/
padding, GELU flavour), source tensors left out, mask inputs left unset, and the first layer
whose output parts when the outputs disagree."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .pairing import Pair

__all__ = ["layer_pairs", "setting_mismatches", "activation_mismatches"]

_NAMES = {"eps": "norm eps", "stride": "conv stride", "padding": "conv padding",
          "dilation": "conv dilation", "groups": "conv groups", "kernel": "conv kernel"}


def layer_pairs(pairs: List[Pair]) -> List[Tuple[str, str]]:
    """(source layer, target layer) paired one to one by their tensors, source execution order."""
    fwd: Dict[str, set] = {}
    back: Dict[str, set] = {}
    order: List[str] = []
    for p in sorted(pairs, key=lambda p: p.source.rank):
        s, t = p.source.layer, p.target.layer
        if s not in fwd:
            order.append(s)
        fwd.setdefault(s, set()).add(t)
        back.setdefault(t, set()).add(s)
    return [(s, next(iter(fwd[s]))) for s in order
            if len(fwd[s]) == 1 and len(back[next(iter(fwd[s]))]) == 1]


def setting_mismatches(pairs: List[Tuple[str, str]], src_h: Dict[str, Dict[str, Any]],
                       dst_h: Dict[str, Dict[str, Any]]) -> List[str]:
    out = []
    for s, t in pairs:
        a, b = src_h.get(s, {}), dst_h.get(t, {})
        for k in ("eps", "stride", "padding", "dilation", "groups", "kernel"):
            if k in a and k in b and a[k] != b[k]:
                what = _NAMES[k]
                hint = (" (ResNet v1 puts a bottleneck's stride on its first 1x1 conv, v1b/v1.5 "
                        "on the 3x3)" if k == "stride" else "")
                out.append(f"{what} differs: source {s or '<root>'} has {a[k]}, target "
                           f"{t or '<root>'} has {b[k]}{hint}")
    return out


def activation_mismatches(src_order: List[str], src_h: Dict[str, Dict[str, Any]],
                          dst_order: List[str], dst_h: Dict[str, Dict[str, Any]]) -> List[str]:
    """GELU layers compared in execution order (when both sides run the same number)."""
    a = [(p, src_h[p]["activation"]) for p in src_order if "activation" in src_h.get(p, {})]
    b = [(p, dst_h[p]["activation"]) for p in dst_order if "activation" in dst_h.get(p, {})]
    if len(a) != len(b):
        return []
    out = []
    for (sp, sk), (tp, tk) in zip(a, b):
        if sk != tk:
            out.append(f"activation differs: source {sp} is {_GELU[sk]}, target {tp} is "
                       f"{_GELU[tk]} (transformers 'gelu' is erf; 'gelu_new', "
                       f"'gelu_pytorch_tanh' are tanh)")
    if len(out) > 3:
        out = out[:2] + [f"... and {len(out) - 2} more activation layers"]
    return out


_GELU = {"gelu_erf": "GELU (erf)", "gelu_tanh": "GELU (tanh approximation)",
         "gelu_other": "a GELU variant"}
