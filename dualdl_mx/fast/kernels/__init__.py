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
``DUALDL_CACHE_DIR`` (default ``~/.cache/dualdl``) under a key of the sources, MXNet's version and
the flags; a lock keeps concurrent processes from building it twice, and the library is renamed
into place only once complete. It is built with OpenMP where the compiler has it (without, where
not): ``dl_batch_norm`` splits its channels over the OpenMP threads MXNet's engine gives its CPU
operators (MXNet's own libgomp; half the processors by default, ``OMP_NUM_THREADS`` if set), with
the same results as one thread. Where it cannot be built or loaded (no compiler, another MXNet) or
``DUALDL_MX_KERNELS=0``, :func:`available` is False, dualdl warns once with the reason (not for
``DUALDL_MX_KERNELS=0``) and keeps the previous paths: MXNet's float64 BatchNorm (the same results
to float32 rounding), log-softmax from its float32 formula (within 2e-7 of the kernel's) and the
check read before the step (the same steps), all slower.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any, List, Optional, Tuple

import mxnet as mx

from dualdl import config

__all__ = ["available", "library_path", "guard_waiter", "KernelUnavailableWarning"]

_SOURCES = ("batch_norm.cc", "finite_guard.cc", "log_softmax.cc")
_FLAGS = ("-O3", "-ffp-contract=off", "-fopenmp", "-std=c++17", "-shared", "-fPIC")
_LIBRARY = "libdualdl_mx_kernels.so"
_OPS = ("dl_batch_norm", "dl_guarded_sgd_mom", "dl_log_softmax")
_LOCK = threading.Lock()
_loaded: Optional[bool] = None
_loaded_from: Optional[Path] = None           # the file this module loaded into MXNet
_waiter: Optional[Tuple[Any, Any]] = None


class KernelUnavailableWarning(RuntimeWarning):
    """dualdl's compiled MXNet operators could not be built or loaded; slower fallbacks run."""


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
    for f in [Path(__file__).parent / s for s in _SOURCES] + _mxnet_files():
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    h.update(" ".join((mx.__version__, compiler) + _FLAGS).encode())
    return h.hexdigest()[:16]


def _build(compiler: str, target: Path) -> None:
    """Compile the library to ``target`` (atomically: a complete file or none)."""
    header, lib_api = _mxnet_files()
    include = header.parent.parent
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        for flags in (_FLAGS, tuple(f for f in _FLAGS if f != "-fopenmp")):   # a compiler without OpenMP:
            cmd = [compiler, *flags, f"-I{include}", f"-I{include / 'mxnet'}",   # the kernels run serially
                   *[str(Path(__file__).parent / s) for s in _SOURCES], str(lib_api), "-o", tmp]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode == 0:
                break
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def library_path() -> Path:
    """Where this machine's build of the library is (built there if missing)."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler (g++ or c++) on PATH")
    missing = [str(f) for f in _mxnet_files() if not f.exists()]
    if missing:
        raise RuntimeError(f"MXNet {mx.__version__} ships no {', '.join(missing)}")
    target = Path(config.cache_dir()) / "mx-kernels" / _key(compiler) / _LIBRARY
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)          # another process may be building it
            if not target.exists():
                _build(compiler, target)
    return target


def available() -> bool:
    """Whether dualdl's operators (``mx.nd.dl_batch_norm``, ``mx.sym.dl_batch_norm``,
    ``dl_guarded_sgd_mom``, ``dl_log_softmax``) exist in this process (built and loaded on the
    first call; False, with one warning, where that fails)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    with _LOCK:
        if _loaded is None:
            _loaded = _load()
    return _loaded


def _load() -> bool:
    if not config.mx_kernels():
        return False
    if all(hasattr(mx.nd, op) for op in _OPS):           # loaded by an earlier import in this process
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
                      "DUALDL_MX_KERNELS=0 silences this.",
                      KernelUnavailableWarning, stacklevel=3)
        return False
    return all(hasattr(mx.nd, op) for op in _OPS)


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
