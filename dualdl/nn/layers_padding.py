"""Declarations of the padding and resampling layers added for torch's module tests (issue 34): merged into ``dualdl.nn.layers.LAYERS`` (see docs/concepts.md
"Adding a layer")."""
from __future__ import annotations

from .declaration import layer  # noqa: F401

_PAD = ("No Gluon block (legacy pad is 4-D/5-D, the dims after the first two, no circular mode, no "
        "cropping): dualdl_mx.padding.pad_last, MXNet's pad on a shape-free 4-D/5-D view, {how}; "
        "negative sides crop (slice_axis); eager and hybridized.")
_CONSTANT = _PAD.format(how="any rank with the padded dims, as torch")
_REFLECT = _PAD.format(how="mode 'reflect', batched or unbatched, each pad smaller than its dim")
_REPLICATE = _PAD.format(how="mode 'edge', batched or unbatched")
_CIRCULAR = ("No Gluon block and no circular mode in MXNet's pad: slice_axis + concat per dim (crop first, "
             "then wrap at most once, as torch), batched or unbatched, eager and hybridized.")

LAYERS = {
    "ConstantPad1d": layer('padding, value', _CONSTANT),
    "ConstantPad2d": layer('padding, value', _CONSTANT),
    "ConstantPad3d": layer('padding, value', _CONSTANT),
    "ZeroPad1d": layer('padding', _CONSTANT),
    "ZeroPad3d": layer('padding', _CONSTANT),
    "ReflectionPad1d": layer('padding', _REFLECT),
    "ReflectionPad3d": layer('padding', _REFLECT),
    "ReplicationPad1d": layer('padding', _REPLICATE),
    "ReplicationPad2d": layer('padding', _REPLICATE),
    "ReplicationPad3d": layer('padding', _REPLICATE),
    "CircularPad1d": layer('padding', _CIRCULAR),
    "CircularPad2d": layer('padding', _CIRCULAR),
    "CircularPad3d": layer('padding', _CIRCULAR),
}
