"""``translate(block, sample_inputs, out_dir)``: Gluon block -> PyTorch source, weights, proof."""
from __future__ import annotations

import json
import keyword
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from ... import config
from ..verify import Check

__all__ = ["Staging", "TranslateReport", "translate"]


@dataclass
class TranslateReport:
    """What was written, how Gluon tensors map to torch keys, and every check with its numbers."""
    name: str
    class_name: str
    source_path: str
    weights_path: str
    report_path: str
    mapping: List[Dict[str, Any]] = field(default_factory=list)
    checks: List[Check] = field(default_factory=list)
    untranslated: List[Dict[str, str]] = field(default_factory=list)
    first_divergent: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    dtype: str = "float64"
    seconds: Dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Everything translated and every check (eval and train step) within tolerance."""
        return not self.untranslated and bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def max_abs_diff(self) -> Optional[float]:
        return _largest(self.checks, "max_abs_diff")

    @property
    def max_rel_diff(self) -> Optional[float]:
        return _largest(self.checks, "max_rel_diff")

    def to_dict(self) -> Dict[str, Any]:
        return {"ok": self.ok, "name": self.name, "class": self.class_name, "source": self.source_path,
                "weights": self.weights_path, "dtype_checked": self.dtype,
                "max_abs_diff": self.max_abs_diff, "max_rel_diff": self.max_rel_diff,
                "checks": [vars(c) for c in self.checks], "first_divergent_layer": self.first_divergent,
                "untranslated": self.untranslated, "notes": self.notes, "seconds": self.seconds,
                "mapping": self.mapping}

    def summary(self) -> str:
        status = "OK" if self.ok else ("NOT VERIFIED" if not self.checks and not self.untranslated else "NOT OK")
        lines = [f"translate {self.name}: {status} -> {self.source_path} "
                 f"(class {self.class_name}), {self.weights_path}"]
        for c in self.checks:
            own = (f", torch's own float32 rounding {c.rounding['torch']:.3g}, Gluon float32 vs torch "
                   f"float32 {c.float32_max_abs_diff:.3g}" if "torch" in c.rounding else "")
            lines.append(f"  check [{c.name}] by {c.evidence}: max abs diff {c.max_abs_diff:.3g}, max rel diff "
                         f"{c.max_rel_diff:.3g}, tolerance {c.tolerance:.3g}{own}: "
                         f"{'passed' if c.passed else 'FAILED'}{' - ' + c.detail if c.detail else ''}")
        if self.first_divergent:
            lines.append(f"  first divergent layer: {self.first_divergent}")
        for u in self.untranslated:
            lines.append(f"  NOT TRANSLATED: {u['block']} at {u['path'] or '(top)'!r}: {u['reason']}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = summary


def _largest(checks: List[Check], attr: str) -> Optional[float]:
    return max((getattr(c, attr) for c in checks), default=None)


# module names a generated NAME.py must not take: importing it from its folder would shadow them
_TAKEN_MODULES = frozenset({"torch", "safetensors", "numpy", "mxnet", "dualdl", "gluoncv", "gluonnlp"})


def _default_name(block: Any) -> str:
    """The Gluon class name in lower case: ResNetV1 -> resnetv1, _MyNet -> mynet (ASCII; a name
    that would shadow a module, e.g. a class ``Torch``, gets ``_model``)."""
    name = re.sub(r"[^0-9a-z_]", "_", type(block).__name__.lower()).strip("_") or "model"
    if name[0].isdigit():
        name = "m_" + name
    return name if _name_problem(name) is None else f"{name}_model"


def _name_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot be the generated module's name (``import NAME`` from its folder), or None."""
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier():
        return "it must be a Python identifier of ASCII letters, digits and _ (it is the module name)"
    if keyword.iskeyword(name) or name == "__debug__":
        return "it is a Python keyword, so `import NAME` cannot be written"
    if name in _TAKEN_MODULES or name in sys.stdlib_module_names:
        return f"a module {name}.py would shadow the installed module {name!r} for code in that folder"
    return None


def _as_arrays(sample_inputs: Any) -> List[Any]:
    """One numpy array per positional input; an input that is a list or tuple of arrays (begin
    states: ``[h, c]``, gluonnlp ELMo's list of (h, c) pairs) keeps its nesting, arrays inside."""
    items = sample_inputs if isinstance(sample_inputs, (list, tuple)) else [sample_inputs]
    return [_as_array(x, str(i)) for i, x in enumerate(items)]


def _as_array(x: Any, where: str) -> Any:
    if isinstance(x, (list, tuple)) and x and _holds_arrays(x):
        return type(x)(_as_array(v, f"{where}[{j}]") for j, v in enumerate(x))
    if hasattr(x, "asnumpy"):
        x = x.asnumpy()
    elif hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except ValueError as e:
        raise ValueError(f"translate: sample input {where} is not an array ({e})") from None
    if a.dtype == object:
        raise ValueError(f"translate: sample input {where} is not a numeric array (dtype object)")
    return a


def _shapes(arrays: Any) -> Any:
    """The shapes of (nested) sample inputs, for messages."""
    return [_shapes(a) if isinstance(a, (list, tuple)) else tuple(a.shape) for a in arrays]


def _holds_arrays(x: Any) -> bool:
    return any(hasattr(v, "shape") or (isinstance(v, (list, tuple)) and _holds_arrays(v)) for v in x)


def translate(block: Any, sample_inputs: Any, out_dir: str, name: Optional[str] = None, *,
              verify: bool = True, lr: float = 0.1, seed: int = 0,
              batchnorm: str = "torch", force: bool = False, train: bool = True) -> TranslateReport:
    """Write ``out_dir/<name>.py`` (a torch module mirroring the Gluon block tree),
    ``<name>.safetensors`` (its state_dict, from the block's current weights) and
    ``<name>.report.json``; return the report (``.ok`` only if every check passed).

    ``sample_inputs``: one array or a list of arrays (numpy, NDArray) as the block takes them.
    Verification runs both models in float64 (eval with randomised norms/biases, and one SGD step
    at ``lr`` in train mode); the block's weights are restored afterwards.

    ``train=False`` translates for inference: a block whose forward branches on
    ``autograd.is_training()`` gets its inference forward only (its training mode raises), and the
    proof's backward and SGD step run in inference mode. Needed where the training forward asks
    ``autograd.is_recording()`` (gluoncv's detectors compute targets and losses there).

    ``batchnorm``: ``"torch"`` writes ``nn.BatchNorm*d`` (running variance updated with torch's
    unbiased batch variance); ``"gluon"`` writes a BatchNorm that keeps Gluon's biased estimate.

    Files are staged and proven before they replace anything (see :class:`Staging`): a crash
    leaves the previous complete result or no report. An existing file of these names that
    translate did not write is refused (``FileExistsError``) unless ``force=True``.
    A ``SymbolBlock`` (an exported model) is translated from its graph (``translate_symbol_block``)."""
    import mxnet as mx
    from .codegen import Generator
    from .errors import TranslationError
    from .trace import gluon_inputs, record_calls, walk
    from .verify import load_generated, torch_state, verify as run_verify

    if not isinstance(block, mx.gluon.Block):
        raise TypeError(f"translate: expected a Gluon Block, got {type(block).__name__}")
    if isinstance(block, mx.gluon.SymbolBlock):
        from .symbol_file import translate_symbol_block
        return translate_symbol_block(block, sample_inputs, out_dir, name, verify=verify, lr=lr, seed=seed,
                                      batchnorm=batchnorm, force=force)
    if batchnorm not in ("torch", "gluon"):
        raise ValueError(f"translate: batchnorm must be 'torch' or 'gluon', got {batchnorm!r}")
    if not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"translate: lr must be a positive finite number (the verified SGD step), got {lr!r}")
    if name is None:
        name = _default_name(block)
    elif _name_problem(name):
        raise ValueError(f"translate: cannot use the name {name!r}: {_name_problem(name)}; choose another name")
    stage = Staging(out_dir, name, force=force)     # refuses before any work: file as out_dir, foreign files
    arrays = _as_arrays(sample_inputs)
    t0, c0 = time.perf_counter(), time.process_time()
    active = [(b, b._active) for _, b in walk(block) if getattr(b, "_active", False)]
    if active:
        block.hybridize(False)
    try:
        inputs = gluon_inputs(block, arrays)
        try:
            records = record_calls(block, inputs)
        except mx.gluon.parameter.DeferredInitializationError as e:
            raise ValueError(f"translate: the block's parameters are not initialised ({e}); call "
                             f"block.initialize() or load_parameters(...) first") from None
        except mx.base.MXNetError as e:      # the sample inputs do not fit the model
            first = next((ln.strip() for ln in str(e).splitlines() if "Error" in ln and "Traceback" not in ln),
                         str(e).strip().splitlines()[-1:] or [""])
            first = first if isinstance(first, str) else first[0]
            raise ValueError(f"translate: {type(block).__name__} does not run on sample inputs of shapes "
                             f"{_shapes(arrays)} ({first}); give the shapes it takes") from None
        except TranslationError:
            raise
        except Exception as e:               # the block's own Python code failed on the sample inputs
            raise ValueError(f"translate: {type(block).__name__} failed on sample inputs of shapes "
                             f"{_shapes(arrays)} ({type(e).__name__}: "
                             f"{' '.join(str(e).split())}); check the inputs it takes") from e
        gen = Generator(block, records, name, batchnorm=batchnorm, train=train)
        source = gen.source()
        _check_generated(source, gen.entries, name)
        t1 = time.perf_counter()
        paths = stage.paths
        report = TranslateReport(name, gen.top_class, paths[".py"], paths[".safetensors"],
                                 paths[".report.json"], untranslated=list(gen.untraced))
        report.mapping = [{"torch": e.torch_key, "gluon": e.gluon_key,
                           "shape": list(e.param.shape) if e.param is not None else [],
                           **({"tied_to": e.tied_to} if e.tied_to else {})} for e in gen.entries]
        with stage:
            stage.write_source(source)
            state = torch_state(gen.entries)
            stage.write_weights(lambda tmp: _save_weights(tmp, state))
            _hook("staged")
            if verify and not gen.untraced:
                cls = load_generated(stage.staged(".py"), gen.top_class)
                current = {id(e.param): state[e.torch_key].numpy() for e in gen.entries if e.param is not None}
                try:
                    checks, first, notes, report.dtype = run_verify(block, cls, gen.entries, arrays, gen.same_output,
                                                                    records, lr=lr, seed=seed, ops=gen.ops,
                                                                    current=current, train=train)
                except Exception as e:
                    _generated_failed(e, stage.staged(".py"), type(block).__name__)
                    raise
                report.checks, report.first_divergent, report.notes = checks, first, list(notes)
            else:     # not proven, but the file must still import and define its class
                try:
                    load_generated(stage.staged(".py"), gen.top_class)
                except Exception as e:
                    raise TranslationError(f"the generated file does not import ({type(e).__name__}: "
                                           f"{' '.join(str(e).split())}); this is a bug in dualdl translate: "
                                           f"please report it with the model's class") from None
                if gen.untraced:
                    report.notes.append("not verified: parts of the model were not translated")
            report.notes += list(getattr(gen, "notes", []))      # what codegen decided (renamed children, ...)
            report.seconds = {"translate": round(t1 - t0, 3), "verify": round(time.perf_counter() - t1, 3),
                              "cpu": round(time.process_time() - c0, 3)}
            stage.publish(report.to_dict())
    finally:
        for b, flag in active:
            b._active = flag
    return report


def _generated_failed(e: BaseException, source_path: str, block: str) -> None:
    """The generated module itself raised while it was proven (a construct translate wrote wrongly):
    a TranslationError naming the generated line, not the raw traceback of code the user never saw."""
    from .errors import TranslationError
    if isinstance(e, TranslationError):
        return
    tb, line = e.__traceback__, None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(source_path):
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return
    try:
        text = open(source_path, encoding="utf-8").read().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        text = ""
    raise TranslationError(f"the generated module raised {type(e).__name__} ({' '.join(str(e).split())[:200]}) at its "
                           f"line {line}: {text[:160]!r}; this is a bug in dualdl translate: please report it with "
                           f"the model's class (nothing was written)", block=block) from None


def _check_generated(source: str, entries, name: str) -> None:
    """The last guard before anything is written: the source is what translate means (safe.check_source)
    and no two Gluon tensors share one torch key (one Gluon layer would load the other's weights)."""
    from .errors import TranslationError
    from .safe import check_source
    check_source(source, f"{name}.py")
    seen: Dict[str, Any] = {}
    for e in entries:
        other = seen.setdefault(e.torch_key, e)
        if other is not e and (e.param is None or other.param is not e.param):
            raise TranslationError(f"Gluon tensors {other.gluon_key or other.gluon_path!r} and "
                                   f"{e.gluon_key or e.gluon_path!r} would both become torch key {e.torch_key!r}; "
                                   f"rename one of the children or parameters")


def _save_weights(path: str, state: Dict[str, Any]) -> None:
    """safetensors refuses shared storage: tied weights are written once per key (load_state_dict
    assigns both keys to the one shared torch Parameter). The metadata marks the file as translate's."""
    from safetensors.torch import save_file
    seen: set = set()
    flat = {}
    for k, v in state.items():
        flat[k] = v.clone() if id(v) in seen else v.contiguous()
        seen.add(id(v))
    save_file(flat, path, metadata={"generated_by": GENERATED_BY})


GENERATED_BY = "dualdl translate"
_SUFFIXES = (".py", ".safetensors", ".report.json")


class Staging:
    """Write one translation result (``NAME.py``, ``NAME.safetensors``, ``NAME.report.json``) so
    that a crash or ``kill -9`` at any moment leaves the previous complete result or no report:
    the source and weights go to temporary files beside their targets (the proof runs on the
    staged source), then the old report is removed, weights and source are renamed over their
    targets and the new report is written last. Use as a context manager: leaving it without
    :meth:`publish` (an exception) removes the temporary files and keeps the previous result.

    On creation it refuses what it must not touch: ``out_dir`` being a file, a target that is a
    folder, and a target translate did not write (its header, metadata or report say so) unless
    ``force``; the error names the file."""

    def __init__(self, out_dir: str, name: str, *, force: bool = False):
        out_dir = os.fspath(out_dir)
        if os.path.exists(out_dir) and not os.path.isdir(out_dir):
            raise NotADirectoryError(f"translate: the output folder {out_dir} is a file; give a folder")
        self.out_dir = out_dir
        self.paths = {k: os.path.join(out_dir, f"{name}{k}") for k in _SUFFIXES}
        for k, p in self.paths.items():
            if os.path.isdir(p):
                raise IsADirectoryError(f"translate: {p} is a folder; remove it or choose another name")
            why = None if force or not os.path.lexists(p) else _not_ours(p, k, self.paths)
            if why:
                raise FileExistsError(f"translate: {p} exists and {why}; pass --force (force=True) to overwrite "
                                      f"it, or choose another --out/--name")
        existing = os.path.abspath(out_dir)
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise NotADirectoryError(f"translate: cannot create the output folder {out_dir}: {existing} is a file")
        try:
            read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
        except (OSError, AttributeError):
            read_only = False
        if read_only or not os.access(existing, os.W_OK | os.X_OK):
            raise PermissionError(f"translate: cannot write in {existing} "
                                  f"({'a read-only file system' if read_only else 'permission denied'})")
        self._tmp: Dict[str, str] = {}

    def staged(self, suffix: str) -> str:
        return self._tmp[suffix]

    def _write(self, suffix: str, fn) -> None:
        from ...atomic import temp_path
        os.makedirs(self.out_dir, exist_ok=True)     # created when the first file is written
        tmp = self._tmp.setdefault(suffix, temp_path(self.paths[suffix]))
        try:
            fn(tmp)
        except OSError:
            raise
        except Exception as e:     # safetensors reports a full disk as "I/O error: ... (os error 28)"
            code = re.search(r"os error (\d+)", str(e))
            if code is None:
                raise
            raise OSError(int(code.group(1)), f"translate: cannot write {self.paths[suffix]}: "
                                              f"{os.strerror(int(code.group(1)))}") from None
        if not os.path.exists(tmp):
            raise FileNotFoundError(f"translate: the writer of {self.paths[suffix]} created no file")

    def write_source(self, source: str) -> None:
        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(source)
        self._write(".py", write)

    def write_weights(self, fn) -> None:
        """``fn(tmp_path)`` writes the safetensors file."""
        self._write(".safetensors", fn)

    def publish(self, report: Dict[str, Any]) -> None:
        from ...atomic import atomic_write_file, publish
        report = dict(report)          # what was written, so a later run can tell a file edited since
        for suffix, key in _HASHES.items():
            if suffix in self._tmp:
                report[key] = _sha256(self._tmp[suffix])
        data = json.dumps(report, indent=1, default=float).encode()
        _hook("locking")
        with _folder_lock(self.out_dir):   # two translate runs into one folder publish one after the other
            _hook("before-publish")
            try:
                os.unlink(self.paths[".report.json"])       # from here on nothing claims to be complete
            except FileNotFoundError:
                pass
            for suffix in (".safetensors", ".py"):
                if suffix in self._tmp:
                    publish(self._tmp.pop(suffix), self.paths[suffix])
                    _hook(f"published {suffix}")
            atomic_write_file(self.paths[".report.json"], lambda f: f.write(data))

    def discard(self) -> None:
        for tmp in self._tmp.values():
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        self._tmp.clear()

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()


class _folder_lock:
    """An exclusive ``flock`` on the output folder itself (no lock file left behind; released
    when the process dies, so a killed run never blocks the next). Where folders cannot be
    locked (no fcntl, some network filesystems) it does nothing."""

    def __init__(self, folder: str):
        self.folder, self.fd = folder, None

    def __enter__(self):
        try:
            import fcntl
            self.fd = os.open(self.folder, os.O_RDONLY)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)         # closing the descriptor releases the lock


def _hook(point: str) -> None:
    """Test seam for crash tests: ``DUALDL_TRANSLATE_PAUSE=<point>`` makes the process print the
    point and sleep there, so a test can ``kill -9`` it at that exact moment;
    ``DUALDL_TRANSLATE_TRACE=1`` prints every point reached."""
    if config.get("DUALDL_TRANSLATE_TRACE"):
        print(f"dualdl-translate-at: {point}", flush=True)
    if config.get("DUALDL_TRANSLATE_PAUSE") == point:
        print(f"dualdl-translate-paused: {point}", flush=True)
        time.sleep(600)


_HASHES = {".py": "source_sha256", ".safetensors": "weights_sha256"}


def _sha256(path: str) -> str:
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _not_ours(path: str, suffix: str, paths: Dict[str, str]) -> Optional[str]:
    """Why translate must not replace the existing ``path`` (None: it is translate's own earlier
    output, unchanged). The report of the earlier run records the hashes of the source and
    weights it wrote: a file changed since (a forward written by hand, weights trained and saved
    over it) is kept. Without such a report (a crash between renames, an older dualdl): a .py
    whose first lines say "generated by `dualdl translate`", weights whose metadata says so."""
    rep = _translate_report(paths[".report.json"])
    if suffix == ".report.json":
        return None if rep is not None else "was not written by dualdl translate"
    try:
        if rep is not None and _HASHES[suffix] in rep:
            return None if _sha256(path) == rep[_HASHES[suffix]] else \
                f"was changed since dualdl translate wrote it (its hash differs from the one in {paths['.report.json']})"
        if suffix == ".py":
            with open(path, "rb") as f:
                ours = b"generated by `dualdl translate`" in f.read(512)
        else:
            ours = _safetensors_metadata(path).get("generated_by") == GENERATED_BY
    except OSError:
        ours = False
    return None if ours else "was not written by dualdl translate"


def _translate_report(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(50_000_000))
    except (OSError, ValueError):
        return None
    keys = {"ok", "name", "class", "source", "weights", "checks", "mapping"}
    return data if isinstance(data, dict) and keys <= set(data) else None


def _safetensors_metadata(path: str) -> Dict[str, Any]:
    import struct
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            return {}
        n = struct.unpack("<Q", head)[0]
        if n > 100_000_000:
            return {}
        try:
            meta = json.loads(f.read(n)).get("__metadata__") or {}
        except (ValueError, AttributeError):
            return {}
    return meta if isinstance(meta, dict) else {}
