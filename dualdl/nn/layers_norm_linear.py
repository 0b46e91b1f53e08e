"""Declarations of the normalisation and linear layers added for torch's module tests (issue 34): merged into ``dualdl.nn.layers.LAYERS`` (see docs/concepts.md
"Adding a layer")."""
from __future__ import annotations

from .declaration import layer

LAYERS = {
    "RMSNorm": layer(
        "normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None",
        "MXNet 1.9 has no RMS norm op: torch's composite formula (x * rsqrt(mean(x^2) + eps) * weight) op "
        "for op. eps=None is the input dtype's machine epsilon as torch: hybridized (a Symbol has no "
        "dtype) the weight's, without a weight the dtype of the layer's last cast(). An empty input is "
        "refused on both (torch returns an empty output; MXNet cannot run one).",
        example=(4,)),
    "InstanceNorm3d": layer(
        "num_features, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False, device=None, dtype=None, *, bias=True",
        "As InstanceNorm1d on (N, C, D, H, W) or unbatched (C, D, H, W).",
        example=(3, 1e-05, 0.1, True)),
    "LocalResponseNorm": layer(
        "size, alpha=0.0001, beta=0.75, k=1.0",
        "MXNet's LRN op takes 4-d float32 input only and centres an even window otherwise (0.69 off torch at "
        "size 2, measured); here torch's formula on (N, C, *): the squares viewed (N, 1, "
        "C, -1), zero-padded along C (size // 2 before, (size - 1) // 2 after) and average-pooled with a "
        "(size, 1) window, as torch's avg_pool2d/3d. An empty input is refused on both (torch returns it "
        "unchanged; MXNet cannot run one)."),
    "Bilinear": layer(
        "in1_features, in2_features, out_features, bias=True, device=None, dtype=None",
        "Gluon has no bilinear layer: one GEMM of x1 with the weight viewed (in1, out * in2), then a "
        "batched product with x2; torch's weight (out, in1, in2), init and unbatched 1-d inputs. An "
        "empty input is refused on both (torch returns an empty output; MXNet cannot run one).",
        example=(2, 3, 4)),
}
