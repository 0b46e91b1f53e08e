"""dualdl's layer declarations are torch 2.13's signatures; on an older torch (CUDA images ship
2.11: make gpu-check found it) a layer whose torch class lacks a declared keyword still builds when
the keyword is left at its default, and says what to do when it is not."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dualdl as dl  # noqa: E402
from dualdl.nn.declaration import fit_keywords  # noqa: E402
from dualdl.nn.layers import LAYERS  # noqa: E402


class BatchNorm2dOfTorch211(torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d with torch 2.11's constructor signature (no ``bias``)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)


def _keywords(**kwargs):
    return LAYERS["BatchNorm2d"].bind("BatchNorm2d", (4,), kwargs)[1]


def test_a_default_keyword_the_old_class_lacks_is_dropped_and_the_layer_computes():
    kw = fit_keywords("BatchNorm2d", LAYERS["BatchNorm2d"], BatchNorm2dOfTorch211, _keywords(), "torch")
    assert "bias" not in kw and kw["num_features"] == 4 and kw["affine"] is True
    old = BatchNorm2dOfTorch211(**kw)
    new = dl.nn.BatchNorm2d(4, backend="torch")
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((3, 4, 5, 5)).astype("float32"))
    assert torch.equal(old(x), new(x))


def test_a_non_default_keyword_the_old_class_lacks_is_refused_with_what_to_do():
    with pytest.raises(NotImplementedError, match=r"BatchNorm2d\(bias=False\) needs a newer torch: .* upgrade "
                                                  r"torch, or leave bias at its default True"):
        fit_keywords("BatchNorm2d", LAYERS["BatchNorm2d"], BatchNorm2dOfTorch211, _keywords(bias=False), "torch")


def test_a_class_that_takes_every_keyword_gets_them_all():
    import inspect
    if "bias" not in inspect.signature(torch.nn.BatchNorm2d.__init__).parameters:
        pytest.skip(f"torch {torch.__version__}'s BatchNorm2d has no bias argument (torch < 2.13)")
    kw = _keywords(bias=False)
    assert fit_keywords("BatchNorm2d", LAYERS["BatchNorm2d"], torch.nn.BatchNorm2d, kw, "torch") == kw


def test_linear_cross_entropy_without_torch_support_says_which_torch(monkeypatch):
    import torch.nn.functional as F
    monkeypatch.delattr(F, "linear_cross_entropy", raising=False)
    x, w = torch.zeros(2, 3), torch.zeros(4, 3)
    with pytest.raises(NotImplementedError, match=r"LinearCrossEntropyLoss needs torch 2.13 or newer"):
        dl.losses.functional.linear_cross_entropy(x, w, torch.zeros(2, dtype=torch.int64))
