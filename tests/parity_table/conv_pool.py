"""Rows of the conv/pool family added in phase 2 (issue 14): transposed and 3-d convolutions, 3-d
pooling, adaptive 1-d pooling and adaptive max pooling (non-divisible sizes: overlapping bins)."""
from dualdl.testing.spec import layer

from .layers import MKLDNN_POOL

ROWS = [
    layer("ConvTranspose1d", (2, 4, 5), 4, 6, 3, stride=2, padding=1, output_padding=1, id="s2 p1 op1"),
    layer("ConvTranspose1d", (2, 4, 5), 4, 6, 3, stride=1, padding=1, output_padding=1, dilation=2, groups=2,
          id="op >= stride (d2 g2)"),
    layer("ConvTranspose1d", (1, 1, 1), 1, 2, 1, bias=False, id="size 1 no bias"),
    layer("ConvTranspose2d", (2, 4, 5, 5), 4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
          id="s2 p1 op1 g2"),
    layer("ConvTranspose2d", (2, 3, 4, 3), 3, 4, (4, 3), stride=(2, 3), padding=(1, 0), id="DCGAN k4 s(2,3)"),
    layer("ConvTranspose2d", (2, 3, 4, 5), 3, 2, 3, stride=2, padding=2, output_padding=(0, 1), dilation=2,
          bias=False, id="d2 p2 op(0,1)"),
    layer("ConvTranspose2d", (2, 2, 3, 3), 2, 3, 3, padding=0, output_padding=1, dilation=3,
          id="op >= stride, past the end"),
    layer("Conv3d", (2, 3, 5, 6, 4), 3, 4, 3, stride=2, padding=1, id="s2 p1"),
    layer("Conv3d", (1, 4, 4, 5, 3), 4, 2, (2, 3, 1), padding="same", groups=2, id="same g2"),
    layer("Conv3d", (1, 2, 4, 4, 4), 2, 2, 3, padding=1, padding_mode="replicate", dilation=(1, 2, 1),
          id="replicate d(1,2,1)"),
    layer("Conv3d", (1, 2, 4, 5, 4), 2, 3, 3, padding=(1, 2, 1), padding_mode="reflect", id="reflect p(1,2,1)"),
    layer("MaxPool3d", (2, 2, 5, 4, 5), 2, id="k2", known=MKLDNN_POOL),
    layer("MaxPool3d", (1, 2, 5, 5, 4), 3, 2, 1, ceil_mode=True, id="ceil", known=MKLDNN_POOL),
    layer("AvgPool3d", (2, 2, 4, 5, 6), 2, id="k2 uneven"),
    layer("AvgPool3d", (1, 2, 5, 5, 6), 3, 2, 1, ceil_mode=True, count_include_pad=False, id="ceil no-pad-count"),
    layer("AvgPool3d", (1, 2, 3, 4, 5), (1, 2, 3), stride=1, padding=(0, 1, 1), id="k(1,2,3) s1 pad counted"),
    layer("AdaptiveAvgPool1d", (2, 3, 7), 3, id="7 -> 3"),
    layer("AdaptiveAvgPool1d", (2, 3, 4), 6, id="4 -> 6 (upsampling bins)"),
    layer("AdaptiveMaxPool1d", (2, 3, 10), 4, id="10 -> 4"),
    layer("AdaptiveMaxPool1d", (2, 3, 5), 1, id="global"),
    layer("AdaptiveMaxPool2d", (2, 3, 7, 5), (3, 2), id="(3,2)"),
    layer("AdaptiveMaxPool2d", (1, 2, 3, 4), 5, id="3x4 -> 5 (upsampling bins)"),
    layer("AdaptiveMaxPool2d", (2, 3, 6, 6), 1, id="global"),
]
