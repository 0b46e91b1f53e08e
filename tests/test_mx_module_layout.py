"""The MXNet adapter's module structure (issue 15): module-level imports between its files form
no circle, and no file of the adapter imports the ``nn`` index (it exists for ``module("nn")``).
Read from the source with ``ast``, so a new circle fails here before it fails at import."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _imports(adapter: str):
    """{module: (module-level sibling imports, every sibling import at any level)}."""
    out = {}
    for path in sorted((ROOT / adapter).glob("*.py")):
        tree = ast.parse(path.read_text())
        top, every = set(), set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 1:
                names = [node.module] if node.module else [a.name for a in node.names]
            elif node.level == 0 and node.module and node.module.startswith(adapter + "."):
                names = [node.module[len(adapter) + 1:]]
            else:
                continue
            names = [n.split(".")[0] for n in names]
            every.update(names)
            if node in tree.body:
                top.update(names)
        out[path.stem] = (top, every)
    return out


@pytest.mark.parametrize("adapter", ["dualdl_mx"])
def test_module_level_imports_are_acyclic(adapter):
    graph = {m: top & set(_imports(adapter)) for m, (top, _) in _imports(adapter).items()}
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", f"import circle in {adapter}: {' -> '.join(path + [m])}"
        state[m] = "open"
        for dep in sorted(graph[m]):
            visit(dep, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])
    assert graph["base"] <= {"core", "compiled"}           # the base imports no layer family


@pytest.mark.parametrize("adapter", ["dualdl_mx"])
def test_nothing_in_the_adapter_imports_the_nn_index(adapter):
    users = sorted(m for m, (_, every) in _imports(adapter).items() if "nn" in every and m != "nn")
    assert users == []
