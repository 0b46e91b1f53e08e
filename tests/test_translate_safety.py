"""The generated file is code users import (issue 32): text and values from the Gluon model reach
it escaped. A class path with triple quotes and a newline, a child whose name holds a newline and
an infinite constant produce a file that parses to exactly the statements translate writes, runs
nothing on import and gives the proven numbers."""
import ast
import keyword
import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("mxnet")

from mxnet import gluon  # noqa: E402

from dualdl import port  # noqa: E402
try:
    from dualdl.port.translate.safe import comment, docstring_text, literal  # noqa: E402
except ImportError:     # an older checkout, measured with the adversarial cases below
    comment = docstring_text = literal = None

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


# ---- 50 adversarial models (issue 32) --------------------------------------------------------
# Each case is a real Gluon model with a hostile name, class path or value. A case holds when
# translate either writes a file that parses to definitions only, runs nothing on import, defines
# each name once without shadowing torch / nn / F, keeps one torch tensor per Gluon tensor and
# proves ok, or refuses with a one-line ValueError (TranslationError included) and no report; and
# in both cases the Gluon block's parameters are unchanged.
PWN = 'import sys; sys.modules["pwned"] = 1'


def _dense(**kw):
    return gluon.nn.Dense(3, in_units=4, **kw)


class _Children(gluon.HybridBlock):
    """Children registered under the given names (``register_child`` takes any string)."""

    def __init__(self, names, share=False):
        super().__init__()
        first = None
        for n in names:
            d = _dense(params=first.params) if share and first is not None else _dense()
            first = first or d
            self.register_child(d, n)

    def hybrid_forward(self, F, x):
        out = None
        for c in self._children.values():
            y = c(x)
            out = y if out is None else out + y
        return out


class _Params(gluon.HybridBlock):
    """Own parameters under the given names (Gluon passes them to hybrid_forward by name)."""

    def __init__(self, names):
        super().__init__()
        self.dense = _dense()
        for i, n in enumerate(names):
            self._reg_params[n] = self.params.get(f"p{i}", shape=(3,))

    def hybrid_forward(self, F, x, **params):
        y = self.dense(x)
        for k in sorted(params):
            y = F.broadcast_mul(y, params[k].reshape((1, 3)))
        return y


class _Leafy(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = _dense()

    def hybrid_forward(self, F, x):
        return F.relu(self.dense(x))


class _Outer(gluon.HybridBlock):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def hybrid_forward(self, F, x):
        return F.sigmoid(self.inner(x))


class _Clip(gluon.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = _dense()

    def hybrid_forward(self, F, x):
        return F.clip(self.dense(x), -np.inf, np.inf) + F.maximum(x.sum(axis=1, keepdims=True), -np.inf)


def _cls(name, base=_Leafy, **attrs):
    return type(name, (base,), dict(attrs))


def _with_concurrent():
    from mxnet.gluon.contrib.nn import HybridConcurrent
    net = HybridConcurrent(axis=1)
    net.add(_dense(), _dense())
    return net


def _seq(*blocks):
    net = gluon.nn.HybridSequential()
    net.add(*blocks)
    return net


def _conc_top_class():
    class Concurrent(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            self.branches = _with_concurrent()

        def hybrid_forward(self, F, x):
            return F.relu(self.branches(x))
    return Concurrent()


def _leaf_top():
    cls = type("Dense", (gluon.nn.Dense,), {"__module__": "mxnet.gluon.nn.basic_layers",
                                            "__qualname__": f'D"""\n{PWN}\n"""'})
    return cls(3, in_units=4)


ADVERSARIAL = {
    # child names
    "child newline": lambda: (_Children([f"a\n{PWN}"]), None),
    "child a-b": lambda: (_Children(["a-b"]), None),
    "child superscript two": lambda: (_Children(["\u00b2"]), None),
    "child fi ligature": lambda: (_Children(["\ufb01"]), None),
    "child __debug__": lambda: (_Children(["__debug__"]), None),
    "child keyword class": lambda: (_Children(["class"]), None),
    "child None": lambda: (_Children(["None"]), None),
    "child forward": lambda: (_Children(["forward"]), None),
    "child to": lambda: (_Children(["to"]), None),
    "child training": lambda: (_Children(["training"]), None),
    "child torch": lambda: (_Children(["torch"]), None),
    "child nn": lambda: (_Children(["nn"]), None),
    "child F": lambda: (_Children(["F"]), None),
    "child 0abc": lambda: (_Children(["0abc"]), None),
    "child empty": lambda: (_Children([""]), None),
    "child __init__": lambda: (_Children(["__init__"]), None),
    "child _modules": lambda: (_Children(["_modules"]), None),
    "child __mangled": lambda: (_Children(["__secret"]), None),
    "child state_dict": lambda: (_Children(["state_dict"]), None),
    # two children whose names collapse to one
    "children a-b a_b": lambda: (_Children(["a-b", "a_b"]), None),
    "children fi-ligature fi": lambda: (_Children(["\ufb01", "fi"]), None),
    "children a.b a_b": lambda: (_Children(["a.b", "a_b"]), None),
    "children forward forward_": lambda: (_Children(["forward", "forward_"]), None),
    "children 'x y' x_y": lambda: (_Children(["x y", "x_y"]), None),
    # own parameters
    "param newline": lambda: (_Params([f"w\n{PWN}"]), None),
    "params a-b a_b": lambda: (_Params(["a-b", "a_b"]), None),
    "param to": lambda: (_Params(["to"]), None),
    "param torch": lambda: (_Params(["torch"]), None),
    "param __debug__": lambda: (_Params(["__debug__"]), None),
    # a tied-weight comment
    "tied child newline": lambda: (_Children(["a", f"b\n{PWN}"], share=True), None),
    # class names
    "class F": lambda: (_cls("F")(), None),
    "class torch": lambda: (_cls("torch")(), None),
    "class nn": lambda: (_cls("nn")(), None),
    "class superscript two": lambda: (_cls("\u00b2")(), None),
    "class fi ligature": lambda: (_cls("\ufb01")(), None),
    "class __debug__": lambda: (_cls("__debug__")(), None),
    "class None": lambda: (_cls("None")(), None),
    "class Concurrent beside the helper": lambda: (_conc_top_class(), None),
    "child class F": lambda: (_Outer(_cls("F")()), None),
    "clip to -inf, inf": lambda: (_Clip(), None),
    # --name
    "name net over class Net": lambda: (_seq(_cls("Net")()), "net"),
    "name torch": lambda: (_Leafy(), "torch"),
    "name fi ligature": lambda: (_Leafy(), "\ufb01"),
    "name __debug__": lambda: (_Leafy(), "__debug__"),
    "name class": lambda: (_Leafy(), "class"),
    "name os": lambda: (_Leafy(), "os"),
    "name Concurrent": lambda: (_seq(_with_concurrent()), "Concurrent"),
    # class paths
    "module triple quote": lambda: (_cls("M", __module__=f'm"""\n{PWN}\n"""')(), None),
    "qualname NUL": lambda: (_cls("Q", __qualname__="Q\x00x")(), None),
    "leaf top hostile qualname": lambda: (_leaf_top(), None),
}


def _params_of(block):
    return {k: v.data().asnumpy().copy() for k, v in block.collect_params().items()}


def _importable_module_name(name):
    return (isinstance(name, str) and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
            and name != "__debug__" and name not in sys.stdlib_module_names
            and name not in ("torch", "safetensors", "numpy", "mxnet", "dualdl"))


def adversarial_case(key, out_dir):
    """(held, why) for one case of ``ADVERSARIAL``."""
    import mxnet as mx
    mx.random.seed(0)
    block, name = ADVERSARIAL[key]()
    block.initialize(mx.init.Uniform(0.5))
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    block(mx.nd.array(x))
    before = _params_of(block)
    sys.modules.pop("pwned", None)
    try:
        r = port.translate(block, [x], out_dir, name=name)
    except ValueError as e:        # TranslationError is a ValueError
        after = _params_of(block)
        if len(str(e).splitlines()) != 1:
            return False, f"refused with a multi-line message: {e}"
        if not (type(e).__name__ == "TranslationError" or str(e).startswith("translate")):
            return False, f"refused with a message that does not say what to do: {e}"
        if any(f.endswith(".report.json") for f in os.listdir(out_dir)):
            return False, f"refused but left a report: {e}"
        if set(after) != set(before) or any(not np.array_equal(after[k], before[k]) for k in before):
            return False, "the Gluon block changed"
        return True, f"refused: {e}"
    except Exception as e:
        return False, f"raw {type(e).__name__}: {str(e)[:200]}"
    after = _params_of(block)
    if set(after) != set(before) or any(not np.array_equal(after[k], before[k]) for k in before):
        return False, "the Gluon block's parameters changed"
    src = open(r.source_path, encoding="utf-8").read()
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        return False, f"SyntaxError {e}"
    top = tree.body
    if not all(isinstance(n, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef))
               or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in top):
        return False, "statements at module level"
    defined = [n.name for n in top if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
    if len(defined) != len(set(defined)) or {"torch", "nn", "F"} & set(defined):
        return False, f"names defined twice or shadowing: {defined}"
    for cls in (n for n in top if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            params = [a.arg for a in fn.args.args]
            if {"torch", "nn", "F"} & set(params) or len(params) != len(set(params)):
                return False, f"{cls.name}.{fn.name} arguments {params}"
    if not _importable_module_name(r.name):
        return False, f"module name {r.name!r} cannot be imported as itself"
    import importlib.util
    spec = importlib.util.spec_from_file_location("adv_translated", r.source_path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        return False, f"import fails: {type(e).__name__}: {e}"
    if "pwned" in sys.modules:
        return False, "importing ran the payload"
    if not hasattr(mod, r.class_name):
        return False, f"class {r.class_name!r} not in the module"
    torch_keys = [m["torch"] for m in r.mapping]
    own = [m for m in r.mapping if "tied_to" not in m]          # a tied tensor is one Gluon tensor
    if len(torch_keys) != len(set(torch_keys)) or len(own) != len(before):
        return False, f"{len(before)} Gluon tensors became torch keys {torch_keys}"
    if not r.ok:
        return False, "report not ok: " + r.summary()[:300]
    return True, "ok"


@pytest.mark.parametrize("key", list(ADVERSARIAL))
def test_adversarial_model_holds(key, tmp_path):
    held, why = adversarial_case(key, str(tmp_path))
    assert held, why


if __name__ == "__main__":      # count the cases that hold (run against any checkout via PYTHONPATH)
    import tempfile
    results = {}
    for k in ADVERSARIAL:
        with tempfile.TemporaryDirectory() as d:
            results[k] = adversarial_case(k, d)
    for k, (h, why) in results.items():
        print(f"{'HELD' if h else 'FAIL'}  {k}: {why[:160]!r}")
    print(f"{sum(h for h, _ in results.values())}/{len(results)} adversarial cases held")


# ---- a crash leaves the previous complete result, or no report --------------------------------
_KILLED = """
import sys
import mxnet as mx
import numpy as np
from mxnet import gluon
from dualdl import port
mx.random.seed(int(sys.argv[2]))
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(5, in_units=4), gluon.nn.Dense(3, in_units=5))
net.initialize(mx.init.Uniform(1.0))
x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
print("done", port.translate(net, [x], sys.argv[1], name="net").ok, flush=True)
"""


def _translate_seq(out, seed):
    import mxnet as mx
    mx.random.seed(seed)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, in_units=4), gluon.nn.Dense(3, in_units=5))
    net.initialize(mx.init.Uniform(1.0))
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    return port.translate(net, [x], str(out), name="net")


def _files(out):
    return {p: (out / p).read_bytes() for p in sorted(os.listdir(out))}


def _kill_at(out, point, seed=2):
    """Run translate in a fresh process, SIGKILL it when it reaches ``point``."""
    import signal
    import subprocess
    env = dict(os.environ, DUALDL_TRANSLATE_PAUSE=point)
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(out), str(seed)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.strip() == f"dualdl-translate-paused: {point}", (line, proc.stderr.read()[-2000:])
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def _check_kill(tmp_path, point):
    out = tmp_path / "out"
    first = _translate_seq(out, seed=1)
    assert first.ok
    v1 = _files(out)
    _kill_at(out, point)
    now = _files(out)
    staged = [p for p in now if p.startswith(".net.tmp-")]
    if point in ("staged", "before-publish"):      # killed while proving: the previous result, untouched
        assert {p: b for p, b in now.items() if p not in staged} == v1
        assert sorted(p.rsplit(".", 1)[1] for p in staged) == ["py", "safetensors"]
    else:                                           # killed while renaming: nothing claims to be complete
        assert "net.report.json" not in now
        assert now["net.safetensors"] != v1["net.safetensors"]
    again = _translate_seq(out, seed=3)            # the next run completes and removes the dead run's files
    assert again.ok and sorted(_files(out)) == ["net.py", "net.report.json", "net.safetensors"]
    import json
    from safetensors.numpy import load_file
    rep = json.loads((out / "net.report.json").read_text())
    assert rep["ok"] is True
    w = load_file(str(out / "net.safetensors"))
    assert not np.array_equal(w["0.weight"], load_file_bytes(v1["net.safetensors"])["0.weight"])


def load_file_bytes(data):
    from safetensors.numpy import load
    return load(data)


def test_kill_9_while_proving_leaves_the_previous_complete_result(tmp_path):
    _check_kill(tmp_path, "staged")


@pytest.mark.slow   # a fresh interpreter per kill point; the fast suite kills at "staged"
@pytest.mark.parametrize("point", ["before-publish", "published .safetensors", "published .py"])
def test_kill_9_at_each_step_of_publishing(tmp_path, point):
    _check_kill(tmp_path, point)


def test_an_error_while_proving_keeps_the_previous_result_and_no_staged_files(tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert _translate_seq(out, seed=1).ok
    v1 = _files(out)
    from dualdl.port.translate.publish import on_step

    def boom(point):
        if point == "staged":
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt), on_step(boom):
        _translate_seq(out, seed=2)
    assert _files(out) == v1


@pytest.mark.parametrize("source, says", [
    ('import torch\nclass A:\n    pass\nclass A:\n    pass\n', "A defined twice"),
    ('import torch\nimport os\nos.system("x")\n', "a Expr statement at module level"),
    ('import torch\nx = 1\n', "a Assign statement at module level"),
    ('import torch\nclass F:\n    pass\nimport torch.nn.functional as F\n', "F defined twice"),
    ('import torch\ndef f(self, torch):\n    return torch.relu(self)\n', "torch rebound"),
    ('import torch\ndef f(x):\n    nn = x\n    return nn\n', "nn rebound"),
    ('import torch\ndef f(x):\n    float = x * 2\n    return x + float("inf")\n',
     "float is both a local of f (line 2) and a function it calls"),
    ('import torch\ndef helper(x):\n    return x\ndef f(x):\n    helper = x\n    return helper(x)\n',
     "helper is both a local of f"),
    ('class C:\n    def f(self):\n        self.__debug__ = 1\n', "SyntaxError"),
    ('import torch\nclass C:\n    def f(self):\n        import mxnet\n', "it imports mxnet"),
    ('from dualdl.nn import Dense\n', "it imports dualdl.nn"),
    ('class C:\n    """a\x00b"""\n', "Error"),
])
def test_the_last_check_refuses_source_that_is_not_what_translate_means(source, says):
    from dualdl.port.translate.safe import check_source
    from dualdl.port.translate.errors import TranslationError
    with pytest.raises(TranslationError, match="refuses to save") as e:
        check_source(source)
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)
    check_source('"""doc"""\nimport torch\nfrom torch import nn\n\nclass A(nn.Module):\n'
                 '    def forward(self, x):\n        y = torch.relu(x)\n        return y * float("inf")\n')


@pytest.mark.slow   # two fresh interpreters
def test_two_runs_into_one_folder_publish_one_after_the_other(tmp_path):
    """Run A stops (holding the folder's lock) between its weights' and its source's rename; run B
    proves a different model and waits for the lock instead of mixing its files with A's; when A
    is killed, B publishes a consistent result (its report, its weights, its source)."""
    import queue
    import signal
    import subprocess
    import threading
    import time
    out = tmp_path / "out"
    assert _translate_seq(out, seed=1).ok
    a = subprocess.Popen([sys.executable, "-c", _KILLED, str(out), "2"], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, DUALDL_TRANSLATE_PAUSE="published .safetensors"))
    b = None
    try:
        assert a.stdout.readline().strip() == "dualdl-translate-paused: published .safetensors"
        b = subprocess.Popen([sys.executable, "-c", _KILLED, str(out), "5"], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, DUALDL_TRANSLATE_TRACE="1"))
        lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=lambda: [lines.put(ln.strip()) for ln in b.stdout], daemon=True).start()
        seen = []
        while "dualdl-translate-at: locking" not in seen:
            seen.append(lines.get(timeout=240))
        time.sleep(2.0)
        assert lines.empty() and b.poll() is None        # B waits: it has not removed A's state
        os.kill(a.pid, signal.SIGKILL)
        a.wait()
        while not seen[-1].startswith("done"):
            seen.append(lines.get(timeout=120))
        assert seen[-1] == "done True" and b.wait(timeout=60) == 0
    finally:
        for p in (a, b):
            if p is not None:
                p.kill()
                p.wait()
    import json
    from safetensors.numpy import load_file
    rep = json.loads((out / "net.report.json").read_text())
    assert rep["ok"] is True and sorted(os.listdir(out)) == ["net.py", "net.report.json", "net.safetensors"]
    # the published weights are B's (seed 5): the same as translating seed 5 again
    b_weights = load_file(str(out / "net.safetensors"))
    _translate_seq(tmp_path / "again", seed=5)
    again = load_file(str(tmp_path / "again" / "net.safetensors"))
    assert all(np.array_equal(b_weights[k], again[k]) for k in again)


def test_a_translation_error_is_one_line_whatever_the_class_is_called():
    from dualdl.port.translate.errors import TranslationError
    e = TranslationError("no translation", block=f"A\n{PWN}", path="x\ny")
    assert len(str(e).splitlines()) == 1 and "A\\nimport sys" in str(e)


class _EvilStr(str):
    def __repr__(self):
        return f"'x')\n{PWN}\n("


class _EvilObj:
    def __repr__(self):
        return f"1)\n{PWN}\n("


def test_literals_are_written_by_the_builtin_types_not_by_the_model():
    assert literal(_EvilStr("a\nb")) == "'a\\nb'"
    assert literal((np.float32("inf"), np.int64(3), np.bool_(True), np.float64(0.5))) == \
        '(float("inf"), 3, True, 0.5)'
    assert literal({"a": (1,)}) == "{'a': (1,)}"
    from dualdl.port.translate.errors import TranslationError
    for bad in (_EvilObj(), np.ones(2), object()):
        with pytest.raises(TranslationError, match="cannot be written into the generated source"):
            literal(bad)



_SAMPLE_MOD = ("from mxnet.gluon import nn\n\ndef make():\n    net = nn.Dense(4, in_units=3)\n"
               "    net.initialize()\n    return net\n")


@pytest.mark.parametrize("kind, says", [("truncated.npz", "is not a numpy .npz/.npy file of arrays (File is not a zip"),
                                        ("truncated.npy", "is not a numpy .npz/.npy file of arrays (EOF"),
                                        ("nan.npz", "input 0 holds 6 NaN values"), ("ok.npy", None)])
def test_a_broken_or_nan_sample_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, kind, says):
    """Were 'internal error' (a truncated .npz: BadZipFile; any .npy: TypeError) or a failed proof of NaN
    against NaN (exit 1); a .npy sample translates. translate() refuses a NaN sample alike."""
    from dualdl.cli import main
    (tmp_path / "sample_mod_t2.py").write_text(_SAMPLE_MOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    a = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    a = np.full_like(a, np.nan) if kind.startswith("nan") else a
    path = str(tmp_path / kind)
    (np.savez if kind.endswith(".npz") else np.save)(path, a)
    if kind.startswith("truncated"):
        os.truncate(path, 50)
    rc = main(["translate", "sample_mod_t2:make", "--sample", path, "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == (0 if says is None else 2) and (says is None or (len(err.splitlines()) == 1 and says in err)), err
    if kind.startswith("nan"):
        import sample_mod_t2
        with pytest.raises(ValueError, match="sample input 0 holds 6 NaN values"):
            port.translate(sample_mod_t2.make(), a, str(tmp_path / "api"))
