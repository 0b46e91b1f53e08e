"""Source text for the generated PyTorch file: Python identifiers from Gluon names (escaped,
CamelCase for classes), attribute paths (``self.body[0].conv``) and constructor calls rendered as
source, with numeric literals replaceable by constructor-argument names (``Call``/``Ref`` trees).
"""
from __future__ import annotations

import builtins
import hashlib
import keyword
import re
from typing import Any, Dict, Iterable, Set

from .registry import Call
from .safe import comment as safe_comment, literal

__all__ = ["Ref", "MODULE_NAMES", "FILE_NAMES", "attr_path", "camel", "collect_refs", "defined_names",
           "free_name", "ident", "is_number", "join_path", "render_args", "render_call", "statement"]

# Names the generated file itself uses at module level: a class, helper or local of the same name
# would shadow them (a class named F breaks every F.relu in the file).
MODULE_NAMES = frozenset({"torch", "nn", "F", "Concurrent", "__debug__"}) | frozenset(keyword.kwlist) | \
    frozenset(n for n in dir(builtins) if not n.startswith("_"))
#: what a generated forward's locals and arguments never shadow: the file's imports and ``self``
FILE_NAMES = frozenset({"torch", "F", "nn", "self"})
_ATTR_RESERVED = frozenset({"torch", "nn", "F", "self", "super", "__debug__"}) | frozenset(keyword.kwlist)


def _module_attrs() -> frozenset:
    """Every name ``nn.Module`` defines (methods like forward/to/cuda, and the instance state
    training/_modules/...): a child attribute of that name would shadow it or be shadowed."""
    global _MODULE_ATTRS
    if _MODULE_ATTRS is None:
        try:
            from torch import nn
            _MODULE_ATTRS = frozenset(dir(nn.Module)) | frozenset(vars(nn.Module()))
        except Exception:    # torch missing: the names every torch 2.x Module has
            _MODULE_ATTRS = frozenset({"forward", "to", "training", "cuda", "cpu", "eval", "train", "parameters",
                                       "state_dict", "load_state_dict", "modules", "children", "apply", "half",
                                       "float", "double", "type", "zero_grad", "buffers", "register_buffer",
                                       "_modules", "_parameters", "_buffers"})
    return _MODULE_ATTRS


_MODULE_ATTRS = None


def _tag(name: str) -> str:
    return hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:4]


def ident(name: str) -> str:
    """A Python identifier for a Gluon name, safe as an attribute of an ``nn.Module`` and as a
    local or argument name: ASCII letters, digits and ``_`` only (Python would NFKC-normalise
    ``\ufb01`` to ``fi`` in source but not in ``state_dict`` keys); a name that had other characters
    than letters, digits, ``_`` and ``.`` gets a short hash of the original so ``a-b`` and ``a_b``
    stay two names (a call path ``enc.0`` becomes ``enc_0``; a child named ``a.b`` beside ``a_b`` is
    refused by translate with a clear error); keywords, ``__debug__``,
    ``torch``/``nn``/``F``/``self`` and ``nn.Module``'s own attributes (``forward``, ``to``,
    ``training``) get a trailing ``_``; a leading digit or ``__`` (name mangling) gets ``m``/``m_``."""
    name = str(name)
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    if (s != name and s != name.replace(".", "_")) or not s:    # "enc.0" (a call path) stays enc_0
        s = f"{s}_{_tag(name)}" if s.strip("_") else f"m_{_tag(name)}"
    if s[0].isdigit():
        s = "m_" + s
    elif s.startswith("__"):
        s = "m" + s
    if s in _ATTR_RESERVED or s in _module_attrs():
        s += "_"
    return s


def camel(name: str) -> str:
    """A CamelCase ASCII class name that shadows nothing the generated file uses (``F``,
    ``Concurrent``, builtins such as ``NotImplementedError``, keywords)."""
    parts = re.split(r"[^0-9A-Za-z]+", str(name))
    s = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Translated"
    if s[0].isdigit():
        s = "M" + s
    return free_name(s, ())


def free_name(base: str, taken: Iterable[str]) -> str:
    """``base`` with ``_`` appended until it is neither in ``taken`` nor in :data:`MODULE_NAMES`."""
    taken = set(taken)
    s = base
    while s in taken or s in MODULE_NAMES:
        s += "_"
    return s


def defined_names(sources: Iterable[str]) -> Set[str]:
    """The module-level names that helper sources define (``class X``/``def f``/``X = ...``)."""
    out: Set[str] = set()
    for src in sources:
        out.update(re.findall(r"^(?:class|def)\s+([A-Za-z_]\w*)", src, flags=re.M))
        out.update(re.findall(r"^([A-Za-z_]\w*)\s*=", src, flags=re.M))
    return out


def join_path(a: str, b: str) -> str:
    return f"{a}.{b}" if a else b


def attr_path(key: str) -> str:
    """``self.a[0].b`` for the torch module key ``a.0.b``."""
    out = "self"
    for part in key.split("."):
        out += f"[{part}]" if part.isascii() and part.isdigit() else f".{part}"
    return out


class Ref(Call):
    """A constructor call of a translated class, filled in once its class variant is known."""
    block: Any = None


def collect_refs(v):
    if isinstance(v, Ref):
        yield v
    if isinstance(v, Call):
        for a in list(v.args) + [a for _, a in v.kwargs]:
            yield from collect_refs(a)


def is_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return isinstance(v, tuple) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v)



def render_call(call: Call, indent: int, names: Dict[int, str], counter, skeleton=False, seen=None,
            notes=None) -> str:
    """Source of a constructor call; numeric literal number i becomes names[i] where given. The
    call's own comment is appended to ``notes`` where given (the caller writes it after the whole
    statement: a value may land inside another call, ``self.add_module('0', <value>)``), else
    after the text."""
    state = {"i": 0} if counter is None else None

    def lit(v):
        if skeleton:
            return "#"
        idx = counter[0] if counter is not None else state["i"]
        if counter is not None:
            counter[0] += 1
        else:
            state["i"] += 1
        return names.get(idx, literal(v))

    def val(v, ind):
        if isinstance(v, Call):
            return one(v, ind)
        if is_number(v):
            return lit(v)
        return literal(v)

    def one(c: Call, ind: int) -> str:
        nested = any(isinstance(a, Call) for a in c.args)
        if not nested:
            parts = [val(a, ind) for a in c.args] + [f"{k}={val(a, ind)}" for k, a in c.kwargs]
            return f"{c.fn}({', '.join(parts)})"
        pad = " " * (ind + 4)
        rows = []
        for a in c.args:
            text = val(a, ind + 4)
            comment = a.comment if isinstance(a, Call) else ""
            if comment and seen is not None and comment not in seen:
                seen.add(comment)
                rows.append(f"{pad}{text},  # {safe_comment(comment)}")
            else:
                rows.append(f"{pad}{text},")
        rows += [f"{pad}{k}={val(a, ind + 4)}," for k, a in c.kwargs]
        return f"{c.fn}(\n" + "\n".join(rows) + f"\n{' ' * ind})"

    text = one(call, indent)
    if call.comment and seen is not None and call.comment not in seen and "\n" not in text:
        seen.add(call.comment)
        if notes is not None:
            notes.append(call.comment)
        else:
            text += f"  # {safe_comment(call.comment)}"
    return text


def statement(code: str, notes=()) -> str:
    """A complete statement with its comments after it (one line; a multi-line statement keeps
    its comments inside, on the lines of its arguments)."""
    notes = [n for n in notes if n]
    if not notes or "\n" in code:
        return code
    return f"{code}  # {safe_comment('; '.join(notes))}"


def render_args(call: Call, indent: int) -> str:
    text = render_call(call, indent, {}, None, seen=set(), notes=[])    # no comment inside the parentheses
    return text[len(call.fn) + 1:-1]
