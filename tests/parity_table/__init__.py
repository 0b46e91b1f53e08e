"""The parity table: one row per entry (layer, op, loss) and its odd cases. tests/test_parity_table.py
generates the checks from ROWS; adding an entry to dualdl is adding its row (docs/parity.md)."""
from .contract import ROWS as CONTRACT_ROWS
from .layers import ROWS as LAYER_ROWS
from .losses import ROWS as LOSS_ROWS
from .ops import ROWS as OP_ROWS

ROWS = LAYER_ROWS + CONTRACT_ROWS + OP_ROWS + LOSS_ROWS
