"""The tensor layer on each backend: numpy round trip, dtypes, scalars, reshape, devices, creation."""
import numpy as np
import pytest

import dualdl as dl

DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_is_exact(backend, dtype, rng):
    a = (rng.normal(size=(3, 4)) * 100).astype(dtype)
    t = dl.from_numpy(a)
    assert dl.backend_for(t).name == backend
    b = dl.to_numpy(t)
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(a, b)


def test_from_numpy_keeps_float64_and_int64_and_copies(backend):
    a = np.array([1 + 1e-10, 2.0])
    t = dl.from_numpy(a)
    assert dl.to_numpy(t).dtype == np.float64
    assert dl.to_numpy(t)[0] - 1 == pytest.approx(1e-10, rel=1e-3)   # MXNet's nd.array would give 0
    i = dl.from_numpy(np.array([2**40, 3], dtype=np.int64))
    assert dl.to_numpy(i)[0] == 2**40
    a[1] = 7.0                                                          # the tensor holds a copy
    assert dl.to_numpy(t)[1] == 2.0


def test_python_values_follow_torch_default_dtypes(backend):
    assert dl.to_numpy(dl.from_numpy([1.5, 2.0])).dtype == np.float32
    assert dl.to_numpy(dl.from_numpy([1, 2])).dtype == np.int64
    assert dl.to_numpy(dl.from_numpy([True, False])).dtype == np.bool_
    assert dl.to_numpy(dl.from_numpy(np.ones(2), dtype="float32")).dtype == np.float32


@pytest.mark.parametrize("scalar", [np.float64(1 + 1e-10), np.float32(1.5), np.float16(0.5), np.int32(7)])
def test_numpy_scalars_keep_their_dtype(backend, scalar):
    """A numpy scalar carries its dtype as an array does (torch.as_tensor(np.float64(1.5)) is
    float64); only Python floats default to float32 (issue 34: np.float64 gave float32)."""
    t = dl.from_numpy(scalar)
    assert dl.to_numpy(t).dtype == scalar.dtype
    assert dl.to_numpy(t).reshape(-1)[0] == scalar


def test_unsupported_dtype_is_a_clear_error(backend):
    with pytest.raises(TypeError, match="unsupported numpy dtype complex128"):
        dl.from_numpy(np.ones(2, dtype=np.complex128))
    with pytest.raises(TypeError, match="unsupported dtype uint16"):
        dl.from_numpy(np.ones(2), dtype="uint16")


@pytest.mark.parametrize("shape", [(), (1,), (1, 1, 1)])
def test_item_returns_a_python_scalar(backend, shape):
    v = dl.item(dl.from_numpy(np.full(shape, 2.5, dtype=np.float32)))
    assert type(v) is float and v == 2.5
    assert type(dl.item(dl.from_numpy(np.array([3])))) is int


def test_item_rejects_non_scalars(backend):
    with pytest.raises(ValueError, match=r"exactly one element, got shape \(2, 3\) \(6 elements\)"):
        dl.item(dl.zeros((2, 3)))


def test_reshape_infers_minus_one_and_rejects_mxnet_codes(backend):
    t = dl.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert dl.reshape(t, (4, -1)).shape == (4, 6)
    assert dl.reshape(t, (-1,)).shape == (24,)
    assert dl.reshape(t, 24).shape == (24,)
    np.testing.assert_array_equal(dl.to_numpy(dl.reshape(t, (6, 4))), np.arange(24).reshape(6, 4))
    for bad in [(0, -1), (-2,), (-3, 4), (-4, 1, 2, -2)]:
        with pytest.raises(ValueError, match="special codes"):
            dl.reshape(t, bad)
    with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(2, 3, 4\) \(24 elements\) into \(5, -1\)"):
        dl.reshape(t, (5, -1))
    with pytest.raises(ValueError, match="only one -1"):
        dl.reshape(t, (-1, -1))


def test_creation_functions(backend):
    z = dl.zeros((2, 3))
    assert dl.to_numpy(z).dtype == np.float32 and not dl.to_numpy(z).any()
    np.testing.assert_array_equal(dl.to_numpy(dl.ones(3, dtype="int32")), np.ones(3, np.int32))
    np.testing.assert_array_equal(dl.to_numpy(dl.full((2,), 7.0)), [7.0, 7.0])
    ar = dl.to_numpy(dl.arange(5))
    assert ar.dtype == np.int64 and ar.tolist() == [0, 1, 2, 3, 4]
    af = dl.to_numpy(dl.arange(0, 1, 0.25))
    assert af.dtype == np.float32 and af.tolist() == [0, 0.25, 0.5, 0.75]
    x = dl.from_numpy(np.ones((2, 2), np.float64))
    assert dl.to_numpy(dl.zeros_like(x)).dtype == np.float64
    assert dl.to_numpy(dl.ones_like(x, dtype="int64")).tolist() == [[1, 1], [1, 1]]
    assert dl.to_numpy(dl.full_like(x, 3)).tolist() == [[3, 3], [3, 3]]


def test_to_device_and_device_of(backend):
    t = dl.from_numpy(np.ones(3, np.float32))
    assert dl.device_of(t) == dl.cpu()
    assert dl.to_device(t, "cpu") is t                  # already there: same object on both
    if backend == "mxnet":                              # MXNet's second CPU context is a real device
        t1 = dl.to_device(t, dl.cpu(1))
        assert dl.device_of(t1) == dl.cpu(1)
        np.testing.assert_array_equal(dl.to_numpy(t1), np.ones(3))


def test_gpu_request_without_gpu_is_a_clear_error(backend):
    if dl.get_backend().gpu_count():
        pytest.skip("a GPU is present")
    t = dl.zeros(2)
    with pytest.raises(RuntimeError, match=r"dualdl.gpu\(0\) requested on the .* backend, but it sees 0 GPU"):
        dl.to_device(t, dl.gpu(0))
    with pytest.raises(RuntimeError, match="no CUDA device"):
        dl.zeros(2, device="cuda:0")
    with pytest.raises(RuntimeError, match=r"dualdl.gpu\(0\) requested on the .* backend, but it sees 0 GPU"):
        dl.from_numpy(np.ones(3, np.float32), device=dl.gpu(0))


# ---- 0-d and empty tensors (issue 16.6) ----------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: dl.from_numpy(np.array(2.5, np.float64)),
                                  lambda: dl.from_numpy(np.float32(2.5)), lambda: dl.full((), 2.5),
                                  lambda: dl.zeros(()), lambda: dl.ones((), dtype="int64")])
def test_zero_dimensional_tensors_keep_shape_and_value(backend, make):
    t = make()
    a = dl.to_numpy(t)
    assert tuple(t.shape) == () and a.shape == ()
    assert dl.item(t) == a.item() and dl.item(t) in (2.5, 0.0, 1)
    assert dl.to_numpy(dl.zeros_like(t)).shape == () and dl.to_numpy(dl.to_device(t, "cpu")).item() == a.item()
    if backend == "mxnet":                                 # a real second device
        moved = dl.to_device(t, dl.cpu(1))
        assert dl.device_of(moved) == dl.cpu(1) and dl.to_numpy(moved).shape == () and dl.item(moved) == a.item()


def test_from_numpy_of_a_0d_array_copies(backend):
    a = np.array(1.5, np.float32)
    t = dl.from_numpy(a)
    a[()] = 9.0
    assert dl.item(t) == 1.5


def test_empty_tensors_reshape_like_torch(backend):
    z = dl.from_numpy(np.zeros((0, 5), np.float32))
    for target, want in (((5, 0), (5, 0)), ((5, -1), (5, 0)), ((-1,), (0,)), ((0, 1, 5), (0, 1, 5))):
        r = dl.reshape(z, target)
        assert tuple(r.shape) == want and dl.to_numpy(r).shape == want and dl.to_numpy(r).dtype == np.float32
    with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(0, 5\) \(0 elements\) into \(-1, 0\)"):
        dl.reshape(z, (-1, 0))                              # torch: the -1 is ambiguous
    for shape in ((0, 5), (5, 0), (0,)):
        assert dl.to_numpy(dl.zeros(shape)).shape == shape and dl.to_numpy(dl.full(shape, 1.0)).shape == shape
    if backend == "mxnet":
        assert dl.to_numpy(dl.to_device(z, dl.cpu(1))).shape == (0, 5)
    one = dl.from_numpy(np.full((1, 1), 4.0, np.float32))
    assert tuple(dl.reshape(one, ()).shape) == () and dl.item(dl.reshape(one, ())) == 4.0


# ---- one reshape / zeros_like for dualdl and dualdl.ops (issue 15) -------------------------------------
def test_ops_reshape_and_zeros_like_are_the_tensor_functions():
    from dualdl import ops
    assert ops.reshape is dl.reshape and ops.zeros_like is dl.zeros_like and ops.ones_like is dl.ones_like


def test_reshape_and_zeros_like_union_on_arrays(backend):
    from dualdl import ops
    x = dl.from_numpy(np.arange(6, dtype=np.float64).reshape(2, 3))
    np.testing.assert_array_equal(dl.to_numpy(ops.reshape(x, (3, -1))), np.arange(6).reshape(3, 2))
    with pytest.raises(ValueError, match="special codes"):
        ops.reshape(x, (0, -1))
    z = ops.zeros_like(x, dtype="int32")
    assert dl.to_numpy(z).dtype == np.int32 and dl.to_numpy(z).tolist() == [[0, 0, 0], [0, 0, 0]]
    assert dl.to_numpy(ops.ones_like(x)).dtype == np.float64 and dl.to_numpy(ops.ones_like(x)).sum() == 6
    empty, scalar = dl.zeros((5, 0)), dl.full((), 2.0)   # MXNet's nd.zeros_like rejects both
    assert dl.to_numpy(ops.zeros_like(empty)).shape == (5, 0)
    assert dl.to_numpy(ops.ones_like(scalar)).shape == () and dl.item(ops.ones_like(scalar)) == 1.0
    assert tuple(ops.reshape(empty, (0, 5)).shape) == (0, 5)


def test_reshape_and_zeros_like_on_symbols_in_a_hybridized_forward():
    import mxnet as mx
    from dualdl import ops

    class Net(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return dl.reshape(x, (-1, 3)) + ops.zeros_like(dl.reshape(x, (2, 3))) + dl.ones_like(
                ops.reshape(x, (2, -1)))

    net = Net()
    net.hybridize()
    x = mx.nd.array(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(net(x).asnumpy(), np.arange(6, dtype=np.float32).reshape(2, 3) + 1)

    class Bad(mx.gluon.HybridBlock):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def hybrid_forward(self, F, x):
            return self.fn(x)

    for fn, match in ((lambda x: dl.reshape(x, (0, -1)), "special codes"),
                      (lambda x: dl.zeros_like(x, dtype="int32"), "takes no value, dtype= or device=")):
        bad = Bad(fn)
        bad.hybridize()
        with pytest.raises((ValueError, TypeError), match=match):
            bad(x)
