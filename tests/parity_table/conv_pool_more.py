"""Parity rows of conv and pool layers added for torch's module tests (issue 34), and of what the
existing ones newly take: unbatched inputs, MaxPool's return_indices and dilation, AvgPool's
divisor_override, adaptive output sizes with None. FractionalMaxPool rows use sizes whose windows do
not depend on the random samples (an integer alpha = (L - k) / (o - 1): window i starts at i alpha; or
o = 1): the samples are drawn
by each framework's generator (tests/test_nn_conv_pool_more.py compares given samples)."""
from dualdl.testing.spec import layer, pos

from .layers import MKLDNN_POOL

ROWS = [
    # ConvTranspose3d: a Convolution of the zero-interleaved input on MXNet
    layer("ConvTranspose3d", (2, 4, 3, 4, 3), 4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
          id="s2 p1 op1 g2"),
    layer("ConvTranspose3d", (1, 2, 3, 4, 3), 2, 3, (2, 3, 2), stride=(2, 1, 3), padding=(0, 2, 1),
          dilation=(2, 1, 2), output_padding=(1, 0, 2), id="d(2,1,2) op >= stride"),
    layer("ConvTranspose3d", (2, 3, 4, 5), 2, 3, 2, padding=(1, 0, 1), dilation=3, bias=False,
          id="unbatched, p > d(k-1) cropped"),
    # unbatched inputs of the existing layers
    layer("Conv1d", (4, 9), 4, 6, 3, padding="same", id="unbatched same"),
    layer("Conv2d", (3, 6, 7), 3, 4, 3, stride=2, padding=1, id="unbatched"),
    layer("Conv3d", (2, 4, 5, 4), 2, 3, 3, padding=1, padding_mode="replicate", id="unbatched replicate"),
    layer("ConvTranspose2d", (4, 5, 5), 4, 6, 3, stride=2, padding=1, output_padding=1, id="unbatched"),
    layer("MaxPool2d", (3, 7, 7), 3, 2, 1, id="unbatched", known=MKLDNN_POOL),
    layer("AvgPool3d", (2, 5, 5, 4), 2, 2, 1, ceil_mode=True, id="unbatched ceil"),
    layer("AdaptiveMaxPool2d", (3, 7, 5), (3, 2), id="unbatched"),
    layer("AdaptiveAvgPool1d", (3, 7), 3, id="unbatched"),
    # MaxPool: return_indices (torch's flat spatial index) and dilation, by window slices on MXNet
    layer("MaxPool1d", (2, 3, 9), 3, 2, 1, return_indices=True, id="indices"),
    layer("MaxPool2d", (2, 3, 7, 6), 3, 2, 1, return_indices=True, ceil_mode=True, id="indices ceil"),
    layer("MaxPool2d", (1, 2, 9, 8), 2, 1, 1, dilation=(2, 3), id="dilation (2,3)"),
    layer("MaxPool3d", (1, 2, 5, 6, 5), 2, 2, 1, dilation=2, return_indices=True, ceil_mode=True,
          id="indices dilation ceil"),
    layer("MaxPool3d", (2, 5, 4, 6), (2, 3, 2), return_indices=True, id="unbatched indices"),
    # AvgPool: divisor_override (sum pooling / divisor)
    layer("AvgPool2d", (2, 3, 6, 7), 3, 2, 1, divisor_override=2, id="divisor 2"),
    layer("AvgPool3d", (1, 2, 5, 5, 5), 2, 2, 1, ceil_mode=True, divisor_override=3, id="divisor ceil"),
    # adaptive pools: None keeps that axis
    layer("AdaptiveAvgPool2d", (2, 3, 7, 5), (3, None), id="(3, None)"),
    layer("AdaptiveMaxPool2d", (2, 3, 7, 5), (None, 2), id="(None, 2)"),
    layer("AdaptiveAvgPool3d", (2, 3, 5, 7, 6), (2, 3, 4), id="(2,3,4)"),
    layer("AdaptiveAvgPool3d", (3, 4, 5, 7), (None, 3, 2), id="unbatched (None,3,2)"),
    layer("AdaptiveAvgPool3d", (1, 2, 3, 4, 5), (6, None, 1), id="(6,None,1) upsampling bins"),
    layer("AdaptiveMaxPool3d", (2, 3, 6, 7, 5), (3, 2, 4), id="(3,2,4)"),
    layer("AdaptiveMaxPool3d", (2, 5, 4, 6), (2, None, 3), id="unbatched (2,None,3)"),
    layer("AdaptiveMaxPool3d", (1, 2, 4, 3, 5), 1, id="global"),
    # LPPool: torch's formula on average pooling
    layer("LPPool1d", (2, 3, 9), 2, 3, 2, id="p2 k3 s2"),
    layer("LPPool1d", pos(3, 8), 1.5, 3, ceil_mode=True, id="unbatched p1.5 ceil"),
    layer("LPPool2d", (2, 3, 7, 6), 2, (2, 3), id="p2 (2,3)"),
    layer("LPPool2d", pos(1, 2, 7, 7), 3.0, 3, 2, ceil_mode=True, id="p3 ceil"),
    layer("LPPool2d", (2, 2, 6, 6), float("inf"), 2, id="p inf", known=MKLDNN_POOL),
    layer("LPPool3d", pos(1, 2, 5, 6, 5), 1.5, 2, id="p1.5"),
    layer("LPPool3d", (3, 4, 5, 6), 2, (2, 3, 2), 1, id="unbatched p2 s1"),
    # FractionalMaxPool: sizes with sample-independent windows
    layer("FractionalMaxPool2d", (2, 3, 5, 7), 2, (4, 1), id="(4,1) alpha 1"),
    layer("FractionalMaxPool2d", (3, 6, 5), (3, 2), (4, 4), return_indices=True, id="unbatched indices"),
    layer("FractionalMaxPool3d", (1, 2, 6, 7, 4), (2, 2, 3), (3, 2, 1), return_indices=True, id="indices"),
    layer("FractionalMaxPool3d", (2, 5, 4, 7), 2, output_size=(2, 1, 2), id="unbatched"),
]
