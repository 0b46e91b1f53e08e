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

__all__ = ["check_source", "comment", "docstring_text", "literal"]


def comment(text: str) -> str:
    """``text`` for after a ``#``: a single line of printable ASCII (written by ``str``'s own
    ``repr``: a ``str`` subclass from the model cannot choose its text)."""
    return str.__repr__(str.__str__(str(text))).encode("ascii", "backslashreplace").decode("ascii")[1:-1]


def docstring_text(text: str) -> str:
    """``text`` for inside a triple-quoted docstring: one line, no quote or backslash that could
    end it or escape its end."""
    return comment(text).replace("\\", "\\\\").replace('"', '\\"')


def literal(v: Any) -> str:
    """Python source that evaluates to ``v``: None, bools, numbers (numpy scalars included), strings,
    bytes, and tuples/lists/dicts of them. Written by the built-in types' own ``repr`` (a ``str``
    subclass or an object from the model cannot choose its own text); infinities and NaN as
    ``float("inf")``...; any other value is refused with a ``TranslationError``."""
    import numbers
    if v is None:
        return "None"
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return "True" if bool(v) else "False"
    if isinstance(v, numbers.Integral):
        return int.__repr__(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if not math.isfinite(f):
            return 'float("nan")' if math.isnan(f) else ('float("inf")' if f > 0 else 'float("-inf")')
        return float.__repr__(f)
    if isinstance(v, str):     # str's own repr, non-ASCII escaped (as ascii() would, without a subclass's say)
        return str.__repr__(str.__str__(v)).encode("ascii", "backslashreplace").decode("ascii")
    if isinstance(v, bytes):
        return bytes.__repr__(bytes(v))
    if isinstance(v, tuple):
        inner = ", ".join(literal(i) for i in tuple.__iter__(v))
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(literal(i) for i in list.__iter__(v)) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(x)}" for k, x in dict.items(v)) + "}"
    from .errors import TranslationError
    raise TranslationError(f"a value of type {type(v).__name__} cannot be written into the generated source "
                           f"(only numbers, strings, None, bools and tuples/lists/dicts of them)")


_FRAMEWORK = frozenset({"torch", "nn", "F"})
_BUILTINS = frozenset(dir(__import__("builtins")))
_NOT_IMPORTED = frozenset({"mxnet", "dualdl", "dualdl_torch", "gluoncv", "gluonnlp"})


def check_source(source: str, filename: str = "<generated>") -> None:
    """Refuse generated source that is not what translate means to write: it must compile, hold
    only its docstring, imports and definitions at module level (nothing else runs on import),
    define each module-level name once, never rebind ``torch``/``nn``/``F`` (as a class,
    function, argument or local), and never call a name its function also binds as a local (a
    local ``float`` or one named like a helper function shadows it), and import neither mxnet nor
    dualdl (nor gluoncv/gluonnlp). Raises ``TranslationError``
    naming the problem."""
    import ast
    from .errors import TranslationError

    def bad(what: str) -> TranslationError:
        return TranslationError(f"translate wrote source that it refuses to save ({what}); this is a "
                                f"bug in dualdl translate: please report it with the model's class")
    try:
        tree = ast.parse(source, filename)
        compile(tree, filename, "exec")
    except (SyntaxError, ValueError) as e:
        raise bad(f"{type(e).__name__}: {comment(e)}") from None
    names = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Import):
            names += [a.asname or a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [a.asname or a.name for a in node.names]
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            raise bad(f"a {type(node).__name__} statement at module level, line {node.lineno}")
    for node in ast.walk(tree):
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        banned = [m for m in mods if m.split(".")[0] in _NOT_IMPORTED]
        if banned:
            raise bad(f"it imports {banned[0]}; generated code needs torch only")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise bad(f"{', '.join(twice)} defined twice at module level")
    for node in ast.walk(tree):
        bound = []
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            a = node.args
            bound = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + \
                [x.arg for x in (a.vararg, a.kwarg) if x is not None]
            if len(bound) != len(set(bound)):
                raise bad(f"an argument listed twice in {getattr(node, 'name', 'a lambda')}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound = [node.id]
        elif isinstance(node, ast.ClassDef) and node not in tree.body:
            bound = [node.name]
        shadow = _FRAMEWORK.intersection(bound)
        if shadow:
            raise bad(f"{', '.join(sorted(shadow))} rebound at line {node.lineno}")
    top_names = set(names)
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        # a local that a call in the same function means as a helper or builtin (a child named
        # `float` or like a helper function would turn `float("inf")` into a call of a tensor)
        a = fn.args
        local = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | \
            {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        called = {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        both = sorted(local & called & (top_names | _BUILTINS))
        if both:
            raise bad(f"{', '.join(both)} is both a local of {fn.name} (line {fn.lineno}) and a function it calls")
    from .allowlist import check_tree
    check_tree(tree, bad)     # every node of every body: only what translate's emitter writes
