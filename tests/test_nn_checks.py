"""The neutral layer checks (dualdl/nn/checks.py): their verdicts are the frameworks' own, and
called with a torch layer's attributes they give the MXNet layer's message word for word.

``torch_explain`` below is the failure-path call the torch adapter makes (torch runs its layer
first and asks the neutral check only when the call failed, or up front for the rank, which
torch would otherwise accept unbatched)."""
import numpy as np
import pytest

import dualdl as dl
from dualdl.nn import checks as C


def torch_explain(m, x):
    """What dualdl's torch layer ``m`` raises for input ``x`` (None: the input is fine)."""
    import torch
    name, shape = type(m).__name__, tuple(x.shape)
    if name in ("Conv1d", "Conv2d"):
        return C.explain(C.check_conv_input, name, m.in_channels, shape, m.kernel_size, m.dilation,
                         m.padding, m.padding_mode)
    if name in ("MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d"):
        n = m._n
        return C.explain(C.check_pool_input, name, shape, C.to_tuple(m.kernel_size, n, "kernel_size"),
                         C.to_tuple(m.stride, n, "stride"), C.to_tuple(m.padding, n, "padding"), m.ceil_mode,
                         C.to_tuple(getattr(m, "dilation", 1), n, "dilation"))
    if name == "AdaptiveAvgPool2d":
        return C.explain(C.check_adaptive_pool_input, m.output_size, shape)
    if name in ("BatchNorm1d", "BatchNorm2d"):
        return C.explain(C.check_batchnorm_input, name, m.num_features, shape, m.training)
    if name == "LayerNorm":
        return C.explain(C.check_layernorm_input, m.normalized_shape, shape)
    if name == "Linear":
        return C.explain(C.check_linear_input, m.in_features, m.out_features, shape)
    if name == "Embedding":
        integer = not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
        err = C.explain(C.check_embedding_dtype, m.num_embeddings, m.embedding_dim,
                        str(x.dtype).replace("torch.", ""), integer)
        if err is None and x.numel():
            lo, hi = torch.aminmax(x)
            err = C.explain(C.check_embedding_range, m.num_embeddings, m.embedding_dim, int(lo), int(hi))
        return err
    raise AssertionError(name)


BAD = [
    (lambda: dl.nn.Conv2d(3, 4, 3), (8, 8), "float32"),
    (lambda: dl.nn.Conv2d(3, 4, 3), (1, 2, 8, 8), "float32"),
    (lambda: dl.nn.Conv2d(3, 4, 5), (1, 3, 3, 3), "float32"),
    (lambda: dl.nn.Conv2d(3, 4, (5, 3), padding=1), (1, 3, 2, 4), "float32"),
    (lambda: dl.nn.Conv1d(3, 4, 3), (0, 3, 8), "float32"),
    (lambda: dl.nn.Conv1d(3, 4, 3, padding=4, padding_mode="reflect"), (2, 3, 4), "float32"),
    (lambda: dl.nn.MaxPool2d(2), (8, 8), "float32"),
    (lambda: dl.nn.MaxPool2d(5), (1, 1, 3, 3), "float32"),
    (lambda: dl.nn.AvgPool1d(3, stride=2), (2, 3, 2), "float32"),
    (lambda: dl.nn.AdaptiveAvgPool2d(1), (3, 4), "float32"),
    (lambda: dl.nn.BatchNorm2d(4), (2, 3, 5, 5), "float32"),
    (lambda: dl.nn.BatchNorm1d(4), (2, 4, 5, 5), "float32"),
    (lambda: dl.nn.BatchNorm1d(4), (1, 4), "float32"),
    (lambda: dl.nn.LayerNorm((2, 3)), (4, 3, 2), "float32"),
    (lambda: dl.nn.Linear(4, 3), (2, 5), "float32"),
    (lambda: dl.nn.Linear(4, 3), (0, 4), "float32"),
    (lambda: dl.nn.Embedding(10, 3), (2,), "float32"),
    (lambda: dl.nn.Embedding(10, 3), (2,), "int64"),         # index 12
]


def _input(shape, dtype):
    if dtype == "int64":
        return np.array([1, 12], np.int64)
    return np.zeros(shape, np.float32) + (np.float32(1.5) if shape and dtype == "float32" else 0)


@pytest.mark.parametrize("make,shape,dtype", BAD)
def test_torch_calls_give_the_mxnet_message(make, shape, dtype):
    import torch
    a = _input(shape, dtype)
    with dl.use("mxnet"):
        with pytest.raises((ValueError, TypeError, IndexError)) as mx_err:
            make()(dl.from_numpy(a))
    with dl.use("torch"):
        err = torch_explain(make(), torch.from_numpy(a))
    assert err is not None and type(err) is mx_err.type and str(err) == str(mx_err.value)


GOOD = [
    (lambda: dl.nn.Conv2d(3, 4, 4, padding="same", dilation=2), (1, 3, 5, 6)),
    (lambda: dl.nn.Conv1d(2, 4, 3, padding=1, padding_mode="reflect"), (2, 2, 2)),
    (lambda: dl.nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (1, 1, 5, 6)),
    (lambda: dl.nn.AvgPool1d(3, stride=2, ceil_mode=True), (2, 3, 3)),
    (lambda: dl.nn.BatchNorm1d(4), (2, 4)),
    (lambda: dl.nn.LayerNorm((2, 3)), (4, 2, 3)),
    (lambda: dl.nn.Linear(4, 3), (2, 7, 4)),
    (lambda: dl.nn.Conv2d(3, 4, 3), (3, 8, 8)),                  # unbatched, as torch.nn
    (lambda: dl.nn.MaxPool2d(2), (3, 8, 8)),
    (lambda: dl.nn.AdaptiveAvgPool2d(1), (2, 3, 4)),
]


@pytest.mark.parametrize("make,shape", GOOD)
def test_valid_inputs_pass_on_both(make, shape):
    import torch
    a = np.ones(shape, np.float32)
    with dl.use("torch"):
        m = make()
        assert torch_explain(m, torch.from_numpy(a)) is None
        want = tuple(m(torch.from_numpy(a)).shape)
    with dl.use("mxnet"):
        assert tuple(make()(dl.from_numpy(a)).shape) == want


def test_pool_output_size_is_torchs():
    """Over a grid of sizes, kernels, strides, paddings, dilations and ceil_mode, the neutral size
    is torch's own output size, and <= 0 exactly where torch refuses the input."""
    import torch
    F = torch.nn.functional
    for size in range(1, 8):
        for k in (1, 2, 3):
            for s in (1, 2, 3):
                for p in range(k // 2 + 1):
                    for d in (1, 2):
                        for ceil in (False, True):
                            eff = d * (k - 1) + 1
                            if p > eff // 2:
                                continue
                            want = C.pool_output_size(size, eff, s, p, ceil)
                            try:
                                got = F.max_pool1d(torch.zeros(1, 1, size), k, s, p, d, ceil_mode=ceil).shape[-1]
                            except RuntimeError:
                                got = None
                            case = (size, k, s, p, d, ceil, got, want)
                            assert want <= 0 if got is None else got == want, case

def test_conv_sides_are_torchs_same_padding():
    import torch
    for k in (1, 2, 3, 4):
        for d in (1, 2):
            (before, after), = C.conv_sides("same", (k,), (d,))
            x = torch.arange(7.0).reshape(1, 1, 7)
            w = torch.zeros(1, 1, k)
            w[0, 0, 0] = 1.0                                  # picks x[i - before] at output i
            y = torch.nn.functional.conv1d(x, w, padding="same", dilation=d)
            ref = torch.nn.functional.conv1d(torch.nn.functional.pad(x, (before, after)), w, dilation=d)
            assert torch.equal(y, ref), (k, d)


def test_argument_checks():
    """The neutral checks dualdl.nn.arguments runs (tests/test_refusals.py: through the layers)."""
    with pytest.raises(ValueError, match="at most half"):
        C.check_pool_args("MaxPool2d", (2, 2), (2, 2), (2, 2))
    with pytest.raises(ValueError, match=r"at most half of the kernel size \(5,\)"):
        C.check_pool_args("MaxPool1d", (3,), (1,), (3,), dilation=(2,))       # dilated kernel 5
    C.check_pool_args("MaxPool1d", (3,), (1,), (2,), dilation=(2,))
    with pytest.raises(ValueError, match="must be positive"):
        C.check_pool_args("AvgPool1d", (0,), (1,), (0,))
    with pytest.raises(ValueError, match=r"^num_channels \(4\) must be divisible by num_groups \(3\)$"):
        C.check_groupnorm_args(3, 4)                                        # torch's wording
    assert C.explain(C.check_layernorm_input, (3,), (2, 3)) is None
