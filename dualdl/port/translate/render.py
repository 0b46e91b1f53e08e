"""Source text for the generated PyTorch file: Python identifiers from Gluon names (escaped,
CamelCase for classes), attribute paths (``self.body[0].conv``) and constructor calls rendered as
source, with numeric literals replaceable by constructor-argument names (``Call``/``Ref`` trees).
"""
from __future__ import annotations

import keyword
import re
from typing import Any, Dict

from .registry import Call
from .safe import comment as safe_comment, literal

__all__ = ["Ref"]


def _ident(name: str) -> str:
    s = re.sub(r"\W", "_", name)
    if not s or s[0].isdigit():
        s = "m_" + s
    return s + "_" if keyword.iskeyword(s) else s


def _camel(name: str) -> str:
    parts = re.split(r"[^0-9A-Za-z]+", name)
    s = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return _ident(s or "Translated")


def _join(a: str, b: str) -> str:
    return f"{a}.{b}" if a else b


def _attr_path(key: str) -> str:
    out = "self"
    for part in key.split("."):
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


class Ref(Call):
    """A constructor call of a translated class, filled in once its class variant is known."""
    block: Any = None


def _refs(v):
    if isinstance(v, Ref):
        yield v
    if isinstance(v, Call):
        for a in list(v.args) + [a for _, a in v.kwargs]:
            yield from _refs(a)


def _with_comment(call: Call, comment: str) -> Call:
    return Call(call.fn, list(call.args), list(call.kwargs), list(call.names), comment or call.comment)


def _is_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return isinstance(v, tuple) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v)



def _render(call: Call, indent: int, names: Dict[int, str], counter, skeleton=False, seen=None) -> str:
    """Source of a constructor call; numeric literal number i becomes names[i] where given."""
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
        if _is_number(v):
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
        text += f"  # {safe_comment(call.comment)}"
    return text


def _render_args(call: Call, indent: int) -> str:
    text = _render(call, indent, {}, None, seen=set())
    return text[len(call.fn) + 1:-1]
