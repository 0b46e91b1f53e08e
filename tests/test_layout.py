"""The package layout: no module-level import circle in dualdl or its adapters, and every module
imports on its own (what breaks first when a circle is held together by import order).

Neutral checks: the same two tests run on ``dualdl_torch``, ``dualdl_mx`` and ``dualdl``.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dualdl", "dualdl_torch", "dualdl_mx")
CASES_CIRCLE = [pytest.param("dualdl_torch", id="dualdl_torch"),
                pytest.param("dualdl_mx", id="dualdl_mx"),
                pytest.param("dualdl", id="dualdl")]
CASES_ALONE = [pytest.param("dualdl_torch", id="dualdl_torch"),
               pytest.param("dualdl_mx", id="dualdl_mx"),
               pytest.param("dualdl", id="dualdl")]


def _modules() -> Dict[str, Path]:
    """Every module of the three packages, by dotted name (``__main__`` left out: it runs the CLI)."""
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__main__":
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _module_level_body(tree: ast.Module):
    """Statements run at import: the module body, class bodies, ``if``/``try``/``with`` blocks; not
    function bodies, not ``if TYPE_CHECKING:``."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, field, None) or [])


def _imports(name: str, path: Path, modules: Dict[str, Path]) -> Set[str]:
    """The project modules that ``name`` imports at module level (explicit targets only: importing
    ``a.b`` also runs ``a/__init__``, but that is the parent already being imported, not a circle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in _module_level_body(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in modules:
                    out.add(sub)           # `from . import x`, `from pkg import submodule`
                elif target in modules:
                    out.add(target)
    out.discard(name)
    return out


@functools.lru_cache(maxsize=None)
def _graph() -> Dict[str, Set[str]]:
    """module -> the project modules it imports at module level, over the three packages."""
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def _cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    comps: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def _in_package(module: str, pkg: str) -> bool:
    return module == pkg or module.startswith(pkg + ".")


def test_cycle_finder_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("pkg", CASES_CIRCLE)
def test_no_module_level_import_circle(pkg):
    circles = [c for c in _cycles(_graph()) if any(_in_package(m, pkg) for m in c)]
    assert not circles, f"module-level import circles touching {pkg}: {circles}"


# Imports each module in a child forked from a process that already holds the frameworks (torch,
# mxnet, numpy) but no project module: a fresh interpreter for the project's modules, without
# paying the frameworks' import once per module (one parent for the three packages).
_ALONE = r"""
import importlib, json, os, sys, traceback
import numpy, torch
try:
    import mxnet
except ImportError:
    pass
assert not [m for m in sys.modules if m.split('.')[0] in ('dualdl', 'dualdl_torch', 'dualdl_mx')]
failed = {}
for name in sys.argv[1:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException:
            os.write(w, traceback.format_exc(limit=3).encode()[-1500:])
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if status:
        failed[name] = msg or f"exit status {status}"
print(json.dumps(failed))
"""


@pytest.fixture(scope="module")
def import_alone_failures() -> Dict[str, str]:
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    r = subprocess.run([sys.executable, "-c", _ALONE, *_modules()], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("pkg", CASES_ALONE)
def test_each_module_imports_alone(pkg, import_alone_failures):
    failed = {m: msg for m, msg in import_alone_failures.items() if _in_package(m, pkg)}
    assert not failed, f"modules of {pkg} that fail to import alone:\n" + "\n".join(
        f"{m}: {msg}" for m, msg in failed.items())


@pytest.mark.parametrize("adapter", ["dualdl_torch", "dualdl_mx"])
def test_nn_is_a_pure_index_and_base_imports_no_layer_family(adapter):
    """``<adapter>/nn.py`` defines nothing and no adapter module imports it; ``base.py`` (the
    write-once base) imports no layer family, so families can import it without a circle."""
    tree = ast.parse(_modules()[f"{adapter}.nn"].read_text())
    defined = [n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
    stars = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)]
    assert not defined and not stars, (defined, stars)
    graph = _graph()
    users = [m for m, deps in graph.items() if _in_package(m, adapter) and f"{adapter}.nn" in deps]
    assert not users, f"adapter modules importing the index: {users}"
    base_deps = {d.rpartition(".")[2] for d in graph[f"{adapter}.base"] if _in_package(d, adapter)}
    assert base_deps <= {"core", "compiled", "grads", "invoke", "torch_style"}, base_deps
