"""dl.port.translate on MXNet's box ops (ops_box.py): ``_contrib_box_nms`` (YOLOv3, SSD, Faster
R-CNN inference) and ``_contrib_box_decode`` (SSD, Faster R-CNN), each in a small HybridBlock
translated with the float64 proof and measured against MXNet's own op in float64 and float32
(tests/test_translate_ops.py's ``measure``): ties, topk, class-aware and forced suppression,
center boxes, background ids, scores at the threshold."""
import os
import sys

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")
torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.dirname(__file__))
from test_translate_ops import OpNet, measure  # noqa: E402

import dualdl.port as port  # noqa: E402
from dualdl.port.translate import TranslationError  # noqa: E402

rng = np.random.default_rng(5)


def _detections(batch=2, n=60, classes=3, center=False):
    """(B, N, 6) rows (id, score, 4 coordinates): overlapping boxes, scores on a coarse grid (ties),
    some below the valid threshold, some of id -1 (the default background)."""
    d = np.zeros((batch, n, 6), np.float32)
    d[..., 0] = rng.integers(-1, classes, (batch, n))
    d[..., 1] = rng.integers(0, 6, (batch, n)) / 5
    xy = rng.uniform(0, 30, (batch, n, 2))
    wh = rng.uniform(2, 15, (batch, n, 2))
    d[..., 2:4] = xy + wh / 2 if center else xy
    d[..., 4:6] = wh if center else xy + wh
    return d


class _IdsKept(mx.gluon.nn.HybridBlock):
    """Column 0 (class ids) as given, the rest x * w + b (trainable: the proof's step reaches the op's
    backward), then ``fn(F, rows)``."""

    def __init__(self, fn, **kw):
        super().__init__(**kw)
        self.fn = fn
        self.w = self.params.get("w", shape=(1,), init=mx.init.Constant(1.25))
        self.b = self.params.get("b", shape=(1,), init=mx.init.Constant(0.1))
        self.initialize()

    def hybrid_forward(self, F, x, w, b):
        ids = F.slice_axis(x, axis=-1, begin=0, end=1)
        rest = F.broadcast_add(F.broadcast_mul(F.slice_axis(x, axis=-1, begin=1, end=None), w), b)
        return self.fn(F, F.concat(ids, rest, dim=-1))


def _nms(**kw):
    # x * 1.25 + 0.1 in OpNet: scores, ids and coordinates shift alike on both sides
    return lambda F, x: F.contrib.box_nms(x, **kw)


@pytest.mark.parametrize("kw", [
    dict(overlap_thresh=0.45, valid_thresh=0.3, topk=-1, id_index=0, score_index=1, coord_start=2),
    dict(overlap_thresh=0.45, valid_thresh=0.3, topk=10, id_index=0, score_index=1, coord_start=2),
    dict(overlap_thresh=0.3, valid_thresh=0.1, topk=100, id_index=0, score_index=1, coord_start=2, force_suppress=True),
    dict(overlap_thresh=0.5, valid_thresh=0.0, id_index=-1, score_index=1, coord_start=2),
    dict(overlap_thresh=0.5, valid_thresh=0.2, id_index=0, score_index=1, coord_start=2, background_id=1),
], ids=["class-aware", "topk", "forced", "no-id", "background"])
def test_box_nms_matches_mxnet(tmp_path, kw):
    _, src, d = measure(_IdsKept(_nms(**kw)), [_detections()], tmp_path, "box_nms(")
    assert "torchvision" not in src
    assert d["float64"] == 0.0 and d["float32"] == 0.0, d


def test_box_nms_center_format(tmp_path):
    kw = dict(overlap_thresh=0.4, valid_thresh=0.2, id_index=0, score_index=1, coord_start=2,
              in_format="center", out_format="center")
    _, _, d = measure(_IdsKept(_nms(**kw)), [_detections(center=True)], tmp_path, "box_nms(")
    assert d["float64"] == 0.0 and d["float32"] == 0.0, d


def test_box_nms_format_conversion_refused(tmp_path):
    net = OpNet(_nms(overlap_thresh=0.5, in_format="center", out_format="corner"))
    net.initialize()
    with pytest.raises(TranslationError) as e:
        port.translate(net, _detections(center=True), str(tmp_path))
    assert "_contrib_box_nms" in str(e.value) and "out_format" in str(e.value)


@pytest.mark.parametrize("fmt", ["center", "corner"])
@pytest.mark.parametrize("clip", [-1.0, 0.5])
def test_box_decode_matches_mxnet(tmp_path, fmt, clip):
    deltas = rng.standard_normal((2, 20, 4)).astype(np.float32)
    anchors = np.concatenate([rng.uniform(0, 20, (1, 20, 2)), rng.uniform(21, 40, (1, 20, 2))], -1).astype(np.float32)
    if fmt == "center":
        anchors[..., 2:] -= anchors[..., :2]
    _, _, d = measure(lambda F, x, a: F.contrib.box_decode(x, a, 0.1, 0.1, 0.2, 0.2, clip=clip, format=fmt),
                      [deltas, anchors], tmp_path, "box_decode(")
    assert d["float64"] < 1e-12 and d["float32"] < 1e-4, d
