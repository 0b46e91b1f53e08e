"""The names and signatures of ``dualdl.nn.functional``: torch 2.13's ``torch.nn.functional``
signatures as source text, one row per function, with what MXNet does differently that the MXNet
adapter hides or refuses. Data only (a leaf: imports nothing), read by ``dualdl.nn.functional``
(which builds one dispatcher per row), by ``dualdl.contract`` (the adapters' ``ops_functional``
module must provide every row with this signature) and by the docs.

The losses of ``torch.nn.functional`` are ``dualdl.losses.functional``'s (re-exported, not listed).
"""
from __future__ import annotations

from typing import Dict, Tuple

__all__ = ["FUNCTIONAL", "NOT_WRITTEN"]

_INPLACE = "inplace=True returns a new array on MXNet (no in-place autograd there): use the result"

#: name -> (torch's signature, the MXNet difference); the first parameter picks the backend
FUNCTIONAL: Dict[str, Tuple[str, str]] = {
    # ---- activations
    "relu": ("(input, inplace=False)", _INPLACE),
    "relu6": ("(input, inplace=False)", _INPLACE),
    "elu": ("(input, alpha=1.0, inplace=False)", _INPLACE),
    "selu": ("(input, inplace=False)", _INPLACE),
    "celu": ("(input, alpha=1.0, inplace=False)", _INPLACE),
    "leaky_relu": ("(input, negative_slope=0.01, inplace=False)", _INPLACE),
    "prelu": ("(input, weight)", "written out (MXNet's prelu op keeps float32 precision in float64)"),
    "rrelu": ("(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False)",
              "training draws the slopes from MXNet's RNG (other numbers than torch's)"),
    "glu": ("(input, dim=-1)", ""),
    "gelu": ("(input, *, approximate='none')", "float64 written out (MXNet's op keeps float32 precision)"),
    "logsigmoid": ("(input)", ""),
    "hardshrink": ("(input, lambd=0.5)", ""),
    "tanhshrink": ("(input)", ""),
    "softsign": ("(input)", ""),
    "softplus": ("(input, beta=1.0, threshold=20.0)", ""),
    "softmin": ("(input, dim=None, _stacklevel=3, dtype=None)", "dim=None: torch's legacy dim"),
    "softmax": ("(input, dim=None, _stacklevel=3, dtype=None)", "dim=None: torch's legacy dim"),
    "softshrink": ("(input, lambd=0.5)", ""),
    "log_softmax": ("(input, dim=None, _stacklevel=3, dtype=None)", "dim=None: torch's legacy dim"),
    "tanh": ("(input)", ""),
    "sigmoid": ("(input)", ""),
    "hardsigmoid": ("(input, inplace=False)", _INPLACE),
    "silu": ("(input, inplace=False)", _INPLACE),
    "mish": ("(input, inplace=False)", _INPLACE),
    "hardswish": ("(input, inplace=False)", _INPLACE),
    "hardtanh": ("(input, min_val=-1.0, max_val=1.0, inplace=False)", _INPLACE),
    "threshold": ("(input, threshold, value, inplace=False)", _INPLACE),
    # ---- distances and encodings
    "normalize": ("(input, p=2.0, dim=1, eps=1e-12, out=None)", "out= refused"),
    "cosine_similarity": ("(x1, x2, dim=1, eps=1e-8)", ""),
    "pairwise_distance": ("(x1, x2, p=2.0, eps=1e-6, keepdim=False)", ""),
    "one_hot": ("(tensor, num_classes=-1)", "num_classes=-1 needs an NDArray (a Symbol's maximum is unknown)"),
    "embedding": ("(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, "
                  "sparse=False)", "max_norm renormalises NDArrays only; scale_grad_by_freq and sparse refused"),
    "pixel_shuffle": ("(input, upscale_factor)", ""),
    "pixel_unshuffle": ("(input, downscale_factor)", ""),
    "channel_shuffle": ("(input, groups)", ""),
    "gumbel_softmax": ("(logits, tau=1, hard=False, eps=1e-10, dim=-1)", "noise from MXNet's RNG (other numbers)"),
    "pad": ("(input, pad, mode='constant', value=None)", "negative (cropping) pads refused"),
    "interpolate": ("(input, size=None, scale_factor=None, mode='nearest', align_corners=None, "
                    "recompute_scale_factor=None, antialias=False)",
                    "eager: every mode but 'bicubic' and antialias, 3-D to 5-D input, torch's coordinates and "
                    "weights; hybridized (a Symbol has no shape): 4-D 'nearest' by one integer scale_factor and "
                    "'bilinear' (BilinearResize2D: float32 weights), 3-D 'nearest'/'linear'"),
    # ---- linear, dropout
    "linear": ("(input, weight, bias=None)", ""),
    "bilinear": ("(input1, input2, weight, bias=None)", ""),
    "dropout": ("(input, p=0.5, training=True, inplace=False)", "masks from MXNet's RNG; " + _INPLACE),
    "dropout1d": ("(input, p=0.5, training=True, inplace=False)", "masks from MXNet's RNG; " + _INPLACE),
    "dropout2d": ("(input, p=0.5, training=True, inplace=False)", "masks from MXNet's RNG; " + _INPLACE),
    "dropout3d": ("(input, p=0.5, training=True, inplace=False)", "masks from MXNet's RNG; " + _INPLACE),
    "alpha_dropout": ("(input, p=0.5, training=False, inplace=False)", "masks from MXNet's RNG; " + _INPLACE),
    # ---- convolution and pooling
    "conv1d": ("(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)",
               "NDArrays only (MXNet's Convolution needs the kernel size): hybridized, use nn.Conv1d"),
    "conv2d": ("(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)",
               "NDArrays only (MXNet's Convolution needs the kernel size): hybridized, use nn.Conv2d"),
    "conv3d": ("(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)",
               "NDArrays only (MXNet's Convolution needs the kernel size): hybridized, use nn.Conv3d"),
    **{f"conv_transpose{n}d": ("(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)",
                               f"NDArrays only (MXNet's Deconvolution needs the kernel size): hybridized, use "
                               f"nn.ConvTranspose{n}d") for n in (1, 2, 3)},
    "avg_pool1d": ("(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True)", ""),
    "avg_pool2d": ("(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, "
                   "divisor_override=None)", ""),
    "avg_pool3d": ("(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, "
                   "divisor_override=None)", ""),
    "max_pool1d": ("(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)",
                   "return_indices refused"),
    "max_pool2d": ("(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)",
                   "return_indices refused"),
    "max_pool3d": ("(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)",
                   "return_indices refused"),
    "lp_pool1d": ("(input, norm_type, kernel_size, stride=None, ceil_mode=False)", ""),
    "lp_pool2d": ("(input, norm_type, kernel_size, stride=None, ceil_mode=False)", ""),
    "lp_pool3d": ("(input, norm_type, kernel_size, stride=None, ceil_mode=False)", ""),
    "adaptive_avg_pool1d": ("(input, output_size)", "contrib.AdaptiveAvgPooling2D (torch's bins)"),
    "adaptive_avg_pool2d": ("(input, output_size)", "contrib.AdaptiveAvgPooling2D (torch's bins)"),
    "adaptive_avg_pool3d": ("(input, output_size)", "contrib.AdaptiveAvgPooling2D (torch's bins)"),
    "adaptive_max_pool1d": ("(input, output_size, return_indices=False)", "ROIPooling; return_indices refused"),
    "adaptive_max_pool2d": ("(input, output_size, return_indices=False)", "ROIPooling; return_indices refused"),
    "adaptive_max_pool3d": ("(input, output_size, return_indices=False)", "ROIPooling; return_indices refused"),
    # ---- normalisation
    "batch_norm": ("(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, "
                   "eps=1e-05)", "written out; running statistics updated in place on NDArrays only"),
    "instance_norm": ("(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, "
                      "momentum=0.1, eps=1e-05)", "written out; running statistics updated on NDArrays only"),
    "layer_norm": ("(input, normalized_shape, weight=None, bias=None, eps=1e-05)", "written out"),
    "group_norm": ("(input, num_groups, weight=None, bias=None, eps=1e-05)", "written out"),
    "rms_norm": ("(input, normalized_shape, weight=None, eps=None)",
                 "eps=None: the dtype's epsilon, found in the graph on Symbols"),
    "local_response_norm": ("(input, size, alpha=0.0001, beta=0.75, k=1.0)", ""),
    # ---- attention
    "scaled_dot_product_attention": ("(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, "
                                     "*, scale=None, enable_gqa=False)",
                                     "written out (matmul, softmax); hybridized, a bool attn_mask must be "
                                     "passed as float (a Symbol has no dtype); enable_gqa refused"),
}

#: torch.nn.functional names not written once yet, and what to use instead
NOT_WRITTEN: Dict[str, str] = {
    **dict.fromkeys(["fractional_max_pool2d", "fractional_max_pool3d"], "use dualdl.nn.FractionalMaxPool2d/3d"),
    "embedding_bag": "use dualdl.nn.EmbeddingBag",
    **dict.fromkeys(["unfold", "fold", "grid_sample", "affine_grid", "feature_alpha_dropout", "pdist",
                     "multi_head_attention_forward"],
                    "no MXNet implementation in dualdl yet"),
}
