"""Empty-batch rows: torch runs these on an input with no elements, MXNet 1.x cannot (its operators,
even ``x * 2`` and ``attach_grad``, raise on a 0 in the shape), so dualdl refuses them on both
backends, eager and hybridized, with the same ValueError (checks.empty_batch_error)."""
from dualdl.testing.spec import layer, op

from .layers import EMPTY

ROWS = [
    layer("ReLU", (0, 5), id="empty batch", raises=EMPTY),
    layer("GELU", (0, 3, 4), id="empty batch", raises=EMPTY),
    layer("Softmax", (0, 4), dim=-1, id="empty batch", raises=EMPTY),
    layer("PReLU", (0, 3), 3, id="empty batch", raises=EMPTY),
    layer("LayerNorm", (0, 5), 5, id="empty batch", raises=EMPTY),
    layer("LayerNorm", (2, 0, 3, 4), (3, 4), id="empty middle axis, 2-d shape", raises=EMPTY),
    op("relu", (0, 5), id="empty batch", raises=EMPTY),
    op("matmul", [(0, 4), (4, 5)], id="empty batch", raises=EMPTY),
    op("matmul", [(2, 3, 4), (4, 0)], id="empty rhs", raises=EMPTY),
]
