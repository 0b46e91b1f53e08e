"""The cache of dualdl's compiled MXNet kernels (dualdl_mx/fast/kernels) is verified before a
library is loaded into MXNet (loading runs its code): ownership, modes and the sha256 recorded at
build time; a library that fails is rebuilt (ours) or not used (another user's), and the build
works without ``fcntl`` (Windows). Also two numeric edge cases of the kernels against torch: an
empty log-softmax input, and a BatchNorm channel of ``-inf``.

Every test that loads a library into MXNet runs in a subprocess (a loaded library cannot be
unloaded, and a planted or truncated one would run its code, or kill, in the test process)."""
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from dualdl_mx.fast import kernels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_compiler = pytest.mark.skipif(kernels._compiler() is None, reason="no C++ compiler on PATH")
POSIX = hasattr(os, "getuid")
LIBRARY = "libdualdl_mx_kernels.so"


def _run(code: str, env: dict, expect_ok: bool = True) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", **env)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=400)
    if expect_ok:
        assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    return done


def _target(cache: Path) -> Path:
    """Where a process with DUALDL_CACHE_DIR=cache looks for the library (the same key)."""
    return cache / "mx-kernels" / kernels._key(kernels._compiler()) / LIBRARY


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _writable_by_others(path: Path) -> bool:
    return bool(os.lstat(path).st_mode & 0o022)


# one process's kernels against torch: log-softmax and a training-mode BatchNorm2d
_COMPUTE = """
import sys
{prelude}
import warnings
warnings.simplefilter("always")
import numpy as np
from mxnet import nd
import dualdl as dl
from dualdl_mx.fast import kernels
ok = kernels.available()
print("available", ok, flush=True)
if ok:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32) * 3
    b = rng.standard_normal((4, 3, 5, 5)).astype(np.float32) + 2
    lsm = nd.dl_log_softmax(nd.array(x), axis=1)[0].asnumpy()
    with dl.use("mxnet"):
        bn = dl.nn.BatchNorm2d(3)
    y = bn(nd.array(b)).asnumpy()
    np.savez({out!r}, x=x, b=b, lsm=lsm, y=y, rm=bn.running_mean.data().asnumpy(),
             rv=bn.running_var.data().asnumpy())
"""


def _check_against_torch(out: Path) -> None:
    r = np.load(out)
    want = torch.log_softmax(torch.tensor(r["x"], dtype=torch.float64), 1).numpy()
    np.testing.assert_allclose(r["lsm"], want, rtol=0, atol=1e-6)
    t = torch.nn.BatchNorm2d(3).double()
    y = t(torch.tensor(r["b"], dtype=torch.float64)).detach().numpy()
    np.testing.assert_allclose(r["y"], y, rtol=0, atol=1e-6)
    np.testing.assert_allclose(r["rm"], t.running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(r["rv"], t.running_var.numpy(), rtol=1e-6)


def _compute(cache: Path, out: Path, prelude: str = "", expect_ok: bool = True) -> subprocess.CompletedProcess:
    return _run(_COMPUTE.format(prelude=prelude, out=str(out)), {"DUALDL_CACHE_DIR": str(cache)}, expect_ok)


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory) -> Path:
    """A cache built by a process under umask 002 (which made the folders group-writable before
    dualdl set their modes); its kernels' results checked against torch."""
    base = tmp_path_factory.mktemp("built")
    done = _compute(base / "cache", base / "first.npz", prelude="import os; os.umask(0o002)")
    assert "available True" in done.stdout, done.stderr[-3000:]
    _check_against_torch(base / "first.npz")
    return base / "cache"


# ---- 1: no fcntl (Windows) ----------------------------------------------------------------------
@needs_compiler
def test_without_fcntl_the_adapter_imports_and_the_kernels_build(tmp_path):
    """Where Python has no fcntl, the MXNet adapter imports and the library is built under an
    O_EXCL lock file, removed afterwards (before: ``import fcntl`` failed the adapter's import)."""
    cache = tmp_path / "cache"
    done = _compute(cache, tmp_path / "out.npz", prelude="sys.modules['fcntl'] = None  # as on Windows")
    assert "available True" in done.stdout, done.stderr[-3000:]
    _check_against_torch(tmp_path / "out.npz")
    folder = _target(cache).parent
    assert sorted(os.listdir(folder)) == [LIBRARY, LIBRARY + ".sha256"]     # no lock file left


def test_the_exclusive_lock_file_waits_for_its_holder_and_takes_over_a_stale_one(tmp_path, monkeypatch):
    """The O_EXCL lock (no fcntl): a second taker waits while the file is fresh, and takes over a
    file older than two builds' timeout (its builder died)."""
    import threading
    import time
    monkeypatch.setattr(kernels, "_FCNTL", None)
    lock = tmp_path / ".lock.excl"
    lock.write_text("")
    old = time.time() - kernels._STALE_LOCK_S - 10
    os.utime(lock, (old, old))
    held = []

    def take():
        second = kernels._build_lock(tmp_path)
        second.__enter__()
        held.append(second)

    with kernels._build_lock(tmp_path):                  # a stale lock: taken over
        assert lock.exists()
        waiter = threading.Thread(target=take)
        waiter.start()
        time.sleep(0.5)
        assert not held                                   # a fresh lock: the second taker waits
    waiter.join(10)
    assert len(held) == 1 and lock.exists()
    held[0].__exit__(None, None, None)
    assert not lock.exists()


# ---- 2: a planted library is not loaded ----------------------------------------------------------
_PLANTED = r"""
#include <cstdio>
__attribute__((constructor)) static void planted() {
  if (FILE* f = std::fopen("%s", "w")) { std::fputs("ran", f); std::fclose(f); }
}
"""


def _plant(target: Path, marker: Path, tmp_path: Path) -> None:
    """A library at ``target`` whose constructor writes ``marker`` when it is loaded."""
    src = tmp_path / "planted.cc"
    src.write_text(_PLANTED % marker)
    target.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([kernels._compiler(), "-shared", "-fPIC", str(src), "-o", str(target)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@needs_compiler
def test_a_library_planted_at_the_cache_path_is_not_loaded_but_rebuilt(tmp_path):
    """A library at the predictable path with no hash recorded by dualdl: removed and rebuilt, its
    code never run (before: loaded, its constructor ran, and the kernels were unavailable)."""
    cache, marker = tmp_path / "cache", tmp_path / "constructor-ran"
    _plant(_target(cache), marker, tmp_path)
    planted = _sha256(_target(cache))
    done = _compute(cache, tmp_path / "out.npz")
    assert not marker.exists()
    assert "available True" in done.stdout and "KernelUnavailableWarning" not in done.stderr, done.stderr[-3000:]
    _check_against_torch(tmp_path / "out.npz")
    target = _target(cache)
    assert _sha256(target) != planted
    assert (target.parent / (LIBRARY + ".sha256")).read_text().strip() == _sha256(target)


@needs_compiler
@pytest.mark.skipif(not POSIX, reason="POSIX owners")
def test_a_cache_folder_of_another_user_is_not_used(tmp_path):
    """Folders owned by another user (here: the process believes it is another uid): nothing is
    loaded, removed or built; one KernelUnavailableWarning names the folder and says to set
    DUALDL_CACHE_DIR, and the slow path gives torch's numbers."""
    cache, marker = tmp_path / "cache", tmp_path / "constructor-ran"
    _plant(_target(cache), marker, tmp_path)
    planted = _sha256(_target(cache))
    code = """
    import os, warnings
    real = os.getuid()
    os.getuid = lambda: real + 4242                      # every folder is now another user's
    import numpy as np, torch
    from mxnet import nd
    import dualdl as dl
    from dualdl_mx.fast import kernels
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        print("available", kernels.available())
        with dl.use("mxnet"):
            y = dl.ops.log_softmax(nd.array([[1.0, 2.0, 3.0]]), dim=1).asnumpy()
    mine = [str(w.message) for w in caught if issubclass(w.category, kernels.KernelUnavailableWarning)]
    print("warnings", len(mine))
    print(mine[0] if mine else "")
    np.testing.assert_allclose(y, torch.log_softmax(torch.tensor([[1.0, 2.0, 3.0]]), 1).numpy(), atol=2e-7)
    """
    done = _run(code, {"DUALDL_CACHE_DIR": str(cache)})
    assert "available False" in done.stdout and "warnings 1" in done.stdout, done.stdout + done.stderr[-3000:]
    assert f"{cache} is owned by uid" in done.stdout and "DUALDL_CACHE_DIR" in done.stdout, done.stdout
    assert not marker.exists() and _sha256(_target(cache)) == planted      # not loaded, not removed


# ---- 3: modes whatever the umask -----------------------------------------------------------------
@needs_compiler
@pytest.mark.skipif(not POSIX, reason="POSIX modes")
def test_cache_folders_and_files_are_private_whatever_the_umask(built_cache):
    """Built under umask 002: folders 0o700, the library 0o500 (loaded: it stays loadable), its
    hash 0o400, the lock 0o600; nothing group- or world-writable (before: 0o775 folders)."""
    target = _target(built_cache)
    for folder in (built_cache, built_cache / "mx-kernels", target.parent):
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700, folder
    modes = {p.name: stat.S_IMODE(os.lstat(p).st_mode) for p in target.parent.iterdir()}
    assert modes == {LIBRARY: 0o500, LIBRARY + ".sha256": 0o400, ".lock": 0o600}


@needs_compiler
@pytest.mark.skipif(not POSIX, reason="POSIX modes")
def test_group_writable_folders_of_ours_lose_the_write_bits(built_cache, tmp_path):
    """Folders an older dualdl left group- and world-writable are tightened, and a library of ours
    that others could write is not trusted: rebuilt."""
    cache = tmp_path / "cache"
    shutil.copytree(built_cache, cache)
    target = _target(cache)
    for folder in (cache, cache / "mx-kernels", target.parent):
        os.chmod(folder, 0o777)
    os.chmod(target, 0o775)
    done = _compute(cache, tmp_path / "out.npz")
    assert "available True" in done.stdout, done.stderr[-3000:]
    _check_against_torch(tmp_path / "out.npz")
    for p in (cache, cache / "mx-kernels", target.parent, target):
        assert not _writable_by_others(p), p
    assert stat.S_IMODE(os.lstat(target).st_mode) == 0o500                 # rebuilt
    assert _sha256(target) == (target.parent / (LIBRARY + ".sha256")).read_text().strip()


# ---- 4: a truncated library is rebuilt, not loaded -----------------------------------------------
@needs_compiler
def test_a_truncated_library_is_rebuilt(built_cache, tmp_path):
    """The library truncated to half its size (a crash while copying, a full disk): before, every
    MXNet process that loaded it died of SIGBUS and it was never rebuilt; now the hash check
    catches it, it is rebuilt, and a fresh process gets the kernels and torch's numbers."""
    cache = tmp_path / "cache"
    shutil.copytree(built_cache, cache)
    target = _target(cache)
    size = target.stat().st_size
    os.chmod(target, 0o700)
    os.truncate(target, size // 2)
    truncated = os.stat(target)
    done = _compute(cache, tmp_path / "out.npz", expect_ok=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])        # before: -7, SIGBUS
    assert "available True" in done.stdout, done.stderr[-3000:]
    _check_against_torch(tmp_path / "out.npz")
    rebuilt = os.stat(target)
    assert rebuilt.st_size == size
    assert (rebuilt.st_ino, rebuilt.st_mtime_ns) != (truncated.st_ino, truncated.st_mtime_ns)
    assert _sha256(target) == (target.parent / (LIBRARY + ".sha256")).read_text().strip()


# ---- 5: log-softmax of an empty input ------------------------------------------------------------
_EMPTY = """
import numpy as np, torch
from mxnet import nd
import dualdl as dl
from dualdl_mx.fast import kernels
assert kernels.available()
rng = np.random.default_rng(1)
for shape, dim in (((0, 5), 1), ((0, 5), 0), ((3, 0), 1), ((2, 0, 4), -1), ((2, 0, 4), 0)):
    x = np.zeros(shape, np.float32)
    with dl.use("mxnet"):
        y = dl.ops.log_softmax(nd.array(x), dim=dim)
    want = torch.log_softmax(torch.tensor(x), dim=dim)
    assert y.shape == tuple(want.shape) and y.dtype == np.float32 and y.asnumpy().shape == tuple(want.shape), shape
    z = (rng.standard_normal((4, 7)) * 3).astype(np.float32)         # the next call is healthy
    with dl.use("mxnet"):
        got = dl.ops.log_softmax(nd.array(z), dim=1).asnumpy()
    np.testing.assert_allclose(got, torch.log_softmax(torch.tensor(z, dtype=torch.float64), 1).numpy(), atol=2e-7)
# the operator itself refuses an empty input (MXNet reads its 0 as unknown) and stays healthy
try:
    nd.dl_log_softmax(nd.array(np.zeros((0, 5), np.float32)), axis=1)[0].wait_to_read()
    print("no error")
except Exception as e:
    print("refused", "empty or unknown dimension" in str(e))
z = np.array([[1.0, 2.0, 3.0]], np.float32)
np.testing.assert_allclose(nd.dl_log_softmax(nd.array(z), axis=1)[0].asnumpy(),
                           torch.log_softmax(torch.tensor(z), 1).numpy(), atol=2e-7)
print("done")
"""


@needs_compiler
def test_log_softmax_of_an_empty_input_is_torchs_and_the_next_call_is_healthy():
    """torch returns an empty tensor of the input's shape; before, the kernel reported a tensor
    'larger than 2^31 elements' and the next call failed to allocate."""
    done = _run(_EMPTY, {})
    assert "refused True" in done.stdout and "done" in done.stdout, done.stdout + done.stderr[-3000:]


# ---- 6: BatchNorm over a channel of -inf ----------------------------------------------------------
_NEG_INF = """
import numpy as np
from mxnet import autograd, nd
import dualdl as dl
from dualdl_mx.fast import kernels
x = np.load({x!r})
out = {{}}
for hybrid in (False, True):
    with dl.use("mxnet"):
        bn = dl.nn.BatchNorm2d(3, momentum=0.3)
    if hybrid:
        bn.hybridize()
    for step in range(2):
        with autograd.record():
            y = bn(nd.array(x))
    out[f"{{hybrid}}y"] = y.asnumpy()
    out[f"{{hybrid}}rm"] = bn.running_mean.data().asnumpy()
    out[f"{{hybrid}}rv"] = bn.running_var.data().asnumpy()
print("available", kernels.available())
np.savez({out!r}, **out)
"""


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """torch's values: NaN and infinities where torch's are, finite values to float32 rounding."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)], err_msg=what)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=1e-6, err_msg=what)


@needs_compiler
@pytest.mark.parametrize("kernel", ["1", "0"])
def test_batchnorm_running_mean_of_a_channel_of_minus_inf_is_torchs(kernel, tmp_path):
    """A channel whose every value is -inf: torch's batch mean is -inf, so its running mean
    (1 - m) * old + m * (-inf) is -inf, its running variance and output NaN; the other channels
    untouched. The kernel (before: NaN running mean, its sums shifted by the channel's first
    value, -inf - -inf) and MXNet's float64 operator (DUALDL_MX_KERNELS=0), eager and hybridized,
    two steps."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 3, 5, 5)) * 2 + 1).astype(np.float32)
    x[:, 1] = -np.inf
    x[1, 2, 0, 0] = -np.inf                     # one -inf in a channel: mean -inf, var NaN (torch)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    done = _run(_NEG_INF.format(x=str(tmp_path / "x.npy"), out=str(out)), {"DUALDL_MX_KERNELS": kernel})
    assert f"available {kernel == '1'}" in done.stdout, done.stdout + done.stderr[-3000:]
    t = torch.nn.BatchNorm2d(3, momentum=0.3)
    for _ in range(2):
        y = t(torch.tensor(x)).detach().numpy()
    want_rm, want_rv = t.running_mean.numpy(), t.running_var.numpy()
    assert want_rm[1] == -np.inf and want_rm[2] == -np.inf and np.isnan(want_rv[1])      # torch's values
    r = np.load(out)
    for hybrid in (False, True):
        _same(r[f"{hybrid}rm"], want_rm, f"running_mean hybrid={hybrid}")
        _same(r[f"{hybrid}rv"], want_rv, f"running_var hybrid={hybrid}")
        _same(r[f"{hybrid}y"], y, f"output hybrid={hybrid}")
