"""The last check of a generated file, as an allow-list (issue 41): every node of the whole AST,
every function body included, must be a construct translate's emitter writes — arithmetic,
calls of torch / ``F`` / ``nn`` functions translate uses, of ``self``, of the file's own classes
and helpers, of locals (tensor methods) and of a few builtins (``float``, ``len``, ``range``...);
``getattr(x, "name")`` only for a name the file registers with ``add_module`` /
``register_parameter`` / ``register_buffer``; no dunder attribute (but ``super().__init__``); no
name that is not an argument, a local, a module-level definition or import, or such a builtin.
What is not listed (``__import__``, ``eval``, ``open``, ``torch.load``, a lambda, an f-string, a
``global``) is refused, so text from a model file that slipped past the gate cannot run."""
from __future__ import annotations

import ast
from typing import Callable, Dict, FrozenSet, List, Optional, Set

__all__ = ["check_tree", "check_recipe_tree"]

BUILTINS = frozenset({"super", "float", "int", "bool", "len", "range", "enumerate", "list", "tuple", "zip", "min",
                      "max", "abs", "isinstance", "getattr", "sum", "any", "all", "reversed", "round", "slice",
                      "sorted", "divmod", "dict", "str", "hasattr", "staticmethod",
                      "NotImplementedError", "ValueError", "RuntimeError", "TypeError", "IndexError"})
#: what a recipe's own functions use beyond that (its literal tables go through the same literal gate)
_RECIPE_BUILTINS = BUILTINS | {"KeyError", "UserWarning", "print"}
_RECIPE_TORCH = frozenset({"optim", "Generator", "nn"})
_STMTS = (ast.Return, ast.Assign, ast.AugAssign, ast.If, ast.For, ast.With, ast.Raise, ast.Expr, ast.Pass,
          ast.Assert, ast.Continue, ast.Break, ast.FunctionDef)     # a FunctionDef: a closure of a helper
_EXPRS = (ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Compare, ast.Call, ast.Constant, ast.Attribute,
          ast.Subscript, ast.Slice, ast.Starred, ast.Name, ast.List, ast.Tuple, ast.ListComp, ast.GeneratorExp,
          ast.Dict, ast.comprehension, ast.keyword, ast.withitem, ast.expr_context, ast.operator, ast.boolop,
          ast.unaryop, ast.cmpop, ast.arguments, ast.arg)
#: torch functions that read or write files or load code: never in a translated forward
_IO = frozenset({"from_file", "save", "load", "hub", "jit", "package", "ops", "classes", "library", "utils",
                 "compile", "serialization", "onnx", "distributed", "multiprocessing", "backends", "cuda"})
_REGISTER = frozenset({"add_module", "register_parameter", "register_buffer", "register_module"})
_VOCAB: Dict[str, FrozenSet[str]] = {}


def _public(mod, pred: Callable = lambda v: True) -> Set[str]:
    return {n for n in dir(mod) if not n.startswith("_") and pred(getattr(mod, n, None))}


def _vocab() -> Dict[str, FrozenSet[str]]:
    """What may follow ``torch.`` / ``F.`` / ``nn.`` / ``torch.linalg.`` ...: torch's tensor
    functions and dtypes, ``torch.nn.functional``'s functions, ``nn``'s layer classes; nothing
    that touches files, devices or code loading."""
    if not _VOCAB:
        import torch
        import torch.nn.functional as tF
        top = _public(torch._C._VariableFunctions) | set(getattr(torch.functional, "__all__", ())) | \
            _public(torch, lambda v: isinstance(v, torch.dtype)) | \
            {"nn", "linalg", "special", "fft", "no_grad", "enable_grad", "Size", "finfo", "iinfo", "device",
             "Tensor", "tensor", "as_tensor", "get_default_dtype", "autograd", "is_grad_enabled", "e", "pi", "inf",
             "nan", "promote_types", "result_type", "broadcast_shapes"}
        _VOCAB.update({
            "torch": frozenset(top - _IO),
            "F": frozenset(_public(tF, callable)),
            "nn": frozenset(_public(torch.nn, lambda v: isinstance(v, type)) | {"functional", "init"}),
            "torch.linalg": frozenset(_public(torch.linalg, callable)),
            "torch.special": frozenset(_public(torch.special, callable)),
            "torch.fft": frozenset(_public(torch.fft, callable)),
            "torch.autograd": frozenset({"Function"}),
            "nn.init": frozenset(_public(torch.nn.init, callable)),
        })
    return _VOCAB


def _chain(node: ast.AST) -> Optional[List[str]]:
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def _framework_path(chain: List[str]) -> Optional[str]:
    """The chain as ``torch.x`` / ``F.x`` / ``nn.x`` with its one or two judged parts, or None."""
    if chain[0] not in ("torch", "F", "nn") or len(chain) < 2:
        return None
    if chain[:3] == ["torch", "nn", "functional"]:
        chain = ["F"] + chain[3:]
    elif chain[:2] == ["torch", "nn"]:
        chain = ["nn"] + chain[2:]
    elif chain[:2] == ["nn", "functional"]:
        chain = ["F"] + chain[2:]
    return ".".join(chain)


def _judge_framework(chain: List[str], bad, recipe: bool = False) -> None:
    path = _framework_path(chain)
    if path is None:
        return
    parts = path.split(".")
    vocab = _vocab()
    if len(parts) < 2:
        return
    if recipe and parts[0] == "torch" and parts[1] in _RECIPE_TORCH:     # annotations, optimizers
        return
    if parts[1] not in vocab[parts[0]]:
        raise bad(f"{'.'.join(chain)} is not a function translate writes")
    inner = f"{parts[0]}.{parts[1]}"
    if inner in vocab and len(parts) > 2 and parts[2] not in vocab[inner]:
        raise bad(f"{'.'.join(chain)} is not a function translate writes")


def _registered(tree: ast.AST) -> Set[str]:
    """Child / parameter / buffer names the file registers by string (names that are no identifier)."""
    out: Set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _REGISTER and n.args \
                and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
            out.add(n.args[0].value)
    return out


def _locals(fn: ast.FunctionDef) -> Set[str]:
    a = fn.args
    out = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} | {x.arg for x in (a.vararg, a.kwarg) if x}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.FunctionDef):
            out.add(n.name)
    return out


def _check_function(fn: ast.FunctionDef, module: Set[str], registered: Set[str], bad, recipe: bool = False) -> None:
    for d in fn.decorator_list:
        if not (isinstance(d, ast.Name) and d.id == "staticmethod"):
            raise bad(f"decorator {ast.unparse(d)[:40]} on {fn.name}")
    known = _locals(fn) | module | (_RECIPE_BUILTINS if recipe else BUILTINS)
    extra = (ast.JoinedStr, ast.FormattedValue) if recipe else ()
    for node in ast.walk(fn):
        if node is fn:
            continue
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            raise bad(f"a decorated function inside {fn.name}")
        where = f"line {getattr(node, 'lineno', fn.lineno)}"
        if isinstance(node, ast.stmt) and not isinstance(node, _STMTS):
            raise bad(f"a {type(node).__name__} statement in {fn.name}, {where}")
        if isinstance(node, ast.expr) and not isinstance(node, _EXPRS + extra):
            raise bad(f"a {type(node).__name__} expression in {fn.name}, {where}")
        if not isinstance(node, (ast.stmt, ast.expr, *_EXPRS)):
            raise bad(f"a {type(node).__name__} in {fn.name}, {where}")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
            raise bad(f"name {node.id} in {fn.name} ({where}) is neither an argument, a local, a definition "
                      f"of the file nor a builtin translate uses")
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and not (
                    node.attr == "__init__" and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name) and node.value.func.id == "super"):
                raise bad(f"attribute {node.attr} in {fn.name}, {where}")
            chain = _chain(node)
            if chain is not None:
                _judge_framework(chain, bad, recipe)
        if isinstance(node, ast.Constant) and not isinstance(node.value, (str, int, float, bool, type(None))) \
                and node.value is not Ellipsis:
            raise bad(f"a constant of type {type(node.value).__name__} in {fn.name}, {where}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            ok = len(node.args) == 2 and not node.keywords and isinstance(node.args[1], ast.Constant) and \
                node.args[1].value in registered
            if not ok:
                raise bad(f"getattr of a name the file does not register, in {fn.name}, {where}")
        if isinstance(node, ast.With):
            for item in node.items:
                if _chain(getattr(item.context_expr, "func", item.context_expr)) != ["torch", "no_grad"]:
                    raise bad(f"a with statement other than torch.no_grad() in {fn.name}, {where}")


def _module_names(tree: ast.Module) -> Set[str]:
    """The names the module level defines: classes, functions, imports, assigned names."""
    module: Set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            module.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            module |= {t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                       if isinstance(t, ast.Name)}
    return module


def check_tree(tree: ast.Module, bad) -> None:
    """Refuse (``raise bad(what)``) any construct of ``tree`` that translate does not write."""
    module = _module_names(tree)
    registered = _registered(tree)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] not in ("torch", "numpy", "math", "__future__") for m in mods):
                raise bad(f"it imports {mods[0]}; generated code needs torch only")
        elif isinstance(node, ast.ClassDef):
            if node.decorator_list or node.keywords:
                raise bad(f"class {node.name} has decorators or keywords")
            for b in node.bases:
                chain = _chain(b)
                if chain is None or not (chain[0] in module and (len(chain) == 1 or chain[0] in ("torch", "nn"))):
                    raise bad(f"class {node.name} derives from {ast.unparse(b)[:40]}")
                _judge_framework(chain, bad)
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    _check_function(item, module, registered, bad)
                elif not (isinstance(item, (ast.Expr, ast.Assign)) and isinstance(item.value, ast.Constant)
                          and all(isinstance(t, ast.Name) for t in getattr(item, "targets", []))) \
                        and not isinstance(item, ast.Pass):     # a docstring or a constant class attribute
                    raise bad(f"a {type(item).__name__} in the body of class {node.name}, line {item.lineno}")
        elif isinstance(node, ast.FunctionDef):
            _check_function(node, module, registered, bad)


def _pure_literal(node: ast.AST) -> bool:
    """A value the literal gate writes: constants, tuples/lists/dicts of them, ``-x``, ``float("inf")``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, int, float, bool, type(None)))
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_pure_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _pure_literal(k) for k in node.keys) and all(_pure_literal(v) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _pure_literal(node.operand)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ("inf", "-inf", "nan"))


def check_recipe_tree(tree: ast.Module, copied: Set[str], bad) -> None:
    """The same allow-list for a generated training recipe: definitions named in ``copied`` are
    dualdl's own torch-only source, copied verbatim; every other function is judged as a
    translated module's (plus f-strings, ``KeyError``/``UserWarning`` and torch.optim), and every
    module-level value must be a literal the gate wrote."""
    module = _module_names(tree)
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (i == 0 and isinstance(node, ast.Expr)
                                                               and isinstance(node.value, ast.Constant)):
            continue
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name in copied:
            continue
        if isinstance(node, ast.FunctionDef):
            _check_function(node, module, set(), bad, recipe=True)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if len(names) != len(targets):
                raise bad(f"an assignment to something other than a name at line {node.lineno}")
            if not (set(names) <= copied) and not (node.value is not None and _pure_literal(node.value)):
                raise bad(f"{names[0]} at line {node.lineno} is not a literal")
        else:
            raise bad(f"a {type(node).__name__} statement at module level, line {node.lineno}")
