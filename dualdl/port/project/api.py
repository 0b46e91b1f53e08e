"""``convert_project(src_dir, out_dir)``: every ``.py`` of a Gluon project converted to PyTorch
source (:mod:`dualdl.port.project.convert`), the project's ``gluon2torch.py`` written beside
them (torch and numpy only), and a report: per file its lines, the lines that name a Gluon API,
those converted automatically, the ``# dualdl: TODO`` lines (API and why), and the seconds the
conversion alone took."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Sequence

__all__ = ["convert_project", "ProjectReport", "runtime_source", "ProjectError"]

RUNTIME = "gluon2torch.py"
REPORT = "dualdl_project_report.json"
#: the torch-only modules whose definitions make the project's gluon2torch.py, in order
_SOURCES = ("dualdl_torch.gluon_optim", "dualdl.port.recipe.torch_src.init",
            "dualdl.port.recipe.torch_src.sampler", "dualdl.port.recipe.torch_src.metrics",
            "dualdl.port.recipe.torch_src.clip",
            "dualdl.port.project.torch_runtime", "dualdl.port.project.torch_runtime_dist",
            "dualdl.port.project.torch_runtime_train",
            "dualdl.port.translate.conventions:RNN_MODES,rnn_weight_names",
            "dualdl.port.project.torch_runtime_rnn", "dualdl.port.project.torch_runtime_text",
            "dualdl.port.project.torch_runtime_vision",
            "dualdl.port.project.torch_runtime_numpy",
            "dualdl.port.recipe.torch_src.nlp_data", "dualdl.port.project.torch_runtime_nlp")


class ProjectError(ValueError):
    """What was asked of convert_project cannot be done (the message says what to do)."""


@dataclass
class ProjectReport:
    src: str
    out: str
    files: List[Dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0            # the conversion alone (parsing, rewriting), not the I/O: CPU
    #                                 seconds of this process (time.process_time: a shared box)
    models: List[Dict[str, Any]] = field(default_factory=list)   # zoo models translated (zoo.py)

    @property
    def lines(self) -> int:
        return sum(f["lines"] for f in self.files)

    @property
    def api_lines(self) -> int:
        return sum(f["api_lines"] for f in self.files)

    @property
    def converted(self) -> int:
        return sum(f["converted"] for f in self.files)

    @property
    def todo_lines(self) -> int:
        return sum(f["todo_lines"] for f in self.files)

    @property
    def todos(self) -> List[Dict[str, Any]]:
        return [dict(t, file=f["path"]) for f in self.files for t in f["todos"]]

    @property
    def lines_per_second(self) -> float:
        return self.lines / self.seconds if self.seconds else float("inf")

    def to_dict(self) -> Dict[str, Any]:
        return {"src": self.src, "out": self.out, "lines": self.lines,
                "api_lines": self.api_lines, "converted": self.converted,
                "todo_lines": self.todo_lines,
                "seconds": self.seconds, "files": self.files, "models": self.models}

    def summary(self) -> str:
        pct = 100.0 * self.converted / self.api_lines if self.api_lines else 100.0
        out = [f"converted {len(self.files)} file(s), {self.lines} lines: {self.converted} of "
               f"{self.api_lines} lines naming a Gluon API converted automatically ({pct:.1f}%), "
               f"{self.todo_lines} TODO line(s); "
               f"{self.seconds:.3f} s ({self.lines_per_second:.0f} lines/s) -> {self.out}"]
        out += [f"  TODO {t['file']}:{t['line']}: {t['api']}: {t['why']}" for t in self.todos]
        for m in self.models:
            out.append(f"  model {m.get('factory')}: " + (f"TODO {m['file']}:{m['line']}: {m['todo']}"
                       if "todo" in m else f"{m.get('module')}.py ({m.get('proof', '')}, "
                                           f"{m.get('seconds', 0):.1f} s)"))
        return "\n".join(out)


def runtime_source() -> str:
    """The project's ``gluon2torch.py``: the definitions of :data:`_SOURCES`, copied verbatim
    (first one wins for a name two modules define)."""
    from ..recipe.emit import _merge_imports, _parse
    imports: List[str] = []
    defs: Dict[str, str] = {}
    for mod in _SOURCES:
        mod, _, only = mod.partition(":")      # "module:name,name": those definitions only
        imp, d = _parse(mod)
        d = {k: v for k, v in d.items() if k in only.split(",")} if only else d
        imports += [i for i in imp if i not in imports and not i.startswith("from .")]
        for name, src in d.items():
            defs.setdefault(name, src)
    head = ('"""Gluon\'s semantics in torch for a project converted by dualdl convert-project: '
            'layers with Gluon\'s\ndeferred shapes and names, the Trainer with Gluon\'s exact '
            'updates, Gluon\'s DataLoader order,\nlosses, metrics and initializers. It imports '
            'torch and numpy only."""')
    text = "\n".join([head, "from __future__ import annotations", ""] + _merge_imports(imports) +
                     [""] + ["\n" + src + "\n" for src in defs.values()])
    check_torch_only(text)
    return text


#: what a converted project may import besides its own modules
ALLOWED = {"torch", "numpy", "gluon2torch", "__future__", "argparse", "contextlib", "gzip", "os",
           "struct", "re", "math", "random", "typing", "time", "logging", "sys", "json", "copy",
           "collections", "functools", "itertools", "dataclasses", "warnings", "io", "pickle",
           "tarfile", "importlib", "unicodedata", "glob", "atexit"}
FORBIDDEN = ("mxnet", "gluonnlp", "gluoncv", "dualdl", "dualdl_mx", "dualdl_torch")


def check_torch_only(text: str, forbidden_only: bool = False) -> None:
    """Refuse source importing mxnet/gluonnlp/gluoncv/dualdl (``forbidden_only``) or, for the
    runtime, anything beyond torch, numpy and the standard modules of :data:`ALLOWED`."""
    import ast
    for node in ast.walk(ast.parse(text)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        for n in names:
            root = n.split(".")[0]
            if root in FORBIDDEN or (not forbidden_only and root not in ALLOWED):
                raise ProjectError(f"the converted source would import {n!r}")


def _py_files(src: str) -> List[str]:
    out = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        out += [os.path.relpath(os.path.join(root, f), src) for f in sorted(files)
                if f.endswith(".py")]
    return out


def convert_project(src_dir: str, out_dir: str, force: bool = False,
                    zoo: Sequence[str] = ()) -> ProjectReport:
    """Convert every ``.py`` under ``src_dir`` into ``out_dir`` (same relative paths) and write
    ``gluon2torch.py`` and ``dualdl_project_report.json`` there; the model-zoo configurations
    the files call (and ``zoo``: ``NAME[:k=v,...]`` specs for calls known at run time only) are
    translated into ``out_dir/dualdl_models`` (:func:`dualdl.port.project.zoo.write_models`).
    Existing output files are refused unless ``force``."""
    from .convert import convert_source
    src_dir, out_dir = os.path.abspath(src_dir), os.path.abspath(out_dir)
    if not os.path.isdir(src_dir):
        raise ProjectError(f"{src_dir} is not a folder; give the Gluon project's folder")
    if out_dir == src_dir or out_dir.startswith(src_dir + os.sep):
        raise ProjectError(f"{out_dir} is inside the project {src_dir}; write the PyTorch "
                           f"project to another folder")
    files = _py_files(src_dir)
    if not files:
        raise ProjectError(f"{src_dir} holds no .py file")
    targets = files + [RUNTIME, REPORT]
    taken = [t for t in targets if os.path.exists(os.path.join(out_dir, t))]
    if taken and not force:
        raise ProjectError(f"{out_dir} already has {taken[:3]}{' ...' if len(taken) > 3 else ''}; "
                           f"pass --force (force=True) to overwrite them")
    report = ProjectReport(src_dir, out_dir)
    import libcst  # noqa: F401  (loaded before the clock starts: the conversion alone is timed)
    from ..translate import oplib  # noqa: F401
    convert_source("import mxnet as mx\nx = mx.nd.relu(mx.nd.zeros((1,)))\n")   # warm caches
    results = {}
    for rel in files:
        with open(os.path.join(src_dir, rel), encoding="utf-8") as f:
            text = f.read()
        t0 = time.process_time()
        try:
            res = convert_source(text)
        except Exception as e:        # libcst's ParserSyntaxError: the file is not Python 3
            raise ProjectError(f"{rel}: cannot be parsed as Python 3 ({type(e).__name__}: "
                               f"{' '.join(str(e).split())[:200]}); fix or remove it") from None
        report.seconds += time.process_time() - t0
        results[rel] = (res, text)
        report.files.append({"path": rel, "lines": res.lines, "api_lines": len(res.api_lines),
                             "converted": len(res.converted), "todo_lines": len(res.todo_lines),
                             "todos": [{"line": ln, "api": a, "why": w} for ln, a, w in res.todos]})
    from ...atomic import atomic_write_file
    for rel, (res, _) in results.items():
        path = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = res.source.encode()
        atomic_write_file(path, lambda f, data=data: f.write(data))
    os.makedirs(out_dir, exist_ok=True)
    rt = runtime_source().encode()
    atomic_write_file(os.path.join(out_dir, RUNTIME), lambda f: f.write(rt))
    from .zoo import write_models
    report.models = write_models({rel: text for rel, (_, text) in results.items()}, out_dir, zoo)
    rep = json.dumps(report.to_dict(), indent=1).encode()
    atomic_write_file(os.path.join(out_dir, REPORT), lambda f: f.write(rep))
    return report
