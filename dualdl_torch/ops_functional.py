"""``dualdl.nn.functional`` on torch: ``torch.nn.functional``'s own functions (the numbers are
torch's), except that ``dtype=`` of the softmax family also takes a neutral dtype ("float64", a
numpy dtype), which written-once code passes."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn.functional import (  # noqa: F401  (re-exported: the adapter's module is the contract's)
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool2d,
    adaptive_max_pool3d, alpha_dropout, avg_pool1d, avg_pool2d, avg_pool3d, batch_norm, bilinear, celu,
    channel_shuffle, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d,
    cosine_similarity, dropout, dropout1d, dropout2d, dropout3d, elu, embedding, gelu, glu, group_norm,
    gumbel_softmax, hardshrink, hardsigmoid, hardswish, hardtanh, instance_norm, interpolate, layer_norm,
    leaky_relu, linear, local_response_norm, logsigmoid, lp_pool1d, lp_pool2d, lp_pool3d, max_pool1d, max_pool2d,
    max_pool3d, mish, normalize, one_hot, pad, pairwise_distance, pixel_shuffle, pixel_unshuffle, prelu, relu,
    relu6, rms_norm, rrelu, scaled_dot_product_attention, selu, sigmoid, silu, softplus, softshrink, softsign,
    tanh, tanhshrink, threshold)
import torch.nn.functional as TF

from .core import torch_dtype


def _torch_dtype(dtype: Any):
    return dtype if dtype is None or isinstance(dtype, torch.dtype) else torch_dtype(np.dtype(dtype))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return TF.softmax(input, dim, _stacklevel, _torch_dtype(dtype))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return TF.softmin(input, dim, _stacklevel, _torch_dtype(dtype))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return TF.log_softmax(input, dim, _stacklevel, _torch_dtype(dtype))
