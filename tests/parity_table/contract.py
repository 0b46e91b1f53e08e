"""Rows for the divergences issue 14 lists (each fixed, so it cannot return): Embedding's
max_norm/norm_type on MXNet, TransformerEncoderLayer(dropout=1.0) in train mode (NaN on MXNet
before, then a crash in MXNet's backward once its Dropout returned zeros_like)."""
from dualdl.testing.spec import idx, layer

ROWS = [
    layer("Embedding", idx((3, 5), 10), 10, 4, max_norm=1.0, id="max_norm"),
    layer("Embedding", idx((2, 7), 6), 6, 3, max_norm=0.5, norm_type=1.0, padding_idx=0, id="max_norm L1 padding_idx"),
    layer("Dropout", (4, 5), 1.0, id="p=1 (train: zeros, zero gradient)"),
    layer("TransformerEncoderLayer", (5, 2, 8), 8, 2, 16, dropout=1.0, id="dropout=1 (train: all dropped)"),
]
