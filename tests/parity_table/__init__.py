"""The parity table: one row per entry (layer, op, loss) and its odd cases. tests/test_parity_table.py
generates the checks from ROWS; adding an entry to dualdl is adding its row (docs/parity.md)."""
from .contract import ROWS as CONTRACT_ROWS
from .layers import ROWS as LAYER_ROWS
from .layers_act import ROWS as ACT_ROWS
from .conv_pool import ROWS as CONV_POOL_ROWS
from .losses import ROWS as LOSS_ROWS
from .norm_rows import ROWS as NORM_ROWS
from .ops import ROWS as OP_ROWS
from .ops_more import ROWS as OP_MORE_ROWS
from .transformer_decoder import ROWS as DECODER_ROWS
from .embedding_bag import ROWS as EMBEDDING_BAG_ROWS
from .empty import ROWS as EMPTY_ROWS
from .act_more import ROWS as ACT_MORE_ROWS
from .padding_more import ROWS as PADDING_MORE_ROWS
from .conv_pool_more import ROWS as CONV_POOL_MORE_ROWS
from .norm_linear_more import ROWS as NORM_LINEAR_MORE_ROWS

ROWS = (LAYER_ROWS + EMBEDDING_BAG_ROWS + CONV_POOL_ROWS + ACT_ROWS + NORM_ROWS + DECODER_ROWS + CONTRACT_ROWS
        + OP_ROWS + OP_MORE_ROWS + LOSS_ROWS + EMPTY_ROWS
        + ACT_MORE_ROWS + PADDING_MORE_ROWS + CONV_POOL_MORE_ROWS + NORM_LINEAR_MORE_ROWS)
