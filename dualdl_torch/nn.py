"""The torch adapter's ``nn`` index: what ``backend.module("nn")`` returns. Defines nothing; every
name lives in its family module (base, linear, conv, ...), and no adapter module imports this one.

Every layer *is* the ``torch.nn`` layer (a thin subclass that adds a shape check whose error names
the layer, the expected layout and the shape received). ``_dl_layer`` marks the dualdl layer each
class implements; ``dualdl_mx.nn`` has a class of the same name for each.
"""
from .base import Module, make_parameter, shape_error, factory_kwargs
from .linear import Flatten, Identity, Linear
from .embedding import Embedding, EmbeddingBag
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from .pool import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, LayerNorm
from .pool import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool3d, MaxPool3d
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .activation import Hardsigmoid, Hardswish, Mish, PReLU, ReLU6, Softplus
from .dropout import Dropout, Dropout1d, Dropout2d
from .resample import PixelShuffle, ReflectionPad2d, Unflatten, Upsample, ZeroPad2d
from .containers import ModuleDict, ModuleList, Sequential
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .transformer import MultiheadAttention, PositionalEncoding, TransformerEncoder, TransformerEncoderLayer
from .transformer import Transformer, TransformerDecoder, TransformerDecoderLayer

__all__ = [
    "Module", "make_parameter", "factory_kwargs", "shape_error",
    "Linear", "Identity", "Flatten", "Embedding", "Conv1d", "Conv2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm",
    "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
    "ReLU", "Sigmoid", "Tanh", "GELU", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
    "Dropout", "Sequential", "ModuleList", "ModuleDict",
    "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "PositionalEncoding",
    "PReLU", "ReLU6", "Hardswish", "Hardsigmoid", "Softplus", "Mish", "Dropout1d", "Dropout2d",
    "Upsample", "PixelShuffle", "ZeroPad2d", "ReflectionPad2d", "Unflatten",
    "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool3d", "AvgPool3d",
    "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
    "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
    "EmbeddingBag",
]
