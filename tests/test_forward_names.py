"""Forward arguments have torch's names on both backends (issue 34: ``m(input=t)`` failed in 35
layers whose forward called it ``x``): write-once code written for torch passes them by keyword."""
import inspect

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("mxnet")

import torch  # noqa: E402

import dualdl as dl  # noqa: E402
from dualdl.backend import get_backend  # noqa: E402
from dualdl.nn import LAYERS  # noqa: E402

TO = get_backend("torch").module("nn")
MX = get_backend("mxnet").module("nn")
P = inspect.Parameter
CALLABLE = [n for n in sorted(LAYERS) if LAYERS[n].torch and hasattr(torch.nn, n)
            and n not in ("ModuleList", "ModuleDict")]


def _names(fn) -> list:
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)][1:]


def _mx_names(cls) -> list:
    """What an MXNet layer's call binds keywords to: its own ``__call__`` when it defines one with
    named arguments, else its ``hybrid_forward(self, F, ...)`` (dualdl_mx.base.Layer.__call__)."""
    call = cls.__call__
    names = _names(call)
    if names:
        return names
    return [p.name for p in list(inspect.signature(cls.hybrid_forward).parameters.values())[2:]
            if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]


@pytest.mark.parametrize("name", CALLABLE)
def test_torch_layers_keep_torchs_forward_names(name):
    want = _names(getattr(torch.nn, name).forward)
    assert _names(getattr(TO, name).forward) == want


@pytest.mark.parametrize("name", CALLABLE)
def test_mxnet_layers_take_torchs_forward_names(name):
    """Every name torch's forward takes is a name the MXNet layer binds; the first may have
    another name in the MXNet code (``input=`` is accepted for it by the base class)."""
    want = _names(getattr(torch.nn, name).forward)
    got = _mx_names(getattr(MX, name))
    assert got[1:len(want)] == want[1:], f"torch: {want}, MXNet: {got}"


@pytest.mark.parametrize("backend", ["torch", "mxnet"])
@pytest.mark.parametrize("hybridize", [False, True])
def test_input_keyword_gives_the_positional_result(backend, hybridize):
    if hybridize and backend == "torch":
        pytest.skip("hybridize is MXNet's")
    rng = np.random.default_rng(0)
    cases = [("Linear", (3, 2), (4, 3)), ("Conv1d", (2, 3, 3), (2, 2, 7)), ("LayerNorm", (5,), (2, 5)),
             ("Tanh", (), (2, 3))]
    with dl.use(backend):
        for name, args, shape in cases:
            m = getattr(dl.nn, name)(*args)
            if hybridize:
                m.hybridize()
            x = dl.from_numpy(rng.standard_normal(shape).astype(np.float32))
            np.testing.assert_array_equal(dl.to_numpy(m(input=x)), dl.to_numpy(m(x)), err_msg=name)
            with pytest.raises(TypeError, match="unexpected keyword argument 'inptu'"):
                m(inptu=x)
