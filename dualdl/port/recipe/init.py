"""The initializer recipe as source: ``init_parameters(model, generator=None)`` applies, by
torch name, the ``mx.init`` rule Gluon's ``Parameter.initialize`` picks for each tensor (the
parameter's own initializer, else the one passed to ``net.initialize``; ``Mixed`` patterns
match Gluon parameter names), computing shape-dependent scales from the Gluon shape."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .emit import RecipeError, SourceFile, lit
from .names import gluon_keys, pair_names

_SRC = "dualdl.port.recipe.torch_src.init"
_IID = ("constant", "uniform", "normal", "xavier")


def rule_of(init: Any, name: str) -> Tuple[str, Dict[str, Any]]:
    """(kind, arguments) for one ``mx.init`` initializer applied to the Gluon parameter ``name``."""
    import mxnet as mx
    I = mx.init
    if isinstance(init, I.Mixed):
        for prog, sub in init.map:
            if prog.match(name):
                return rule_of(sub, name)
        raise RecipeError(f"Gluon parameter {name!r} matches no pattern of the Mixed initializer "
                          f"(MXNet raises too); add a '.*' pattern last")
    if init is None or isinstance(init, str) or isinstance(init, dict):
        init = I.create(init if init is not None else "uniform")
    if isinstance(init, I.Zero):
        return "constant", {"value": 0.0}
    if isinstance(init, I.One):
        return "constant", {"value": 1.0}
    if isinstance(init, I.Constant):
        v = init.value
        return "constant", {"value": v.tolist() if hasattr(v, "tolist") else v}
    if isinstance(init, I.Xavier):  # MSRAPrelu too
        return "xavier", {"rnd_type": init.rnd_type, "factor_type": init.factor_type,
                          "magnitude": float(init.magnitude)}
    if type(init) is I.Uniform:
        return "uniform", {"scale": float(init.scale)}
    if type(init) is I.Normal:
        return "normal", {"sigma": float(init.sigma)}
    if type(init) is I.Orthogonal:
        return "orthogonal", {"scale": float(init.scale), "rand_type": init.rand_type}
    if type(init) is I.Bilinear:
        return "bilinear", {}
    if type(init) is I.LSTMBias:
        return "lstm_bias", {"forget_bias": float(init.forget_bias)}
    raise RecipeError(f"initializer {type(init).__module__}.{type(init).__name__} (for Gluon "
                      f"parameter {name!r}) has no translation; supported: Zero, One, Constant, "
                      f"Uniform, Normal, Xavier, MSRAPrelu, Orthogonal, Bilinear, LSTMBias, Mixed")


def init_rows(initializer: Any, gluon_model: Any, torch_model: Any = None,
              mapping: Any = None) -> List[tuple]:
    """(torch key, Gluon key, kind, args, Gluon shape) per torch tensor Gluon initializes."""
    gk = gluon_keys(gluon_model)
    rows = []
    for tkey, key, transposed in pair_names(gluon_model, torch_model, mapping):
        p = gk[key]
        own = p.init
        kind, args = rule_of(own if own is not None else initializer, p.name)
        if transposed and kind not in _IID:
            raise RecipeError(f"torch {tkey!r} is Gluon {key!r} transposed, and {kind} "
                              f"initialization is not elementwise: initialize in Gluon's layout")
        shape = [int(s) for s in p.shape]
        if any(s <= 0 for s in shape):
            raise RecipeError(f"Gluon parameter {key!r} has unknown shape {tuple(p.shape)}: run "
                              f"one forward pass (deferred initialization) before translating")
        rows.append((tkey, key, kind, args, shape))
    return rows


def emit_init(sf: SourceFile, initializer: Any, gluon_model: Any, torch_model: Any = None,
              mapping: Optional[Any] = None) -> List[tuple]:
    rows = init_rows(initializer, gluon_model, torch_model, mapping)
    names = ["_f32", "xavier_scale", "uniform_", "normal_", "xavier_", "orthogonal_", "bilinear_",
             "lstm_bias_", "constant_", "apply_rule"]
    sf.use(_SRC, names)
    table = ",\n".join("    " + lit(r) for r in rows)  # a table: one tensor per line
    sf.add(f'''
#: (torch name, Gluon name, rule, arguments, Gluon shape) - the mx.init rule Gluon applies
INIT_RULES = [
{table},
]


def init_parameters(model: torch.nn.Module, generator: Optional[torch.Generator] = None) -> None:
    """Initialize ``model`` as Gluon's ``net.initialize(...)`` did: same rule and scale per tensor
    (parameters and running statistics), torch's RNG (same distribution, not the same draws)."""
    state = dict(model.named_parameters())
    state.update(model.named_buffers())
    with torch.no_grad():
        for tname, gname, kind, args, shape in INIT_RULES:
            if tname not in state:
                raise KeyError(f"the model has no tensor {{tname!r}} (Gluon {{gname}})")
            apply_rule(state[tname], kind, args, shape, generator)
''', "init_parameters")
    return rows
