"""Parity rows of padding layers added for torch's module tests (issue 34): dualdl.nn.<name> on each
backend against torch.nn.<name>, batched and unbatched, cropping (negative) sides included."""
from dualdl.testing.spec import layer  # noqa: F401

ROWS = [
    layer("ConstantPad1d", (2, 3, 5), (1, 2), 3.5, id="(1,2) value 3.5"),
    layer("ConstantPad1d", (6,), (-2, 3), -1.0, id="1-d, crops left"),
    layer("ConstantPad2d", (2, 3, 4, 5), (1, -2, 0, 3), 0.5, id="crops right"),
    layer("ConstantPad2d", (4, 5), 2, 1.0, id="2-d"),
    layer("ConstantPad3d", (2, 2, 3, 4, 5), (1, 0, -1, 2, 2, 1), 2.0, id="mixed"),
    layer("ConstantPad3d", (2, 1, 2, 3, 4, 5), 1, 0.25, id="6-d"),
    layer("ZeroPad1d", (2, 3, 5), (2, -1), id="crops right"),
    layer("ZeroPad1d", (3, 5), 1, id="unbatched"),
    layer("ZeroPad3d", (2, 2, 3, 4, 5), (1, 2, 0, 1, 2, 0)),
    layer("ZeroPad3d", (2, 3, 4, 5), (-1, 1, 1, -1, 0, 2), id="unbatched, crops"),
    layer("ZeroPad2d", (2, 3, 4, 5), (-1, 2, 1, -2), id="crops"),
    layer("ReflectionPad1d", (2, 3, 5), (4, 1), id="pad = size - 1"),
    layer("ReflectionPad1d", (3, 6), (2, -3), id="unbatched, crops right"),
    layer("ReflectionPad2d", (3, 4, 5), (-1, 3, 2, -2), id="unbatched, crops"),
    layer("ReflectionPad3d", (2, 2, 3, 4, 5), (1, 2, 3, 0, 2, 1)),
    layer("ReflectionPad3d", (2, 3, 4, 5), 1, id="unbatched"),
    layer("ReplicationPad1d", (2, 3, 5), (3, 7), id="pads over the size"),
    layer("ReplicationPad1d", (3, 5), (-2, 1), id="unbatched, crops left"),
    layer("ReplicationPad2d", (2, 3, 4, 5), (1, 2, 6, 0)),
    layer("ReplicationPad2d", (3, 4, 5), (2, -1, -2, 3), id="unbatched, crops"),
    layer("ReplicationPad3d", (1, 2, 3, 4, 5), (1, 2, 3, 4, 5, 6)),
    layer("ReplicationPad3d", (2, 3, 4, 5), (0, 1, -1, 2, 1, 0), id="unbatched, crops"),
    layer("CircularPad1d", (2, 3, 5), (5, 2), id="pad = size"),
    layer("CircularPad1d", (3, 5), (-2, 3), id="unbatched, crop then wrap"),
    layer("CircularPad2d", (2, 3, 4, 5), (1, 2, 4, 3)),
    layer("CircularPad2d", (3, 4, 5), (2, -1, -1, 3), id="unbatched, crops"),
    layer("CircularPad3d", (1, 2, 3, 4, 5), (1, 2, 3, 0, 2, 1)),
    layer("CircularPad3d", (2, 3, 4, 5), (-1, 2, 1, 1, 0, -1), id="unbatched, crops"),
]
