"""Layer rows of the activations, channel dropouts and resampling/padding/reshaping layers
(issue 14): dualdl.nn.<name> on each backend against torch.nn.<name>."""
from dualdl.testing.spec import layer

NO_TRAIN = ("eval", "float64", "hybridize")        # random in train mode: compared in eval mode only
BILINEAR64 = dict(tol64=1e-6, reason="MXNet's BilinearResize2D computes its weights in float32, also for "
                                     "float64 data (measured <= 6.7e-7; exact weights such as x2 match)")

ROWS = [
    layer("PReLU", (4, 30)),
    layer("PReLU", (2, 3, 4, 5), 3, 0.1, id="per channel 4-d"),
    layer("PReLU", (7,), id="1-d", checks=("train", "step", "eval", "float64")),
    layer("Sequential", (2, 3, 8, 8), lambda nn: (nn.Conv2d(3, 4, 3), nn.PReLU(4), nn.Flatten(), nn.Linear(144, 3)),
          id="conv-prelu-linear: MXNet's prelu op gives a wrong slope gradient here, hybridized"),
    layer("ReLU6", (4, 30) , id="wide"),
    layer("Hardswish", (4, 30)),
    layer("Hardsigmoid", (4, 30)),           # MXNet's gradient takes torch's float32 1/6 (exact to torch)
    layer("Softplus", (4, 30)),
    layer("Softplus", (4, 30), 2.0, 1.5, id="beta 2 threshold 1.5"),
    layer("Mish", (4, 30)),
    layer("Dropout1d", (3, 4, 5), 0.0, id="p=0"),
    layer("Dropout1d", (4, 5), 1.0, id="p=1 (C, L)"),
    layer("Dropout1d", (3, 4, 5), 0.5, id="p=0.5", checks=NO_TRAIN),
    layer("Dropout2d", (2, 3, 4, 5), 0.0, id="p=0"),
    layer("Dropout2d", (2, 3, 4, 5), 1.0, id="p=1"),
    layer("Dropout2d", (2, 3, 4, 5), 0.3, id="p=0.3", checks=NO_TRAIN),
    layer("Upsample", (2, 3, 3, 5), scale_factor=2, id="nearest x2"),
    layer("Upsample", (1, 2, 5, 7), size=(7, 4), id="nearest to (7,4)", checks=("train", "step", "eval", "float64")),
    layer("Upsample", (2, 3, 4, 5), scale_factor=2, mode="bilinear", id="bilinear x2"),
    layer("Upsample", (1, 2, 5, 3), size=(8, 7), mode="bilinear", align_corners=True, id="bilinear ac=True",
          **BILINEAR64),
    layer("Upsample", (1, 2, 8, 9), size=(3, 4), mode="bilinear", id="bilinear down", **BILINEAR64),
    layer("PixelShuffle", (2, 12, 3, 4), 2),
    layer("PixelShuffle", (9, 2, 3), 3, id="unbatched r3", checks=("train", "step", "eval", "float64")),
    layer("ZeroPad2d", (2, 3, 4, 5), (1, 0, 2, 3), id="(1,0,2,3)"),
    layer("ZeroPad2d", (3, 1, 1), 2, id="unbatched 1x1"),
    layer("ReflectionPad2d", (2, 3, 4, 5), (1, 2, 3, 0), id="(1,2,3,0)"),
    layer("ReflectionPad2d", (1, 2, 3, 3), 2, id="pad = size - 1"),
    layer("Unflatten", (2, 12), 1, (3, 4)),
    layer("Unflatten", (2, 12, 5), 1, (2, -1, 3), id="three sizes with -1"),
    layer("Unflatten", (6, 5), -1, (5, 1), id="dim -1", checks=("train", "step", "eval", "float64")),
]
