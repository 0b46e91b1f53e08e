"""dualdl's compiled MXNet kernels ``dl_batch_norm`` and ``dl_log_softmax`` (dualdl_mx/fast/kernels):
built once per machine into the cache folder, loaded with MXNet's library-operator API, exact to
float32 rounding; gradient requests (add-to, null) honoured through dualdl's BatchNorm and
log-softmax; where they cannot be built, one warning and the previous paths with the same results."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from mxnet import autograd, nd

import dualdl as dl
from dualdl_mx.fast import kernels
from _mx_profile import engine_stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_compiler = pytest.mark.skipif(kernels._compiler() is None, reason="no C++ compiler on PATH")


def _ref(x, w, b, g, eps=1e-5):
    """float64 batch-statistics BatchNorm: y, dx, dw, db, mean, unbiased var."""
    x, w, b, g = (a.astype(np.float64) for a in (x, w, b, g))
    ax = (0,) + tuple(range(2, x.ndim))
    sh = (1, -1) + (1,) * (x.ndim - 2)
    m, v = x.mean(ax, keepdims=True), x.var(ax, keepdims=True)
    xh = (x - m) / np.sqrt(v + eps)
    dx = w.reshape(sh) / np.sqrt(v + eps) * (g - g.mean(ax, keepdims=True) - xh * (g * xh).mean(ax, keepdims=True))
    n = x.size // x.shape[1]
    return xh * w.reshape(sh) + b.reshape(sh), dx, (g * xh).sum(ax), g.sum(ax), m.ravel(), v.ravel() * n / max(n - 1, 1)


def _err(a, e):
    return float(np.abs(a.astype(np.float64) - e).max() / max(1.0, np.abs(e).max()))


@needs_compiler
def test_the_kernel_builds_and_loads():
    assert kernels.available()
    path = kernels.library_path()
    assert path.is_file() and path.parent.parent.name == "mx-kernels"
    assert not [f for f in os.listdir(path.parent) if f.startswith(".build-")]     # no half-written build


@needs_compiler
@pytest.mark.parametrize("shape", [(16, 6), (4, 5, 7), (8, 16, 14, 14), (2, 3, 4, 5, 6), (1, 3, 1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_operator_against_float64(shape, dtype):
    """Outputs and gradients within float32 rounding of a float64 reference (float64 input: of
    float64 rounding); the batch mean; torch's running-statistics update with the unbiased
    variance (1 for a single value per channel), computed in float64."""
    assert kernels.available()
    rng = np.random.default_rng(sum(shape))
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 5).astype(dtype)
    w, b = (rng.standard_normal(c).astype(dtype) for _ in range(2))
    g = rng.standard_normal(shape).astype(dtype)
    rm, rv = rng.standard_normal(c).astype(dtype), rng.random(c).astype(dtype) + 0.5
    xs, ws, bs = nd.array(x, dtype=dtype), nd.array(w, dtype=dtype), nd.array(b, dtype=dtype)
    for a in (xs, ws, bs):
        a.attach_grad()
    with autograd.record():
        y, mean, inv_std, new_mean, new_var = nd.dl_batch_norm(xs, ws, bs, nd.array(rm, dtype=dtype),
                                                               nd.array(rv, dtype=dtype), eps=1e-5, momentum=0.2)
    y.backward(nd.array(g, dtype=dtype))
    r = _ref(x, w, b, g)
    tol = 1.2e-7 if dtype == "float32" else 1e-13
    for got, want in ((y, r[0]), (xs.grad, r[1]), (ws.grad, r[2]), (bs.grad, r[3])):
        assert got.dtype == np.dtype(dtype) and _err(got.asnumpy(), want) < tol
    assert mean.dtype == inv_std.dtype == np.float64 and new_mean.dtype == new_var.dtype == np.dtype(dtype)
    np.testing.assert_allclose(mean.asnumpy(), r[4], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(inv_std.asnumpy(), 1 / np.sqrt(x.astype(np.float64).var((0,) + tuple(range(2, x.ndim))) + 1e-5),
                               rtol=1e-10)
    want_mean = (0.8 * rm.astype(np.float64) + 0.2 * r[4]).astype(dtype)
    want_var = (0.8 * rv.astype(np.float64) + 0.2 * r[5]).astype(dtype)
    np.testing.assert_allclose(new_mean.asnumpy(), want_mean, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-7)
    np.testing.assert_allclose(new_var.asnumpy(), want_var, rtol=1e-6 if dtype == "float32" else 1e-10, atol=1e-7)
    y3 = nd.dl_batch_norm(xs, ws, bs, eps=1e-5)          # without running statistics: 3 outputs
    assert len(y3) == 3 and np.array_equal(y3[0].asnumpy(), y.asnumpy())


@needs_compiler
def test_nan_and_adversarial_statistics():
    """A NaN poisons its own channel only (torch's behaviour); mean 1000 / std 0.1 keeps float32
    rounding where torch's float32 statistics lose 3 digits."""
    assert kernels.available()
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((16, 3, 8, 8)) * 0.1 + 1000).astype(np.float32)
    w, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    y = nd.dl_batch_norm(nd.array(x), nd.array(w), nd.array(b), eps=1e-5)[0].asnumpy()
    r = _ref(x, w, b, np.zeros_like(x))
    t = torch.nn.functional.batch_norm(torch.tensor(x), None, None, training=True, eps=1e-5).numpy()
    assert _err(y, r[0]) < 1.2e-7 and _err(t, r[0]) > 100 * _err(y, r[0])
    x[2, 1, 3, 3] = np.nan
    y = nd.dl_batch_norm(nd.array(x), nd.array(w), nd.array(b), eps=1e-5)[0].asnumpy()
    assert np.isnan(y[:, 1]).all() and np.isfinite(y[:, [0, 2]]).all()


def _bn(hybrid, affine=True):
    with dl.use("mxnet"):
        bn = dl.nn.BatchNorm2d(3, affine=affine)
    if hybrid:
        bn.hybridize()
    return bn


@needs_compiler
@pytest.mark.parametrize("hybrid", [False, True])
def test_gradient_requests_through_dualdl_batchnorm(hybrid):
    """The library operator writes its gradients whatever MXNet asks: dualdl's BatchNorm gives it
    weight, bias and a leaf input through an identity op, so grad_req='add' accumulates (weight,
    bias and an input with grad_req='add', two backward passes), 'null' freezes."""
    assert kernels.available()
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 3, 5, 5)) + 2).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    bn = _bn(hybrid)
    w, b = bn.weight.data().asnumpy(), bn.bias.data().asnumpy()
    r = _ref(x, w, b, g)
    xm = nd.array(x)
    xm.attach_grad(grad_req="add")
    bn.zero_grad()
    for _ in range(2):
        with autograd.record():
            y = bn(xm)
        y.backward(nd.array(g))
    assert _err(xm.grad.asnumpy(), 2 * r[1]) < 1e-6
    assert _err(bn.weight.grad().asnumpy(), 2 * r[2]) < 1e-6 and _err(bn.bias.grad().asnumpy(), 2 * r[3]) < 1e-6
    bn.weight.grad_req = "null"
    bn.bias.zero_grad()
    xm.grad[:] = 0
    with autograd.record():
        y = bn(xm)
    y.backward(nd.array(g))
    assert _err(bn.bias.grad().asnumpy(), r[3]) < 1e-6 and _err(xm.grad.asnumpy(), r[1]) < 1e-6
    # an intermediate input and no affine parameters
    bn = _bn(hybrid, affine=False)
    xm = nd.array(x)
    xm.attach_grad()
    with autograd.record():
        y = bn(xm * 1.0)
    y.backward(nd.array(g))
    r = _ref(x, np.ones(3, np.float32), np.zeros(3, np.float32), g)
    assert _err(y.asnumpy(), r[0]) < 1.2e-7 and _err(xm.grad.asnumpy(), r[1]) < 1e-6


_FALLBACK = r"""
import warnings, numpy as np, mxnet as mx, dualdl as dl
from mxnet import autograd, nd
from dualdl_mx import norm
from dualdl_mx.fast import kernels
x = nd.array(np.random.default_rng(0).standard_normal((4, 3, 5, 5)).astype("float32") + 2)
outs = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for hybrid in (False, True):
        with dl.use("mxnet"):
            bn = dl.nn.BatchNorm2d(3)
        if hybrid:
            bn.hybridize()
        for _ in range(2):
            with autograd.record():
                y = bn(x)
            y.backward()
        outs += [y.asnumpy().ravel(), bn.running_var.data().asnumpy()]
    z = nd.array(np.random.default_rng(1).standard_normal((8, 5)).astype("float32") * 3)
    z.attach_grad()
    with autograd.record():
        ce = dl.losses.CrossEntropyLoss(label_smoothing=0.1)(z, nd.array([0, 1, 2, 3, 4, 0, 1, 2]))
    ce.backward()
print("available", kernels.available(), "loaded", hasattr(mx.nd, "dl_batch_norm"))
print("warnings", sum(issubclass(w.category, kernels.KernelUnavailableWarning) for w in caught))
np.save({out!r}, np.concatenate(outs))
np.save({out!r} + ".ce.npy", np.concatenate([ce.asnumpy().ravel(), z.grad.asnumpy().ravel()]))
"""


def _run(code, env):
    env = dict(os.environ, PYTHONPATH=ROOT, **dict(dict(OMP_NUM_THREADS="1"), **env))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@needs_compiler
def test_fallback_without_a_compiler_warns_once_and_gives_the_same_numbers(tmp_path):
    """No compiler on PATH and an empty cache folder: one KernelUnavailableWarning, MXNet's float64
    operator, the same outputs and running variance as the kernel to float32 rounding, eager and
    hybridized, and a cross-entropy (log-softmax from its float32 formula) within its rounding;
    DUALDL_MX_KERNELS=0: the same without a warning."""
    empty = tmp_path / "bin"
    empty.mkdir()
    results = {}
    for name, env in (("kernel", {}),
                      ("no compiler", {"PATH": str(empty), "DUALDL_CACHE_DIR": str(tmp_path / "cache")}),
                      ("off", {"DUALDL_MX_KERNELS": "0"})):
        out = tmp_path / f"{len(results)}.npy"
        text = _run(_FALLBACK.format(out=str(out)), env)
        results[name] = np.load(out), np.load(str(out) + ".ce.npy")
        assert ("available True loaded True" in text) == (name == "kernel"), text
        assert f"warnings {1 if name == 'no compiler' else 0}" in text, text
    assert not list(tmp_path.rglob("*.so"))                      # nothing half-built left behind
    for name in ("no compiler", "off"):
        np.testing.assert_allclose(results[name][0], results["kernel"][0], rtol=2e-7, atol=2e-7)
        np.testing.assert_allclose(results[name][1], results["kernel"][1], rtol=1e-6, atol=1e-6)


@needs_compiler
def test_a_fresh_cache_builds_once_and_is_reused(tmp_path):
    """A new cache folder: the first process builds the library (atomically: no temporary file is
    left), the second loads the same file without building."""
    code = "from dualdl_mx.fast import kernels; print(kernels.available(), kernels.library_path())"
    env = {"DUALDL_CACHE_DIR": str(tmp_path)}
    first = _run(code, env).split()
    assert first[0] == "True" and first[1].startswith(str(tmp_path))
    built = os.stat(first[1]).st_mtime_ns
    second = _run(code, env).split()
    assert second == first and os.stat(first[1]).st_mtime_ns == built
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        ".lock", "libdualdl_mx_kernels.so", "libdualdl_mx_kernels.so.sha256"]     # and the hash recorded at build


_THREADS = """
import numpy as np, mxnet as mx
from mxnet import autograd, nd
from dualdl_mx.fast import kernels
assert kernels.available()
rng = np.random.default_rng(0)
out = {{}}
for pool in (None, "2,2"):
    x = nd.array(rng.standard_normal((16, 32, 32, 32)).astype(np.float32) * 3 + 1)
    w, b = nd.array(rng.standard_normal(32).astype(np.float32)), nd.array(rng.standard_normal(32).astype(np.float32))
    for a in (x, w, b):
        a.attach_grad()
    kw = dict(relu=1, pool=pool) if pool else {{}}
    with autograd.record():
        y = nd.dl_batch_norm(x, w, b, eps=1e-5, **kw)[0]
    y.backward(nd.array(rng.standard_normal(y.shape).astype(np.float32)))
    for k, a in (("y", y), ("dx", x.grad), ("dw", w.grad), ("db", b.grad)):
        out[f"{{pool}}{{k}}"] = a.asnumpy()
import ctypes
print("threads", ctypes.CDLL("libgomp.so.1").omp_get_max_threads())
np.savez("{out}", **out)
"""


@needs_compiler
def test_batchnorm_kernel_threads_give_the_same_numbers(tmp_path):
    """The library is built with OpenMP (MXNet's libgomp): with OMP_NUM_THREADS=2, dl_batch_norm
    splits the channels of inputs this large over two threads (measured: (32, 64, 64, 64) forward
    24.7 ms on one, 13.0 ms on two) and gives the one-thread results bit for bit, plain and with
    the fused ReLU and pool, forward and backward."""
    assert b"GOMP_parallel" in kernels.library_path().read_bytes()
    results = {}
    for n in ("1", "2"):
        out = tmp_path / f"threads{n}.npz"
        text = _run(_THREADS.format(out=str(out)), {"OMP_NUM_THREADS": n} if n == "2" else {})
        results[n] = (dict(np.load(out)), int(text.split("threads")[1]))
    assert (results["1"][1], results["2"][1]) == (1, 2)
    assert sorted(results["1"][0]) == sorted(results["2"][0])
    for k, a in results["1"][0].items():
        np.testing.assert_array_equal(a, results["2"][0][k], err_msg=k)


# ---- dl_log_softmax --------------------------------------------------------------------------
def _lsm_ref(x, g, axis):
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = torch.log_softmax(t, dim=axis)
    y.backward(torch.tensor(g, dtype=torch.float64))
    return y.detach().numpy(), t.grad.numpy()


@needs_compiler
@pytest.mark.parametrize("shape,axis", [((32, 10), 1), ((5, 7, 3), 1), ((4, 6), 0), ((2, 3, 4, 5), 3), ((1, 1), 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_softmax_against_float64(shape, axis, dtype):
    """Values and gradients one rounding from the float64 result (half an ulp, here at most
    1.2e-7 of max(1, |reference|) in float32), where the float32 formula and torch are 2-8x that."""
    from dualdl_mx.ops import _log_softmax_formula
    assert kernels.available()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    ry, rg = _lsm_ref(x, g, axis)
    a = nd.array(x, dtype=dtype)
    a.attach_grad()
    with autograd.record():
        y = _log_softmax_formula(nd, a, dim=axis, kernel=True, leaf=True)
    y.backward(nd.array(g, dtype=dtype))
    assert y.dtype == a.grad.dtype == np.dtype(dtype)
    bound = 1.2e-7 if dtype == "float32" else 1e-14         # float64: a few ulps (so is the reference)
    assert _err(y.asnumpy(), ry) <= bound and _err(a.grad.asnumpy(), rg) <= bound


@needs_compiler
def test_log_softmax_nan_and_infinities_follow_the_formula():
    from dualdl_mx.ops import _log_softmax_formula
    assert kernels.available()
    x = nd.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 0.0], [-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 1.0],
                  [1e30, -1e30, 0.0]])
    want = _log_softmax_formula(nd, x, dim=1).asnumpy()
    got = _log_softmax_formula(nd, x, dim=1, kernel=True).asnumpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=2e-7)   # float64 vs float32 sums


@needs_compiler
@pytest.mark.parametrize("path", ["op", "ops.log_softmax", "CrossEntropyLoss"])
def test_log_softmax_gradient_add_to_on_a_leaf(path):
    """Two backward passes into a leaf with grad_req='add' give twice one pass, bit for bit. The
    operator alone overwrites instead (what the identity in front of it is for)."""
    assert kernels.available()
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((6, 4)).astype(np.float32)
    target = nd.array([0, 1, 2, 3, 1, 2])

    def f(a):
        if path == "op":
            return nd.dl_log_softmax(a, axis=1)[0] * nd.arange(4).reshape((1, 4))
        if path == "ops.log_softmax":
            with dl.use("mxnet"):
                return dl.ops.log_softmax(a, dim=1) * nd.arange(4).reshape((1, 4))
        return dl.losses.CrossEntropyLoss()(a, target)

    def grad(passes):
        a = nd.array(x_np)
        a.attach_grad(grad_req="add")
        for _ in range(passes):
            with autograd.record():
                out = f(a)
            out.backward()
        return a.grad.asnumpy()
    one, two = grad(1), grad(2)
    if path == "op":
        np.testing.assert_array_equal(two, one)            # the library operator ignores add-to
    else:
        np.testing.assert_array_equal(two, 2 * one)


# ---- BatchNorm + ReLU in one kernel pass (dualdl_mx.containers.Sequential) ------------------------
def _cnn(nested: bool):
    """Conv, BatchNorm, ReLU, MaxPool; ``nested`` puts ReLU outside BatchNorm's Sequential, which
    keeps them apart (the reference for the fused pass)."""
    with dl.use("mxnet"):
        dl.seed(0)
        conv, bn, act, pool = (dl.nn.Conv2d(3, 8, 3, padding=1, bias=False), dl.nn.BatchNorm2d(8), dl.nn.ReLU(),
                               dl.nn.MaxPool2d(2))
        return dl.nn.Sequential(dl.nn.Sequential(conv, bn), act, pool) if nested else dl.nn.Sequential(conv, bn, act, pool)


def _train_twice(m, x_np, hybrid):
    if hybrid:
        m.hybridize()
    x = nd.array(x_np)
    x.attach_grad()
    for _ in range(2):
        with autograd.record():
            y = m(x)
        y.backward(nd.ones_like(y))
    bn = m[0][1] if isinstance(m[0], dl.nn.Sequential) else m[1]
    conv = m[0][0] if isinstance(m[0], dl.nn.Sequential) else m[0]
    return [y.asnumpy(), x.grad.asnumpy(), conv.weight.grad().asnumpy(), bn.weight.grad().asnumpy(),
            bn.bias.grad().asnumpy(), bn.running_mean.data().asnumpy(), bn.running_var.data().asnumpy()]


@needs_compiler
@pytest.mark.parametrize("hybrid", [False, True])
def test_batchnorm_then_relu_in_one_pass_bit_for_bit(hybrid):
    """In a Sequential, BatchNorm followed by ReLU runs as one kernel pass: outputs, gradients
    and running statistics equal the separate layers bit for bit (two steps, eager and hybridized)."""
    from dualdl_mx.fast.sequential import _absorbs_pool, _absorbs_relu
    assert kernels.available()
    fused = _cnn(False)
    assert _absorbs_relu(fused[1], fused[2], nd.zeros((1,)))
    assert _absorbs_pool(fused[1], fused[3], nd.zeros((1,)))
    assert not _absorbs_relu(fused[2], fused[3], nd.zeros((1,)))
    x_np = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32) * 2 + 1
    for a, b in zip(_train_twice(fused, x_np, hybrid), _train_twice(_cnn(True), x_np, hybrid)):
        np.testing.assert_array_equal(a, b)


@needs_compiler
def test_batchnorm_then_relu_nan_gradient_is_torchs():
    """relu's backward at NaN passes the gradient (torch's threshold_backward): with a NaN in the
    input, the fused pass gives torch's BatchNorm bias gradient."""
    x_np = np.random.default_rng(1).standard_normal((4, 3, 8, 8)).astype(np.float32)
    x_np[0, 0, 0, 0] = np.nan
    m = _cnn(False)
    got = _train_twice(m, x_np, hybrid=False)
    t = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
                            torch.nn.ReLU(), torch.nn.MaxPool2d(2))
    t[0].weight.data = torch.tensor(m[0].weight.data().asnumpy())
    xt = torch.tensor(x_np, requires_grad=True)
    for _ in range(2):
        t(xt).sum().backward()
    np.testing.assert_array_equal(got[4], t[1].bias.grad.numpy())


@needs_compiler
def test_a_hook_keeps_batchnorm_and_relu_apart():
    m = _cnn(False)
    seen = []
    m[2].register_forward_hook(lambda mod, inp, out: seen.append(out.shape))
    with autograd.record():
        m(nd.ones((2, 3, 4, 4)))
    assert seen == [(2, 8, 4, 4)]


# ---- BatchNorm + ReLU + MaxPool2d in one kernel pass --------------------------------------------
def _bn_relu_pool(channels: int, pool, nested: bool, **pool_kw):
    """BatchNorm2d, ReLU, MaxPool2d; ``nested`` keeps them apart (the reference)."""
    with dl.use("mxnet"):
        bn, act, mp = dl.nn.BatchNorm2d(channels), dl.nn.ReLU(), dl.nn.MaxPool2d(pool, **pool_kw)
        return dl.nn.Sequential(dl.nn.Sequential(bn), act, mp) if nested else dl.nn.Sequential(bn, act, mp)


def _fwd_bwd(m, x_np, g_np, hybrid, steps=2):
    """Output, input gradient, BatchNorm's weight/bias gradients and running statistics after
    ``steps`` forward/backward calls."""
    if hybrid:
        m.hybridize()
    x = nd.array(x_np)
    x.attach_grad()
    for _ in range(steps):
        with autograd.record():
            y = m(x)
        y.backward(nd.array(g_np))
    bn = m[0][0] if isinstance(m[0], dl.nn.Sequential) else m[0]
    return [y.asnumpy(), x.grad.asnumpy(), bn.weight.grad().asnumpy(), bn.bias.grad().asnumpy(),
            bn.running_mean.data().asnumpy(), bn.running_var.data().asnumpy()]


def _operators(fn, folder):
    """The names of the MXNet operators ``fn()`` runs (MXNet's profiler, its file in ``folder``)."""
    return set(engine_stats(fn, folder).get("operator", {}))


@needs_compiler
@pytest.mark.parametrize("hybrid", [False, True])
@pytest.mark.parametrize("shape,pool", [((4, 3, 8, 8), 2), ((3, 4, 9, 7), 2), ((2, 3, 8, 6), (2, 1)),
                                        ((2, 3, 7, 9), 3), ((2, 3, 5, 39), 2), ((2, 3, 9, 21), (2, 1)),
                                        ((2, 2, 6, 34), (3, 2))])
def test_batchnorm_relu_maxpool_in_one_pass_bit_for_bit(shape, pool, hybrid, tmp_path):
    """BatchNorm2d, ReLU and a MaxPool2d whose windows do not overlap run as one kernel pass (no
    Pooling operator forward or backward): outputs, input and parameter gradients and running
    statistics equal the separate layers bit for bit, including rows and columns past the last
    window (odd sizes) and 2x1 / 3x3 windows. Rows of 8 windows or more take the float32 kernel's
    vector loops for windows one or two wide (then its scalar loop for the rest of the row)."""
    rng = np.random.default_rng(3)
    x_np = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
    k = (pool, pool) if isinstance(pool, int) else pool
    g_np = rng.standard_normal(shape[:2] + (shape[2] // k[0], shape[3] // k[1])).astype(np.float32)
    fused, ref = _bn_relu_pool(shape[1], pool, False), _bn_relu_pool(shape[1], pool, True)
    ops = _operators(lambda: _fwd_bwd(fused, x_np, g_np, hybrid, steps=1), tmp_path)
    assert "dl_batch_norm" in ops and not {"Pooling", "_backward_Pooling"} & ops
    assert "Pooling" in _operators(lambda: _fwd_bwd(ref, x_np, g_np, hybrid, steps=1), tmp_path)
    for a, b in zip(_fwd_bwd(fused, x_np, g_np, hybrid), _fwd_bwd(ref, x_np, g_np, hybrid)):
        np.testing.assert_array_equal(a, b)


def _torch_bn_relu_pool(pool, x_np, g_np):
    """torch's BatchNorm2d, ReLU and MaxPool2d(pool) in train mode: (output, input gradient,
    BatchNorm bias gradient) for the output gradient ``g_np``."""
    t = torch.nn.Sequential(torch.nn.BatchNorm2d(x_np.shape[1]), torch.nn.ReLU(), torch.nn.MaxPool2d(pool))
    xt = torch.tensor(x_np, requires_grad=True)
    yt = t(xt)
    yt.backward(torch.tensor(g_np))
    return yt.detach().numpy(), xt.grad.numpy(), t[0].bias.grad.numpy()


@needs_compiler
@pytest.mark.parametrize("pool", [2, (2, 1), (3, 2)])
@pytest.mark.parametrize("width", [8, 37])
def test_batchnorm_relu_maxpool_ties_follow_torch(pool, width):
    """Integer-valued inputs put exact ties in most windows: the gradient goes to torch's element
    (the first maximum), within float32 rounding of torch's output and input gradient (width 37:
    the vector loops too)."""
    rng = np.random.default_rng(4)
    x_np = rng.integers(-3, 4, (4, 3, 9, width)).astype(np.float32)
    k = (pool, pool) if isinstance(pool, int) else pool
    g_np = rng.standard_normal((4, 3, 9 // k[0], width // k[1])).astype(np.float32)
    got = _fwd_bwd(_bn_relu_pool(3, pool, False), x_np, g_np, hybrid=False, steps=1)
    y, dx, dbias = _torch_bn_relu_pool(pool, x_np, g_np)
    np.testing.assert_allclose(got[0], y, rtol=0, atol=2.4e-7)
    np.testing.assert_allclose(got[1], dx, rtol=0, atol=2.4e-7)
    np.testing.assert_allclose(got[3], dbias, rtol=1e-6)


@needs_compiler
@pytest.mark.parametrize("width,pool", [(4, 2), (36, 2), (36, (2, 1))])
def test_batchnorm_relu_maxpool_nan_is_torchs(width, pool):
    """A NaN in a window is its maximum, as in torch (MKLDNN's max pooling gave -3.4e38 there):
    the fused pass gives torch's outputs and input gradients, NaN where torch's are (width 36: in
    the vector loops and their scalar rest)."""
    rng = np.random.default_rng(5)
    k = (pool, pool) if isinstance(pool, int) else pool
    x_np = rng.standard_normal((2, 2, 4, width)).astype(np.float32)
    x_np[0, 0, 1, 1] = x_np[1, 1, 0, 0] = x_np[1, 0, 2, width - 1] = np.nan
    g_np = rng.standard_normal((2, 2, 4 // k[0], width // k[1])).astype(np.float32)
    got = _fwd_bwd(_bn_relu_pool(2, pool, False), x_np, g_np, hybrid=False, steps=1)
    y, dx, _ = _torch_bn_relu_pool(pool, x_np, g_np)
    for a, b in ((got[0], y), (got[1], dx)):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(np.nan_to_num(a), np.nan_to_num(b), rtol=0, atol=2.4e-7)


@needs_compiler
@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2), dict(kernel_size=2, padding=1),
                                dict(kernel_size=2, ceil_mode=True), dict(kernel_size=2, hook=True)])
def test_pools_the_kernel_does_not_take_stay_apart(kw):
    """Overlapping windows, padding, ceil_mode or a hook on the MaxPool2d: it runs as its own layer
    (the BatchNorm still computes the ReLU), with the separate layers' numbers."""
    from dualdl_mx.fast.sequential import _absorbs_pool
    kw = dict(kw)
    hook = kw.pop("hook", False)
    pool = kw.pop("kernel_size")
    m, ref = _bn_relu_pool(3, pool, False, **kw), _bn_relu_pool(3, pool, True, **kw)
    seen = []
    if hook:
        m[2].register_forward_hook(lambda mod, inp, out: seen.append(out.shape))
    assert not _absorbs_pool(m[0], m[2], nd.zeros((1,)))
    rng = np.random.default_rng(6)
    x_np = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    shape = _bn_relu_pool(3, pool, True, **kw)(nd.array(x_np)).shape
    g_np = rng.standard_normal(shape).astype(np.float32)
    for a, b in zip(_fwd_bwd(m, x_np, g_np, False), _fwd_bwd(ref, x_np, g_np, False)):
        np.testing.assert_array_equal(a, b)
    assert seen == ([shape] * 2 if hook else [])


@needs_compiler
def test_fused_pool_too_small_input_is_maxpools_error():
    m = _bn_relu_pool(3, 4, False)
    with pytest.raises(ValueError, match=r"MaxPool2d\(kernel_size=\(4, 4\)\): input spatial size \(3, 8\) is too small"):
        with autograd.record():
            m(nd.ones((2, 3, 3, 8)))


@needs_compiler
@pytest.mark.parametrize("case", ["eval", "float64"])
def test_fused_pool_where_the_kernel_does_not_run(case):
    """BatchNorm2d, ReLU, MaxPool2d in a Sequential where the kernel does not run (eval mode:
    running statistics; float64): the BatchNorm applies the relu and the MaxPool2d itself, with
    the separate layers' numbers."""
    rng = np.random.default_rng(7)
    dtype = np.float64 if case == "float64" else np.float32
    x_np = rng.standard_normal((2, 3, 6, 6)).astype(dtype)
    g_np = rng.standard_normal((2, 3, 3, 3)).astype(dtype)
    models = [_bn_relu_pool(3, 2, nested) for nested in (False, True)]
    for m in models:
        if case == "float64":
            m.cast("float64")
        else:
            m.eval()
    for a, b in zip(_fwd_bwd(models[0], x_np, g_np, False), _fwd_bwd(models[1], x_np, g_np, False)):
        np.testing.assert_array_equal(a, b)
    assert models[0](nd.array(x_np, dtype=dtype)).shape == (2, 3, 3, 3)


def test_a_batchnorm_subclass_with_its_own_forward_keeps_relu_and_pool_apart():
    """A subclass of the MXNet BatchNorm2d with a hybrid_forward of its own would not apply a relu
    or pool it was asked to: the Sequential calls the ReLU and the MaxPool2d itself."""
    from dualdl_mx.fast.sequential import _absorbs_relu
    from dualdl_mx.norm import BatchNorm2d

    class Doubling(BatchNorm2d):
        def hybrid_forward(self, F, x, *args, **kwargs):
            return x * 2

    with dl.use("mxnet"):
        m = dl.nn.Sequential(Doubling(3), dl.nn.ReLU(), dl.nn.MaxPool2d(2))
    assert not _absorbs_relu(m[0], m[1], nd.zeros((1,)))
    x = np.random.default_rng(8).standard_normal((2, 3, 4, 4)).astype(np.float32)
    with autograd.record():
        y = m(nd.array(x)).asnumpy()
    want = np.maximum(2 * x, 0).reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(y, want)
