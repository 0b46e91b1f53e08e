"""Which Gluon tensor each torch state_dict entry comes from, by name: a ``dl.port.translate``
report (its rows name Gluon's structural ``save_parameters`` keys), a ``dl.port`` report or
Mapping, a dict, or, with none, equal names (the translated module keeps Gluon's structural
names)."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .emit import RecipeError


def gluon_keys(gluon_model: Any) -> Dict[str, Any]:
    """structural key -> Parameter (``save_parameters`` names)."""
    return dict(gluon_model._collect_params_with_prefix())


def torch_keys(torch_model: Any) -> List[str]:
    return [k for k, _ in torch_model.named_parameters()] + \
        [k for k, _ in torch_model.named_buffers()]


def pair_names(gluon_model: Any, torch_model: Any, mapping: Any = None
               ) -> List[Tuple[str, str, bool]]:
    """(torch key, Gluon structural key, transposed) for every torch tensor fed by one Gluon
    tensor."""
    from ..mapping import gluon_key_resolver
    from ..trainer_translate import _as_mapping
    gk = gluon_keys(gluon_model)
    tk = torch_keys(torch_model) if torch_model is not None else None
    resolve = gluon_key_resolver(gluon_model)    # checkpoint key, Parameter(.name), structural name
    out: List[Tuple[str, str, bool]] = []
    if mapping is None:
        if tk is None:
            return [(k, k, False) for k in gk]
        missing = [k for k in gk if k not in tk]
        if missing:
            raise RecipeError(f"Gluon parameter {missing[0]!r} has no torch tensor of the same "
                              f"name ({len(missing)} of {len(gk)} unmatched); pass mapping= (the "
                              f"dl.port.translate report, a dl.port report or a dict Gluon key -> "
                              f"torch key)")
        return [(k, k, False) for k in gk]
    if isinstance(mapping, dict):
        items = [(t, g) for g, t in mapping.items()]
        for t, g in items:
            key = resolve(g)
            if key is None:
                raise RecipeError(f"mapping key {g!r} is not a parameter of the Gluon model")
            out.append((t, key, False))
        return out
    if hasattr(mapping, "mapping") and hasattr(mapping, "pairs"):
        mapping = mapping.mapping  # a dl.port PortReport
    else:
        mapping = _as_mapping(mapping)
    if not hasattr(mapping, "entries"):
        raise RecipeError(f"mapping= must be a dl.port.translate report, a dl.port report or "
                          f"Mapping, their JSON path, or a dict Gluon key -> torch key; got "
                          f"{type(mapping).__name__}")
    for e in mapping.entries:
        if len(e.sources) != 1 or e.transform not in ("copy", "transpose") \
                or e.sources[0].get("part"):
            continue
        s = e.sources[0]
        key = resolve(s["key"])
        if key is None:
            from ..mapping import from_dualdl_report
            whose = ("a bug in dualdl if the translate report was made from this gluon_model "
                     "(please report it)" if from_dualdl_report(mapping) else
                     "pass the mapping of this model")
            raise RecipeError(f"the mapping feeds torch {e.target!r} from Gluon {s['key']!r}, "
                              f"which is not a parameter of gluon_model under any name; {whose}")
        out.append((e.target, key, bool(e.transpose or s.get("transpose")
                                         or e.transform == "transpose")))
    return out
