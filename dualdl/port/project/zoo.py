"""Model zoo calls of a Gluon project, translated at conversion time: a converted project imports
torch and numpy only, so ``get_model('cifar_resnet20_v1', classes=10)`` must become torch
source. For each call of a registered factory (gluoncv's ``model_zoo.get_model``, Gluon's
``model_zoo.vision.get_model`` and its factory functions; other domains register theirs, e.g.
gluonnlp's ``get_model`` in ``zoo_nlp``), with literal arguments or a ``--zoo NAME[:k=v,...]``
spec for a call whose arguments are known at run time only, the Gluon block is built and
translated by :func:`dualdl.port.translate` (its float64 proof must pass), and the module is
written to ``OUT/dualdl_models/<stem>.py`` with an entry in ``OUT/dualdl_models/index.json``.
The converted call (``g2t.zoo('<factory>')(...)``, :mod:`dualdl.port.project.table_vision`)
finds its configuration there and builds the module under Gluon's ``save_parameters`` names.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

__all__ = ["ZooEntry", "ZOO", "register_zoo", "find_calls", "parse_spec", "write_models", "MODELS"]

#: the folder of the converted project that holds the translated zoo models
MODELS = "dualdl_models"


@dataclass
class ZooEntry:
    """How to translate a factory's call: ``build(*args, **kwargs)`` returns the Gluon block
    (or ``(block, extra)`` when ``returns`` names the g2t function ``f(model, extra, args,
    kwargs)`` making the call's result; ``extra`` JSON-able); ``sample(block, args, kwargs)``
    the list of numpy inputs the translator traces with; ``ignore``: keyword arguments that do
    not change the model; ``translate_kw``: more keywords for :func:`dualdl.port.translate`."""
    build: Callable[..., Any]
    sample: Callable[[Any, tuple, dict], List[Any]]
    ignore: Tuple[str, ...] = ("ctx", "root")
    translate_kw: Dict[str, Any] = field(default_factory=dict)
    returns: str = ""


#: qualified factory name (as the converter resolves it) -> its entry
ZOO: Dict[str, ZooEntry] = {}
#: modules registering more factories, imported when a project is converted
DOMAINS = ("zoo_nlp",)


def register_zoo(qualified: str, entry: ZooEntry) -> None:
    ZOO[qualified] = entry


def _image_sample(block: Any, args: tuple, kwargs: dict) -> List[Any]:
    """A (2, 3, S, S) image batch: S 32 for CIFAR models, 299 for Inception v3, else 224."""
    import numpy as np
    name = str(args[0] if args else kwargs.get("name", getattr(block, "name", ""))).lower()
    size = 32 if "cifar" in name else 299 if "inception" in name else 224
    return [np.random.default_rng(0).standard_normal((2, 3, size, size)).astype(np.float32)]


def _gluoncv_get_model(*args: Any, **kwargs: Any) -> Any:
    from ..gluoncv_compat import import_gluoncv
    return import_gluoncv().model_zoo.get_model(*args, **kwargs)


def _vision(fn: str) -> Callable[..., Any]:
    def build(*args: Any, **kwargs: Any) -> Any:
        from mxnet.gluon.model_zoo import vision
        return getattr(vision, fn)(*args, **kwargs)
    return build


def _builtin() -> None:
    from .table_vision import VISION_FACTORIES
    gluon_bn = {"batchnorm": "gluon"}
    register_zoo("gluoncv.model_zoo.get_model", ZooEntry(_gluoncv_get_model, _image_sample,
                                                         translate_kw=gluon_bn))
    for fn in ("get_model",) + VISION_FACTORIES:
        register_zoo("mxnet.gluon.model_zoo.vision." + fn,
                     ZooEntry(_vision(fn), _image_sample, translate_kw=gluon_bn))


_builtin()
_LOADED: List[str] = []


def _load_domains() -> None:
    for dom in DOMAINS:
        if dom in _LOADED:
            continue
        try:
            importlib.import_module(f"{__package__}.{dom}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{dom}":
                raise
        _LOADED.append(dom)


# ----------------------------------------------------------------------------- finding the calls
@dataclass
class ZooCall:
    factory: str
    line: int
    args: Optional[tuple] = None          # None: not literal (known at run time only)
    kwargs: Optional[dict] = None


def _factory_of(qualified: str) -> Optional[str]:
    """The factory a qualified name calls: the name inside its table target ``g2t.zoo('...')``."""
    from .table import lookup_api
    target, _ = lookup_api(qualified)
    m = re.fullmatch(r"g2t\.zoo\('([^']+)'\)", target or "")
    return m.group(1) if m else None


def find_calls(text: str) -> List[ZooCall]:
    """The zoo factory calls of one file's source, their literal arguments where they are."""
    import libcst as cst
    from .convert import _imports
    module = cst.parse_module(text)
    aliases = _imports(module)
    if not aliases:
        return []
    tree = ast.parse(text)
    out: List[ZooCall] = []

    def qual(node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.Name):
            return aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = qual(node.value)
            return f"{base}.{node.attr}" if base else None
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        q = qual(node.func)
        factory = _factory_of(q) if q else None
        if factory is None:
            continue
        call = ZooCall(factory, node.lineno)
        ignore = ZOO[factory].ignore if factory in ZOO else ()
        try:
            if any(isinstance(a, ast.Starred) for a in node.args) or \
                    any(k.arg is None for k in node.keywords):
                raise ValueError
            call.args = tuple(ast.literal_eval(a) for a in node.args)
            call.kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords
                           if k.arg not in ignore}
        except ValueError:
            call.args = call.kwargs = None
        out.append(call)
    return out


def parse_spec(spec: str) -> Tuple[tuple, dict]:
    """``"cifar_resnet20_v1:classes=10,drop_rate=0.1"`` -> ``(('cifar_resnet20_v1',), {...})``
    (values by ``ast.literal_eval``; a value that is no literal is taken as a string)."""
    name, _, rest = spec.partition(":")
    kwargs: Dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        k, eq, v = item.partition("=")
        if not eq or not k.strip().isidentifier():
            raise ValueError(f"--zoo {spec!r}: {item!r} is not key=value; write NAME[:k=v,...]")
        try:
            kwargs[k.strip()] = ast.literal_eval(v.strip())
        except (ValueError, SyntaxError):
            kwargs[k.strip()] = v.strip()
    return ((name.strip(),) if name.strip() else ()), kwargs


# ----------------------------------------------------------------------------- translating them
def _stem(factory: str, args: tuple, key: str, taken: Dict[str, str]) -> str:
    """The module's file name: the model's name (``get_model``'s first argument, or the factory
    function's own name), made an identifier; another configuration of it gets a hash."""
    fn = factory.rsplit(".", 1)[-1]
    name = str(args[0]) if args and fn == "get_model" else fn
    stem = re.sub(r"\W", "_", name).strip("_") or "model"
    if stem[0].isdigit():
        stem = "m_" + stem
    if taken.get(stem, key) != key:
        stem += "_" + hashlib.sha1(key.encode()).hexdigest()[:8]
    taken[stem] = key
    return stem


def _translate(factory: str, args: tuple, kwargs: dict, folder: str, stem: str) -> Dict[str, Any]:
    """Build, translate (float64 proof) and write one configuration; its index entry."""
    import numpy as np
    from ..translate.api import translate
    from .api import ProjectError, check_torch_only
    from .torch_runtime_vision import zoo_key
    entry = ZOO[factory]
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    call = f"{factory}({', '.join(shown)})"
    if kwargs.get("pretrained"):
        raise ProjectError(f"{call}: pretrained weights are not translated here; build it with "
                           f"pretrained=False and convert the weights with dualdl convert")
    t0 = time.perf_counter()
    try:
        import mxnet as mx
        built = entry.build(*args, **kwargs)
    except Exception as e:          # the factory refuses the configuration (an unknown name ...)
        raise ProjectError(f"{call} cannot be built at conversion time ({type(e).__name__}: "
                           f"{' '.join(str(e).split())[:160]}); give its arguments with "
                           f"--zoo NAME[:k=v,...]") from None
    block, extra = built if entry.returns else (built, None)
    block.initialize(mx.init.Xavier())
    sample = entry.sample(block, args, kwargs)
    block(*[mx.nd.array(np.asarray(s)) for s in sample])
    with tempfile.TemporaryDirectory() as tmp:
        rep = translate(block, sample, tmp, stem, **dict({"force": True}, **entry.translate_kw))
        if not rep.ok:
            raise ProjectError(f"{call}: dualdl translate's proof failed "
                               f"({rep.summary().splitlines()[0]}); translate it by hand")
        with open(rep.source_path, encoding="utf-8") as f:
            source = f.read()
    check_torch_only(source)
    with open(os.path.join(folder, stem + ".py"), "w", encoding="utf-8") as f:
        f.write(source)
    rename = {r["torch"]: r["gluon"] or "" for r in rep.mapping
              if r["torch"] != r["gluon"]}
    return {"factory": factory, "args": list(args), "kwargs": kwargs, "ignore": list(entry.ignore),
            "key": zoo_key(args, kwargs, entry.ignore), "module": stem, "class": rep.class_name,
            "rename": rename, "returns": entry.returns, "extra": extra,
            "proof": f"float64 max abs {rep.max_abs_diff:.3g}",
            "seconds": round(time.perf_counter() - t0, 3)}


def write_models(texts: Dict[str, str], out_dir: str,
                 zoo: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """Translate every zoo configuration the files call (``texts``: path -> source) into
    ``out_dir/dualdl_models/`` (module files and ``index.json``); ``zoo``: specs for the calls
    whose arguments are known at run time only. Returns one dict per model written, and one per
    call left untranslated (``"todo"``: why)."""
    from .api import ProjectError
    _load_domains()
    calls = [(rel, c) for rel, text in texts.items() for c in find_calls(text)]
    if not calls and not zoo:
        return []
    wanted: Dict[str, Tuple[str, tuple, dict]] = {}
    todo: List[Dict[str, Any]] = []
    from .torch_runtime_vision import zoo_key
    for rel, c in calls:
        if c.factory not in ZOO:
            todo.append({"factory": c.factory, "file": rel, "line": c.line,
                         "todo": "no zoo entry registered for this factory"})
        elif c.args is not None:
            wanted.setdefault(c.factory + zoo_key(c.args, c.kwargs, ZOO[c.factory].ignore),
                              (c.factory, c.args, c.kwargs))
    late = sorted({c.factory for _, c in calls if c.args is None and c.factory in ZOO})
    for spec in zoo:
        args, kwargs = parse_spec(spec)
        if not late:
            raise ProjectError(f"--zoo {spec!r}: no zoo call with arguments known at run time "
                               f"only in the project; literal calls are translated as written")
        wanted.setdefault(late[0] + zoo_key(args, kwargs, ZOO[late[0]].ignore),
                          (late[0], args, kwargs))
    if late and not zoo:
        todo += [{"factory": c.factory, "file": rel, "line": c.line,
                  "todo": "arguments known at run time only: name the configuration with "
                          "--zoo NAME[:k=v,...]"} for rel, c in calls if c.args is None]
    folder = os.path.join(out_dir, MODELS)
    os.makedirs(folder, exist_ok=True)
    taken: Dict[str, str] = {}
    models = [_translate(f, a, k, folder, _stem(f, a, key, taken))
              for key, (f, a, k) in wanted.items()]
    with open(os.path.join(folder, "index.json"), "w", encoding="utf-8") as f:
        json.dump(models, f, indent=1)
    return models + todo
