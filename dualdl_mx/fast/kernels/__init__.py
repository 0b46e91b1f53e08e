"""dualdl's MXNet operators written in C++, built on first use and loaded with MXNet's
library-operator API (``mx.library.load``).

MXNet differences hidden here:

- MXNet 1.9 has no operator that sums a float32 batch precisely at MKLDNN's speed (its float32
  BatchNorm sums in float32, 7.6-18x torch's error), so dualdl ran the operator in float64, with a
  float64 copy of the input. ``dl_batch_norm`` (``batch_norm.cc``) reads float32 and sums in float64
  in one operator (and applies the ReLU that follows it in a Sequential, and a MaxPool2d after
  that whose windows do not overlap, in the same pass).
- MXNet's log_softmax is off by up to 3.5e-6 (torch 2e-7), so dualdl computed it from its
  formula: six operators forward, about eight backward. ``dl_log_softmax`` (``log_softmax.cc``) is
  that formula in float64, one operator each way.
- Every host read waits for MXNet's engine, so dl.Trainer's gradient check, read before the step
  was queued, left the engine idle. ``dl_guarded_sgd_mom`` (``finite_guard.cc``) is the check and
  SGD's multi-tensor update in one operator: the update, bit for bit ``multi_sgd_mom_update``'s,
  runs only if every gradient element is finite (:mod:`dualdl_mx.fast.guarded_step`).

The library is compiled once per machine with the C++ compiler (``g++``/``c++``, the one ``pip``
uses for any package that compiles) against the headers MXNet's wheel ships, into
``DUALDL_CACHE_DIR`` (default ``~/.cache/dualdl``) under a key of the sources and headers, MXNet's version and
the flags; a lock keeps concurrent processes from building it twice (``fcntl.flock`` on POSIX; where
Python has no ``fcntl``, Windows, a lock file created with ``O_EXCL``, taken over when older than two
builds' timeout), and the library is renamed into place only once complete. It is built with OpenMP
where the compiler has it (without, where not): ``dl_batch_norm`` splits its channels over the
OpenMP threads MXNet's engine gives its CPU operators (MXNet's own libgomp; half the processors by
default, ``OMP_NUM_THREADS`` if set), with the same results as one thread. Where it cannot be built
or loaded (no compiler, another MXNet, a cache it cannot trust), or while ``DUALDL_MX_FAST=0`` or
``DUALDL_MX_KERNELS=0``, :func:`available` is False, dualdl warns once with the reason (not for
the switches) and
keeps the previous paths: MXNet's float64 BatchNorm (the same results to float32 rounding),
log-softmax from its float32 formula (within 2e-7 of the kernel's) and the check read before the
step (the same steps), all slower.

Loading a library runs its code in this process, so the cache is verified before every load:

- the cache folder, ``mx-kernels/`` and the key's folder, the library and its recorded hash are
  owned by the current user (``os.getuid()``; where Python has none, Windows, this and the mode
  check are skipped) and not group- or world-writable; ``mx-kernels/`` and the key's folder are
  real folders, the files regular files (no symbolic links);
- the library's sha256 equals the one dualdl recorded when it built it
  (``libdualdl_mx_kernels.so.sha256`` next to it, written atomically after the library's atomic
  rename: a library without it, from a build that stopped between the two, is rebuilt).

A library that fails the check is not loaded: when it is ours it is removed and rebuilt (so a
truncated one, which MXNet's ``dlopen`` would map and die on with SIGBUS, or one planted at the
predictable path, is replaced by a fresh build); when a folder or file is another user's, nothing
is loaded, removed or built, and the warning says which path and what to do. Folders are created
with mode 0o700 and files 0o500 (the library) / 0o400 (its hash) / 0o600 (the lock), set with
``chmod`` whatever the umask; an existing folder of ours that is group- or world-writable (an older
dualdl under umask 002) loses those write bits.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, List, Optional, Tuple

import mxnet as mx

from dualdl import config

_FCNTL: Optional[ModuleType]
try:                                  # POSIX only: Windows has no fcntl (the build lock then
    import fcntl as _FCNTL            # uses an O_EXCL lock file, :func:`_build_lock`)
except ImportError:                   # pragma: no cover - exercised in a subprocess by the tests
    _FCNTL = None

__all__ = ["available", "library_path", "guard_waiter", "KernelUnavailableWarning", "UntrustedCacheError",
           "OPERATORS"]

_SOURCES = ("batch_norm.cc", "finite_guard.cc", "log_softmax.cc")
_HEADERS = ("batch_norm_pool.h",)           # included by the sources: part of the cache key
_FLAGS = ("-O3", "-ffp-contract=off", "-fopenmp", "-std=c++17", "-shared", "-fPIC")
_LIBRARY = "libdualdl_mx_kernels.so"
_DIGEST_SUFFIX = ".sha256"                    # the hash dualdl recorded when it built the library
#: the operators the library registers in MXNet once loaded (dualdl's own, not MXNet 1.9.1's)
OPERATORS = ("dl_batch_norm", "dl_guarded_sgd_mom", "dl_log_softmax")
_BUILD_TIMEOUT_S = 600
_STALE_LOCK_S = 2 * _BUILD_TIMEOUT_S + 60    # an O_EXCL lock file older than two builds: its builder died
_FOLDER_MODE, _LIBRARY_MODE, _DIGEST_MODE, _LOCK_MODE = 0o700, 0o500, 0o400, 0o600
_LOCK = threading.Lock()
_loaded: Optional[bool] = None
_loaded_from: Optional[Path] = None           # the file this module loaded into MXNet
_waiter: Optional[Tuple[Any, Any]] = None


class KernelUnavailableWarning(RuntimeWarning):
    """dualdl's compiled MXNet operators could not be built or loaded; slower fallbacks run."""


class UntrustedCacheError(RuntimeError):
    """A cache folder or file dualdl will not load from, remove or build in (another user's, not a
    folder, or a fresh build that still fails its check): the message names the path and what to
    do. :func:`available` turns it into the :class:`KernelUnavailableWarning`."""


def _mxnet_files() -> List[Path]:
    root = Path(mx.__file__).parent
    return [root / "include" / "mxnet" / "lib_api.h", root / "src" / "lib_api.cc"]


def _compiler() -> Optional[str]:
    for name in ("g++", "c++"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _key(compiler: str) -> str:
    h = hashlib.sha256()
    for f in [Path(__file__).parent / s for s in _SOURCES + _HEADERS] + _mxnet_files():
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    h.update(" ".join((mx.__version__, compiler) + _FLAGS).encode())
    return h.hexdigest()[:16]


# ---- what is trusted: ownership, modes, the recorded hash --------------------------------------
def _uid() -> Optional[int]:
    """The current user's id; None where Python has no ``os.getuid`` (Windows: POSIX owners and
    mode bits do not exist there, so only the recorded hash is checked)."""
    getuid = getattr(os, "getuid", None)
    return getuid() if getuid is not None else None


def _digest_path(library: Path) -> Path:
    return library.with_name(library.name + _DIGEST_SUFFIX)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _foreign(path: Path, st: os.stat_result) -> Optional[str]:
    """Why ``path`` (``st``: its stat) is not the current user's alone: owned by another user, or
    group- or world-writable; None where it is (always on Windows, :func:`_uid`)."""
    uid = _uid()
    if uid is None:
        return None
    if st.st_uid != uid:
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})"
    if st.st_mode & 0o022:
        return f"{path} is group- or world-writable (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _private_folder(path: Path, *, follow: bool) -> None:
    """Create ``path`` with mode 0o700 (chmod after mkdir: mkdir's mode is cut by the umask), or
    check the existing folder: a folder (a symbolic link only where ``follow``: the cache folder
    the user chose), owned by the current user; one of ours that is group- or world-writable loses
    those write bits. Raises :class:`UntrustedCacheError` for another user's folder."""
    try:
        path.mkdir(mode=_FOLDER_MODE)
        os.chmod(path, _FOLDER_MODE)
        return
    except FileExistsError:
        pass
    st = os.stat(path) if follow else os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UntrustedCacheError(f"{path} is not a folder{'' if follow else ' (or is a symbolic link)'}: "
                                  f"remove it, or set DUALDL_CACHE_DIR to a folder of your own")
    uid = _uid()
    if uid is None:
        return
    if st.st_uid != uid:
        raise UntrustedCacheError(f"the cache folder {path} is owned by uid {st.st_uid}, not by you (uid {uid}), "
                                  f"and dualdl loads no library others can replace: set DUALDL_CACHE_DIR to a "
                                  f"folder of your own")
    if st.st_mode & 0o022:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)


def _cache_folder(compiler: str) -> Path:
    """The key's folder under ``config.cache_dir()``, each folder created or checked by
    :func:`_private_folder` (missing parents of the cache folder are created with mode 0o700)."""
    root = Path(config.cache_dir())
    for parent in reversed(root.parents):
        if not parent.exists():
            with contextlib.suppress(FileExistsError):
                parent.mkdir(mode=_FOLDER_MODE)
    _private_folder(root, follow=True)
    mx_folder = root / "mx-kernels"
    _private_folder(mx_folder, follow=False)
    folder = mx_folder / _key(compiler)
    _private_folder(folder, follow=False)
    return folder


def _problem(library: Path) -> Optional[str]:
    """None where ``library`` is the file dualdl built: it and its recorded hash are regular files
    of the current user's, not writable by others, and its sha256 is the recorded one; else what
    is wrong (missing, another user's, writable by others, truncated or replaced)."""
    digest = _digest_path(library)
    for f in (library, digest):
        try:
            st = os.lstat(f)
        except FileNotFoundError:
            return f"{f} is missing"
        if not stat.S_ISREG(st.st_mode):
            return f"{f} is not a regular file"
        foreign = _foreign(f, st)
        if foreign:
            return foreign
    recorded = digest.read_bytes().decode("ascii", "replace").strip()
    actual = _sha256(library)
    if actual != recorded:
        return (f"{library} has sha256 {actual[:16]}..., not the {recorded[:16]}... recorded when dualdl built "
                f"it (truncated, corrupted or replaced)")
    return None


def _discard(library: Path) -> None:
    """Remove the library and its recorded hash where they are the current user's; raise
    :class:`UntrustedCacheError` (nothing removed) where one is another user's."""
    uid = _uid()
    files = [library, _digest_path(library)]
    for f in files:
        try:
            st = os.lstat(f)
        except FileNotFoundError:
            continue
        if uid is not None and st.st_uid != uid:
            raise UntrustedCacheError(f"{f} is owned by uid {st.st_uid}, not by you (uid {uid}): dualdl neither "
                                      f"loads nor removes it; remove it yourself, or set DUALDL_CACHE_DIR to a "
                                      f"folder of your own")
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


# ---- building -------------------------------------------------------------------------------
@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    """One build at a time across processes. POSIX: ``flock`` on ``folder/.lock`` (mode 0o600),
    released by the OS if the builder dies. Where Python has no ``fcntl`` (Windows): the lock
    file ``folder/.lock.excl`` created with ``O_EXCL`` and removed after the build; one older than
    two builds' timeout (a builder that died) is taken over."""
    if _FCNTL is not None:
        fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), _LOCK_MODE)
        try:
            os.fchmod(fd, _LOCK_MODE)
            _FCNTL.flock(fd, _FCNTL.LOCK_EX)
            yield
        finally:
            os.close(fd)                                 # releases the lock
        return
    lock = folder / ".lock.excl"
    while True:
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _LOCK_MODE)
            break
        except FileExistsError:
            try:
                age = time.time() - os.stat(lock).st_mtime
            except FileNotFoundError:
                continue
            if age > _STALE_LOCK_S:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
            else:
                time.sleep(0.2)
    try:
        yield
    finally:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """``data`` into ``path`` through a temporary file in its folder renamed over it (a complete
    file or none), with ``mode``."""
    fd, tmp = tempfile.mkstemp(prefix=".build-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _compile_and_link(compiler: str, flags: Tuple[str, ...], include: Path, sources: List[Path],
                      out: str) -> Optional[str]:
    """Each source compiled to an object file at once, as many at a time as there are processors
    (the build's wall time is its longest source's, about 11 s for batch_norm.cc against 25 s for
    all four one after the other, on 2 cores), then linked into ``out``; the same object code as
    one compiler call on every source. None, or what failed with the compiler's message."""
    compile_flags = [f for f in flags if f != "-shared"]
    with tempfile.TemporaryDirectory(prefix="dualdl-build-") as objs:
        cmds = [[compiler, *compile_flags, f"-I{include}", f"-I{include / 'mxnet'}", "-c", str(src),
                 "-o", os.path.join(objs, f"{i}.o")] for i, src in enumerate(sources)]
        workers = max(1, min(len(cmds), os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            runs = list(pool.map(lambda c: subprocess.run(c, capture_output=True, text=True,
                                                          timeout=_BUILD_TIMEOUT_S), cmds))
        for cmd, done in zip(cmds, runs):
            if done.returncode != 0:
                return f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}"
        cmd = [compiler, *flags, *(c[-1] for c in cmds), "-o", out]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S)
        return None if done.returncode == 0 else f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}"


def _build(compiler: str, target: Path) -> None:
    """Compile the library to ``target`` (atomically: a complete file or none, flushed to disk
    before its rename; mode 0o500: the linker's output mode follows the umask), then record its
    sha256 next to it (atomically too)."""
    header, lib_api = _mxnet_files()
    include = header.parent.parent
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        sources = [Path(__file__).parent / s for s in _SOURCES] + [lib_api]
        for flags in (_FLAGS, tuple(f for f in _FLAGS if f != "-fopenmp")):   # a compiler without OpenMP:
            failed = _compile_and_link(compiler, flags, include, sources, tmp)  # the kernels run serially
            if failed is None:
                break
        if failed is not None:
            raise RuntimeError(failed)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _LIBRARY_MODE)
        digest = _sha256(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _write_atomic(_digest_path(target), (digest + "\n").encode(), _DIGEST_MODE)


def library_path() -> Path:
    """Where this machine's build of the library is, verified (:func:`_problem`): built there if
    missing; removed and rebuilt if it fails the check and is ours. Raises RuntimeError (no
    compiler, MXNet without the headers, a failed build) or :class:`UntrustedCacheError`."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler (g++ or c++) on PATH")
    missing = [str(f) for f in _mxnet_files() if not f.exists()]
    if missing:
        raise RuntimeError(f"MXNet {mx.__version__} ships no {', '.join(missing)}")
    folder = _cache_folder(compiler)
    target = folder / _LIBRARY
    if _problem(target) is None:
        return target
    with _build_lock(folder):                         # another process may be building it
        if _problem(target) is not None:
            _discard(target)
            _build(compiler, target)
            problem = _problem(target)
            if problem is not None:
                raise UntrustedCacheError(f"the library dualdl just built fails its check: {problem}; set "
                                          f"DUALDL_CACHE_DIR to a folder of your own on a file system with "
                                          f"POSIX owners and modes")
    return target


def available() -> bool:
    """Whether dualdl's operators (``mx.nd.dl_batch_norm``, ``mx.sym.dl_batch_norm``,
    ``dl_guarded_sgd_mom``, ``dl_log_softmax``) exist in this process (built and loaded on the
    first call; False, with one warning, where that fails) and may be used now: False while
    ``DUALDL_MX_FAST=0`` or ``DUALDL_MX_KERNELS=0`` (read at each call, so the switch works
    inside one process)."""
    global _loaded
    if not config.mx_kernels():
        return False
    if _loaded is not None:
        return _loaded
    with _LOCK:
        if _loaded is None:
            _loaded = _load()
    return _loaded


def _load() -> bool:
    if all(hasattr(mx.nd, op) for op in OPERATORS):      # loaded by an earlier import in this process
        return True
    global _loaded_from
    try:
        path = library_path()
        mx.library.load(str(path), verbose=False)
        _loaded_from = path
    except Exception as e:  # noqa: BLE001 - any failure means the fallback, with its reason
        warnings.warn(f"dualdl could not build or load its MXNet kernels ({type(e).__name__}: {e}); "
                      "BatchNorm uses MXNet's float64 operator instead (the same results to float32 "
                      "rounding, slower), log-softmax its float32 formula, and dl.Trainer checks "
                      "gradients before queueing a step. "
                      "DUALDL_MX_FAST=0 silences this (and turns the other fast forms off too).",
                      KernelUnavailableWarning, stacklevel=3)
        return False
    return all(hasattr(mx.nd, op) for op in OPERATORS)


def guard_waiter() -> Optional[Tuple[Any, Any]]:
    """``(arm, wait)``: the library's C functions ``dl_finite_guard_arm(slot)`` and
    ``dl_finite_guard_wait(slot, timeout_ms) -> 1 / 0 / -1`` (finite_guard.cc), which give the
    check of a ``dl_guarded_sgd_mom`` as soon as it has run, where reading its flag through MXNet
    waits for the update and the operators queued after it too; None where the kernels are not
    loaded, or were loaded into MXNet by another import of this module (their file is not known
    here)."""
    global _waiter
    if _waiter is None and available() and _loaded_from is not None:
        lib = ctypes.CDLL(str(_loaded_from))        # the library MXNet loaded: the same handle
        arm, wait = lib.dl_finite_guard_arm, lib.dl_finite_guard_wait
        arm.argtypes, arm.restype = [ctypes.c_int64], None
        wait.argtypes, wait.restype = [ctypes.c_int64, ctypes.c_int], ctypes.c_int
        _waiter = (arm, wait)
    return _waiter
