"""One refusal path (issue 35): a layer's constructor arguments are checked once, before either
adapter builds anything (dualdl/nn/module.py ``_build_layer``):

1. an invalid value (dualdl/nn/arguments.py): torch's exception type and message, word for word, on
   both backends, where torch.nn's own constructor refuses it (``TORCH_REFUSES``); where torch takes
   it and fails only in forward, dualdl refuses it at construction with one ValueError on both
   (``DUALDL_EARLIER``);
2. a valid value the MXNet build cannot honour: declared in the MXNet adapter's ``_dl_cannot``;
   torch builds it as torch.nn does, MXNet raises ``NotImplementedError("X(arg=value) cannot be
   honoured on the mxnet backend: why")`` (the values: tests/test_layer_contract.py REFUSED_VALUES).

And the torch adapter explains a failure of torch's own computation in one place
(``dualdl_torch.base.explained``).
"""
import pathlib
import re

import numpy as np
import pytest
import torch

import dualdl as dl
from dualdl.nn.layers import LAYERS

from test_layer_contract import MINIMAL, REFUSAL_ARGS, REFUSAL_KWARGS, REFUSED_VALUES


def _call(make):
    """(exception type, message) of ``make()``, or None when it builds."""
    try:
        make()
    except Exception as e:          # noqa: BLE001 - the exception is what is compared
        return type(e), str(e)
    return None


def _dl(backend, name, args, kwargs):
    with dl.use(backend):
        return _call(lambda: getattr(dl.nn, name)(*args, **kwargs))


def _case(name, *args, **kwargs):
    return pytest.param(name, args, kwargs, id=f"{name}{args}{kwargs}")


# ---- 1. invalid values torch.nn's constructor refuses: its type and message on both backends -------
TORCH_REFUSES = [
    # negative sizes: torch.empty's RuntimeError on the first tensor torch's constructor creates
    _case("Linear", 3, -4), _case("Linear", -3, 4),
    _case("Conv1d", 2, -4, 3), _case("Conv2d", -2, 4, 3), _case("Conv2d", 2, 4, -1),
    _case("Conv3d", 2, 4, (3, -1, 3)),
    _case("ConvTranspose2d", 2, -4, 3), _case("ConvTranspose1d", -2, 4, 3),
    _case("LSTMCell", 3, -1), _case("GRUCell", -3, 4), _case("RNNCell", 3, -2),
    _case("Embedding", -1, 3), _case("Embedding", 4, -3), _case("EmbeddingBag", 4, -2),
    _case("BatchNorm2d", -1), _case("BatchNorm1d", -2, affine=False),
    _case("BatchNorm3d", -3, track_running_stats=False),
    _case("InstanceNorm1d", -1, affine=True), _case("InstanceNorm2d", -3, track_running_stats=True),
    _case("InstanceNorm3d", -2, affine=True), _case("RMSNorm", (2, -3)),
    _case("Bilinear", 0, 3, 4), _case("Bilinear", -1, 3, 4), _case("Bilinear", 2, 3, -4, bias=False),
    _case("LayerNorm", -1), _case("LayerNorm", (2, -1)), _case("GroupNorm", 2, -4), _case("PReLU", -1),
    _case("MultiheadAttention", 4, 2, kdim=-3), _case("TransformerEncoderLayer", 4, 2, -1),
    _case("TransformerDecoderLayer", 4, 2, dim_feedforward=-8), _case("Transformer", 4, 2, 1, 1, -8),
    # convolutions: groups, padding strings, padding modes (before MXNet's circular refusal)
    _case("Conv2d", 2, 4, 3, padding="foo"), _case("Conv1d", 2, 4, 3, padding_mode="foo"),
    _case("Conv2d", 2, 4, 3, padding="same", stride=2),
    _case("Conv3d", 2, 4, 3, padding="same", stride=(1, 2, 1)),
    _case("Conv2d", 2, 4, 3, groups=0), _case("Conv2d", 3, 4, 3, groups=2), _case("Conv2d", 4, 3, 3, groups=2),
    _case("Conv2d", 2, 4, 3, groups=-1, padding_mode="circular"),
    _case("ConvTranspose2d", 2, 4, 3, padding_mode="reflect"),
    _case("ConvTranspose1d", 2, 4, 3, padding_mode="foo"),
    _case("ConvTranspose1d", 2, 4, 3, groups=3), _case("ConvTranspose2d", 4, 3, 3, groups=2),
    _case("ConvTranspose3d", 2, -4, 3),
    # lazy convolutions (torch checks what it has before the first call)
    _case("LazyConv2d", 4, 3, groups=0), _case("LazyConv1d", 4, 3, padding="foo"),
    _case("LazyConvTranspose2d", 4, 3, padding_mode="reflect"), _case("LazyConv3d", 4, (3, -1, 3)),
    _case("LazyConvTranspose1d", 4, 3, padding_mode="foo"), _case("LazyConvTranspose3d", 4, -3),
    # fractional max pooling: an output size or ratio, one of them, ratios in (0, 1)
    _case("FractionalMaxPool2d", 2), _case("FractionalMaxPool3d", 2, output_size=2, output_ratio=0.5),
    _case("FractionalMaxPool2d", 2, output_ratio=1.5),
    _case("FractionalMaxPool3d", 2, output_size=2, _random_samples=3),
    # dropout probabilities
    _case("Dropout", 1.5), _case("Dropout", -0.1), _case("Dropout1d", 2), _case("Dropout2d", p=1.5),
    _case("Dropout", "a"),
    # recurrent layers (proj_size before MXNet's projection refusal)
    _case("RNN", 3, 4, nonlinearity="foo"), _case("LSTM", 3, 4, dropout=1.5), _case("GRU", 3, 4, dropout=True),
    _case("RNN", 3, 4, dropout="0.1"), _case("LSTM", 3, 0), _case("LSTM", 0, 4), _case("GRU", 3, 4, num_layers=0),
    _case("LSTM", 3, 4, proj_size=-1), _case("LSTM", 3, 4, proj_size=4), _case("LSTM", 3, 4, bias=1),
    _case("LSTM", 3.0, 4), _case("GRU", 3, 4.0),
    # embeddings
    _case("Embedding", 10, 3, padding_idx=10), _case("Embedding", 10, 3, padding_idx=-11),
    _case("EmbeddingBag", 10, 3, padding_idx=10), _case("EmbeddingBag", 10, 3, padding_idx=-11, mode="median"),
    # group norm
    _case("GroupNorm", 3, 4), _case("GroupNorm", 0, 4),
    # attention and Transformer layers (kdim before MXNet's refusal; torch's AssertionError as torch)
    _case("MultiheadAttention", 4, 3), _case("MultiheadAttention", 0, 1), _case("MultiheadAttention", 4, -2),
    _case("MultiheadAttention", 4, 3, add_bias_kv=True),
    _case("TransformerEncoderLayer", 4, 3), _case("TransformerDecoderLayer", 4, 3), _case("Transformer", 8, 3),
    _case("TransformerEncoderLayer", 4, 2, activation="swish"),
    _case("TransformerEncoderLayer", 4, 2, activation="RELU"),
    _case("TransformerDecoderLayer", 4, 2, 8, activation="tanh"),
    _case("Transformer", 8, 2, 1, 1, 8, activation="swish"),
    _case("TransformerEncoderLayer", 4, 2, dropout=1.5), _case("TransformerDecoderLayer", 4, 2, dropout=-1.0),
    _case("Transformer", 8, 2, 1, 1, 8, dropout=2.0),
    # activations
    _case("Hardtanh", 1.0, -1.0), _case("Hardtanh", 0.5, 0.5),
    # unflatten sizes
    _case("Unflatten", 1, "ab"), _case("Unflatten", 1, (2.0, 3)), _case("Unflatten", 1, 6),
]


@pytest.mark.parametrize("name,args,kwargs", TORCH_REFUSES)
def test_invalid_value_fails_as_torch_nn_on_both_backends(name, args, kwargs):
    want = _call(lambda: getattr(torch.nn, name)(*args, **kwargs))
    assert want is not None, f"torch.nn.{name} takes it: not a torch refusal"
    assert _dl("torch", name, args, kwargs) == want
    assert _dl("mxnet", name, args, kwargs) == want


@pytest.mark.parametrize("name", ["Embedding", "EmbeddingBag"])
def test_a_weight_of_the_wrong_shape_fails_as_torch_nn_on_both_backends(name):
    want = _call(lambda: getattr(torch.nn, name)(3, 2, _weight=torch.ones(2, 2)))
    assert want == (AssertionError, "Shape of weight does not match num_embeddings and embedding_dim")
    for be in ("torch", "mxnet"):
        with dl.use(be):
            weight = dl.from_numpy(np.ones((2, 2), np.float32))
        assert _dl(be, name, (3, 2), {"_weight": weight}) == want, be


# ---- 1b. values torch takes and fails on in forward: dualdl's ValueError at construction, on both --
DUALDL_EARLIER = [
    _case("ConvTranspose2d", 2, 4, 3, stride=2, output_padding=2),      # >= max(stride, dilation)
    _case("ConvTranspose1d", 2, 4, 3, output_padding=-1),
    _case("ConvTranspose2d", 2, 3, 3, padding="same"),
    _case("Conv3d", 2, 3, (3, 3)), _case("Conv2d", 2, 3, 3, stride=(1, 1, 1)),
    _case("MaxPool2d", 2, padding=2), _case("MaxPool1d", 3, padding=3, dilation=2), _case("MaxPool3d", (2, 2)),
    _case("AvgPool2d", 0), _case("AvgPool3d", 2, padding=2), _case("AvgPool1d", 2, stride=0),
    _case("AdaptiveMaxPool2d", (2, 2, 2)), _case("AdaptiveAvgPool1d", 0), _case("AdaptiveAvgPool2d", (2, -1)),
    _case("AdaptiveMaxPool1d", (2, 3)),
    _case("LazyConv2d", 3, 3, groups=2), _case("LazyConvTranspose2d", -3, 3),
    _case("LPPool2d", 0, 2), _case("LPPool1d", 2, (2,)), _case("LPPool3d", 2, 2, stride=0),
    _case("AdaptiveAvgPool3d", 0), _case("AdaptiveMaxPool3d", (2, 2)),
    _case("FractionalMaxPool2d", 0, output_size=2), _case("FractionalMaxPool3d", 2, output_size=0),
    _case("RNNCell", 3, 4, nonlinearity="foo"),
    _case("EmbeddingBag", 10, 3, mode="median"),
    _case("GroupNorm", -2, 4), _case("LocalResponseNorm", 0),
    _case("GELU", "fast"), _case("Softshrink", -0.5), _case("CELU", 0.0),
    _case("Upsample"), _case("Upsample", 4, 2), _case("Upsample", scale_factor=2, mode="lanczos"),
    _case("Upsample", size=4, align_corners=True), _case("Upsample", size=4, mode="area", align_corners=False),
    _case("ZeroPad2d", (1, 2)), _case("ReflectionPad2d", (1, 2, 3)),
    _case("ConstantPad1d", (1, 2, 3), 0.0), _case("ConstantPad2d", (1, 2), 0.0),
    _case("ConstantPad3d", (1, 2, 3, 4), 0.0), _case("ZeroPad1d", (1,)), _case("ZeroPad3d", (1, 2)),
    _case("ReflectionPad1d", (1, 2, 3, 4)), _case("ReflectionPad3d", (1, 2, 3)),
    _case("ReplicationPad1d", (1, 2, 3)), _case("ReplicationPad2d", (1, 2)),
    _case("ReplicationPad3d", (1, 2, 3, 4)),
    _case("CircularPad1d", (1, 2, 3)), _case("CircularPad2d", (1, 2, 3, 4, 5, 6)), _case("CircularPad3d", (1, 2)),
    _case("Unflatten", 1, (-1, -1)), _case("Unflatten", 1, ()),
]


@pytest.mark.parametrize("name,args,kwargs", DUALDL_EARLIER)
def test_value_torch_fails_on_in_forward_is_refused_at_construction_alike(name, args, kwargs):
    assert _call(lambda: getattr(torch.nn, name)(*args, **kwargs)) is None, "torch.nn refuses it: a torch case"
    got = _dl("torch", name, args, kwargs)
    assert got is not None and got[0] is ValueError, got
    assert _dl("mxnet", name, args, kwargs) == got


def test_dualdls_own_layer_refuses_as_its_torch_parts_do():
    """PositionalEncoding (no torch.nn counterpart) refuses its dropout as torch.nn.Dropout does."""
    want = _call(lambda: torch.nn.Dropout(1.5))
    for be in ("torch", "mxnet"):
        assert _dl(be, "PositionalEncoding", (8,), {"dropout": 1.5}) == want, be


# layers whose constructors check no argument value, on torch.nn and in dualdl (the containers'
# children and TransformerEncoder/Decoder's layer are checked by the adapters: they need the backend's
# classes; the child-name errors are check_child_name's)
UNCHECKED = {"Identity", "Flatten", "ReLU", "Sigmoid", "Tanh", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
             "ReLU6", "Hardswish", "Hardsigmoid", "Softplus", "Mish", "PixelShuffle", "Sequential", "ModuleList",
             "ModuleDict", "TransformerEncoder", "TransformerDecoder",
             "GLU", "Hardshrink", "LogSigmoid", "SELU", "Softmax2d", "Softmin", "Softsign", "Tanhshrink", "Threshold"}


def test_every_declared_layer_has_its_argument_check_or_none_to_make():
    """A new layer gets an entry in dualdl/nn/arguments.py (and cases here) or joins UNCHECKED."""
    from dualdl.nn.arguments import _CHECKS
    assert set(_CHECKS) | UNCHECKED == set(LAYERS) and not set(_CHECKS) & UNCHECKED
    covered = {p.values[0] for p in TORCH_REFUSES + DUALDL_EARLIER} | {"PositionalEncoding"}
    assert set(_CHECKS) <= covered, sorted(set(_CHECKS) - covered)


@pytest.mark.parametrize("key", [1, "a.b", ""])
def test_the_neutral_child_name_check_is_torchs(key):
    """For the MXNet containers (torch's own add_module raises these on torch)."""
    from dualdl.nn.arguments import check_child_name
    assert _call(lambda: check_child_name(key)) == _call(lambda: torch.nn.ModuleDict({key: torch.nn.ReLU()}))


# ---- 2. declared refusals: torch builds what torch.nn builds, MXNet names the argument and value ----
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")          # torch.nn.Transformer's own
@pytest.mark.parametrize("name,arg", sorted(REFUSED_VALUES))
def test_declared_refusal_is_honoured_on_torch_and_refused_by_name_on_mxnet(name, arg):
    args, value = REFUSAL_ARGS.get(name, MINIMAL.get(name, ())), REFUSED_VALUES[(name, arg)]
    kwargs = {**REFUSAL_KWARGS.get(name, {}), arg: value}
    torch.manual_seed(0)
    ref = getattr(torch.nn, name)(*args, **kwargs)
    with dl.use("torch"):
        torch.manual_seed(0)
        mine = getattr(dl.nn, name)(*args, **kwargs)
    assert isinstance(mine, type(ref)) and getattr(mine, arg, value) == getattr(ref, arg, value)
    shape = lambda v: "lazy" if isinstance(v, torch.nn.parameter.UninitializedTensorMixin) else tuple(v.shape)
    assert {k: shape(v) for k, v in mine.state_dict().items()} == {k: shape(v) for k, v in ref.state_dict().items()}
    err = _dl("mxnet", name, args, kwargs)
    assert err is not None and err[0] is NotImplementedError, err
    assert re.fullmatch(rf"{name}\({arg}={re.escape(repr(value))}\) cannot be honoured on the mxnet "
                        rf"backend: \S.*", err[1]), err[1]


def test_declared_refusal_works_with_a_value_of_another_type():
    """A predicate, not a list of values of one type: 1 is True and a list is a tuple to torch."""
    for name, kwargs in [("Embedding", {"sparse": 1}),
                         ("AdaptiveMaxPool2d", {"output_size": 2, "return_indices": 1}),
                         ("AdaptiveMaxPool3d", {"output_size": [2, 1, 2], "return_indices": 1})]:
        err = _dl("mxnet", name, (10, 3) if name == "Embedding" else (), kwargs)
        assert err is not None and err[0] is NotImplementedError, (name, err)
    for kwargs in ({"sparse": 0}, {"sparse": False}):
        assert _dl("mxnet", "Embedding", (10, 3), kwargs) is None


def test_torch_honours_what_it_used_to_refuse_with_torch_nns_numbers():
    """MultiheadAttention with kdim/vdim, bias_k/bias_v and a zero attention row, Upsample('bicubic'),
    a cropping ZeroPad2d and BatchNorm's cumulative average (momentum=None) run as torch.nn's."""
    rng = np.random.default_rng(0)
    q, k, v = (torch.from_numpy(rng.standard_normal(s).astype(np.float32))
               for s in ((5, 2, 4), (3, 2, 6), (3, 2, 2)))                # (L, N, E), (S, N, kdim), (S, N, vdim)
    for kw in ({"kdim": 6, "vdim": 2}, {"add_bias_kv": True, "add_zero_attn": True, "kdim": 6, "vdim": 2}):
        torch.manual_seed(0)
        ref = torch.nn.MultiheadAttention(4, 2, **kw)
        with dl.use("torch"):
            mine = dl.nn.MultiheadAttention(4, 2, **kw)
        mine.load_state_dict(ref.state_dict())
        mask = torch.zeros(2, 3, dtype=torch.bool)
        mask[1, 2] = True
        for a, b in zip(ref(q, k, v, key_padding_mask=mask), mine(q, k, v, key_padding_mask=mask)):
            torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-6)
    x = torch.from_numpy(rng.standard_normal((2, 3, 5, 6)).astype(np.float32))
    with dl.use("torch"):
        for make in (lambda nn: nn.Upsample(scale_factor=2, mode="bicubic"),
                     lambda nn: nn.ZeroPad2d((1, -2, 0, -1)), lambda nn: nn.BatchNorm2d(3, momentum=None)):
            ref, mine = make(torch.nn), make(dl.nn)
            for _ in range(2):
                assert torch.equal(mine(x), ref(x))
            assert all(torch.equal(a, b) for a, b in zip(mine.state_dict().values(), ref.state_dict().values()))


# ---- the torch adapter's one "explain on failure" path ------------------------------------------
def test_the_torch_adapter_explains_failures_in_one_place():
    root = pathlib.Path(__file__).resolve().parents[1] / "dualdl_torch"
    copies = [p.name for p in root.glob("*.py") if p.name != "base.py" and "raise err from None" in p.read_text()]
    assert copies == [], f"explain on failure through dualdl_torch.base.explained, not a copy: {copies}"


def test_explained_replaces_only_torch_shape_errors_a_check_explains():
    from dualdl_torch.base import EXPLAINABLE, explained

    def check(bad):
        if bad:
            raise ValueError("the neutral check's message")

    def fail(exc):
        def call():
            raise exc
        return call

    for exc in EXPLAINABLE:
        with pytest.raises(ValueError, match="the neutral check's message"):
            explained(fail(exc("torch's message")), check, lambda: (True,))
        with pytest.raises(exc, match="torch's message"):            # the check finds nothing: torch's
            explained(fail(exc("torch's message")), check, lambda: (False,))
    calls = []
    for exc in (TypeError, AttributeError):                         # no shape problem: torch's, unchecked
        with pytest.raises(exc):
            explained(fail(exc("torch's message")), check, lambda: calls.append(1) or (True,))
    assert calls == [] and explained(lambda: 7, check, lambda: calls.append(1)) == 7 and calls == []


@pytest.mark.parametrize("make,shape", [
    (lambda nn: nn.Unflatten(2, (2, 2)), (3, 4)),                  # torch: IndexError (dim out of range)
    (lambda nn: nn.Unflatten(1, (2, 3)), (3, 4)),                  # torch: RuntimeError
    (lambda nn: nn.LayerNorm(4), (2, 3)),
    (lambda nn: nn.Linear(4, 2), (2, 3)),
    (lambda nn: nn.PReLU(3), (2, 4, 5)),
    (lambda nn: nn.Conv2d(2, 3, 3), (1, 2, 2, 2)),
    (lambda nn: nn.MaxPool2d(3), (1, 2, 2, 2)),
])
def test_torch_failures_get_the_mxnet_message(make, shape):
    errs = []
    for be in ("torch", "mxnet"):
        with dl.use(be):
            layer = make(dl.nn)
            errs.append(_call(lambda: layer(dl.from_numpy(np.ones(shape, np.float32)))))
    assert errs[0] == errs[1] and errs[0][0] is ValueError, errs
