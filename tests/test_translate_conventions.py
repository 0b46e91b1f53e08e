"""MXNet -> torch layer conventions written once (dualdl/port/translate/conventions.py) and taken
by all three places a layer can come from: a Gluon layer (leaves.py), a layer node of an exported
symbol (symbol_layers.py) and an op called in a forward (the op registry). Pooling's 'full'
convention is torch's ceil_mode except where MXNet keeps a last window starting in the padding:
each path translates the first (checked against MXNet's numbers) and refuses the second with both
output sizes (the op path used to write ceil_mode there and produce a smaller output)."""
import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from mxnet.gluon import nn  # noqa: E402

import dualdl.port as port  # noqa: E402
from dualdl.port.translate import TranslationError  # noqa: E402
from dualdl.port.translate.conventions import bn_momentum, full_pool_outputs, pool_call  # noqa: E402
from dualdl.port.translate.symbol_file import translate_symbol_block  # noqa: E402

# kernel 3, stride 3, pad 1: size 6 -> MXNet 'full' 3 outputs, torch ceil_mode 3 (agree);
# size 5 -> MXNet 3 (a last window starting at 6, inside the padding), torch 2 (refused)
AGREE, DIFFER = 6, 5


class _OpPool(mx.gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.Pooling(x, kernel=(3, 3), stride=(3, 3), pad=(1, 1), pool_type="max", pooling_convention="full")


def _layer():
    return nn.MaxPool2D(3, 3, 1, ceil_mode=True)


def _sample(size):
    return mx.nd.array(np.random.default_rng(0).standard_normal((2, 2, size, size)))


def _exported(size, tmp_path):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(2, 1, in_channels=2), _layer())       # a weight: a params file of no arrays is refused
    net.initialize()
    net.hybridize()
    net(_sample(size))
    sym, params = _export(net, tmp_path)
    return mx.gluon.SymbolBlock.imports(sym, ["data"], params)


def _export(net, tmp_path):
    base = str(tmp_path / "pool")
    net.export(base)
    return base + "-symbol.json", base + "-0000.params"


def test_the_conventions_match_mxnet_and_torch_numbers():
    """full_pool_outputs is torch's ceil_mode size; MXNet's own output size says where they differ."""
    for size in (AGREE, DIFFER):
        mxo = mx.nd.Pooling(_sample(size), kernel=(3, 3), stride=(3, 3), pad=(1, 1), pooling_convention="full")
        th = torch.nn.functional.max_pool2d(torch.zeros(1, 1, size, size), 3, 3, 1, ceil_mode=True)
        assert th.shape[-1] == full_pool_outputs(size, 3, 3, 1)
        assert (mxo.shape[-1] == th.shape[-1]) == (size == AGREE)
    assert bn_momentum(0.9) == 0.1 and bn_momentum(0.9, as_float32=True) == 1 - float(np.float32(0.9))
    spec = pool_call("MXNet", pool_type="avg", nd=2, kernel=(2, 2), count_include_pad=False)
    assert spec["kwargs"] == [("stride", 1), ("padding", 0), ("count_include_pad", False)]   # MXNet's stride 1


@pytest.mark.parametrize("path", ["gluon layer", "op in a forward", "exported symbol"])
def test_full_pooling_is_ceil_mode_or_refused_on_every_path(path, tmp_path):
    def run(size, out):
        x = _sample(size)
        if path == "exported symbol":
            blk = _exported(size, tmp_path)
            return blk, translate_symbol_block(blk, [x], str(out), name="pool")
        blk = _OpPool() if path == "op in a forward" else _layer()
        blk.initialize()
        return blk, port.translate(blk, [x], str(out), name="pool", train=False)

    blk, rep = run(AGREE, tmp_path / "ok")
    assert rep.ok, rep.notes
    assert "ceil_mode=True" in open(rep.source_path).read()
    assert rep.max_abs_diff is not None and rep.max_abs_diff < 1e-6
    with pytest.raises(TranslationError, match=r"MXNet gives 3 outputs, torch's ceil_mode gives 2"):
        run(DIFFER, tmp_path / "no")


def test_use_global_stats_batchnorm_is_one_frozen_batchnorm_on_both_readers(tmp_path):
    """BatchNorm(use_global_stats=True) (gluoncv's frozen backbones) normalises with the running
    statistics in train mode too: the same FrozenBatchNorm2d from a Gluon block and from its
    exported symbol (the symbol reader refused it before), proven in eval and train mode, with the
    running statistics unchanged by torch's train-mode forward."""
    rng = np.random.default_rng(1)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, in_channels=2), nn.BatchNorm(in_channels=4, use_global_stats=True), nn.Dense(3))
    net.initialize()
    net[1].running_mean.set_data(mx.nd.array(rng.uniform(-0.5, 0.5, 4)))
    net[1].running_var.set_data(mx.nd.array(rng.uniform(0.5, 1.5, 4)))
    x = mx.nd.array(rng.standard_normal((2, 2, 6, 6)))
    traced = port.translate(net, [x], str(tmp_path / "traced"), name="frozen")
    net.hybridize()
    net(x)
    sym, params = _export(net, tmp_path)
    exported = translate_symbol_block(mx.gluon.SymbolBlock.imports(sym, ["data"], params), [x],
                                      str(tmp_path / "symbol"), name="frozen")
    for rep in (traced, exported):
        assert rep.ok, rep.summary()
        assert any("train" in c.name for c in rep.checks)           # train mode proven too
        src = open(rep.source_path).read()
        assert "class FrozenBatchNorm2d(nn.BatchNorm2d):" in src and "FrozenBatchNorm2d(4" in src
    from safetensors.torch import load_file
    from dualdl.port.translate.proof_torch import load_generated
    m = load_generated(exported.source_path, exported.class_name)()
    m.load_state_dict(load_file(exported.weights_path))
    before = {k: v.clone() for k, v in m.state_dict().items() if "running" in k}
    m.train()
    m(torch.from_numpy(x.asnumpy()))
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items() if "running" in k)
