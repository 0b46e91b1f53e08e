"""The torch adapter's ``nn`` index: what ``backend.module("nn")`` returns. Defines nothing; every
name lives in its family module (base, linear, conv, ...), and no adapter module imports this one.

Every layer *is* the ``torch.nn`` layer (a thin subclass that adds a shape check whose error names
the layer, the expected layout and the shape received). ``_dl_layer`` marks the dualdl layer each
class implements; ``dualdl_mx.nn`` has a class of the same name for each.
"""
from .base import Module, make_parameter, shape_error, factory_kwargs
from .linear import Flatten, Identity, Linear
from .embedding import Embedding
from .conv import Conv1d, Conv2d
from .pool import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .norm import BatchNorm1d, BatchNorm2d, LayerNorm
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .dropout import Dropout
from .containers import ModuleDict, ModuleList, Sequential
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from .transformer import MultiheadAttention, PositionalEncoding, TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "Module", "make_parameter", "factory_kwargs", "shape_error",
    "Linear", "Identity", "Flatten", "Embedding", "Conv1d", "Conv2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm",
    "ReLU", "Sigmoid", "Tanh", "GELU", "LeakyReLU", "ELU", "SiLU", "Softmax", "LogSoftmax",
    "Dropout", "Sequential", "ModuleList", "ModuleDict",
    "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell",
    "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "PositionalEncoding",
]
