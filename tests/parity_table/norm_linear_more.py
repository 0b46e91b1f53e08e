"""Parity rows of the normalisation and linear layers added for torch's module tests (issue 34):
RMSNorm, InstanceNorm3d, LocalResponseNorm, Bilinear; and the inputs torch takes that dualdl now
takes too: unbatched InstanceNorm input, another channel count without a weight or running
statistics, BatchNorm's cumulative average (momentum=None)."""
from dualdl.testing.spec import layer

from .layers import EMPTY

ROWS = [
    layer("RMSNorm", (3, 5, 8), 8),
    layer("RMSNorm", (3, 5, 8), (5, 8), eps=1e-3, id="(5,8), eps 1e-3"),
    layer("RMSNorm", (4, 6), 6, elementwise_affine=False, id="no affine, eps None"),
    layer("RMSNorm", (6,), 6, id="unbatched"),
    layer("RMSNorm", (0, 5), 5, id="empty batch", raises=EMPTY),
    layer("InstanceNorm3d", (2, 3, 4, 3, 2), 3),
    layer("InstanceNorm3d", (2, 3, 3, 2, 2), 3, affine=True, track_running_stats=True, momentum=0.3,
          id="affine, running stats"),
    layer("InstanceNorm3d", (3, 4, 3, 2), 3, affine=True, id="unbatched, affine"),
    layer("InstanceNorm1d", (3, 7), 3, id="unbatched"),
    layer("InstanceNorm1d", (3, 7), 3, track_running_stats=True, id="unbatched, running stats"),
    layer("InstanceNorm2d", (3, 4, 5), 3, affine=True, id="unbatched, affine"),
    layer("InstanceNorm1d", (2, 4, 5), 3, id="4 channels, num_features 3, no affine"),
    layer("InstanceNorm1d", (2, 4, 5), 3, affine=True, id="channel mismatch, affine",
          raises=r"expected input of shape \(3, L\) or \(N, 3, L\)"),
    layer("InstanceNorm2d", (0, 3, 2, 2), 3, id="empty batch", raises=EMPTY),
    layer("LocalResponseNorm", (2, 5, 7), 3),
    layer("LocalResponseNorm", (2, 6, 4, 4), 2, id="4-d, even size"),
    layer("LocalResponseNorm", (1, 5, 3, 3, 3), 1, 1.0, 0.5, 2.0, id="5-d, custom"),
    layer("LocalResponseNorm", (2, 3, 5), 5, alpha=0.1, id="size > channels"),
    layer("LocalResponseNorm", (2, 5), 3, id="2-d", raises=r"expected input of shape \(N, C, \*\)"),
    layer("Bilinear", [(8, 2), (8, 3)], 2, 3, 4),
    layer("Bilinear", [(8, 2), (8, 3)], 2, 3, 4, bias=False, id="no bias"),
    layer("Bilinear", [(2,), (3,)], 2, 3, 4, id="unbatched"),
    layer("Bilinear", [(2, 5, 3), (2, 5, 4)], 3, 4, 2, id="3-d"),
    layer("Bilinear", [(0, 2), (0, 3)], 2, 3, 4, id="empty batch", raises=EMPTY),
    layer("BatchNorm1d", (8, 5), 5, momentum=None, id="cumulative average"),
    layer("BatchNorm2d", (4, 3, 3, 3), 3, 1e-3, None, id="cumulative average"),
    layer("BatchNorm2d", (0, 3, 2, 2), 3, id="empty batch", raises=EMPTY),
]
