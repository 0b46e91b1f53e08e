"""Parameter groups by name pattern (seed 004's per-submodule learning rates).

Hides: MXNet expresses per-parameter rates as ``lr_mult``/``wd_mult`` attributes (default 1 on
every parameter, so biases and BatchNorm gamma/beta are weight-decayed too); torch uses param
groups. A torch name filter on ``'weight'`` also catches BatchNorm's weight (gamma). Here norms are
recognised by their layer, not by name.
"""
from __future__ import annotations

import fnmatch
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = ["param_groups", "BIASES_AND_NORMS"]

BIASES_AND_NORMS = "biases_and_norms"
_NORM_HINTS = ("BatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm", "SyncBatchNorm")


def _is_norm(module: Any) -> bool:
    name = getattr(type(module), "_dl_layer", None) or type(module).__name__
    return any(h in name for h in _NORM_HINTS)


def _norm_param_names(model: Any) -> set:
    out = set()
    for mname, m in model.named_modules():
        if _is_norm(m):
            for pname, _ in m.named_parameters():
                out.add(f"{mname}.{pname}" if mname else pname)
    return out


def param_groups(model: Any, rules: Optional[Sequence[Tuple[Union[str, Sequence[str]], Dict[str, Any]]]] = None,
                 no_decay: Optional[str] = None) -> List[Dict[str, Any]]:
    """Split ``model``'s parameters into optimizer param groups.

    ``rules``: ``[(pattern, options), ...]``; a pattern is a glob on structural names
    (``"features.*"``, ``"*.bias"``) or a list of them; the first matching rule wins; the rest
    form a default group. ``no_decay=BIASES_AND_NORMS`` additionally gives every bias and every
    norm-layer parameter ``weight_decay=0``, in one line::

        opt = dl.optim.SGD(dl.optim.param_groups(net, [("features.*", {"lr": 1e-3})],
                                                 no_decay=dl.optim.BIASES_AND_NORMS),
                           lr=1e-2, momentum=0.9, weight_decay=1e-4)
    """
    rules = list(rules or [])
    if no_decay not in (None, BIASES_AND_NORMS):
        raise ValueError(f"no_decay must be None or dl.optim.BIASES_AND_NORMS, got {no_decay!r}")
    norms = _norm_param_names(model) if no_decay else set()
    buckets: Dict[Tuple[int, bool], List[Any]] = {}
    matched = [0] * len(rules)
    for name, p in model.named_parameters():
        idx = len(rules)
        for i, (pat, _) in enumerate(rules):
            pats = [pat] if isinstance(pat, str) else list(pat)
            if any(fnmatch.fnmatchcase(name, q) for q in pats):
                idx = i
                matched[i] += 1
                break
        nd = bool(no_decay) and (name.endswith("bias") or name in norms)
        buckets.setdefault((idx, nd), []).append(p)
    unused = [rules[i][0] for i, n in enumerate(matched) if n == 0]
    if unused:
        names = [n for n, _ in model.named_parameters()]
        raise ValueError(f"param_groups: pattern(s) {unused} matched no parameter; names look like "
                         f"{names[:6]}{' ...' if len(names) > 6 else ''}")
    groups = []
    for (idx, nd), ps in sorted(buckets.items(), key=lambda kv: kv[0]):
        g: Dict[str, Any] = {"params": ps}
        if idx < len(rules):
            g.update(rules[idx][1])
        if nd:
            g["weight_decay"] = 0.0
        groups.append(g)
    return groups
