"""Does a saved optimizer state fit this optimizer? One check and one message for both backends.

Hides: torch's ``Optimizer.load_state_dict`` takes any state of the right group sizes and fails
later on a missing key (an SGD-momentum state in an Adam: ``KeyError: 'step'``); dualdl's MXNet
optimizers took it and restarted Adam without its moments. Here the optimizer type, the
hyper-parameter names of every group, the state keys and the shapes of the state arrays are
checked before anything is loaded, with backend-neutral names: implementation flags that only
torch's groups carry (``foreach``, ``fused``, ...) are left out of the comparison.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

__all__ = ["optimizer_name", "check_optimizer_state", "STATE_KEYS"]

# the per-parameter state each dl.optim optimizer may hold (torch's names, on both backends)
STATE_KEYS = {
    "SGD": {"momentum_buffer"},
    "Adam": {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    "AdamW": {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    "RMSprop": {"step", "square_avg", "momentum_buffer", "grad_avg"},
}
# group entries that say how torch computes an update, not which update (absent on MXNet), and
# the scheduler's bookkeeping
_FLAGS = {"foreach", "fused", "capturable", "differentiable", "decoupled_weight_decay", "initial_lr", "params"}
# for states written without the optimizer's name: a hyper-parameter only that optimizer has
_SIGNATURES = (("betas", "Adam or AdamW"), ("alpha", "RMSprop"), ("nesterov", "SGD"))


def optimizer_name(optimizer: Any) -> str:
    """``"SGD"``, ``"Adam"``, ... for a dl.optim optimizer on either backend."""
    return getattr(optimizer, "_dl_optimizer", "") or type(optimizer).__name__


def _names(group: Dict[str, Any]) -> List[str]:
    return sorted(k for k in group if k not in _FLAGS)


def _state_keys(state: Dict[Any, Dict[str, Any]]) -> List[str]:
    return sorted({k for s in state.values() for k in s})


def _describe(name: str, sd: Dict[str, Any]) -> str:
    groups = sd.get("param_groups") or [{}]
    keys = _state_keys(sd.get("state") or {})
    return (f"{name} (hyper-parameters: {', '.join(_names(groups[0])) or 'none'}; "
            f"state: {', '.join(keys) or 'none yet'})")


def _guess(sd: Dict[str, Any]) -> str:
    groups = sd.get("param_groups") or [{}]
    for key, name in _SIGNATURES:
        if key in groups[0]:
            return name
    return "an unknown optimizer"


def _shape(v: Any) -> Optional[tuple]:
    shape = getattr(v, "shape", None)
    return tuple(shape) if shape is not None and len(shape) else None


def check_optimizer_state(saved: Dict[str, Any], saved_name: Optional[str], optimizer: Any,
                          param_shapes: Sequence[Sequence[tuple]]) -> None:
    """Raise ``ValueError`` saying what ``saved`` holds and what ``optimizer`` expects if the state
    does not fit. ``param_shapes[g]``: the shapes of group ``g``'s parameters (None: unknown yet)."""
    mine = optimizer.state_dict()
    name = optimizer_name(optimizer)
    if not isinstance(saved, dict) or not isinstance(saved.get("param_groups"), list) \
            or not isinstance(saved.get("state"), dict):
        raise ValueError(f"the optimizer state is not an optimizer state_dict (param_groups, state); "
                         f"this Trainer's optimizer is {_describe(name, mine)}")
    holds = saved_name or _guess(saved)
    what = f"the file holds the state of {_describe(holds, saved)}, but this Trainer's optimizer is " \
           f"{_describe(name, mine)}"
    if holds != name and not (saved_name is None and name in holds.split(" or ")):
        raise ValueError(f"{what}: build the Trainer with the optimizer that wrote the state")
    groups = saved["param_groups"]
    if len(groups) != len(mine["param_groups"]):
        raise ValueError(f"{what}: the file has {len(groups)} parameter group(s), the optimizer "
                         f"{len(mine['param_groups'])}")
    index = {}
    for g, (a, b) in enumerate(zip(groups, mine["param_groups"])):
        missing = sorted(set(_names(b)) - set(_names(a)))
        extra = sorted(set(_names(a)) - set(_names(b)))
        if missing or extra:
            raise ValueError(f"{what}: parameter group {g} of the file "
                             + (f"lacks {', '.join(missing)}" if missing else "")
                             + (" and " if missing and extra else "")
                             + (f"has {', '.join(extra)} that {name} does not take" if extra else ""))
        if len(a.get("params", [])) != len(b["params"]):
            raise ValueError(f"{what}: parameter group {g} of the file has {len(a.get('params', []))} "
                             f"parameter(s), the optimizer's {len(b['params'])}")
        index.update({i: (g, j) for j, i in enumerate(a.get("params", []))})
    allowed = STATE_KEYS.get(name)
    for i, s in saved["state"].items():
        if not isinstance(s, dict) or i not in index:
            raise ValueError(f"{what}: state entry {i!r} belongs to no parameter of the file's groups")
        bad = sorted(set(s) - allowed) if allowed is not None else []
        if bad:
            raise ValueError(f"{what}: parameter {i} has state {', '.join(bad)} that {name} does not keep")
        g, j = index[i]
        want = param_shapes[g][j]
        for k, v in s.items():
            have = _shape(v)
            if have is not None and want is not None and have != tuple(want):
                raise ValueError(f"{what}: the {k} of parameter {i} has shape {have}, the parameter "
                                 f"{tuple(want)}")
