"""Declarations of the convolutions and pools added for torch's module tests (issue 34): merged into ``dualdl.nn.layers.LAYERS`` (see docs/concepts.md
"Adding a layer")."""
from __future__ import annotations

from .declaration import layer  # noqa: F401

_CONV = "stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode='zeros', device=None, dtype=None"
_CONV_T = ("stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros', "
           "device=None, dtype=None")
_LAZY = ("Gluon's deferred initialisation infers in_channels at the first call (also inside a hybridized "
         "parent); weight/bias then have torch's names, shapes and U(+-1/sqrt(fan_in)) init, and the layer "
         "becomes a {0} (torch's cls_to_become). {1}")
_LP = ("MXNet's Pooling(pool_type='lp') differs from torch's formula; torch's is composed: x ** p, average "
       "pooling (ceil_mode as AvgPool{0}d), sign(out) * relu(|out|) * kernel volume, ** (1 / p); norm_type "
       "inf / -inf: max pooling of |x| / -|x|.")
_FRACTIONAL = ("MXNet has no fractional max pooling: torch's window starts (int((i + u) alpha) - int(u alpha), "
               "alpha = (L - k) / (o - 1), last one L - k, in the input's dtype) from the samples u, the "
               "windows gathered by index and the first maximum picked (argmax), so the gradient and "
               "return_indices are torch's; _random_samples given: torch's numbers exactly; not given: drawn "
               "from MXNet's generator (uniform [0, 1)). output_ratio under hybridize() needs the input's "
               "shape: the graph is specialised per input size (an NDArray call), refused inside a parent's graph.")
LAYERS = {
    "ConvTranspose3d": layer(
        f"in_channels, out_channels, kernel_size, {_CONV_T}",
        "MXNet's 3-d Deconvolution is MKLDNN float32 only: a Convolution of the zero-interleaved input with the "
        "regrouped, flipped weight (torch's layout (in, out/groups, kd, kh, kw) and init), every dtype; "
        "forward(x, output_size=) as ConvTranspose2d.",
        example=(2, 3, 3)),
    "AdaptiveAvgPool3d": layer(
        "output_size",
        "MXNet has no 3-d adaptive pooling: contrib.AdaptiveAvgPooling2D over (H, W), then over D (separable; "
        "torch's bins); None (keep the input size) skips that axis, hybridized too."),
    "AdaptiveMaxPool3d": layer(
        "output_size, return_indices=False",
        "As AdaptiveAvgPool3d with ROIPooling (AdaptiveMaxPool2d's whole-map regions: torch's bins); no "
        "return_indices."),
    "LPPool1d": layer("norm_type, kernel_size, stride=None, ceil_mode=False", _LP.format(1)),
    "LPPool2d": layer("norm_type, kernel_size, stride=None, ceil_mode=False", _LP.format(2)),
    "LPPool3d": layer("norm_type, kernel_size, stride=None, ceil_mode=False", _LP.format(3)),
    "FractionalMaxPool2d": layer(
        "kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None",
        _FRACTIONAL),
    "FractionalMaxPool3d": layer(
        "kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None",
        _FRACTIONAL),
    **{f"LazyConv{n}d": layer(f"out_channels, kernel_size, {_CONV}", _LAZY.format(f"Conv{n}d", ""),
                              example=(2, 3)) for n in (1, 2, 3)},
    **{f"LazyConvTranspose{n}d": layer(f"out_channels, kernel_size, {_CONV_T}",
                                       _LAZY.format(f"ConvTranspose{n}d", f"As ConvTranspose{n}d."),
                                       example=(2, 3)) for n in (1, 2, 3)},
}
