"""The layer contract (dualdl/nn/layers.py LAYERS): every declared layer exists on both adapters
(each adapter's layer classes register by class name, dualdl/nn/registry.py, and no other public
layer class exists), each adapter's class takes exactly the declared signature, the declaration is
torch 2.13's signature (departures named in ``Declaration.dualdl``), calls are bound once with
torch's wording, and what an adapter cannot honour is refused clearly (``_dl_cannot``)."""
import inspect
import time

import numpy as np
import pytest
import torch

import dualdl as dl
import dualdl_mx.nn as MX
import dualdl_torch.nn as TO
from dualdl.nn.layer_docs import TORCH_DOCS
from dualdl.nn.declaration import Declaration
from dualdl.nn.layers import LAYERS
from dualdl.nn import registry
from dualdl_mx.base import Layer as MXLayer
from dualdl_torch.base import Layer as TorchLayer

from layer_docs_gen import torch_docs

P = inspect.Parameter
NAMES = sorted(LAYERS)


def _params(sig):
    return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"]


def _same(a, b):
    return [(n, k, type(d), d) for n, k, d in a] == [(n, k, type(d), d) for n, k, d in b]


def declared(name):
    return _params(LAYERS[name].compile(name)[0])


def accepted(cls, name):
    """The parameters an adapter class takes: its ``__init__``'s, through pass-through
    ``(*args, **kwargs)`` wrappers to the class they forward to; torch.nn.Module's own
    ``(*args, **kwargs)`` takes nothing (it raises on any argument)."""
    passthrough = [("args", P.VAR_POSITIONAL, P.empty), ("kwargs", P.VAR_KEYWORD, P.empty)]
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        if klass is torch.nn.Module:
            return []
        params = _params(inspect.signature(klass.__init__))
        if params != passthrough or declared(name) == passthrough:
            return params
    raise AssertionError(cls)


@pytest.mark.parametrize("name", NAMES)
def test_every_entry_declares_its_signature(name):
    assert isinstance(LAYERS[name], Declaration), f"{name}: declare it with layer(signature, mxnet)"


@pytest.mark.parametrize("name", NAMES)
def test_every_declared_layer_exists_on_both_adapters(name):
    for nn in (TO, MX):
        cls = getattr(nn, name)
        assert cls._dl_layer == name and name in nn.__all__
        assert registry.adapter_layers(nn.__package__)[name] is cls


@pytest.mark.parametrize("adapter", [TO, MX], ids=["torch", "mxnet"])
def test_every_adapter_layer_is_declared(adapter):
    """A public layer class of an adapter whose name LAYERS does not declare is not registered and
    fails here (declare it, or name it with a leading ``_`` if it is a shared base)."""
    assert registry.undeclared(adapter.__package__) == []
    layers = registry.adapter_layers(adapter.__package__)
    assert sorted(layers) == NAMES
    assert set(adapter.__all__) == set(layers) | {"Module", "make_parameter", "factory_kwargs"} | \
        ({"shape_error"} if adapter is TO else {"Layer"})


@pytest.mark.parametrize("base,package", [(TorchLayer, "dualdl_torch"), (MXLayer, "dualdl_mx")],
                         ids=["torch", "mxnet"])
def test_layer_classes_register_by_class_name(base, package, monkeypatch):
    monkeypatch.setattr(registry, "_LAYERS", {})
    monkeypatch.setattr(registry, "_UNDECLARED", {})
    name, here = NAMES[0], {"__module__": f"{package}.probe"}
    shared = type("_Shared", (base,), dict(here))               # a private base: not a layer
    built = type(name, (shared,), dict(here))                   # built dynamically, as torch's activations
    odd = type("NotDeclared", (shared,), dict(here))
    users = type(name, (built,), {"__module__": "users_code"})  # outside the adapter: not registered
    assert registry.adapter_layers(package) == {name: built} and built._dl_layer == name
    assert getattr(shared, "_dl_layer", None) is None and getattr(odd, "_dl_layer", None) is None
    assert registry.undeclared(package) == [f"{package}.probe.NotDeclared"]
    assert users._dl_layer == name and registry.defined_in(f"{package}.probe") == [name]
    with pytest.raises(TypeError, match=f"{package} already has the layer {name}"):
        type(name, (shared,), {"__module__": f"{package}.other"})


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("adapter", [TO, MX], ids=["torch", "mxnet"])
def test_adapter_takes_exactly_the_declared_signature(name, adapter):
    got, want = accepted(getattr(adapter, name), name), declared(name)
    assert _same(got, want), f"{adapter.__name__}.{name}{got}\n  declared {want}"


def _torch_signature(name):
    cls = getattr(torch.nn, name)
    if cls.__init__ is torch.nn.Module.__init__:
        return []                                   # Sigmoid, Tanh: torch.nn.Module refuses any argument
    return _params(inspect.signature(cls.__init__))


@pytest.mark.parametrize("name", [n for n in NAMES if LAYERS[n].torch])
def test_declaration_is_torchs_signature(name):
    """Names, kinds and defaults as torch 2.13's inspect.signature, except the parameters the
    declaration names in ``dualdl`` (each of which really departs from torch's)."""
    decl, mine = LAYERS[name], declared(name)
    theirs = _torch_signature(name)
    if name in ("LSTM", "GRU", "RNN"):              # torch's is (*args, **kwargs): parsed by RNNBase
        kw = {n: d for n, _, d in mine if n not in decl.dualdl and d is not P.empty}
        getattr(torch.nn, name)(3, 4, **kw)         # every declared name and default is torch's
        with pytest.raises(TypeError):
            getattr(torch.nn, name)(3, 4, not_an_argument=1)
        return
    keep = [p for p in mine if p[0] not in decl.dualdl]
    ref = [p for p in theirs if p[0] not in decl.dualdl]
    assert _same(keep, ref), f"{name}: declared {keep}\n  torch {ref}"
    for arg in decl.dualdl:                          # a named departure is a real one
        assert arg not in dict((n, d) for n, _, d in theirs) or \
            dict((n, d) for n, _, d in theirs)[arg] != dict((n, d) for n, _, d in mine)[arg], arg


def test_stored_docs_are_torchs():
    """dualdl/nn/layer_docs.py is what tests/layer_docs_gen.py makes from torch's docstrings."""
    assert TORCH_DOCS == torch_docs()
    assert "Args:" in dl.nn.Linear.__doc__ and "Shape:" in dl.nn.Linear.__doc__
    assert "On MXNet: " in dl.nn.Linear.__doc__ and "device=None, dtype=None" in dl.nn.Linear.__doc__


BAD_CALLS = [
    ("Linear", (3,), {}),
    ("Linear", (3, 4), {"foo": 1}),
    ("Linear", (3, 4), {"in_features": 3}),
    ("Linear", (3, 4, True, None, None, 7), {}),
    ("Sigmoid", (1,), {}),
    ("Conv2d", (3, 4), {}),
    ("BatchNorm2d", (4, 1e-5, 0.1, True, True, None, None, False), {}),   # bias is keyword-only
    ("Embedding", (10,), {"max_norm": 1}),
    ("LSTM", (3,), {"hidden_size": 4, "proj": 1}),
    ("Dropout", (), {"q": 0.1}),
]


@pytest.mark.parametrize("name,args,kwargs", BAD_CALLS)
def test_wrong_calls_fail_as_torch_on_both_backends(name, args, kwargs):
    """Python's wording, as torch's; torch names the class defining ``__init__`` (``_BatchNorm``,
    ``RNNBase``, ``_DropoutNd``), dualdl the layer called."""
    with pytest.raises(TypeError) as native:
        getattr(torch.nn, name)(*args, **kwargs)
    want = f"{name}.__init__()" + str(native.value).split(".__init__()", 1)[1]
    for be in ("torch", "mxnet"):
        with dl.use(be), pytest.raises(TypeError) as err:
            getattr(dl.nn, name)(*args, **kwargs)
        assert str(err.value) == want, be


FACTORY = [n for n in NAMES if isinstance(LAYERS[n], Declaration)
           and "dtype" in dict((p[0], p) for p in declared(n))]
MINIMAL = {n: LAYERS[n].example for n in FACTORY}       # layer(..., example=...): a small instance


@pytest.mark.parametrize("name", FACTORY)
def test_every_layer_with_factory_arguments_has_an_example(name):
    """The dtype test below builds ``LAYERS[name].example`` on both backends: it must bind."""
    try:
        LAYERS[name].bind(name, MINIMAL[name], {})
    except TypeError as e:
        pytest.fail(f"{name}: give its declaration example=(positional args of a small instance): {e}")


@pytest.mark.parametrize("name", sorted(MINIMAL))
@pytest.mark.parametrize("dtype", ["float64", np.float64, torch.float64], ids=["str", "numpy", "torch"])
def test_device_and_dtype_are_honoured_on_both(name, dtype):
    for be in ("torch", "mxnet"):
        with dl.use(be):
            m = getattr(dl.nn, name)(*MINIMAL[name], device="cpu", dtype=dtype)
            got = {np.dtype(str(p.dtype).replace("torch.", "")) for p in m.parameters()}
            assert got == {np.dtype("float64")}, (be, got)
            devs = {str(p.device) if be == "torch" else str(p.list_ctx()) for p in m.parameters()}
            assert devs == ({"cpu"} if be == "torch" else {"[cpu(0)]"}), devs


def test_float64_layers_compute_in_float64_on_both():
    x = np.random.RandomState(0).randn(2, 5, 3)
    outs = {}
    for be in ("torch", "mxnet"):
        with dl.use(be):
            lin = dl.nn.Linear(3, 4, dtype="float64")
            lstm = dl.nn.LSTM(4, 2, batch_first=True, dtype="float64")
            dl.load_state_dict(lin, {"weight": np.arange(12.).reshape(4, 3) / 7, "bias": np.ones(4) / 3})
            dl.load_state_dict(lstm, {k: np.full(v.shape, 0.1) for k, v in dl.state_dict(lstm).items()})
            y, _ = lstm(lin(dl.from_numpy(x)))
            outs[be] = dl.to_numpy(y)
    assert outs["torch"].dtype == outs["mxnet"].dtype == np.float64
    np.testing.assert_allclose(outs["mxnet"], outs["torch"], rtol=1e-12, atol=1e-12)


def test_mxnet_refuses_a_non_float_dtype_clearly():
    with dl.use("mxnet"), pytest.raises(ValueError, match=r"Linear\(dtype='int64'\): parameters must "
                                                         r"have a floating-point dtype"):
        dl.nn.Linear(3, 4, dtype="int64")


REFUSED = [n for n in NAMES for adapter in (TO, MX) if getattr(getattr(adapter, n), "_dl_cannot", None)]
REFUSED_VALUES = {("Conv1d", "padding_mode"): "circular", ("Conv2d", "padding_mode"): "circular",
                  ("Conv3d", "padding_mode"): "circular",
                  **{(f"LazyConv{n}d", "padding_mode"): "circular" for n in (1, 2, 3)},
                  ("Embedding", "scale_grad_by_freq"): True, ("Embedding", "sparse"): True,
                  ("EmbeddingBag", "scale_grad_by_freq"): True, ("EmbeddingBag", "sparse"): True,
                  ("AdaptiveMaxPool1d", "return_indices"): True, ("AdaptiveMaxPool2d", "return_indices"): True,
                  ("AdaptiveMaxPool3d", "return_indices"): True,
                  ("TransformerEncoderLayer", "activation"): torch.tanh,
                  ("TransformerDecoderLayer", "activation"): torch.tanh,
                  ("Transformer", "activation"): torch.tanh,
                  ("Upsample", "mode"): "bicubic"}
# the other required arguments of a refusal call, for layers without a declared example
REFUSAL_KWARGS = {"AdaptiveMaxPool1d": {"output_size": 2}, "AdaptiveMaxPool2d": {"output_size": 2},
                  "AdaptiveMaxPool3d": {"output_size": 2},
                  "Upsample": {"scale_factor": 2}}
# positional arguments of a refusal call where the declared example would clash with the refused one
REFUSAL_ARGS = {}


def test_declared_refusals_name_declared_arguments():
    for name in REFUSED:
        for adapter in (TO, MX):
            for arg in getattr(getattr(adapter, name), "_dl_cannot", {}):
                assert arg in dict((p[0], p) for p in declared(name)), (name, arg)
                assert (name, arg) in REFUSED_VALUES, (name, arg)


@pytest.mark.parametrize("name,arg", sorted(REFUSED_VALUES))
def test_refused_argument_raises_a_clear_error_on_mxnet_and_works_on_torch(name, arg):
    args, value = REFUSAL_ARGS.get(name, MINIMAL.get(name, ())), REFUSED_VALUES[(name, arg)]
    kwargs = {**REFUSAL_KWARGS.get(name, {}), arg: value}
    with dl.use("torch"):
        getattr(dl.nn, name)(*args, **kwargs)
    with dl.use("mxnet"), pytest.raises(NotImplementedError) as err:
        getattr(dl.nn, name)(*args, **kwargs)
    assert str(err.value).startswith(f"{name}({arg}={value!r}) cannot be honoured on the mxnet backend: ")


def test_binding_costs_microseconds():
    """The declaration is compiled once; a bound call adds a few microseconds to construction
    (best of 5 against the cheapest torch layer worth binding, on a loaded machine)."""
    import timeit
    decl = LAYERS["Conv2d"]
    bind = min(timeit.repeat(lambda: decl.bind("Conv2d", (3, 4, 3), {"padding": 1}), number=500, repeat=5)) / 500
    with dl.use("torch"):
        build = min(timeit.repeat(lambda: TO.Conv2d(3, 4, 3, padding=1), number=50, repeat=5)) / 50
    assert bind < 0.25 * build, (bind, build)

@pytest.mark.parametrize("name", NAMES)
def test_docstring_args_are_declared_parameters(name):
    """The Args section (torch's, or dualdl's own for PositionalEncoding) documents declared names."""
    import re
    doc = getattr(dl.nn, name).__doc__
    assert f"``{name}({LAYERS[name].signature})``" in doc and f"On MXNet: {LAYERS[name].mxnet}" in doc
    section = re.search(r"\nArgs:\n(.*?)(?:\n\n|\Z)", doc, re.S)
    documented = re.findall(r"^    (\w+)(?: \(.*?\))?:", section.group(1), re.M) if section else []
    assert set(documented) <= {p[0] for p in declared(name)}, documented
    if not LAYERS[name].torch:
        assert documented == [p[0] for p in declared(name)]
