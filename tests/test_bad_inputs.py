"""Bad inputs to layers and losses get the same dualdl error on both backends (issue 16.7):
a float64 LSTM state to a float32 LSTM, a batch of 0 samples, integer attention masks; and bool
class targets mean class 0/1 on both, as in torch."""
import numpy as np
import pytest

import dualdl as dl

_LSTM = "LSTM(input_size=5, hidden_size=4, num_layers=1, layout='TNC')"


def _x(*shape, dtype="float32"):
    return dl.from_numpy(np.zeros(shape, dtype))


def test_float64_lstm_state_names_both_dtypes(backend):
    lstm = dl.nn.LSTM(5, 4)
    x = dl.from_numpy(np.random.default_rng(0).normal(size=(3, 2, 5)).astype("float32"))
    h32, h64 = _x(1, 2, 4), _x(1, 2, 4, dtype="float64")
    with pytest.raises(ValueError) as e:
        lstm(x, (h64, h64))
    assert str(e.value) == (f"{_LSTM}: state h has dtype float64 but the weights and the input are "
                            f"float32; cast the state to float32")
    with pytest.raises(ValueError, match="state c has dtype float64"):
        lstm(x, (h32, h64))
    with pytest.raises(ValueError) as e:
        lstm(dl.from_numpy(np.zeros((3, 2, 5))))
    assert str(e.value) == f"{_LSTM}: input dtype float64 does not match the weights' dtype float32"
    out, (h, c) = lstm(x, (h32, h32))                      # the right dtypes still run
    assert tuple(out.shape) == (3, 2, 4) and np.isfinite(dl.to_numpy(out)).all()
    gru = dl.nn.GRU(5, 4)
    with pytest.raises(ValueError, match=r"GRU\(.*\): state h has dtype float64"):
        gru(x, h64)


@pytest.mark.parametrize("case", ["linear", "linear_3d", "conv2d", "lstm", "cross_entropy", "nll"])
def test_a_batch_of_zero_samples_is_refused_the_same_on_both(backend, case):
    layer, x, who = {
        "linear": (dl.nn.Linear(5, 3), _x(0, 5), "Linear(in_features=5, out_features=3)"),
        "linear_3d": (dl.nn.Linear(5, 3), _x(2, 0, 5), "Linear(in_features=5, out_features=3)"),
        "conv2d": (dl.nn.Conv2d(2, 4, 3), _x(0, 2, 6, 6), "Conv2d(in_channels=2)"),
        "lstm": (dl.nn.LSTM(5, 4), _x(3, 0, 5), _LSTM),
        "cross_entropy": (lambda x: dl.losses.CrossEntropyLoss()(x, _x(0, dtype="int64")), _x(0, 4),
                          "CrossEntropyLoss"),
        "nll": (lambda x: dl.losses.NLLLoss(reduction="sum")(x, _x(0, dtype="int64")), _x(0, 4), "NLLLoss"),
    }[case]
    with pytest.raises(ValueError) as e:
        layer(x)
    shape = tuple(x.shape)
    assert str(e.value) == (f"{who}: got an input with no elements (shape {shape}, e.g. a batch of 0 "
                            f"samples); MXNet's operators cannot run on it, so dualdl refuses it on both "
                            f"backends: skip empty batches before calling the layer or loss")


def _empty_message(who, shape):
    return (f"{who}: got an input with no elements (shape {shape}, e.g. a batch of 0 samples); MXNet's "
            f"operators cannot run on it, so dualdl refuses it on both backends: skip empty batches "
            f"before calling the layer or loss")


class _TwoLayers(dl.nn.Module):
    """A write-once model: hybridized on MXNet, its own call checks the NDArray inputs."""
    def __init__(self):
        super().__init__()
        self.fc, self.act = dl.nn.Linear(5, 3), dl.nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


@pytest.mark.parametrize("hybridize", [False, True], ids=["eager", "hybridized"])
@pytest.mark.parametrize("case", ["relu", "gelu", "softmax", "layernorm", "layernorm_2d", "linear",
                                  "sequential", "write_once"])
def test_empty_batches_to_layers_are_refused_the_same_on_both_eager_and_hybridized(backend, case, hybridize):
    """torch would run these on an empty batch; MXNet's operators (and a hybridized cached graph)
    raise their own error: dualdl refuses them on both, before MXNet runs, hybridized too."""
    layer, x, who = {
        "relu": (dl.nn.ReLU(), _x(0, 5), "ReLU"),
        "gelu": (dl.nn.GELU(), _x(2, 0, 3), "GELU"),
        "softmax": (dl.nn.Softmax(dim=-1), _x(0, 4), "Softmax"),
        "layernorm": (dl.nn.LayerNorm(5), _x(0, 5), "LayerNorm((5,))"),
        "layernorm_2d": (dl.nn.LayerNorm((3, 4)), _x(2, 0, 3, 4), "LayerNorm((3, 4))"),
        "linear": (dl.nn.Linear(5, 3), _x(0, 5), "Linear(in_features=5, out_features=3)"),
        "sequential": (dl.nn.Sequential(dl.nn.Linear(5, 3), dl.nn.ReLU()), _x(0, 5),
                       "Linear(in_features=5, out_features=3)"),
        "write_once": (_TwoLayers(), _x(0, 5), "Linear(in_features=5, out_features=3)"),
    }[case]
    if hybridize and backend == "mxnet":
        layer.hybridize()
        if case in ("sequential", "write_once"):       # the outer block's call refuses it, by its name
            who = "Sequential" if case == "sequential" else "_TwoLayers"
    with pytest.raises(ValueError) as e:
        layer(x)
    assert str(e.value) == _empty_message(who, tuple(x.shape))
    y = layer(_x(*[n or 2 for n in x.shape]))           # and a batch with samples still runs after it
    assert np.isfinite(dl.to_numpy(y)).all()


@pytest.mark.parametrize("case", ["relu", "matmul_lhs", "matmul_rhs"])
def test_empty_operands_to_relu_and_matmul_are_refused_the_same_on_both(backend, case):
    call, x, who = {
        "relu": (dl.ops.relu, _x(0, 5), "relu"),
        "matmul_lhs": (lambda x: dl.ops.matmul(x, _x(4, 5)), _x(0, 4), "matmul"),
        "matmul_rhs": (lambda x: dl.ops.matmul(_x(2, 3, 4), x), _x(4, 0), "matmul"),
    }[case]
    with pytest.raises(ValueError) as e:
        call(x)
    assert str(e.value) == _empty_message(who, tuple(x.shape))


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_integer_attention_masks_are_refused_as_torch_does(backend, dtype):
    mha = dl.nn.MultiheadAttention(4, 2)
    q = dl.from_numpy(np.random.default_rng(1).normal(size=(3, 2, 4)).astype("float32"))
    causal = np.triu(np.ones((3, 3)), 1)
    with pytest.raises(TypeError) as e:
        mha(q, q, q, attn_mask=dl.from_numpy(causal.astype(dtype)))
    assert str(e.value) == (f"attention mask must be bool (True = blocked) or float (added to the scores), "
                            f"got {dtype}; for a 0/1 mask pass mask.astype(bool) / mask.bool()")
    out_bool, _ = mha(q, q, q, attn_mask=dl.from_numpy(causal.astype(bool)))
    out_float, _ = mha(q, q, q, attn_mask=dl.from_numpy(np.where(causal > 0, -np.inf, 0).astype("float32")))
    np.testing.assert_allclose(dl.to_numpy(out_bool), dl.to_numpy(out_float), rtol=0, atol=1e-6)


def test_bool_class_targets_mean_classes_0_and_1(backend):
    logits = np.random.default_rng(2).normal(size=(5, 3)).astype("float32")
    t = np.array([True, False, True, True, False])
    ce = dl.losses.CrossEntropyLoss()
    got = dl.item(ce(dl.from_numpy(logits), dl.from_numpy(t)))
    want = dl.item(ce(dl.from_numpy(logits), dl.from_numpy(t.astype("int64"))))
    z = logits - logits.max(1, keepdims=True)
    ref = float(np.mean(np.log(np.exp(z).sum(1)) - z[np.arange(5), t.astype(int)]))
    assert got == want and abs(got - ref) < 1e-6
