"""Source assembly for generated recipe files: definitions copied verbatim from torch-only
modules (``torch_src/``, ``dualdl_torch/gluon_optim.py``), literals written so that they
round-trip exactly (``repr`` of a float is exact; ``inf``/``nan`` are spelled ``float(...)``), and
a check that the file imports nothing but torch, numpy and the standard library."""
from __future__ import annotations

import ast
import importlib
from typing import Any, Dict, List, Sequence, Tuple

#: what a generated file may import: torch, numpy and these standard modules
ALLOWED_IMPORTS = {"torch", "numpy", "math", "struct", "random", "typing", "__future__"}


class RecipeError(ValueError):
    """A part of the Gluon training recipe has no torch-only translation (the message says which
    and what to do)."""


def lit(v: Any) -> str:
    """A Python literal for ``v`` that evaluates to an equal value (floats bit for bit), written by
    translate's one literal gate (``safe.literal``: the built-in types' own ``repr``, so a ``str``
    subclass from the user's objects, an ``mx.metric.Accuracy(axis=...)`` or a scheduler's
    ``warmup_mode``, cannot choose its text); an array is written as its ``tolist()``."""
    from ..translate.errors import TranslationError
    from ..translate.safe import literal
    try:
        return literal(v)
    except TranslationError:
        pass
    if hasattr(type(v), "tolist") and hasattr(v, "shape"):
        try:
            return literal(v.tolist())
        except TranslationError:
            pass
    raise RecipeError(f"cannot write a {type(v).__name__} value into the generated file (only numbers, "
                      f"strings, None, bools and tuples/lists/dicts of them)")


def pretty(v: Any, indent: int = 0, width: int = 99) -> str:
    """``lit(v)``, broken over lines (one item per line) where it would pass ``width``."""
    flat = lit(v)
    if indent + len(flat) <= width or not isinstance(v, (list, tuple, dict)) or not v:
        return flat
    pad = " " * (indent + 4)
    if isinstance(v, dict):
        items = [f"{pad}{lit(k)}: {pretty(x, indent + 4 + len(lit(k)) + 2, width)}"
                 for k, x in v.items()]
        return "{\n" + ",\n".join(items) + ",\n" + " " * indent + "}"
    if all(isinstance(x, str) for x in v):  # names: fill lines
        lines, cur = [], pad
        for x in v:
            piece = lit(x) + ", "
            if len(cur) + len(piece) > width and cur.strip():
                lines.append(cur.rstrip())
                cur = pad
            cur += piece
        lines.append(cur.rstrip())
        body = "\n".join(lines)
    else:
        body = ",\n".join(pad + pretty(x, indent + 4, width) for x in v) + ","
    o, c = ("(", ")") if isinstance(v, tuple) else ("[", "]")
    return o + "\n" + body + "\n" + " " * indent + c


def call_src(fn: str, args: Sequence[str], kw: Dict[str, Any], indent: int = 4) -> str:
    """``fn(args..., k=v, ...)`` on one line, or one argument per line when too long."""
    parts = list(args) + [f"{k}={lit(v)}" for k, v in kw.items()]
    flat = f"{fn}({', '.join(parts)})"
    if indent + 7 + len(flat) <= 99:
        return flat
    pad = " " * (indent + 4)
    parts = list(args) + [f"{k}={pretty(v, indent + 4)}" for k, v in kw.items()]
    return f"{fn}(\n" + "".join(f"{pad}{p},\n" for p in parts) + " " * indent + ")"


_PARSED: Dict[str, Tuple[List[str], Dict[str, str]]] = {}


def _parse(module: str) -> Tuple[List[str], Dict[str, str]]:
    """(import lines, top-level name -> source) of a torch-only module."""
    if module not in _PARSED:
        path = importlib.import_module(module).__file__
        with open(path) as f:
            text = f.read()
        tree = ast.parse(text)
        imports, defs = [], {}
        for node in tree.body:
            seg = ast.get_source_segment(text, node)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                    imports.append(seg)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                deco = "".join("@" + ast.get_source_segment(text, d) + "\n"
                               for d in node.decorator_list)
                defs[node.name] = deco + seg
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id != "__all__":
                        defs[t.id] = seg
        _PARSED[module] = (imports, defs)
    return _PARSED[module]


class SourceFile:
    """A generated file: header, imports, copied definitions (once each), then recipe code."""

    def __init__(self, title: str):
        self.title = title
        self.imports: List[str] = []
        self.defs: List[Tuple[str, str]] = []
        self.body: List[str] = []
        self.exports: List[str] = []

    def use(self, module: str, names: Sequence[str]) -> None:
        imports, defs = _parse(module)
        for line in imports:
            if line not in self.imports:
                self.imports.append(line)
        have = {n for n, _ in self.defs}
        for n in names:
            if n not in defs:
                raise KeyError(f"{module} defines no {n}")
            if n not in have:
                self.defs.append((n, defs[n]))
                have.add(n)

    def add(self, code: str, *exports: str) -> None:
        self.body.append(code.strip("\n"))
        self.exports.extend(exports)

    def text(self) -> str:
        out = [f'"""{self.title}\n\nGenerated by dualdl from a Gluon training recipe. It imports '
               f'torch (and numpy) only:\nno dualdl, no mxnet. Public names: '
               f'{", ".join(self.exports)}."""',
               "from __future__ import annotations", ""]
        out += _merge_imports(self.imports)
        out.append("")
        out += ["\n" + src + "\n" for _, src in self.defs]
        out += ["\n# " + "-" * 75 + " the recipe"]
        out += ["\n" + b + "\n" for b in self.body]
        out.append(f"\n__all__ = {lit(list(self.exports))}\n")
        src = "\n".join(out).replace("\n\n\n\n", "\n\n\n")
        check_recipe_source(src, [n for n, _ in self.defs])
        return src


def _merge_imports(lines: Sequence[str]) -> List[str]:
    """``import x`` lines, then one ``from m import a, b`` per module (names sorted)."""
    plain, froms = set(), {}
    for line in lines:
        for node in ast.parse(line).body:
            if isinstance(node, ast.Import):
                plain.update(f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
                             for a in node.names)
            else:
                froms.setdefault(node.module, set()).update(
                    a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
    return sorted(plain) + [f"from {m} import {', '.join(sorted(n))}"
                            for m, n in sorted(froms.items())]


def check_imports(src: str) -> None:
    """Refuse generated source that imports anything beyond torch/numpy/the stdlib listed."""
    for node in ast.walk(ast.parse(src)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        for n in names:
            if n.split(".")[0] not in ALLOWED_IMPORTS:
                raise RecipeError(f"generated recipe would import {n!r}; only "
                                  f"{sorted(ALLOWED_IMPORTS)} are allowed")


def check_recipe_source(src: str, copied: Sequence[str] = ()) -> None:
    """The last check of a generated recipe (translate's allow-list, ``allowlist.check_recipe_tree``):
    ``copied`` definitions are dualdl's own torch-only source; the recipe's own functions use only
    what the recipe writer writes, and its tables are literals."""
    from ..translate.allowlist import check_recipe_tree

    def bad(what: str) -> RecipeError:
        return RecipeError(f"dualdl wrote a recipe that it refuses to save ({what}); this is a bug in dualdl: "
                           f"please report it with the training script")
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        raise bad(f"SyntaxError: {e.msg} at line {e.lineno}") from None
    check_imports(src)
    check_recipe_tree(tree, set(copied), bad)
