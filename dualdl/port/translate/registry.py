"""The extension point: user translations for an MXNet op name or a whole Gluon block class.

An op translation is ``fn(args, attrs, node) -> str``, the signature of the built-in ones (the
op registry, :mod:`dualdl.port.translate.oplib`): the torch expression for the op given the
torch expressions of its inputs (``args``, strings), its MXNet attributes (strings, as the symbol
stores them) and the :class:`~dualdl.port.translate.ops.OpNode` (``node.in_shapes``,
``node.out_shapes``). Replacing a built-in translation takes ``replace=True``.
A block translation is ``fn(block, info) -> Leaf``: the torch layer that replaces the Gluon block
(``info.in_shapes`` / ``info.out_shapes`` are the shapes seen on the sample input).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .oplib import register_user, unregister_user

__all__ = ["Call", "Step", "Leaf", "register_translation", "unregister_translation", "block_translation"]


@dataclass
class Call:
    """A constructor call in the generated source: ``fn(*args, **kwargs)``.

    ``args``/``kwargs`` hold literals (int, float, bool, str, tuples), nested ``Call`` s or lists
    of them; ``names`` gives the positional arguments their torch names (used to name constructor
    parameters when instances of one Gluon class differ in a number)."""
    fn: str
    args: List[Any] = field(default_factory=list)
    kwargs: List[Tuple[str, Any]] = field(default_factory=list)
    names: List[str] = field(default_factory=list)
    comment: str = ""


@dataclass
class Step:
    """An extra computation around a leaf layer (Gluon ``Dense`` flattening, a fused activation):
    ``module`` is its ``nn.Module`` form (inside ``nn.Sequential``), ``expr`` its functional form
    (``"torch.flatten({x}, 1)"``) for a generated ``forward``."""
    module: Optional[Call]
    expr: str
    comment: str = ""


@dataclass
class Leaf:
    """The torch translation of one Gluon layer.

    ``ctor`` builds the weight-owning torch module; ``params`` maps each Gluon parameter name of
    the block to the torch ``state_dict`` name inside that module (``{"gamma": "weight"}``);
    ``pre`` / ``post`` are steps applied before / after it; ``call`` is the torch call expression
    (``"{m}({args})"`` by default; an LSTM uses ``"{m}({args})[0]"`` when Gluon returns the
    output only); ``buffers`` are extra torch buffers with their values (``num_batches_tracked``).
    ``helpers`` are source texts written once at the top of the generated file (the class a
    user's translation constructs). ``same_output`` says whether the torch module's own output equals the Gluon block's (used to
    locate the first divergent layer)."""
    ctor: Call
    params: Dict[str, str] = field(default_factory=dict)
    pre: List[Step] = field(default_factory=list)
    post: List[Step] = field(default_factory=list)
    call: str = "{m}({args})"
    call_comment: str = ""
    buffers: Dict[str, Any] = field(default_factory=dict)
    helpers: List[str] = field(default_factory=list)

    @property
    def same_output(self) -> bool:
        return not self.pre and not self.post and self.call == "{m}({args})"


_BLOCKS: Dict[Any, Callable] = {}


def register_translation(target: Union[str, type], fn: Optional[Callable] = None, *, replace: bool = False):
    """Register ``fn`` as the translation of an MXNet op (``target`` a str such as ``"erf"``) or of
    a Gluon block class (``target`` the class: its instances become leaf layers). Usable as a
    decorator: ``@register_translation("erf")``. An op that already has a translation (built in or
    registered before) is only replaced with ``replace=True``; an op the registry refuses takes it
    as it is."""
    def deco(f):
        if isinstance(target, str):
            try:
                register_user(target, f, replace=replace)
            except ValueError as e:
                raise ValueError(f"register_translation: {e}") from None
        elif isinstance(target, type):
            _BLOCKS[target] = f
        else:
            raise TypeError(f"register_translation: target must be an op name (str) or a Gluon block "
                            f"class, got {type(target).__name__}")
        return f
    return deco(fn) if fn is not None else deco


def unregister_translation(target: Union[str, type]) -> None:
    """Remove a translation registered with :func:`register_translation` (the built-in one it
    replaced, if any, is back)."""
    if isinstance(target, str):
        try:
            unregister_user(target)
        except ValueError as e:
            raise ValueError(f"unregister_translation: {e}") from None
    else:
        _BLOCKS.pop(target, None)


def block_translation(block: Any) -> Optional[Callable]:
    for cls in type(block).__mro__:
        if cls in _BLOCKS:
            return _BLOCKS[cls]
    return None
