"""The adapter contract (dualdl/contract.py): both adapters keep it, the check can fail, the contract
covers what the neutral package calls, and the base of the neutral package has no import circle."""
import ast
import inspect
import pathlib
import re
import sys

import pytest

import dualdl
from dualdl.backend import ADAPTER_MODULES, KNOWN_BACKENDS, get_backend
from dualdl.contract import CONTRACT, PARALLEL, check_adapter, signature_mismatch, stub

ROOT = pathlib.Path(dualdl.__file__).parent


@pytest.mark.parametrize("name", sorted(KNOWN_BACKENDS))
def test_every_adapter_keeps_the_contract(name):
    adapter = KNOWN_BACKENDS[name][0]
    assert check_adapter(adapter) == []
    be = get_backend(name)
    for module in ADAPTER_MODULES:
        assert be.module(module).__name__ == f"{adapter}.{module}"


def test_adapter_modules_are_the_contract_s():
    assert ADAPTER_MODULES == tuple(CONTRACT)
    assert set(PARALLEL) <= set(CONTRACT)
    n = sum(len(names) for names in CONTRACT.values())
    assert n >= 140, n
    for module, names in CONTRACT.items():
        for name, spec in names.items():
            assert spec.meaning and spec.kind in ("function", "class", "object"), (module, name)


def test_contract_covers_what_the_neutral_package_calls():
    src = "\n".join(p.read_text() for p in ROOT.rglob("*.py"))
    used = set(re.findall(r"\.module\(\"(\w+)\"\)", src)) | set(re.findall(r"_module = \"(\w+)\"", src))
    assert used and used <= set(ADAPTER_MODULES), used - set(ADAPTER_MODULES)
    from dualdl.nn.layers import LAYERS
    from dualdl import ops
    # the layers are declared once, in LAYERS (checked by tests/test_layer_contract.py)
    assert not set(LAYERS) & set(CONTRACT["nn"]), set(LAYERS) & set(CONTRACT["nn"])
    assert set(ops.__all__) - {"concat"} <= set(CONTRACT["ops"]), set(ops.__all__) - set(CONTRACT["ops"])


def test_signature_check_accepts_added_optional_parameters_only():
    want = inspect.signature(stub("(x, dim=..., *, keepdim=...)"))
    ok = [lambda x, dim=0, out=None, *, keepdim=False, device=None: 0,
          lambda x, dim=None, *args, keepdim=False, **kwargs: 0,
          lambda x=None, dim=0, *, keepdim=False: 0]
    for f in ok:
        assert signature_mismatch(want, inspect.signature(f)) is None
    bad = {
        "parameter 'dim' is missing": lambda x, *, keepdim=False: 0,
        "'keepdim' is positional or keyword, the contract says keyword-only": lambda x, dim=0, keepdim=False: 0,
        "'x' is at position 1, the contract says 0": lambda dim=0, x=None, *, keepdim=False: 0,
        "'dim' is required": lambda x, dim, *, keepdim=False: 0,
        "extra required parameter(s) out": lambda x, dim=0, *, keepdim=False, out: 0,
    }
    for why, f in bad.items():
        got = signature_mismatch(want, inspect.signature(f))
        assert got is not None and why in got, (why, got)


def test_a_broken_adapter_is_reported(tmp_path, monkeypatch):
    pkg = tmp_path / "dualdl_broken"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text("def relu(x, inplace):\n    return x\nsigmoid = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = check_adapter("dualdl_broken")
    text = "\n".join(problems)
    assert "dualdl_broken.core: cannot be imported" in text
    assert "dualdl_broken.ops.relu(x, inplace): extra required parameter(s) inplace" in text
    assert "dualdl_broken.ops.sigmoid: expected a function, got int" in text
    assert "dualdl_broken.ops.tanh: missing" in text
    sys.modules.pop("dualdl_broken", None)
    sys.modules.pop("dualdl_broken.ops", None)


def _imports(path: pathlib.Path) -> set:
    """Every dualdl module ``path`` imports, at any level (function bodies included)."""
    pkg = "dualdl"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == pkg}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = node.module or ""
                mods = [f"{pkg}.{base}"] if base else [f"{pkg}.{a.name}" for a in node.names]
                out |= {m.rstrip(".") for m in mods}
            elif (node.module or "").split(".")[0] == pkg:
                out.add(node.module)
    return out


def test_devices_is_a_leaf_and_backend_devices_random_have_no_circle():
    assert _imports(ROOT / "devices.py") == set()
    assert _imports(ROOT / "config.py") == set()
    assert _imports(ROOT / "contract.py") == set()
    backend = _imports(ROOT / "backend.py")
    assert "dualdl.random" not in backend and "dualdl.tensor" not in backend, backend
    assert "dualdl.devices" in backend and "dualdl.backend" in _imports(ROOT / "random.py")
