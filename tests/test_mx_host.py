"""``dualdl_mx.fast.host.host_array``: host data into NDArrays as ``nd.array`` makes them, without the
engine wait ``nd.array`` does (its ``SyncCopyFromCPU`` pushes an op and waits for it behind every
operator already queued)."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, nd

import dualdl as dl
from dualdl_mx.fast.host import host_array
from _mx_profile import engine_stats


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "uint8", "int8", "bool"])
def test_same_array_as_nd_array(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    got, want = host_array(a, mx.cpu(), dtype), nd.array(a, dtype=dtype)
    assert got.dtype == want.dtype and got.shape == want.shape and got.context == mx.cpu(0)
    assert got.asnumpy().tobytes() == want.asnumpy().tobytes()


def test_a_copy_aligned_like_mxnets_own_memory():
    a = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
    x = host_array(a[:, ::2], mx.cpu())            # a strided view is copied C-contiguous
    a[:] = 7                                       # the source stays the caller's
    np.testing.assert_array_equal(x.asnumpy(), np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)[:, ::2])
    x[:] = 3                                       # and the array is MXNet's to write
    assert float(x.sum().asscalar()) == 3 * 64 * 32 and float(a[0, 0]) == 7
    ptr = x.handle
    data = mx.base.ctypes.c_void_p()
    mx.base.check_call(mx.base._LIB.MXNDArrayGetData(ptr, mx.base.ctypes.byref(data)))
    assert data.value % 64 == 0


def test_other_contexts_shapes_and_autograd():
    y = host_array(np.ones((2, 3), np.float32), mx.cpu(1))
    assert y.context == mx.cpu(1) and float(y.sum().asscalar()) == 6
    assert host_array(np.zeros((0, 3), np.float32), mx.cpu()).shape == (0, 3)
    assert host_array(np.float32(2.5), mx.cpu()).shape == nd.array(np.float32(2.5)).shape
    assert host_array([1.5, 2.0], mx.cpu(), "float64").dtype == np.float64
    x = host_array(np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3), mx.cpu())
    x.attach_grad()
    with autograd.record():
        out = nd.Convolution(x, nd.ones((2, 1, 1, 2)), kernel=(1, 2), num_filter=2, no_bias=True)
    out.backward(nd.ones_like(out))
    np.testing.assert_array_equal(x.grad.asnumpy().ravel(), [2, 4, 2, 2, 4, 2])


def _engine_waits(make, tmp_path):
    """The engine's WaitForVar operations (MXNet's profiler) while ``make()`` runs."""
    stats = engine_stats(make, tmp_path)
    return sum(v["Count"] for dom in stats.values() for k, v in dom.items() if k == "WaitForVar")


def _behind_work(make):
    """``make()`` with matrix products queued before it: an engine wait then has something to
    wait for (on an idle engine, whether ``nd.array``'s wait is needed is a race with the worker)."""
    big = nd.ones((512, 512))
    nd.waitall()

    def run():
        for _ in range(4):
            nd.dot(big, big)
        return make()
    return run


def test_no_engine_wait(tmp_path):
    a = np.arange(100, dtype=np.float32)
    assert _engine_waits(_behind_work(lambda: nd.array(a)), tmp_path) >= 1    # what the helper avoids: the check can fail
    assert _engine_waits(_behind_work(lambda: host_array(a, mx.cpu())), tmp_path) == 0
    with dl.use("mxnet"):
        assert _engine_waits(lambda: dl.from_numpy(np.ones((4, 3), np.float32)), tmp_path) == 0
        targets = dl.from_numpy(np.array([[2, 1, 3], [1, 2, 0]], np.int64))
    log_probs = nd.log_softmax(nd.array(np.random.default_rng(0).standard_normal((5, 2, 4)), dtype="float32"), axis=2)
    labels, lengths = targets[:, 1:], targets[:, 0]
    for ready in (log_probs, labels, lengths):    # computed: a host read of them needs no wait
        ready.wait_to_read()                      # (before, one was a race with the engine's worker)
    ctc = dl.losses.CTCLoss(check_log_probs=False)
    assert _engine_waits(lambda: ctc(log_probs, labels, np.array([5, 5]), lengths), tmp_path) == 0
