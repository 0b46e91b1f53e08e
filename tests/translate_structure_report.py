"""The structure of ``dualdl/port/translate/``, measured from its source (issue 41: one graph, two
readers, one writer): the file/line table, the import graph counting module-level AND
function-level imports (Python only sees the first kind, so a circle kept alive by imports inside
functions never fails at import time), its cycles, and private names (``_x``) used outside the
file that defines them. ``python tests/translate_structure_report.py`` prints it;
tests/test_translate_layers.py asserts on the same numbers."""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Set, Tuple

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dualdl", "port", "translate")
PACKAGE = "dualdl.port.translate"


@dataclass
class Module:
    name: str                                   # dotted, relative to the package: "codegen", "oplib.nn"
    path: str
    lines: int
    imports: List[Tuple[str, bool, Tuple[str, ...], int]] = field(default_factory=list)
    # (imported module, at function level?, names imported from it, line)
    attr_uses: List[Tuple[str, str, int]] = field(default_factory=list)   # (module, attribute, line)


def _modules(root: str = ROOT) -> Dict[str, Module]:
    out: Dict[str, Module] = {}
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)[:-3].replace(os.sep, ".")
            name = rel[:-len(".__init__")] if rel.endswith(".__init__") else ("" if rel == "__init__" else rel)
            with open(p, encoding="utf-8") as fh:
                out[name] = Module(name, p, sum(1 for _ in fh))
    return out


def _resolve(mod: str, is_pkg: bool, level: int, target: str) -> str | None:
    """The package-relative module a ``from ... import`` names, or None when outside the package."""
    if level == 0:
        if target == PACKAGE:
            return ""
        if target.startswith(PACKAGE + "."):
            return target[len(PACKAGE) + 1:]
        return None
    parts = mod.split(".") if mod else []
    base = parts if is_pkg else parts[:-1]
    up = level - 1
    if up > len(base):
        return None                                 # above the package
    base = base[:len(base) - up]
    full = ".".join(base + ([target] if target else []))
    return full


def _walk(tree: ast.AST) -> Iterator[Tuple[ast.AST, bool]]:
    """Every node with whether it sits inside a function body."""
    stack = [(tree, False)]
    while stack:
        node, in_fn = stack.pop()
        yield node, in_fn
        inner = in_fn or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((c, inner) for c in ast.iter_child_nodes(node))


def analyse(root: str = ROOT) -> Dict[str, Module]:
    """Parse every file of the package: its imports (module- and function-level) of package modules."""
    mods = _modules(root)
    for m in mods.values():
        is_pkg = m.path.endswith("__init__.py")
        tree = ast.parse(open(m.path, encoding="utf-8").read(), m.path)
        aliases: Dict[str, str] = {}
        for node, in_fn in _walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(m.name, is_pkg, node.level, node.module or "")
                if base is None:
                    continue
                names = []
                for a in node.names:
                    sub = f"{base}.{a.name}" if base else a.name
                    if sub in mods:                    # from . import codegen: the module itself
                        m.imports.append((sub, in_fn, (), node.lineno))
                        aliases[a.asname or a.name] = sub
                    else:
                        names.append(a.name)
                if names and base in mods:
                    m.imports.append((base, in_fn, tuple(names), node.lineno))
            elif isinstance(node, ast.Import):
                for a in node.names:
                    base = _resolve(m.name, is_pkg, 0, a.name)
                    if base is not None and base in mods:
                        m.imports.append((base, in_fn, (), node.lineno))
                        if a.asname:
                            aliases[a.asname] = base
        for node, _ in _walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                m.attr_uses.append((aliases[node.value.id], node.attr, node.lineno))
    return mods


def edges(mods: Dict[str, Module], function_level: bool = True) -> Dict[str, Set[str]]:
    """Module -> modules it imports (a package's own ``__init__`` excluded: ``from .x import`` in a
    package file does not run through a sibling)."""
    g: Dict[str, Set[str]] = {k: set() for k in mods}
    for m in mods.values():
        for target, in_fn, _, _ in m.imports:
            if target != m.name and (function_level or not in_fn):
                g[m.name].add(target)
    return g


def _reach(g: Dict[str, Set[str]], start: str) -> Set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in g[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def cycles(g: Dict[str, Set[str]]) -> List[List[str]]:
    """The import circles: groups of more than one module each reachable from every other (the
    strongly connected components, by reachability: the package has ~50 files), largest first."""
    reach = {v: _reach(g, v) for v in g}
    out, placed = [], set()
    for v in sorted(g):
        if v in placed:
            continue
        comp = sorted(w for w in reach[v] if v in reach[w]) if v in reach[v] else []
        if len(comp) > 1:
            out.append(comp)
            placed.update(comp)
    return sorted(out, key=len, reverse=True)


def private_crossings(mods: Dict[str, Module]) -> List[Tuple[str, str, str, int]]:
    """(user module, defining module, private name, line) for every ``_name`` imported from, or read
    as an attribute of, another file of the package (dunders excluded)."""
    out = []
    for m in mods.values():
        uses = [(t, n, ln) for t, _, names, ln in m.imports for n in names]
        uses += m.attr_uses
        for target, name, line in uses:
            if target != m.name and name.startswith("_") and not name.startswith("__"):
                out.append((m.name, target, name, line))
    return sorted(set(out))


def function_level_imports(mods: Dict[str, Module]) -> int:
    return sum(1 for m in mods.values() for t, in_fn, _, _ in m.imports if in_fn and t != m.name)


def summary(mods: Dict[str, Module] | None = None, root: str = ROOT) -> Dict[str, object]:
    mods = mods if mods is not None else analyse(root)
    g = edges(mods)
    cyc = cycles(g)
    big = max(mods.values(), key=lambda m: m.lines)
    return {"files": len(mods), "lines": sum(m.lines for m in mods.values()),
            "largest": f"{os.path.relpath(big.path, root)} ({big.lines})",
            "over_600": sorted(os.path.relpath(m.path, root) for m in mods.values() if m.lines > 600),
            "function_level_imports": function_level_imports(mods),
            "cycles": len(cyc), "files_in_cycles": sum(len(c) for c in cyc),
            "largest_cycle": len(cyc[0]) if cyc else 0,
            "module_level_cycles": len(cycles(edges(mods, function_level=False))),
            "private_crossings": len(private_crossings(mods)),
            "private_names": len({(t, n) for _, t, n, _ in private_crossings(mods)})}


def main(argv: List[str]) -> int:
    mods = analyse()
    print(f"{'file':<34}{'lines':>7}")
    for m in sorted(mods.values(), key=lambda m: -m.lines):
        print(f"{os.path.relpath(m.path, ROOT):<34}{m.lines:>7}")
    s = summary(mods)
    print()
    for k, v in s.items():
        print(f"{k:<24}{v}")
    for c in cycles(edges(mods)):
        print(f"\ncycle of {len(c)}: {' '.join(c)}")
    if "--time" in argv:                         # --time zoo:resnet34_v1,nlp:BERTModel
        for n, t in time_cases(argv[argv.index("--time") + 1].split(","), repeat=2).items():
            print(f"{n:<28}{t:7.2f} s")
    if "-v" in argv:
        print("\nprivate names used outside their file:")
        for user, target, name, line in private_crossings(mods):
            print(f"  {user}:{line} uses {target}.{name}")
    return 0



def time_cases(names: List[str], repeat: int = 1) -> Dict[str, float]:
    """Seconds translate takes (the proof included) on corpus cases, best of ``repeat``."""
    import tempfile
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _translate_corpus as corpus
    cases = {c.name: c for c in corpus.CASES}
    out = {}
    for n in names:
        best = None
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as d:
                o = corpus.run_case(cases[n], d)
            assert o.status == "ok", (n, o.status, o.detail)
            best = o.seconds if best is None else min(best, o.seconds)
        out[n] = best
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
