"""Outputs sensitive to rounding: a selection (top-k, NMS) over values equal in float32 and distinct
in float64 picks differently in torch's own float32 and float64 runs, so "as close as torch's own
float32" would accept any answer. The eval check then judges every layer the generated module
keeps as well: the layers before the selection are held to their own, tight, rounding."""
import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from mxnet.gluon import nn  # noqa: E402

import dualdl.port as port  # noqa: E402
from dualdl.port.translate import registry  # noqa: E402
from dualdl.port.translate.codegen import Call, Leaf  # noqa: E402


class Select(nn.HybridBlock):
    """relu, then the index of the largest of ``x[:, 0] + relu(x[:, 1:4])`` (LeakyReLU: MXNet computes it
    in float32 also on float64 data, so the proof keeps torch's float32 run beside its float64)."""

    def __init__(self):
        super().__init__()
        self.act = nn.Activation("relu")

    def hybrid_forward(self, F, x):
        y = self.act(x)
        y = F.broadcast_add(F.slice_axis(x, axis=1, begin=0, end=1), F.slice_axis(y, axis=1, begin=1, end=4))
        y = F.LeakyReLU(y, act_type="leaky", slope=0.1)
        return F.topk(y, axis=-1, k=1, ret_typ="indices")


def _x():
    # 1 + 2^-31 and 1 + 2^-30 round to 1 in float32: the top-1 index is 2 in float64, a tie in float32;
    # the last column only reaches the relu's output
    return np.array([[1.0, 0.0, 2.0 ** -31, 2.0 ** -30, -1.0]] * 2, np.float32)


def _eval_check(report):
    return next(c for c in report.checks if c.name.startswith("eval outputs"))


def test_selection_over_float32_ties_is_judged_layer_by_layer(tmp_path):
    net = Select()
    net.initialize()
    r = port.translate(net, _x(), str(tmp_path))
    assert r.ok, r.summary()
    c = _eval_check(r)
    assert c.sensitive and c.rounding["torch"] >= 1.0          # torch's float32 picked another index
    assert "sensitive to rounding" in c.detail and "each of the 2 layers" in c.detail, c.detail
    assert "1 within 8x" in c.detail and "1 sensitive themselves: (top block)" in c.detail, c.detail


def test_wrong_layer_before_the_selection_fails_the_proof(tmp_path):
    """relu written as LeakyReLU(0.01): the selection does not see it (the negative column only
    reaches the relu's output), the layer check does."""
    net = Select()
    net.initialize()
    port.register_translation(nn.Activation, lambda block, info: Leaf(Call("nn.LeakyReLU", [0.01])))
    try:
        r = port.translate(net, _x(), str(tmp_path))
    finally:
        registry._BLOCKS.pop(nn.Activation)
    c = _eval_check(r)
    assert not r.ok and not c.passed and "layer act differs" in c.detail, r.summary()
    assert r.first_divergent == "act"

