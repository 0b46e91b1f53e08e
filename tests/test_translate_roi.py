"""dl.port.translate on MXNet's region ops (ops_roi.py): ``_contrib_ROIAlign`` (gluoncv's Faster
R-CNN) and ``reverse``, each in a small HybridBlock translated with the float64 proof and measured
against MXNet's own op in float64 and float32 (tests/test_translate_ops.py's ``measure``)."""
import os
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.dirname(__file__))
from test_translate_ops import measure  # noqa: E402

from dualdl.port.translate import TranslationError  # noqa: E402
import dualdl.port as port  # noqa: E402

rng = np.random.default_rng(3)
X = rng.standard_normal((2, 3, 12, 10)).astype(np.float32)


def _rois(n=7, h=12, w=10, scale=1.0):
    """ROIs in image coordinates: inside, across the border, tiny (below 1 px). (No negative batch index:
    MXNet's result is undefined there, it reads outside the data; the translation gives zeros.)"""
    r = []
    for i in range(n):
        x1, y1 = rng.uniform(-3, w / scale), rng.uniform(-3, h / scale)
        r.append([i % 2, x1, y1, x1 + rng.uniform(0.2, 8 / scale), y1 + rng.uniform(0.2, 8 / scale)])
    return np.array(r, np.float32)


@pytest.mark.parametrize("ratio", [2, -1])
@pytest.mark.parametrize("aligned", [False, True])
def test_roi_align_matches_mxnet(tmp_path, ratio, aligned):
    rois = _rois(scale=0.5)
    _, src, d = measure(lambda F, x, r: F.contrib.ROIAlign(x, r, pooled_size=(3, 2), spatial_scale=0.5,
                                                           sample_ratio=ratio, aligned=aligned),
                        [X, rois], tmp_path, "roi_align(")
    assert "torchvision" not in src
    assert d["float64"] < 1e-12 and d["float32"] < 1e-5, d


def test_roi_align_position_sensitive_refused(tmp_path):
    from test_translate_ops import OpNet
    net = OpNet(lambda F, x, r: F.contrib.ROIAlign(x, r, pooled_size=(2, 2), spatial_scale=1.0, sample_ratio=2,
                                                   position_sensitive=True))
    net.initialize()
    with pytest.raises(TranslationError) as e:
        port.translate(net, [rng.standard_normal((1, 8, 6, 6)).astype(np.float32), _rois(2, 6, 6)], str(tmp_path))
    assert "position_sensitive" in str(e.value) and "register" in str(e.value)


def test_reverse(tmp_path):
    _, _, d = measure(lambda F, x: F.reverse(x, axis=1), [X], tmp_path / "r", "torch.flip(")
    assert d["float64"] == 0.0 and d["float32"] == 0.0
