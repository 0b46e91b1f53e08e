"""The proof's float64 verdict does not move with the CPU's rounding (issue 41: on an AMD EPYC
resnet34_v1 at 32 px failed by 1.19e-8 against 1e-8; on this Intel Xeon it passes at 9.32e-9, 0.93 of
the fixed line). Another CPU is emulated by scaling the torch-vs-Gluon float64 gradient difference in
the comparison only (each side's measured conditioning stays as this CPU measures it): x1.28 is the
AMD report's 1.19e-8. A check that misses the fixed 1e-8 or passes it at CLOSE_CALL or more of it is
judged by its measured conditioning, and both CPUs then give the same verdict and the same note."""
import os
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

import dualdl.port as port  # noqa: E402
from dualdl.port.translate import proof_judge  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
# BatchNorm over 2 nearly equal samples on a 1x1 map
from test_translate_proof_conditioning import _net_and_sample as _small  # noqa: E402


@pytest.fixture
def other_cpu(monkeypatch):
    """``other_cpu(k)``: from now on Gluon's float64 gradients sit k times as far from torch's."""
    orig = proof_judge.Judge.tensors

    def install(k):
        def tensors(self, a, b, names, label, tol, extra=None, floor=None, gluon=None):
            if label.startswith("gradients"):
                a = list(a)
                floor = 1e-4 * max(proof_judge.absmax(x) for x in a) if floor is None else floor
                a = [y + k * (np.asarray(x) - y) for x, y in zip(a, b[1] if self.ref else b[0])]
            return orig(self, a, b, names, label, tol, extra, floor, gluon)
        monkeypatch.setattr(proof_judge.Judge, "tensors", tensors)
    return install


def _grads(r):
    return next(c for c in r.checks if c.name.startswith("gradients"))


@pytest.mark.parametrize("k, ok", [(1.0, True), (1.28, True), (4.0, True), (40.0, False)])
def test_an_ill_conditioned_verdict_under_another_cpus_rounding(tmp_path, other_cpu, k, ok):
    net, x = _small()
    other_cpu(k)
    r = port.translate(net, x, str(tmp_path))
    g = _grads(r)
    assert r.ok is ok and g.passed is ok, r.summary()
    assert g.max_rel_diff > 1e-8          # the fixed line alone fails it on every CPU
    if ok:
        assert "measured conditioning" in g.evidence
        assert any(n.startswith("gradients after one backward: ill-conditioned in float64 at ") for n in r.notes)
    else:
        assert any("a real difference, not rounding" in n for n in r.notes), r.notes


def _resnet34(tmp_path):
    """tests/test_translate_ops.py::test_model_zoo_resnet34_at_32px's case."""
    from mxnet.gluon.model_zoo import vision
    mx.random.seed(0)
    net = vision.get_model("resnet34_v1")
    net.initialize(mx.init.Xavier())
    return port.translate(net, np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32),
                          str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("k", [1.0, 1.28])
def test_resnet34_at_32px_says_the_same_on_intel_and_amd(tmp_path, other_cpu, k):
    """Intel (k = 1): 9.32e-9 passes 1e-8 at 0.93 of it, a close call; AMD (1.28: 1.19e-8) misses it.
    Both are judged by the measured conditioning (0.15-0.19 of that tolerance) and say so at the same layer."""
    other_cpu(k)
    r = _resnet34(tmp_path)
    g = _grads(r)
    assert r.ok and "measured conditioning" in g.evidence, r.summary()
    note = next(n for n in r.notes if n.startswith("gradients after one backward: ill-conditioned in float64 at "))
    assert "(layer features.7." in note and "BatchNorm over few values per channel" in note, note


@pytest.mark.slow
def test_resnet34_at_32px_fails_when_the_difference_is_beyond_its_conditioning(tmp_path, other_cpu):
    """x8 (7.45e-8): beyond 8x the measured conditioning (1.16 of it): not ok, a real difference."""
    other_cpu(8.0)
    r = _resnet34(tmp_path)
    assert not r.ok and not _grads(r).passed, r.summary()
    assert any("a real difference, not rounding" in n for n in r.notes), r.notes
