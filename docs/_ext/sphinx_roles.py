"""A griffe extension for the API reference (mkdocs.yml): dualdl's docstrings use Sphinx roles
(``:class:`Device```, ``:func:`~dualdl.use```, ``:math:`x^2```), which Markdown shows as raw text.
Each role becomes inline code with the name a reader types (``~a.b.C`` -> ``C``)."""
from __future__ import annotations

import re
from typing import Any

from griffe import Extension

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|exc|data|obj|const|math|ref|term):`([^`]+)`")


def _replace(m: re.Match) -> str:
    role, text = m.group(1), m.group(2)
    if role in ("ref", "term") and "<" in text:           # :ref:`title <target>` -> title
        text = text.split("<", 1)[0].strip()
    elif text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    if role in ("func", "meth") and not text.endswith(")"):
        text += "()"
    return f"`{text}`"


MATH = re.compile(r"^([ \t]*)\.\. math::[ \t]*\n((?:\1[ \t]+\S.*\n?|[ \t]*\n)+)", re.M)


def _math_block(m: re.Match) -> str:
    indent, body = m.group(1), m.group(2).rstrip()
    lines = [line for line in body.splitlines()]
    cut = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    code = "\n".join(indent + line[cut:] for line in lines)
    return f"{indent}```text\n{code}\n{indent}```\n\n"


# an argument's continuation indented 6 (torch's LeakyReLU) instead of the Google style's 8
CONTINUATION = re.compile(r"^(    \w[^\n]*:[^\n]*\n)      (?=\S)", re.M)


def convert(text: str) -> str:
    """``text`` with every Sphinx role written as Markdown inline code, every ``.. math::``
    directive as a code block, argument continuations indented as Google style reads them."""
    return ROLE.sub(_replace, MATH.sub(_math_block, CONTINUATION.sub(r"\1        ", text)))


class SphinxRoles(Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
