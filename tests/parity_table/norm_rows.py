"""Rows for the norm family added in phase 2: BatchNorm3d, GroupNorm, InstanceNorm1d/2d."""
from dualdl.testing.spec import layer

from .layers import EMPTY

ROWS = [
    layer("BatchNorm3d", (3, 4, 3, 2, 5), 4, momentum=0.3),
    layer("BatchNorm3d", (2, 3, 2, 2, 2), 3, affine=False, track_running_stats=False, id="no affine, no stats"),
    layer("GroupNorm", (3, 6, 5, 4), 3, 6),
    layer("GroupNorm", (2, 6, 7), 6, 6, eps=1e-3, id="groups = channels, (N,C,L)"),
    layer("GroupNorm", (2, 4), 1, 4, affine=False, id="1 group, (N,C), no affine"),
    layer("GroupNorm", (1, 4, 3, 3, 2), 2, 4, bias=False, id="5-d, batch 1, no bias"),
    layer("GroupNorm", (0, 4, 3), 2, 4, id="empty batch", raises=EMPTY),
    layer("InstanceNorm1d", (3, 4, 7), 4),
    layer("InstanceNorm1d", (2, 3, 5), 3, affine=True, id="affine"),
    layer("InstanceNorm1d", (4, 3, 6), 3, momentum=0.2, track_running_stats=True, affine=True,
          id="running stats"),
    layer("InstanceNorm2d", (2, 3, 5, 4), 3),
    layer("InstanceNorm2d", (3, 2, 4, 3), 2, affine=True, track_running_stats=True, id="affine, running stats"),
    layer("InstanceNorm2d", (1, 5, 1, 3), 5, affine=True, id="batch 1, 1x3 maps"),
    layer("InstanceNorm2d", (2, 3, 1, 1), 3, id="1x1 maps", raises="more than 1 spatial element",
          checks=("train", "hybridize")),           # hybridized too: checked at the call (_CheckedCall)
]
