"""Where a translation's three files go and when they may replace what is there: the output
name, the staging and publishing of ``NAME.py``/``NAME.safetensors``/``NAME.report.json``, and
the marks that tell translate's own unchanged output from a file someone else wrote or changed.

Each generated file carries its own proof of origin, so the report is not needed to tell: the
source's first line is ``# dualdl translate sha256=<hash of the rest> model=<fingerprint>`` and the
weights' safetensors metadata holds ``generated_by``, ``model`` and ``sha256`` (of the tensor table
and data). The model fingerprint (top class, torch keys and shapes) keeps one model's output
from silently replacing another's (``resnet18_v1`` then ``resnet34_v1`` into one folder)."""
from __future__ import annotations

import hashlib
import json
import keyword
import os
import re
import stat
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from ... import config

__all__ = ["Staging", "GENERATED_BY", "default_name", "name_from", "name_problem", "model_fingerprint",
           "save_weights", "on_step", "reached"]

GENERATED_BY = "dualdl translate"
_SUFFIXES = (".py", ".safetensors", ".report.json")
_HASHES = {".py": "source_sha256", ".safetensors": "weights_sha256"}
_REPORT_LIMIT = 50_000_000           # bytes read of an existing report
_MARK = re.compile(rb"# dualdl translate sha256=([0-9a-f]{64}) model=([0-9a-f]{16})\n")

# module names a generated NAME.py must not take: importing it from its folder would shadow them
_TAKEN_MODULES = frozenset({"torch", "safetensors", "numpy", "mxnet", "dualdl", "gluoncv", "gluonnlp"})


# ---- names -------------------------------------------------------------------------------------
def name_from(text: str) -> str:
    """A module name from a class, factory or file name: ResNetV1 -> resnetv1, resnet18_v1 ->
    resnet18_v1 (ASCII; a leading digit gets ``m_``; a name that would shadow a module, e.g.
    ``torch``, gets ``_model``)."""
    name = re.sub(r"[^0-9a-z_]", "_", str(text).lower()).strip("_") or "model"
    if name[0].isdigit():
        name = "m_" + name
    return name if name_problem(name) is None else f"{name}_model"


def default_name(block: Any) -> str:
    """The Gluon class name in lower case (see :func:`name_from`)."""
    return name_from(type(block).__name__)


def name_problem(name: str) -> Optional[str]:
    """Why ``name`` cannot be the generated module's name (``import NAME`` from its folder), or None."""
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier():
        return "it must be a Python identifier of ASCII letters, digits and _ (it is the module name)"
    if keyword.iskeyword(name) or name == "__debug__":
        return "it is a Python keyword, so `import NAME` cannot be written"
    if name in _TAKEN_MODULES or name in sys.stdlib_module_names:
        return f"a module {name}.py would shadow the installed module {name!r} for code in that folder"
    return None


def model_fingerprint(class_name: str, mapping: List[Dict[str, Any]]) -> str:
    """16 hex digits naming the model a translation is of: its top class and its torch keys with
    their shapes (resnet18_v1 and resnet34_v1 share the class ResNetV1, not the keys)."""
    rows = [[str(m.get("torch")), [int(d) for d in m.get("shape") or []]] for m in mapping if isinstance(m, dict)]
    return hashlib.sha256(json.dumps([str(class_name), rows]).encode()).hexdigest()[:16]


# ---- progress ----------------------------------------------------------------------------------
_listeners: List[Callable[[str], None]] = []


class on_step:
    """``with on_step(fn):`` calls ``fn(point)`` at each step translate reaches ("staged": traced and
    written, the proof starts; "locking": proven, the files are published). The CLI's progress."""

    def __init__(self, fn: Callable[[str], None]):
        self.fn = fn

    def __enter__(self) -> "on_step":
        _listeners.append(self.fn)
        return self

    def __exit__(self, *exc) -> None:
        _listeners.remove(self.fn)


def reached(point: str) -> None:
    """Test seam for crash tests: ``DUALDL_TRANSLATE_PAUSE=<point>`` makes the process print the
    point and sleep there, so a test can ``kill -9`` it at that exact moment;
    ``DUALDL_TRANSLATE_TRACE=1`` prints every point reached. Listeners (:class:`on_step`) hear it."""
    for fn in list(_listeners):
        fn(point)
    if config.get("DUALDL_TRANSLATE_TRACE"):
        print(f"dualdl-translate-at: {point}", flush=True)
    if config.get("DUALDL_TRANSLATE_PAUSE") == point:
        print(f"dualdl-translate-paused: {point}", flush=True)
        time.sleep(600)


# ---- the marks in the files --------------------------------------------------------------------
def _digest(f, h: Any = None) -> str:
    """The sha256 (or ``h`` continued) of the rest of the open binary file ``f``."""
    h = h or hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return _digest(f)


def marked_source(source: str, model: str) -> str:
    """``source`` with its first line saying translate wrote it: the hash of the rest and the model."""
    body = source.encode("utf-8")
    return f"# dualdl translate sha256={hashlib.sha256(body).hexdigest()} model={model}\n" + source


def _source_mark(path: str) -> Optional[Dict[str, Any]]:
    """{"intact": the rest hashes as the first line says, "model": fingerprint}, or None without a mark."""
    with open(path, "rb") as f:
        m = _MARK.match(f.readline(200))
        if m is None:
            return None
        rest = _digest(f)
    return {"intact": rest == m.group(1).decode(), "model": m.group(2).decode()}


def _safetensors_header(path: str) -> Optional[tuple]:
    """(header dict, data offset) of a safetensors file, None if it is not one."""
    import struct
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            return None
        n = struct.unpack("<Q", head)[0]
        if n > 100_000_000:
            return None
        try:
            header = json.loads(f.read(n))
        except (ValueError, RecursionError):
            return None
    return (header, 8 + n) if isinstance(header, dict) else None


def _tensors_sha256(path: str, header: Dict[str, Any], offset: int) -> str:
    """The hash of a safetensors file's tensor table (names, dtypes, shapes, offsets; not the
    metadata, which holds this hash) and its data."""
    h = hashlib.sha256(json.dumps({k: v for k, v in header.items() if k != "__metadata__"},
                                  sort_keys=True).encode())
    with open(path, "rb") as f:
        f.seek(offset)
        return _digest(f, h)


def save_weights(path: str, state: Dict[str, Any], model: str = "0" * 16) -> None:
    """Write ``state`` as safetensors marked as translate's (``generated_by``, ``model``, and the
    ``sha256`` of its tensors, filled in place once written). safetensors refuses shared storage:
    tied weights are written once per key (load_state_dict assigns both keys to the one shared
    torch Parameter)."""
    from safetensors.torch import save_file
    seen: set = set()
    flat = {}
    for k, v in state.items():
        flat[k] = v.clone() if id(v) in seen else v.contiguous()
        seen.add(id(v))
    placeholder = "0" * 64
    save_file(flat, path, metadata={"generated_by": GENERATED_BY, "model": model, "sha256": placeholder})
    header, offset = _safetensors_header(path)
    digest = _tensors_sha256(path, header, offset)
    with open(path, "r+b") as f:          # same length: the header and the offsets stay as they are
        raw = f.read(offset)
        key = b'"sha256":"' + placeholder.encode()
        at = raw.find(key, 8)
        at = at + len(key) - len(placeholder) if at >= 0 else raw.index(placeholder.encode(), 8)
        f.seek(at)
        f.write(digest.encode())


def _weights_mark(path: str) -> Optional[Dict[str, Any]]:
    got = _safetensors_header(path)
    if got is None:
        return None
    meta = got[0].get("__metadata__")
    if not isinstance(meta, dict) or meta.get("generated_by") != GENERATED_BY or "sha256" not in meta:
        return None
    return {"intact": _tensors_sha256(path, *got) == meta["sha256"], "model": meta.get("model")}


def _translate_report(path: str) -> Optional[Dict[str, Any]]:
    """The JSON of a translate report at ``path`` (None: not one, unreadable, too large or too deep)."""
    if not _regular(path):
        return None
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(_REPORT_LIMIT))
    except (OSError, ValueError, RecursionError):
        return None
    keys = {"ok", "name", "class", "source", "weights", "checks", "mapping"}
    return data if isinstance(data, dict) and keys <= set(data) else None


def _report_model(rep: Dict[str, Any]) -> Optional[str]:
    model = rep.get("model")
    if isinstance(model, str):
        return model
    mapping = rep.get("mapping")
    return model_fingerprint(rep.get("class"), mapping) if isinstance(mapping, list) else None


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _special(path: str) -> Optional[str]:
    """What ``path`` is when it is neither absent nor a regular file (nor a link to one): a FIFO
    blocks whoever opens it, /dev/zero never ends."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    mode = st.st_mode
    if stat.S_ISLNK(mode):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return "a symbolic link to nothing"
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return None
        return f"a symbolic link to {_kind(mode)} ({os.path.realpath(path)})"
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else _kind(mode)


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"


def _not_ours(path: str, suffix: str, paths: Dict[str, str]) -> Optional[str]:
    """Why translate must not replace the existing ``path`` (None: it is translate's own earlier
    output, unchanged). The mark in the file decides (its hash of itself); a file without one is
    judged by the earlier report's hash of it; with neither it was not written by translate (or by
    an older dualdl) and is kept."""
    rep = _translate_report(paths[".report.json"])
    if suffix == ".report.json":
        return None if rep is not None else "was not written by dualdl translate"
    try:
        mark = _source_mark(path) if suffix == ".py" else _weights_mark(path)
        if mark is None and rep is not None and _HASHES[suffix] in rep:
            mark = {"intact": _sha256(path) == rep[_HASHES[suffix]]}
    except OSError:
        mark = None
    if mark is None:
        return "was not written by dualdl translate"
    return None if mark["intact"] else "was changed since dualdl translate wrote it (its content no longer " \
                                       "matches the hash translate wrote in it)"


def _file_mode() -> int:
    """0666 less the umask: what ``open(path, "w")`` gives (safetensors and temporary files get 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


# ---- staging and publishing --------------------------------------------------------------------
class Staging:
    """Write one translation result (``NAME.py``, ``NAME.safetensors``, ``NAME.report.json``) so
    that a crash or ``kill -9`` at any moment leaves the previous complete result or no report:
    the source and weights go to temporary files beside their targets (the proof runs on the
    staged source), then the old report is removed, weights and source are renamed over their
    targets and the new report is written last. Use as a context manager: leaving it without
    :meth:`publish` (an exception) removes the temporary files and keeps the previous result.

    On creation it refuses what it must not touch: ``out_dir`` being a file, a target that is a
    folder or a special file (FIFO, device, socket), and a target translate did not write or that
    was changed since (the marks in the files say so) unless ``force``; :meth:`claim` then refuses
    files that hold another model's translation. The error names the file and the flag."""

    def __init__(self, out_dir: str, name: str, *, force: bool = False):
        out_dir = os.fspath(out_dir)
        if os.path.exists(out_dir) and not os.path.isdir(out_dir):
            raise NotADirectoryError(f"translate: the output folder {out_dir} is a file; give a folder")
        self.out_dir, self.force, self.model = out_dir, force, "0" * 16
        self.paths = {k: os.path.join(out_dir, f"{name}{k}") for k in _SUFFIXES}
        for k, p in self.paths.items():
            special = _special(p)
            if special:
                raise FileExistsError(f"translate: {p} is {special}, not a file translate wrote; remove it or "
                                      f"choose another --out/--name")
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

    def claim(self, class_name: str, mapping: List[Dict[str, Any]]) -> str:
        """Say which model this result is of (before anything is staged); refuses, unless ``force``,
        when the files there hold another model's translation. Returns the fingerprint."""
        self.model = model_fingerprint(class_name, mapping)
        if self.force:
            return self.model
        rep = _translate_report(self.paths[".report.json"])
        for suffix, p in self.paths.items():
            if not os.path.lexists(p):
                continue
            try:
                if suffix == ".report.json":
                    other = _report_model(rep) if rep else None
                else:
                    mark = _source_mark(p) if suffix == ".py" else _weights_mark(p)
                    other = mark.get("model") if mark else (_report_model(rep) if rep else None)
            except OSError:
                other = None
            if other is not None and other != self.model:
                was = (f" ({rep.get('class')} with {len(rep.get('mapping') or [])} tensors; this one has "
                       f"{len(mapping)})") if rep and isinstance(rep.get("mapping"), list) else ""
                raise FileExistsError(f"translate: {p} holds the translation of another model{was}; pass --name "
                                      f"NAME (name=...) to keep both, or --force (force=True) to replace it")
        return self.model

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
        os.chmod(tmp, _file_mode())

    def write_source(self, source: str) -> None:
        def write(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(marked_source(source, self.model))
        self._write(".py", write)

    def write_weights(self, fn) -> None:
        """``fn(tmp_path)`` writes the safetensors file."""
        self._write(".safetensors", fn)

    def write_state(self, state: Dict[str, Any]) -> None:
        """Write the torch ``state`` dict as the weights, marked with this result's model."""
        self._write(".safetensors", lambda tmp: save_weights(tmp, state, self.model))

    def publish(self, report: Dict[str, Any]) -> None:
        from ...atomic import atomic_write_file, publish
        report = dict(report, model=self.model)   # what was written, so a later run can tell a file edited since
        for suffix, key in _HASHES.items():
            if suffix in self._tmp:
                report[key] = _sha256(self._tmp[suffix])
        data = json.dumps(report, indent=1, default=float).encode()
        reached("locking")
        with _folder_lock(self.out_dir):   # two translate runs into one folder publish one after the other
            reached("before-publish")
            try:
                os.unlink(self.paths[".report.json"])       # from here on nothing claims to be complete
            except FileNotFoundError:
                pass
            for suffix in (".safetensors", ".py"):
                if suffix in self._tmp:
                    publish(self._tmp.pop(suffix), self.paths[suffix])
                    reached(f"published {suffix}")
            atomic_write_file(self.paths[".report.json"], lambda f: f.write(data))
            os.chmod(self.paths[".report.json"], _file_mode())

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
