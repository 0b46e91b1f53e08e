"""The gate between a model file and the generated source (issue 41): an MXNet symbol stores every
attribute as text, and MXNet keeps *any* ``__name__``-style attribute a file gives a node, so an op
translation that formats an attribute into ``forward`` would write whatever the file says. Every
attribute an op translation reads passes :func:`attr_text` first: it must parse as a typed value —
a number (``inf``/``nan`` included), a bool, ``None``, a tuple/list of them, or an option name
(``relu``, ``float32``, ``NCHW``, ``ij,jk->ik``) — and anything else (quotes, brackets, calls,
``__``) is refused with a ``TranslationError`` naming the node and the attribute. :func:`attr_value`
is the one parser of attribute text: :class:`Attrs` judges with it, and op translations read values
with :func:`parse_attr`, which is it (no other ``literal_eval`` of model text in translate)."""
from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any, Dict, Iterator, Optional

__all__ = ["Attrs", "attr_text", "attr_value", "parse_attr", "probability"]

#: an option name: letters, digits and ``_ . , : - >`` only (no quote, bracket, space, ``=`` or ``#``)
_WORD = re.compile(r"[A-Za-z0-9_.,:>\-]*\Z")
_MAX = 4096          # characters: the longest shape or option text a real export holds is far shorter
#: the MXNet bookkeeping attributes an op translation reads (others, like ``__profiler_scope__``, are
#: never an op's argument and are not shown to translations)
_KNOWN_DUNDER = frozenset({"__dualdl_dims__"})


def _typed(v: Any, depth: int = 0) -> bool:
    if depth > 8:
        return False
    if v is None or isinstance(v, (bool, int, float)):
        return type(v) in (type(None), bool, int, float)
    if type(v) is str:
        return bool(_WORD.match(v)) and "__" not in v
    if type(v) in (tuple, list):
        return all(_typed(i, depth + 1) for i in v)
    return False


def attr_value(text: str) -> Any:
    """The typed value of one attribute text; ``ValueError`` saying why when it is none of a number,
    bool, None, tuple/list of them or an option name."""
    if type(text) is not str:
        raise ValueError(f"a {type(text).__name__}, not text")
    if len(text) > _MAX:
        raise ValueError(f"{len(text)} characters long")
    s = text.strip()
    if s in ("True", "true"):
        return True
    if s in ("False", "false"):
        return False
    if s == "None":
        return None
    try:
        f = float(s)
    except ValueError:
        pass
    else:
        if re.fullmatch(r"[+-]?\d+", s):
            return int(s)
        return f
    if s[:1] in "([":
        try:
            v = ast.literal_eval(s)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise ValueError("not a tuple or list of numbers") from None
        if not _typed(v):
            raise ValueError("a tuple or list holding something other than numbers, None or option names")
        return v
    if _WORD.match(s) and "__" not in s:
        return s
    raise ValueError("not a number, a tuple of numbers or an option name")


def _refused(text: Any, why: ValueError, where: str):
    from .errors import TranslationError
    return TranslationError(f"{where}{ascii(str.__str__(text) if isinstance(text, str) else type(text).__name__)[:60]}"
                            f" is {why}; translate reads only such values from a model file (was it edited by hand "
                            f"or by another tool? export it again from the Gluon model)")


def attr_text(text: str, op: str, node: str, key: str) -> str:
    """``text`` once it is known to be a typed attribute value (see :func:`attr_value`)."""
    try:
        attr_value(text)
    except ValueError as e:
        from .safe import comment
        raise _refused(text, e, f"MXNet {comment(op)} node {ascii(str(node))[1:-1]!r}: its attribute "
                                f"{ascii(str(key))[1:-1]!r} = ") from None
    return text


def parse_attr(text: Optional[str], default: Any = None) -> Any:
    """The value of one attribute as op translations read it (``default`` when it is absent): the
    value :func:`attr_value` parses, so a number, bool, None, tuple/list of them or an option name;
    any other text (code, deep nesting, a ``str`` subclass) is a one-line ``TranslationError``."""
    if text is None:
        return default
    try:
        return attr_value(text)
    except ValueError as e:
        raise _refused(text, e, "an MXNet attribute = ") from None


class Attrs(Mapping):
    """An op node's attributes as op translations read them: every value passes :func:`attr_text`
    when it is read (an attribute nobody reads is never judged); read-only."""

    def __init__(self, raw: Dict[str, str], op: str, node: str):
        self._raw = {str(k): v for k, v in dict(raw or {}).items()}
        self._op, self._node = str(op), str(node)

    def __getitem__(self, key: str) -> str:
        return attr_text(self._raw[key], self._op, self._node, key)

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._raw if not (k.startswith("__") and k.endswith("__")) or k in _KNOWN_DUNDER)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key) -> bool:
        return key in self._raw and (key in _KNOWN_DUNDER or not (str(key).startswith("__") and str(key).endswith("__")))

    def __repr__(self) -> str:
        return f"Attrs({self._op} {self._node!r}: {sorted(self._raw)})"

    @property
    def raw(self) -> Dict[str, str]:
        """The attribute texts as the file holds them (for MXNet itself, never for the source)."""
        return dict(self._raw)


def probability(value, what: str) -> float:
    """A dropout rate as a float in [0, 1]: MXNet's own range check lets ``nan`` through (every
    comparison with it is false), and torch's layer then raises at construction."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        p = float("nan")
    if not 0.0 <= p <= 1.0:
        from .errors import TranslationError
        raise TranslationError(f"{what}: dropout rate {ascii(str(value))[1:-1][:40]} is not a probability in "
                               f"[0, 1]; set a rate in the model (or export it again) before translating")
    return p
