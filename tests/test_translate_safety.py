"""The generated file is code users import (issue 32): text and values from the Gluon model reach
it escaped. A class path with triple quotes and a newline, a child whose name holds a newline and
an infinite constant produce a file that parses to exactly the statements translate writes, runs
nothing on import and gives the proven numbers."""
import ast
import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("mxnet")

from mxnet import gluon  # noqa: E402

from dualdl import port  # noqa: E402
from dualdl.port.translate.safe import comment, docstring_text, literal  # noqa: E402

HOSTILE = ['a\nimport os; os.system("echo pwned")', 'x"""\nraise SystemExit\n"""', "back\\slash\\",
           "line\rbreak", "sep\u2028arator", "form\x0cfeed", "²ﬁ", "'''", "#"]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_comment_stays_one_comment(text):
    src = f"x = 1  # {comment(text)}\ny = 2\n"
    tree = ast.parse(src)
    assert [type(n).__name__ for n in tree.body] == ["Assign", "Assign"]
    assert src.count("\n") == 2 and comment(text).isprintable() and comment(text).isascii()


@pytest.mark.parametrize("text", HOSTILE)
def test_a_docstring_stays_one_docstring(text):
    src = f'class C:\n    """Translated from Gluon {docstring_text(text)}."""\n'
    tree = ast.parse(src)
    assert len(tree.body) == 1 and len(tree.body[0].body) == 1
    doc = ast.get_docstring(tree.body[0], clean=False)
    assert doc.startswith("Translated from Gluon ") and "\n" not in doc


@pytest.mark.parametrize("v", [float("inf"), float("-inf"), float("nan"), 1.5, -0.0, 3, (float("inf"), 2),
                               [float("nan")], "s\n", None, True, (1,)])
def test_literals_evaluate_to_the_value(v):
    got = eval(literal(v), {"__builtins__": {"float": float}})
    assert repr(got) == repr(v)


class _Hostile(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = gluon.nn.Dense(3, in_units=4)

    def hybrid_forward(self, F, x):
        s = x.sum(axis=1, keepdims=True)
        return self.dense(x) + s / np.inf + s / -np.inf      # constants inf and -inf: 0 and -0 here


_Hostile.__qualname__ = 'Hostile"""\nimport sys; sys.modules["pwned"] = 1\n"""'


def test_hostile_class_path_and_infinite_constants_translate_safely(tmp_path):
    block = _Hostile()
    block.initialize()
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    r = port.translate(block, [x], str(tmp_path), name="hostile")
    src = open(r.source_path).read()
    tree = ast.parse(src)
    # the module holds its docstring, imports and class definitions only: nothing runs on import
    assert all(isinstance(n, (ast.Expr, ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef))
               for n in tree.body), [type(n).__name__ for n in tree.body]
    assert all(not isinstance(n, ast.Expr) or isinstance(n.value, ast.Constant) for n in tree.body)
    assert 'float("inf")' in src and 'float("-inf")' in src and "\ninf" not in src
    assert r.ok, r.summary()
    sys.modules.pop("pwned", None)
    import importlib.util
    spec = importlib.util.spec_from_file_location("hostile_translated", r.source_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "pwned" not in sys.modules
    assert os.path.exists(r.source_path)
