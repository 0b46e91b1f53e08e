"""The parity table: one row per entry (layer, op, loss) and its odd cases. tests/test_parity_table.py
generates the checks from ROWS; adding an entry to dualdl is adding its row (docs/parity.md)."""
from .layers import ROWS as LAYER_ROWS
from .losses import ROWS as LOSS_ROWS
from .ops import ROWS as OP_ROWS
from .transformer_decoder import ROWS as DECODER_ROWS

ROWS = LAYER_ROWS + DECODER_ROWS + OP_ROWS + LOSS_ROWS
