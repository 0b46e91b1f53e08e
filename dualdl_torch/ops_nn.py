"""dualdl.ops on torch, functional layers: torch.nn.functional itself."""
from __future__ import annotations

import torch
import torch.nn.functional as TF

Tensor = torch.Tensor

interpolate = TF.interpolate
conv2d = TF.conv2d
max_pool2d = TF.max_pool2d
avg_pool2d = TF.avg_pool2d
batch_norm = TF.batch_norm


def layer_norm(input: Tensor, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """An int ``normalized_shape`` is accepted (as ``nn.LayerNorm``; F.layer_norm wants a tuple)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    return TF.layer_norm(input, shape, weight, bias, eps)


group_norm = TF.group_norm
scaled_dot_product_attention = TF.scaled_dot_product_attention
