"""Text from a Gluon model made safe to put in the generated Python file (issue 32): the file is
code users import, so a name, class path or value from the model must never end a comment, a
docstring or a literal early (a child named ``"a\\nimport os"`` would otherwise become a statement
that runs on import).

- :func:`comment` and :func:`docstring_text`: one line of printable ASCII; every other character
  (newlines, other line breaks, control and non-ASCII characters) is written as its Python escape,
  and a docstring's quotes and backslashes are escaped;
- :func:`literal`: Python source of a number or plain value; infinities and NaN (whose ``repr``
  is the undefined name ``inf``/``nan``) as ``float("inf")``, ``float("-inf")``, ``float("nan")``."""
from __future__ import annotations

import math
from typing import Any

__all__ = ["comment", "docstring_text", "literal"]


def comment(text: str) -> str:
    """``text`` for after a ``#``: a single line of printable ASCII."""
    return ascii(str(text))[1:-1]


def docstring_text(text: str) -> str:
    """``text`` for inside a triple-quoted docstring: one line, no quote or backslash that could
    end it or escape its end."""
    return comment(text).replace("\\", "\\\\").replace('"', '\\"')


def literal(v: Any) -> str:
    """Python source that evaluates to ``v`` (numbers, strings, None, bools and tuples/lists of them)."""
    if isinstance(v, float) and not math.isfinite(v):
        return 'float("nan")' if math.isnan(v) else ('float("inf")' if v > 0 else 'float("-inf")')
    if isinstance(v, tuple):
        inner = ", ".join(literal(i) for i in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(literal(i) for i in v) + "]"
    return repr(v)
