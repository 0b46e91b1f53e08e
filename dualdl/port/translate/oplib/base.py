"""The one op registry: every MXNet operator name with all its facts in one entry (JAX's "all
facts beside the op", onnx2torch's one decorator): its torch translation, whether MXNet computes
it in float32 (the proof needs that), or why it is refused, or why it is not part of a forward.

A translation is ``fn(args, attrs, node) -> Expr | str`` for built-in and user ones alike:
``args`` are the torch expressions of the op's inputs (:class:`Expr`, a ``str``), ``attrs`` the
MXNet attributes as the symbol stores them (strings), ``node`` the :class:`OpNode`
(``node.in_shapes``, ``node.out_shapes``). A returned plain ``str`` is taken as a
non-atomic expression (parenthesised when nested)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import TranslationError
from ..gate import parse_attr
from ..safe import literal

__all__ = ["Expr", "OpNode", "OpEntry", "NeedsName", "op", "refuse", "inapplicable", "lookup", "entries",
           "register_user", "unregister_user", "family", "translate_op", "parse_attr", "unsupported",
           "num", "f32", "ndim", "DEVICE", "bind_device"]


class Expr(str):
    """A torch expression (its text is the string itself); ``atomic`` is False for binary operations
    (parenthesised when nested); ``helpers``: source of functions the expression calls, written
    once into the file."""

    def __new__(cls, text: str, atomic: bool = True, helpers: Tuple[str, ...] = ()):
        self = super().__new__(cls, str.__str__(text))
        self.atomic, self.helpers = atomic, tuple(helpers)
        return self

    @property
    def text(self) -> str:
        return str.__str__(self)

    def p(self) -> str:
        return self.text if self.atomic else f"({self.text})"

    def __repr__(self) -> str:
        return f"Expr({self.text!r}, atomic={self.atomic})"


@dataclass
class OpNode:
    op: str
    name: str
    attrs: Dict[str, str]
    in_shapes: List[Optional[Tuple[int, ...]]] = field(default_factory=list)
    out_shapes: List[Optional[Tuple[int, ...]]] = field(default_factory=list)
    block: str = ""
    path: str = ""


Translation = Callable[[Sequence[Expr], Dict[str, str], OpNode], Any]


@dataclass(frozen=True)
class OpEntry:
    """One MXNet operator name and its facts. ``status`` is ``"translated"``, ``"refused"``
    (``reason`` says why and what to do) or ``"not applicable"`` (``reason`` says what it is:
    an optimizer update, I/O...). ``float32_only``: MXNet 1.9.1 refuses float64 on CPU for it;
    ``float32_internal``: it takes float64 but computes in float32 (the proof judges it by
    float32 rounding). ``torch`` is the torch form for the docs; ``user`` marks a registration
    of the user's (``replaces``: the built-in entry it replaced)."""
    name: str
    translate: Optional[Translation] = None
    reason: str = ""
    applicable: bool = True
    float32_only: bool = False
    float32_internal: bool = False
    float32_note: str = ""
    torch: str = ""
    n_outputs: Optional[Callable[[Dict[str, str]], int]] = None
    user: bool = False
    replaces: Optional["OpEntry"] = None

    @property
    def status(self) -> str:
        if self.translate is not None:
            return "translated"
        return "refused" if self.applicable else "not applicable"

    @property
    def family(self) -> str:
        return family(self.name)


_REGISTRY: Dict[str, OpEntry] = {}


def family(name: str) -> str:
    """Which interface an MXNet op name belongs to: ``numpy`` (``_np_``/``_npi_``/``_npx_``: what
    ``mx.np``/``mx.npx`` code records), ``contrib`` (``_contrib_``), ``sparse`` (``_sparse_``: the
    storage-typed API's names) or ``legacy`` (``mx.nd``/``mx.sym``)."""
    if name.startswith(("_np_", "_npi_", "_npx_")):
        return "numpy"
    if name.startswith("_contrib_"):
        return "contrib"
    if name.startswith("_sparse_"):
        return "sparse"
    return "legacy"


def _add(entry: OpEntry, replace: bool = False) -> None:
    old = _REGISTRY.get(entry.name)
    if old is not None and not replace:
        raise ValueError(f"MXNet op {entry.name!r} is registered twice ({old.status} already): "
                         f"pass replace=True to replace it")
    _REGISTRY[entry.name] = entry


def op(*names: str, float32_only: bool = False, float32_internal: bool = False, float32_note: str = "",
       torch: str = "", n_outputs: Optional[Callable[[Dict[str, str]], int]] = None
       ) -> Callable[[Translation], Translation]:
    """Decorator: ``fn`` is the built-in translation of the MXNet ops ``names`` (aliases share it);
    ``float32_note`` says what was measured for a float32 fact. A name registered twice is refused."""
    def deco(fn: Translation) -> Translation:
        form = torch or getattr(fn, "torch_form", "") or (fn.__doc__ or "").strip().split("\n")[0]
        for n in names:
            _add(OpEntry(n, translate=fn, float32_only=float32_only, float32_internal=float32_internal,
                         float32_note=float32_note, torch=form, n_outputs=n_outputs))
        return fn
    return deco


def refuse(reason: str, *names: str, float32_only: bool = False) -> None:
    """The MXNet ops ``names`` are refused: ``reason`` says why (what torch or this translator lacks)
    and what to do instead."""
    for n in names:
        _add(OpEntry(n, reason=reason, float32_only=float32_only))


def inapplicable(reason: str, *names: str) -> None:
    """The MXNet ops ``names`` are no part of a model's forward (optimizer updates, I/O, image
    augmentation, graph plumbing...): ``reason`` says what they are."""
    for n in names:
        _add(OpEntry(n, reason=reason, applicable=False))


def lookup(name: str) -> Optional[OpEntry]:
    """The registry's entry for the MXNet op ``name`` (``"relu"``, ``"_npi_add"``, ...), or None when
    MXNet 1.9.1 registers no such op. The same entry serves a graph node's op and the
    ``mx.nd.<name>`` / ``F.<name>`` call that records it."""
    return _REGISTRY.get(name)


def entries() -> Iterator[OpEntry]:
    """Every entry, sorted by name."""
    return iter(sorted(_REGISTRY.values(), key=lambda e: e.name))


def register_user(name: str, fn: Translation, replace: bool = False) -> None:
    """A user's translation for ``name``. A built-in translation is only replaced with
    ``replace=True``; a refused or unknown op (or one not applicable) takes it as it is."""
    old = _REGISTRY.get(name)
    if old is not None and old.translate is not None and not replace:
        raise ValueError(f"MXNet op {name!r} already has a {'user' if old.user else 'built-in'} translation "
                         f"({old.torch or 'see docs/translate-ops.md'}): pass replace=True to replace it")
    _REGISTRY[name] = OpEntry(name, translate=fn, float32_only=old.float32_only if old else False,
                              float32_internal=old.float32_internal if old else False,
                              float32_note=old.float32_note if old else "", user=True, replaces=old,
                              n_outputs=old.n_outputs if old else None, torch="user translation")


def unregister_user(name: str) -> None:
    """Remove the user's translation of ``name``: the entry it replaced (if any) is back."""
    e = _REGISTRY.get(name)
    if e is None or not e.user:
        raise ValueError(f"MXNet op {name!r} has no user translation to remove")
    if e.replaces is None:
        del _REGISTRY[name]
    else:
        _REGISTRY[name] = e.replaces


def translate_op(node: OpNode, args: List[Expr]) -> Expr:
    """The torch expression of one MXNet op node, from its registry entry."""
    e = _REGISTRY.get(node.op)
    if e is None:
        raise unsupported(node, repr(node.op))
    if e.translate is None:
        what = "cannot be translated" if e.applicable else "is not part of a forward dualdl translates"
        raise TranslationError(f"MXNet op {node.op!r} {what}: {e.reason}", op=node.op, block=node.block, path=node.path)
    args = [a if isinstance(a, Expr) else Expr(str(a)) for a in args]
    out = e.translate(args, node.attrs, node)
    return out if isinstance(out, Expr) else Expr(str(out), atomic=False)


def n_outputs_of(name: str, attrs: Dict[str, str]) -> int:
    """How many outputs an MXNet op node has (SliceChannel/split, topk ret_typ='both', ...)."""
    e = _REGISTRY.get(name)
    return int(e.n_outputs(attrs)) if e is not None and e.n_outputs is not None else 1


# ----- helpers the family modules share ---------------------------------------------------------

class NeedsName(Exception):
    """The translation refers to its input several times: bind the input to a variable first."""


def unsupported(node: OpNode, what: str) -> TranslationError:
    return TranslationError(f"MXNet op {what} has no torch translation", op=node.op, block=node.block,
                            path=node.path)


def num(v: str) -> str:
    """A numeric attribute as source: an integer stays an integer."""
    f = float(v)
    return repr(int(f)) if f.is_integer() and "." not in v and "e" not in v.lower() else literal(f)


def f32(v: str) -> str:
    """An attribute MXNet keeps as a C++ float (eps, slope): the float32 value it computes with."""
    import numpy as np
    f = float(np.float32(float(v)))
    return repr(int(f)) if f.is_integer() and abs(f) < 2 ** 53 else literal(f)


def ndim(node: OpNode, i: int = 0) -> int:
    s = node.in_shapes[i] if node.in_shapes and i < len(node.in_shapes) else None
    if s is None:
        raise unsupported(node, f"{node.op} on an input of unknown rank")
    return len(s)


# An op that creates a tensor from nothing (arange, zeros) writes ``device=`` this token; the
# forward writer replaces it with a variable holding its first input's device (a generated module
# moved to a GPU then creates them there). NUL bytes: no name or value from a model can contain it.
DEVICE = "\x00device\x00"


def bind_device(lines: List[str], sources: Sequence[str], fresh: Callable[[str], str]) -> List[str]:
    """``lines`` of a forward with :data:`DEVICE` replaced by a variable holding the device of the
    first of ``sources`` (the forward's input expressions): MXNet creates such a tensor on the
    context of the graph; torch needs ``device=`` or creates it on the CPU."""
    if not any(DEVICE in ln for ln in lines):
        return lines
    name, text = fresh("device"), "\n".join(lines).replace(DEVICE, "") + " " + " ".join(sources)
    while re.search(rf"\b{name}\b(?!=)", text):      # a name the forward already uses (not the keyword device=)
        name += "_"
    src = f"{sources[0]}.device" if sources else "None"
    return [f"{name} = {src}"] + [ln.replace(DEVICE, name) for ln in lines]
