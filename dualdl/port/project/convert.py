"""One Gluon source file to PyTorch source, on libcst's concrete syntax tree (comments, blank
lines and layout kept; only the Gluon spellings change).

What it rewrites: names the file imports from mxnet/gluonnlp/gluoncv, resolved to qualified
names and looked up in :mod:`dualdl.port.project.table`; ``mx.nd.<op>`` / ``F.<op>`` calls
through the translator's op registry (``oplib.lookup``); Gluon-only methods (``asnumpy``,
``as_in_context``, ``backward`` of a per-sample loss, ``collect_params``, ``initialize``,
``save_parameters``, ...); ``hybrid_forward(self, F, x)`` -> ``forward(self, x)``;
``with self.name_scope():`` unwrapped; ``super().__init__(**kwargs)`` of a Gluon block without
Gluon's ``prefix``/``params``; the mxnet imports -> ``import torch`` + ``import gluon2torch as
g2t``. What it cannot convert stays as it is, with a ``# dualdl: TODO`` line above the
statement naming the API and why.
"""
from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .convert_lines import FileResult, _account, _stand_ins

__all__ = ["FileResult", "convert_source"]


def convert_source(text: str) -> FileResult:
    """Convert one file's text (see the module docstring)."""
    import libcst as cst
    lines = sum(1 for ln in text.splitlines() if ln.strip())
    module = cst.parse_module(text)
    aliases = _imports(module)
    if not aliases:
        return FileResult(text, lines)
    conv = _make_converter(aliases, _module_names(module), _function_locals(text, aliases))
    new = module.visit(conv)
    res = _account(text, module, new, conv.top, lines, conv.todos)
    return _stand_ins(res, aliases)


def _imports(module) -> Dict[str, str]:
    """local name -> qualified name, for what the file imports from the converted packages."""
    import libcst as cst
    from .table import ROOTS
    out: Dict[str, str] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for s in stmt.body:
            if isinstance(s, cst.Import):
                for a in s.names:
                    full = _dotted(a.name)
                    if full.split(".")[0] in ROOTS:
                        local = a.asname.name.value if a.asname else full.split(".")[0]
                        out[local] = full if a.asname else full.split(".")[0]
            elif isinstance(s, cst.ImportFrom) and s.module is not None:
                mod = _dotted(s.module)
                if mod.split(".")[0] in ROOTS and not isinstance(s.names, cst.ImportStar):
                    for a in s.names:
                        local = a.asname.name.value if a.asname else a.name.value
                        out[local] = f"{mod}.{a.name.value}"
    return out


def _module_names(module) -> Set[str]:
    """The names a file binds to modules outside the converted packages (``from d2l import mxnet
    as d2l``, d2l's own ``d2l = sys.modules[__name__]``): ``d2l.astype(x, t)`` is a module's
    function, never the Gluon method ``x.astype``."""
    import libcst as cst
    from .table import ROOTS
    out: Set[str] = set()
    rebound: Set[str] = set()        # a module name assigned a value: a variable from then on
    for stmt in module.body:
        for s in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(s, cst.Import):
                out.update(a.asname.name.value if a.asname else _dotted(a.name).split(".")[0]
                           for a in s.names if _dotted(a.name).split(".")[0] not in ROOTS)
            elif isinstance(s, cst.ImportFrom) and s.module is not None and \
                    not isinstance(s.names, cst.ImportStar) and _dotted(s.module).split(".")[0] not in ROOTS:
                out.update(a.asname.name.value if a.asname else a.name.value for a in s.names)
            elif isinstance(s, cst.Assign) and isinstance(s.value, cst.Subscript) and \
                    cst.Module([]).code_for_node(s.value.value) == "sys.modules":
                out.update(t.target.value for t in s.targets if isinstance(t.target, cst.Name))
            elif isinstance(s, cst.Assign):   # word_language_model: `model = model.RNNModel(...)`
                rebound.update(t.target.value for t in s.targets if isinstance(t.target, cst.Name))
    return out - rebound


def _function_locals(text: str, aliases: Dict[str, str]) -> List[Set[str]]:
    """For each function of the file, in source order, the imported names it binds itself (a
    parameter, an assignment, a ``for``/``with`` target: d2l's ``for center, context, negative in
    data`` where ``context`` is also ``mxnet.context``): a local there, never the Gluon API.
    From Python's own parser (C, fast); libcst's functions come in the same order."""
    out: List[Set[str]] = []

    def scope(fn) -> Set[str]:
        names: Set[str] = set()
        a = fn.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None:
                names.add(arg.arg)
        declared: Set[str] = set()
        todo = list(fn.body)
        while todo:
            n = todo.pop()
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda,
                              ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(n.name)
                continue                       # its own scope
            if isinstance(n, (ast.Global, ast.Nonlocal)):
                declared.update(n.names)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                names.add(n.id)
            todo.extend(ast.iter_child_nodes(n))
        return (names - declared) & set(aliases)

    def walk(node) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(scope(child))
            walk(child)
    try:
        walk(ast.parse(text))
    except SyntaxError:
        return []
    return out


def _make_converter(aliases: Dict[str, str], modules: Set[str] = frozenset(),
                    local_names: Sequence[Set[str]] = ()):
    import libcst as cst
    from .table import ATTRS, CALLS, METHODS, ROOTS, STATEMENTS, lookup_api, normalize

    class Converter(cst.CSTTransformer):
        def __init__(self) -> None:
            super().__init__()
            self.aliases = dict(aliases)
            self.todos: List[Tuple[str, str]] = []
            self._stack: list = []
            self._pending: List[List[str]] = []
            self._block_class: List[bool] = []
            self._imports_placed = False
            self._dropped: set = set()
            self._in_import = 0
            self.top: Dict[int, Any] = {}       # id(body statement) -> what it became, if changed
            self._scopes: List[Dict[str, str]] = []     # the aliases outside each function
            self._functions = 0
            self._dirty = False

        # ---- the parents of the node being visited (libcst's ParentNodeProvider, cheaper)
        def on_visit(self, node) -> bool:
            self._stack.append(node)
            return super().on_visit(node)

        def on_leave(self, original, updated):
            out = super().on_leave(original, updated)
            self._stack.pop()
            if out is not updated:
                self._dirty = True
            if len(self._stack) == 1:            # a statement of the module's body
                if self._dirty:
                    self.top[id(original)] = out
                self._dirty = False
            return out

        # no visit_<Node>_<field> methods here: libcst's per-field dispatch cost 1/8 of the time
        def on_visit_attribute(self, node, attribute) -> None:
            pass

        def on_leave_attribute(self, original_node, attribute) -> None:
            pass

        def parent(self, node):
            i = len(self._stack) - 1
            while i >= 0 and self._stack[i] is not node:
                i -= 1
            return self._stack[i - 1] if i > 0 else None

        def qual(self, node) -> Optional[str]:
            if isinstance(node, cst.Name):
                return self.aliases.get(node.value)
            if isinstance(node, cst.Attribute):
                base = self.qual(node.value)
                return f"{base}.{node.attr.value}" if base else None
            return None

        def todo(self, node, api: str, why: str) -> None:
            if self._pending:
                note = f"# dualdl: TODO {api}: {why}"
                if note not in self._pending[-1]:
                    self._pending[-1].append(note)
                    self.todos.append((api, why))

        def _outermost(self, node) -> bool:
            parent = self.parent(node)
            return not (isinstance(parent, cst.Attribute) and parent.value is node)

        # ---- statements: where TODO lines go
        def _push(self, _node) -> None:
            self._pending.append([])

        def _pop(self, updated):
            notes = self._pending.pop()
            if not notes or not hasattr(updated, "leading_lines"):
                return updated
            extra = [cst.EmptyLine(comment=cst.Comment(n)) for n in dict.fromkeys(notes)]
            return updated.with_changes(leading_lines=list(updated.leading_lines) + extra)

        def visit_SimpleStatementLine(self, node) -> None:
            self._push(node)

        def leave_SimpleStatementLine(self, original, updated):
            for hook in STATEMENTS:             # a domain's statement rules (table.STATEMENTS)
                new = hook(original, updated, self)
                if new is not None:
                    return self._pop(new)
            if len(original.body) == 1 and isinstance(original.body[0], cst.Expr) and \
                    id(original.body[0].value) in self._dropped:
                call = original.body[0].value
                note = (f"  # dualdl: {cst.Module([]).code_for_node(call)} dropped (Gluon-only: "
                        f"torch runs eagerly, tensors are ready)")
                self._pending.pop()
                return updated.with_changes(body=[cst.Pass()], trailing_whitespace=cst.TrailingWhitespace(
                    whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(note.strip())))
            if all(isinstance(s, (cst.Import, cst.ImportFrom)) and self._is_ours(s)
                   for s in original.body):
                self._pending.pop()
                if self._imports_placed:
                    return cst.RemovalSentinel.REMOVE
                self._imports_placed = True
                first = cst.parse_statement("import torch\n").with_changes(
                    leading_lines=updated.leading_lines)
                return cst.FlattenSentinel([first, cst.parse_statement("import gluon2torch as g2t\n")])
            return self._pop(updated)

        def _is_ours(self, s) -> bool:
            if isinstance(s, cst.Import):
                return all(_dotted(a.name).split(".")[0] in ROOTS for a in s.names)
            return s.module is not None and _dotted(s.module).split(".")[0] in ROOTS

        def visit_For(self, node) -> None:
            self._push(node)

        def visit_While(self, node) -> None:
            self._push(node)

        def visit_If(self, node) -> None:
            self._push(node)

        def visit_With(self, node) -> None:
            self._push(node)

        def visit_Try(self, node) -> None:
            self._push(node)

        def leave_For(self, o, u):
            return self._pop(u)

        def leave_While(self, o, u):
            return self._pop(u)

        def leave_If(self, o, u):
            return self._pop(u)

        def leave_Try(self, o, u):
            return self._pop(u)

        def leave_With(self, original, updated):
            items = original.items
            if len(items) == 1 and isinstance(items[0].item, cst.Call) and \
                    isinstance(items[0].item.func, cst.Attribute) and \
                    items[0].item.func.attr.value == "name_scope":
                self._pending.pop()
                body = list(updated.body.body)
                if body and hasattr(body[0], "leading_lines"):
                    body[0] = body[0].with_changes(
                        leading_lines=list(updated.leading_lines) + list(body[0].leading_lines))
                return cst.FlattenSentinel(body)
            return self._pop(updated)

        # ---- classes and hybrid_forward
        def visit_ClassDef(self, node) -> None:
            self._push(node)
            gluon = any((self.qual(b.value) or "").startswith(ROOTS) for b in node.bases)
            self._block_class.append(gluon)

        def leave_ClassDef(self, original, updated):
            self._block_class.pop()
            return self._pop(updated)

        def visit_FunctionDef(self, node) -> None:
            self._push(node)
            self._scopes.append(self.aliases)
            i = self._functions
            self._functions += 1
            if i < len(local_names) and local_names[i]:      # the function's own locals
                self.aliases = {k: v for k, v in self.aliases.items() if k not in local_names[i]}
            if node.name.value == "hybrid_forward" and len(node.params.params) >= 2:
                self.aliases = dict(self.aliases, **{node.params.params[1].name.value: "mxnet.nd"})

        def leave_FunctionDef(self, original, updated):
            self.aliases = self._scopes.pop()
            if original.name.value == "hybrid_forward" and len(original.params.params) >= 2:
                params = list(updated.params.params)
                del params[1]
                updated = updated.with_changes(name=cst.Name("forward"),
                                               params=updated.params.with_changes(params=params))
            return self._pop(updated)

        # ---- names
        def leave_Name(self, original, updated):
            return self._replace(original, updated)

        def leave_Attribute(self, original, updated):
            name = original.attr.value
            if name in ATTRS and not self._in_import and self.qual(original.value) is None and \
                    self._read(original):
                return cst.Call(_expression(ATTRS[name]), [cst.Arg(updated.value)])
            return self._replace(original, updated)

        def _read(self, node) -> bool:
            """``node`` is read as a value: not a call's function, not a target."""
            parent = self.parent(node)
            if isinstance(parent, cst.Call):
                return parent.func is not node
            if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For,
                                   cst.CompFor)):
                return parent.target is not node
            return not isinstance(parent, (cst.Del, cst.AsName))

        def visit_Import(self, node) -> None:
            self._in_import += 1

        def leave_Import(self, original, updated):
            self._in_import -= 1
            return updated

        def visit_ImportFrom(self, node) -> None:
            self._in_import += 1

        def leave_ImportFrom(self, original, updated):
            self._in_import -= 1
            return updated

        def _replace(self, original, updated):
            q = self.qual(original)
            if q is None or self._in_import or not self._outermost(original):
                return updated
            parent = self.parent(original)
            if isinstance(parent, (cst.ImportAlias, cst.ImportFrom, cst.Import, cst.Param)) or \
                    isinstance(parent, cst.Attribute) and parent.attr is original or \
                    isinstance(parent, cst.Arg) and parent.keyword is original:
                return updated                # a keyword's name (init=...) is no Gluon name
            target, why = lookup_api(q)
            if target is not None:
                return _expression(target)
            if isinstance(parent, cst.Call) and parent.func is original:
                return updated      # a call: leave_Call (the domains' hooks, the op registry)
            self.todo(original, _short(q), why)
            return updated

        # ---- calls
        def leave_Call(self, original, updated):
            q = self.qual(original.func)
            if q is not None:
                target, why = lookup_api(q)
                if target is None:
                    for hook in CALLS:          # a domain's own rules (table.CALLS)
                        new = hook(q, updated, self)
                        if new is not None:
                            return new
                    op = _op_name(normalize(q))
                    if op:
                        return self._op_call(original, updated, op, q)
                    self.todo(original, _short(q), why)
                    return updated
            func = original.func
            if isinstance(func, cst.Attribute) and func.attr.value in METHODS and \
                    self.qual(func.value) is None and \
                    not (isinstance(func.value, cst.Name) and func.value.value in modules):
                return self._method(original, updated)
            if isinstance(func, cst.Attribute) and func.attr.value == "__init__" and \
                    isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Name) and \
                    func.value.func.value == "super" and self._block_class and \
                    self._block_class[-1] and updated.args:
                return updated.with_changes(args=[])      # Gluon's prefix=/params= kwargs
            return updated

        def _op_call(self, original, updated, op: str, q: str):
            from ..translate.oplib import Expr, OpNode, lookup
            entry = lookup(op)
            if entry is None or entry.translate is None:
                why = entry.reason if entry is not None else "not an MXNet operator"
                self.todo(original, _short(q), why or "no torch translation")
                return updated
            code = cst.Module([]).code_for_node
            args, attrs = [], {}
            for a in updated.args:
                if a.star:
                    self.todo(original, _short(q), "*args of an operator call")
                    return updated
                text = code(a.value)
                if a.keyword is None:
                    args.append(Expr(text, atomic=isinstance(a.value, (cst.Name, cst.Attribute,
                                                                        cst.Call, cst.Subscript))))
                else:
                    attrs[a.keyword.value] = _attr_text(text)
            try:
                node = OpNode(op, "src", attrs, [None] * len(args), [None])
                expr = str(entry.translate(args, attrs, node))
                new = _expression(expr)
            except Exception as e:                        # the registry needs what source lacks
                self.todo(original, _short(q), f"{' '.join(str(e).split())[:160]}")
                return updated
            lost = _dropped_args(args, expr)
            if lost:                  # an MXNet attribute given positionally: never drop it
                self.todo(original, _short(q), f"argument {lost[0]} would not reach the torch "
                                               f"call; write MXNet attributes as keywords")
                return updated
            return new

        def _method(self, original, updated):
            kind, target = METHODS[original.func.attr.value]
            receiver = updated.func.value
            if kind == "fn":
                return cst.Call(_expression(target),
                                [cst.Arg(receiver)] + list(updated.args))
            if kind == ".name":
                return updated.with_changes(func=updated.func.with_changes(attr=cst.Name(target)))
            self._dropped.add(id(original))  # the statement becomes `pass` (leave_SimpleStatementLine)
            return updated

    return Converter()


_PARSED: Dict[str, Any] = {}


def _expression(text: str):
    """``cst.parse_expression``, once per text (libcst's nodes are immutable: one parsed
    ``g2t.Dense`` serves every use; parsing was 1/5 of the conversion)."""
    got = _PARSED.get(text)
    if got is None:
        import libcst as cst
        got = _PARSED[text] = cst.parse_expression(text)
    return got


def _dropped_args(args: List[str], expr: str) -> List[str]:
    """The positional arguments whose expression is no subexpression of the torch call (a
    literal under a unary minus does not count: ``softmax(x, 1)``'s 1 is not ``dim=-1``'s)."""
    tree = ast.parse(expr, mode="eval")
    under_minus = {id(n.operand) for n in ast.walk(tree) if isinstance(n, ast.UnaryOp)}
    have = {ast.dump(n) for n in ast.walk(tree) if id(n) not in under_minus}
    out = []
    for a in args:
        try:
            if ast.dump(ast.parse(a, mode="eval").body) not in have:
                out.append(a)
        except SyntaxError:
            out.append(a)
    return out


def _dotted(n) -> str:
    import libcst as cst
    return n.value if isinstance(n, cst.Name) else f"{_dotted(n.value)}.{n.attr.value}"


def _op_name(q: str) -> Optional[str]:
    """The operator an ``mx.nd.<op>`` / ``mx.nd.contrib.<op>`` name calls, or None."""
    for prefix in ("mxnet.nd.contrib.", "mxnet.nd."):
        if q.startswith(prefix):
            rest = q[len(prefix):]
            if "." not in rest:
                return ("_contrib_" if "contrib" in prefix else "") + rest
    return None


def _short(q: str) -> str:
    return q.replace("mxnet.", "mx.", 1) if q.startswith("mxnet.") else q


def _attr_text(text: str) -> str:
    """An MXNet attribute string from a keyword's source: a string literal's value, else the
    source text (``(-1, 784)``, ``1``, ``True``)."""
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return v if isinstance(v, str) else text
