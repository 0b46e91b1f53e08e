"""Layer rows: dualdl.nn.<name>(*args, **kwargs) on each backend against torch.nn.<name>."""
from dualdl.testing.spec import Intermittent, idx, layer

from .known import F32_ACT_HYB, LN64

NO_TRAIN = ("eval", "float64", "hybridize")        # random in train mode: compared in eval mode only
EMPTY = "no elements"                              # dualdl refuses empty batches on both backends
# the backward reads a workspace that eval mode never wrote: whether it is wrong depends on what
# that memory last held (a full test run can hand it the train-mode pass's workspace)
MKLDNN_POOL = {"float32 mxnet:hybridized eval": Intermittent("MKLDNN max-pool backward under record(train_mode=False), "
                                                             "avoided on NDArrays only (docs/parity.md)")}
# InstanceNorm's running statistics, hybridized: updated by MXNet's fused BatchNorm op in a graph
BN_HYB64 = {"float64 mxnet:hybridized": "MXNet's fused BatchNorm op keeps float32 precision in float64 (<= 1.4e-7)"}

ROWS = [
    layer("Linear", (3, 5), 5, 4),
    layer("Linear", (2, 3, 5), 5, 1, bias=False, id="3-d, out 1, no bias"),
    layer("Linear", (0, 5), 5, 4, id="empty batch", raises=EMPTY),
    layer("Conv1d", (2, 4, 9), 4, 6, 3, stride=2, padding=1, id="s2 p1"),
    layer("Conv1d", (2, 4, 9), 4, 6, 4, padding="same", id="same k4"),
    layer("Conv1d", (2, 2, 7), 2, 3, 3, stride=2, padding=2, padding_mode="reflect", id="reflect s2"),
    layer("Conv1d", (1, 1, 1), 1, 2, 1, id="size 1"),
    layer("Conv2d", (2, 4, 7, 7), 4, 6, 3, stride=2, padding=1, groups=2, id="s2 p1 g2"),
    layer("Conv2d", (2, 3, 6, 7), 3, 4, (2, 4), padding="same", id="same (2,4)"),
    layer("Conv2d", (2, 3, 8, 8), 3, 4, 3, dilation=2, bias=False, id="d2 no bias"),
    layer("Conv2d", (2, 3, 6, 7), 3, 4, 3, padding=(1, 2), padding_mode="reflect", id="reflect p(1,2)"),
    layer("Conv2d", (2, 3, 5, 6), 3, 4, (2, 3), padding="same", padding_mode="replicate", id="replicate same"),
    layer("MaxPool1d", (2, 3, 5), 2, 2, 1, ceil_mode=True, id="ceil", known=MKLDNN_POOL),
    layer("MaxPool2d", (2, 3, 5, 5), 2, 2, 1, ceil_mode=True, id="ceil crop", known=MKLDNN_POOL),
    layer("MaxPool2d", (1, 2, 7, 6), 3, 2, 1, id="uneven", known=MKLDNN_POOL),
    layer("AvgPool1d", (2, 3, 8), 3, 2, 1, ceil_mode=True, id="ceil"),
    layer("AvgPool2d", (2, 3, 6, 6), 3, 2, 1, ceil_mode=True, count_include_pad=False, id="ceil no-pad-count"),
    layer("AvgPool2d", (1, 2, 5, 7), 2, id="uneven"),
    layer("AdaptiveAvgPool2d", (2, 3, 5, 5), (1, 1), id="(1,1)"),
    layer("AdaptiveAvgPool2d", (2, 3, 7, 5), (3, 2), id="(3,2)"),
    layer("BatchNorm1d", (8, 5), 5, momentum=0.2, id="(N,C)"),
    layer("BatchNorm1d", (4, 5, 3), 5, id="(N,C,L)"),
    layer("BatchNorm2d", (6, 4, 5, 5), 4),
    layer("BatchNorm2d", (6, 4, 3, 3), 4, affine=False, id="no affine"),
    layer("BatchNorm2d", (6, 4, 3, 3), 4, track_running_stats=False, id="no stats"),
    layer("BatchNorm2d", (2, 3, 1, 1), 3, id="1x1 maps"),
    layer("LayerNorm", (3, 5, 8), 8),
    layer("LayerNorm", (3, 5, 8), (5, 8), id="(5,8)"),
    layer("LayerNorm", (3, 5, 8), 8, elementwise_affine=False, id="no affine"),
    layer("Dropout", (4, 5), 0.0, id="p=0"),
    layer("Dropout", (4, 5), 0.5, id="p=0.5", checks=NO_TRAIN),
    layer("Embedding", idx((3, 5), 10), 10, 4),
    layer("Embedding", idx((3, 6), 4), 10, 4, padding_idx=2, id="padding_idx"),
    layer("Flatten", (2, 3, 4, 5)),
    layer("Flatten", (2, 3, 4, 5), 1, 2, id="(1,2)"),
    layer("Flatten", (2, 3, 4), 0, id="(0)"),
    layer("Identity", (2, 3)),
    layer("ReLU", (4, 30)),
    layer("Sigmoid", (4, 30)),
    layer("Tanh", (4, 30)),
    layer("GELU", (4, 30), **F32_ACT_HYB),
    layer("GELU", (4, 30), "tanh", id="tanh"),
    layer("LeakyReLU", (4, 30), 0.2, id="0.2", **F32_ACT_HYB),
    layer("ELU", (4, 30), 0.7, id="0.7", **F32_ACT_HYB),
    layer("SiLU", (4, 30)),
    layer("Softmax", (4, 5, 3), dim=1, id="dim 1"),
    layer("LogSoftmax", (4, 5, 3), dim=-1, id="dim -1"),
    layer("Sequential", (3, 6), lambda nn: (nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))),
    layer("MultiheadAttention", [(4, 2, 8), (5, 2, 8), (5, 2, 8)], 8, 2, id="TNC, kv len 5"),
    layer("MultiheadAttention", [(2, 4, 8), (2, 4, 8), (2, 4, 8)], 8, 2, batch_first=True, bias=False,
          id="batch_first, no bias"),
    layer("TransformerEncoderLayer", (5, 2, 8), 8, 2, 16, dropout=0.0),
    layer("TransformerEncoderLayer", (2, 5, 8), 8, 2, 16, dropout=0.0, batch_first=True, norm_first=True,
          activation="gelu", id="norm_first gelu batch_first", **LN64, **F32_ACT_HYB),
    layer("TransformerEncoder", (5, 2, 8), lambda nn: (nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2),
          enable_nested_tensor=False),
    layer("LSTM", (5, 2, 3), 3, 4),
    layer("LSTM", (2, 5, 3), 3, 4, 2, batch_first=True, bidirectional=True, id="2 layers bidirectional"),
    layer("GRU", (5, 2, 3), 3, 4),
    layer("RNN", (5, 2, 3), 3, 4, nonlinearity="relu", id="relu", tol64=1e-6,
          reason="MXNet's fused RNN op in relu mode gives float32 precision in float64 (<= 2.5e-7)"),
    layer("LSTMCell", (2, 3), 3, 4),
    layer("GRUCell", (2, 3), 3, 4),
    layer("RNNCell", (1, 3), 3, 4, id="batch 1"),
]
