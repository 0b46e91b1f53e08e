"""Parity rows of act_more layers added for torch's module tests (issue 34): GLU ... Softmax2d on
random inputs, on whole numbers (``ties``: values on the branch points, where the gradients of
Hardtanh/Threshold/shrinks/CELU/SELU/LogSigmoid are decided by torch's conditions). NaN inputs
and 0-d inputs: tests/test_nn_activation_more.py."""
from dualdl.testing.spec import In, layer  # noqa: F401

X = (4, 30)
TIES = In(X, "ties")

ROWS = [
    layer("GLU", (4, 6)),
    layer("GLU", (5, 6, 7), 1, id="dim 1"),
    layer("GLU", (3, 8, 2, 2), -3, id="dim -3 4-d"),
    layer("Hardtanh", X),
    layer("Hardtanh", TIES, -2.0, 1.0, id="(-2, 1) ties"),
    layer("Hardshrink", X),
    layer("Hardshrink", TIES, 1.0, id="1 ties"),
    layer("Softshrink", X),
    layer("Softshrink", TIES, 1.0, id="1 ties"),
    layer("Tanhshrink", X),
    layer("Threshold", X, 0.1, 20.0),
    layer("Threshold", TIES, 1.0, -3.0, id="1 -> -3 ties"),
    layer("Softmin", (4, 5, 3), 1, id="dim 1"),
    layer("Softmin", (4, 5), -1, id="dim -1"),
    layer("Softsign", X),
    layer("Softsign", TIES, id="ties"),
    layer("LogSigmoid", X),
    layer("LogSigmoid", TIES, id="ties"),
    layer("LogSigmoid", In((3, 4), "float"), id="large |x|", call=lambda f, x: f(x * 300.0)),
    layer("CELU", X),
    layer("CELU", X, 2.5, id="alpha 2.5"),
    layer("CELU", TIES, 0.5, id="alpha 0.5 ties"),
    layer("SELU", X),
    layer("SELU", TIES, id="ties"),
    layer("Softmax2d", (2, 3, 4, 5)),
    layer("Softmax2d", (3, 4, 5), id="unbatched (C, H, W)"),
]
