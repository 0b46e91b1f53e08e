"""What a conversion changed, line by line, for :func:`dualdl.port.project.convert.convert_source`:
the lines converted automatically (original numbering), the ``# dualdl: TODO`` lines (converted
numbering) and the stand-ins for names that statements under TODO lines still use."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Dict, List, Set, Tuple

__all__ = ["FileResult"]


@dataclass
class FileResult:
    source: str
    lines: int                        # non-blank lines of the original
    api_lines: Set[int] = field(default_factory=set)     # lines naming a Gluon API
    converted: Set[int] = field(default_factory=set)
    todos: List[Tuple[int, str, str]] = field(default_factory=list)   # (line, api, why)

    @property
    def todo_lines(self) -> Set[int]:
        return {t[0] for t in self.todos}


def _stand_ins(res: FileResult, aliases: Dict[str, str]) -> FileResult:
    """A name of a removed mxnet/gluonnlp/gluoncv import that statements under TODO lines still
    use gets a stand-in after ``import gluon2torch as g2t`` (``mx = g2t.Unconverted('mxnet')``):
    the module imports (a module-level ``class It(mx.io.DataIter)`` in a helper the script never
    uses, as gluonnlp's bert/utils.py has), and a use fails in one line naming the API."""
    if not res.todos:
        return res
    try:
        tree = ast.parse(res.source)
    except SyntaxError:
        return res
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in aliases}
    bound = {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign, ast.For))
             for t in ast.walk(n.targets[0] if isinstance(n, ast.Assign) else n.target)
             if isinstance(t, ast.Name)}
    names = sorted(used - bound)
    anchor = "import gluon2torch as g2t\n"
    if not names or anchor not in res.source:
        return res
    add = "".join(f"{n} = g2t.Unconverted({aliases[n]!r})  # dualdl: for the lines left under "
                  f"TODO\n" for n in names)
    at = res.source.index(anchor) + len(anchor)
    shift = add.count("\n")
    before = res.source[:at].count("\n")
    res.source = res.source[:at] + add + res.source[at:]
    res.todos = [(ln + shift if ln > before else ln, a, w) for ln, a, w in res.todos]
    res.api_lines = {(-(-ln + shift) if ln < 0 and -ln > before else ln) for ln in res.api_lines}
    return res


def _account(text: str, module, new, top: Dict[int, Any], lines: int,
             todos: List[Tuple[str, str]]) -> FileResult:
    """Which lines changed (original line numbers: converted automatically) and where each TODO
    sits (converted-file line numbers of the statements under a ``# dualdl: TODO`` line), from
    the two texts, diffed statement by statement of the module's body (``top``: what each
    became): libcst's position metadata cost 2/3 of the conversion time, and one diff of the
    whole file is quadratic in its repeated lines (610 lines/s on a 4,850-line file)."""
    import libcst as cst
    code = module.code_for_node
    chunks: List[Tuple[str, str]] = []
    for stmt in module.body:
        if id(stmt) not in top:
            same = code(stmt)                 # unchanged: one code generation
            chunks.append((same, same))
            continue
        got = top[id(stmt)]
        if isinstance(got, cst.RemovalSentinel):
            after = ""
        elif isinstance(got, cst.FlattenSentinel):
            after = "".join(code(n) for n in got.nodes)
        else:
            after = code(got)
        chunks.append((code(stmt), after))
    body = "".join(a for a, _ in chunks)
    footer = code(module.with_changes(body=[], header=[])) if module.footer else ""
    head = text[:len(text) - len(body) - len(footer)] if text.endswith(body + footer) else None
    if head is None or any(c in text for c in "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        return _account_whole(text, new.code, lines, todos)
    out = head + "".join(b for _, b in chunks) + footer
    changed: Set[int] = set()
    at = head.count("\n")
    for before, after in chunks:
        if before != after:
            changed.update(at + i for i in _changed(before.splitlines(), after.splitlines()))
        at += before.count("\n")
    return _todo_lines(FileResult(out, lines, set(changed), set(changed)), out, todos)


def _changed(a: List[str], b_all: List[str]) -> Set[int]:
    """1-based numbers of ``a``'s non-blank lines that ``b_all`` (less its TODO lines) replaces or
    deletes."""
    import difflib
    b = [ln for ln in b_all if not ln.lstrip().startswith("# dualdl: TODO")]
    out: Set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            out.update(i + 1 for i in range(i1, i2) if a[i].strip())
    return out


def _account_whole(text: str, out: str, lines: int, todos: List[Tuple[str, str]]) -> FileResult:
    """:func:`_account` for a text whose statements do not concatenate back to it (odd line
    separators): one diff of the whole file."""
    changed = _changed(text.splitlines(), out.splitlines())
    return _todo_lines(FileResult(out, lines, set(changed), set(changed)), out, todos)


def _todo_lines(res: FileResult, out: str, todos: List[Tuple[str, str]]) -> FileResult:
    seen = iter(todos)
    for i, ln in enumerate(out.splitlines()):
        if ln.lstrip().startswith("# dualdl: TODO"):
            api, why = next(seen, ("?", ln.split(":", 2)[-1].strip()))
            res.todos.append((i + 2, api, why))
            res.api_lines.add(-(i + 2))          # a TODO line (converted-file numbering)
    return res
