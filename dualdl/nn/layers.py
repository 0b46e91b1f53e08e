"""The built-in layers. Each class is a declaration: instantiating it returns the active backend's
native implementation (``torch.nn.Linear`` subclass on torch, a Gluon ``HybridBlock`` on MXNet)
with PyTorch's signature, parameter names, shapes and default initialisation on both.

``isinstance(layer, dualdl.nn.Linear)`` holds for either backend's Linear.
"""
from __future__ import annotations

from typing import Union

from .declaration import Declaration, layer
from .layer_docs import TORCH_DOCS
from .module import Module

# The one registry: name -> declaration (PyTorch 2.13's signature, what MXNet does differently and
# where dualdl departs from torch's signature, a small example call). See docs/concepts.md "One
# contract" and "Adding a layer". Each adapter's class of that name registers itself (its layer
# base's __init_subclass__, dualdl/nn/registry.py); docs/models.md's layer table is generated from
# this dict, in its order (tests/layer_docs_gen.py). An entry may still be a plain string (the MXNet
# difference only): built without binding, and the contract test (tests/test_layer_contract.py)
# fails until it is declared.
_LAYOUT = {"batch_first": "None (default): from layout=, else False as torch",
           "layout": "'NTC'/'TNC' (Gluon's names) instead of batch_first"}
LAYERS = {
    "Linear": layer(
        'in_features, out_features, bias=True, device=None, dtype=None',
        "Gluon Dense flattens non-batch axes by default and infers in_units lazily; "
        "Linear applies to the last axis and creates its weight (out, in) at once.",
        example=(3, 4)),
    "Conv1d": layer(
        "in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode='zeros', device=None, dtype=None",
        "F.Convolution with torch's weight (out, in/groups, k) and U(+-1/sqrt(fan_in)) init; padding='same'"
        " with an even kernel crops MXNet's symmetric padding; padding_mode 'zeros', 'reflect' and "
        "'replicate' (via F.pad; 1.2e-7 from torch.nn.Conv1d), 'circular' raises on MXNet.",
        example=(2, 3, 3)),
    "Conv2d": layer(
        "in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode='zeros', device=None, dtype=None",
        "F.Convolution (NCHW) with torch's weight layout and init (Gluon: Uniform(0.07), zero bias); "
        "padding='same' handled as Conv1d; unbatched (C, H, W) input runs as a batch of one.",
        example=(2, 3, 3)),
    "MaxPool1d": layer(
        'kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False',
        "ceil_mode=True: MXNet's 'full' convention adds a last window starting in the right padding (torch "
        "drops it) and its MKLDNN backward can fail; dualdl pads explicitly (-inf) instead. MXNet's max "
        "pooling skips NaN where torch's propagates it "
        "(docs/differences.md#mxnet-max-pooling-drops-nan-and-relus-mkldnn-form)."),
    "MaxPool2d": layer(
        'kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False',
        "ceil_mode as MaxPool1d (MXNet's extra row/column holds -3.4e38); dilation and return_indices (torch's "
        "flat spatial index; Pooling has neither) by windows sliced from the -inf padded input, first maximum "
        "picked by argmax (NaN propagates there). "
        "MKLDNN's backward is wrong under record(train_mode=False): pooled in float64 then "
        "(non-hybridized only)."),
    "AvgPool1d": layer(
        'kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True',
        "ceil_mode=True: besides the extra window, MXNet's backward divides a clipped window by the "
        "full kernel (0.17-0.25 off); dualdl uses explicit padding + sum pooling / counted elements."),
    "AvgPool2d": layer(
        'kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None',
        "ceil_mode as AvgPool1d; count_include_pad as torch; divisor_override (Pooling has none) = sum "
        "pooling / divisor."),
    "AdaptiveAvgPool2d": layer(
        'output_size',
        "(1, 1) is a global mean; other sizes use contrib.AdaptiveAvgPooling2D (torch's bins); a None output "
        "size keeps that axis (the other pooled alone, hybridized too)."),
    "Conv3d": layer(
        "in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True, padding_mode='zeros', device=None, dtype=None",
        "F.Convolution (NCDHW) with torch's weight layout (out, in/groups, kd, kh, kw) and init; padding "
        "('same', reflect/replicate via 5-d F.pad) as Conv2d.",
        example=(2, 3, 3)),
    "ConvTranspose1d": layer(
        "in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros', device=None, dtype=None",
        "F.Deconvolution, same weight layout (in, out/groups, k), adj = output_padding; torch's init (fan_in "
        '= out/groups * k; Gluon: Uniform(0.07)). MXNet refuses adj >= stride (torch allows output_padding < '
        'max(stride, dilation)) and its float64 Deconvolution is wrong with stride > 1 and dilation > 1 (7.1 '
        "off): both run as a stride-1 deconvolution of the zero-interleaved input, cropped to torch's window.",
        example=(2, 3, 3)),
    "ConvTranspose2d": layer(
        "in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1, padding_mode='zeros', device=None, dtype=None",
        "As ConvTranspose1d (NCHW). forward(x, output_size=) as torch (eager and hybridized); MXNet's "
        'target_shape is fixed per layer and refuses sizes that need output_padding > padding.',
        example=(2, 3, 3)),
    "MaxPool3d": layer(
        'kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False',
        "As MaxPool2d on NCDHW (ceil_mode via explicit -inf padding, dilation/return_indices by window slices; "
        "MKLDNN's eval-mode backward quirk "
        'measured here too, 2.0-5.7 off hybridized).'),
    "AvgPool3d": layer(
        'kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None',
        'As AvgPool2d on NCDHW (ceil_mode via sum pooling / counted elements; divisor_override: sum / divisor).'),
    "AdaptiveAvgPool1d": layer(
        'output_size',
        "MXNet has no 1-d adaptive pooling: contrib.AdaptiveAvgPooling2D on (N, C, 1, L) (torch's bins)."),
    "AdaptiveMaxPool1d": layer(
        'output_size, return_indices=False',
        "MXNet has no adaptive max pooling: ROIPooling with one whole-map region per sample has torch's bins "
        '(exact, incl. overlapping and upsampling bins); no return_indices.'),
    "AdaptiveMaxPool2d": layer(
        'output_size, return_indices=False',
        'As AdaptiveMaxPool1d (NCHW); a None output size keeps that axis (the other pooled alone, hybridized '
        'too); no return_indices.'),
    "BatchNorm1d": layer(
        'num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *, bias=True',
        "Gluon: gamma/beta, momentum 0.9 = weight of the old value, stats updated in backward with the "
        "biased variance, mode from autograd.record(). Here torch's semantics (non-hybridized); momentum=None "
        "is torch's cumulative average (1 / the batches counted since construction, eager or in a dualdl "
        "graph; the count is in no state dict, as num_batches_tracked, and refused under a native "
        "hybridized Gluon parent). An empty batch is refused on both, train and eval (torch returns an "
        "empty output; MXNet cannot run one).",
        example=(3,)),
    "BatchNorm2d": layer(
        'num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *, bias=True',
        "As BatchNorm1d. Hybridized: F.BatchNorm(momentum=1-m), running var unbiased as torch's (1.2e-7 "
        "after one step); the running stats are updated by the fused op at backward, only inside "
        "autograd.record(). Fast forms (dualdl_mx/fast, off with `DUALDL_MX_FAST=0`): in a `Sequential`, a "
        "BatchNorm followed by `ReLU` (no hooks on either) computes the relu in its kernel's pass on CPU: the same numbers bit for bit on finite inputs, torch's "
        "gradient at NaN. A `MaxPool2d` after that ReLU with windows that do not overlap (stride = kernel, "
        "no padding, floor) joins the same pass: bit for bit the separate layers on finite inputs, torch's "
        "NaN (where MXNet's pooling drops it).",
        example=(3,)),
    "LayerNorm": layer(
        'normalized_shape, eps=1e-05, elementwise_affine=True, bias=True, device=None, dtype=None',
        "Gluon LayerNorm takes one axis and gamma/beta; here weight/bias over normalized_shape. float64: the "
        "two-pass formula (MXNet's fused op keeps float32 precision there: 1.6e-8 off torch, measured). An "
        "empty input is refused on both (torch returns an empty output; MXNet cannot run one).",
        example=(4,)),
    "BatchNorm3d": layer(
        'num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *, bias=True',
        "As BatchNorm1d/2d on (N, C, D, H, W) (Gluon: BatchNorm(axis=1) on 5-d input); 5.7e-6 (rel 3.5e-7) "
        "from torch.nn.BatchNorm3d in float32.",
        example=(3,)),
    "GroupNorm": layer(
        'num_groups, num_channels, eps=1e-05, affine=True, device=None, dtype=None, *, bias=True',
        "MXNet 1.9's GroupNorm op and Gluon block have gamma/beta of shape (num_groups,), one per group "
        "(measured); here torch's weight/bias (C,). Statistics in float64, cast back: at mean 1000 / std "
        "0.1, 3.1e-8 (rel) from float64 where torch's float32 kernel is 2.2e-4 off. Batched (N, C, *) only;"
        " an empty batch is refused on both. The price, as measured on a shared 2-core CPU with 1 thread: "
        "forward + backward of GroupNorm(8, 32) on (16, 32, 16, 16) 28 ms hybridized, 41 ms eager, torch "
        "1.6 ms (InstanceNorm2d(32, affine=True): 35 / 60 / 3.2 ms).",
        example=(2, 4)),
    "InstanceNorm1d": layer(
        'num_features, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False, device=None, dtype=None, *, bias=True',
        "Gluon InstanceNorm: beta learnt (center=True), gamma fixed at 1 (scale=False), no running stats "
        "(measured); here torch's affine=False, track_running_stats=False defaults, and with "
        "track_running_stats=True torch's running stats (instance means and unbiased variances averaged "
        "over the batch), used in eval mode. Hybridized, updated in forward at each call as eager (the graph "
        "outputs torch's update, as BatchNorm's). (N, C, L) or unbatched (C, L) as torch; without weight and "
        "running stats another channel count is normalised with torch's warning (refused with them, where "
        "torch raises); momentum=None is torch's 0.0 (running stats kept). An empty batch is refused on both "
        "(torch returns an empty output; MXNet cannot run one).",
        example=(3, 1e-05, 0.1, True)),
    "InstanceNorm2d": layer(
        'num_features, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False, device=None, dtype=None, *, bias=True',
        "As InstanceNorm1d on (N, C, H, W) or (C, H, W); float64 statistics as GroupNorm (at mean 1000 / "
        "std 0.1: 3.1e-8 rel, torch 1.7e-4).",
        example=(3, 1e-05, 0.1, True)),
    "Dropout": layer(
        'p=0.5, inplace=False',
        "Gluon Dropout is active only inside autograd.record(); here module.train()/eval() decides."),
    "Embedding": layer(
        'num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None',
        "Gluon clips out-of-range and accepts float indices, init U(+-0.07), no padding_idx, no max_norm; "
        "here IndexError/TypeError, N(0,1), padding_idx row zero with no gradient, `max_norm`/`norm_type` "
        "renormalise the looked-up rows in place outside autograd as torch (same output and weight as torch"
        " to 1e-6, tests/test_contract_divergences.py; eager or the Embedding hybridized alone, refused "
        "inside a hybridized parent, whose cached graph cannot renormalise); `sparse=True` and "
        "`scale_grad_by_freq=True` are refused on MXNet.",
        example=(6, 4)),
    "Flatten": layer(
        'start_dim=1, end_dim=-1',
        "Gluon Flatten keeps axis 0 only; here start_dim/end_dim (hybridized: end_dim -1 or >= 0)."),
    "Identity": layer(
        '*args, **kwargs',
        "Gluon has no Identity block (returns the input)."),
    "ReLU": layer(
        'inplace=False',
        "Gluon: Activation('relu'), which maps NaN to 0 in MKLDNN; here NaN is kept, as torch. On float32 "
        "feature maps (3+ dims eager; in a graph, after a Convolution, BatchNorm, Pooling or activation; "
        "also `ops.relu`) its fast form (off with `DUALDL_MX_FAST=0`) is MKLDNN's ELU with slope -0.0, which keeps the convolution's layout, with torch's"
        " values and input gradients (1 at NaN) except gradient 0 for 0 < x <= 6e-8 (torch: 1); zeros may "
        "differ in sign. Elsewhere MXNet's relu op (gradient NaN at NaN). In a graph, a relu output that "
        "goes into a max pooling runs MKLDNN's Activation on that path, and so does a Sequential's ReLU "
        "before its MaxPool: the pooling skips NaN anyway; an all-NaN window pools to 0 "
        "(docs/differences.md#mxnet-max-pooling-drops-nan-and-relus-mkldnn-form). `DUALDL_MX_EXACT_RELU=1` "
        "keeps the relu op everywhere (tests/test_mx_relu.py, tests/test_mx_relu_graph.py, "
        "tests/test_mx_relu_pool.py)."),
    "Sigmoid": layer(
        '',
        "Gluon: Activation('sigmoid')."),
    "Tanh": layer(
        '',
        "Gluon: Activation('tanh')."),
    "GELU": layer(
        "approximate='none'",
        "Gluon GELU is erf only; approximate='tanh' is computed from its formula (they differ by <= 1e-3). "
        "MXNet's LeakyReLU operator keeps float32 precision in float64, so float64 uses the exact formula "
        "(the dtype from the input, or from the layer's cast() inside a graph); float32 keeps MXNet's operator."),
    "LeakyReLU": layer(
        'negative_slope=0.01, inplace=False',
        "Gluon LeakyReLU(alpha) has no default; torch's negative_slope=0.01. MXNet's LeakyReLU operator "
        "keeps float32 precision in float64, so float64 uses the exact formula (the dtype from the input, "
        "or from the layer's cast() inside a graph); float32 keeps MXNet's operator."),
    "ELU": layer(
        'alpha=1.0, inplace=False',
        "Gluon ELU(alpha=1.0); same formula. MXNet's LeakyReLU operator keeps float32 precision in float64, "
        "so float64 uses the exact formula (the dtype from the input, or from the layer's cast() inside a "
        "graph); float32 keeps MXNet's operator."),
    "SiLU": layer(
        'inplace=False',
        "Gluon Swish(beta=1.0); x * sigmoid(x)."),
    "Softmax": layer(
        'dim=None',
        "MXNet softmax(axis=-1); torch's dim (None: torch's legacy implicit dim, NDArray only)."),
    "LogSoftmax": layer(
        'dim=None',
        "MXNet log_softmax(axis=-1) is off by up to 3.5e-6 (torch 1.8e-7): computed from its formula; on "
        "CPU NDArrays in float64 by dualdl's `dl_log_softmax` kernel (one rounding from the float64 "
        "result)."),
    "Sequential": layer(
        '*args',
        "Gluon (Hybrid)Sequential uses add(); here Sequential(*modules) or an OrderedDict, children "
        "'0', '1', ..., torch's indexing/append/insert."),
    "ModuleList": layer(
        'modules=None',
        "Gluon has none (a list plus register_child); children '0', '1', ..., not callable."),
    "ModuleDict": layer(
        'modules=None',
        "Gluon has none; children named by key, not callable."),
    "MultiheadAttention": layer(
        'embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None',
        "Gluon/gluonnlp keep separate query/key/value Dense layers without bias and a 0/1 "
        "mask; here torch's packed in_proj_weight (3E, E) (q/k/v_proj_weight when kdim/vdim differ), "
        "bias_k/bias_v, zero attention, additive float or bool masks, unbatched (L, E) inputs, "
        "masked scores -1e18 (finite) on both backends.",
        example=(4, 2)),
    "TransformerEncoderLayer": layer(
        "d_model, nhead, dim_feedforward=2048, dropout=0.1, activation='relu', layer_norm_eps=1e-05, batch_first=None, norm_first=False, bias=True, device=None, dtype=None, layout=None",
        "gluonnlp: NTC input, dropout 0.0, no q/k/v/proj bias, dropout after ffn_2 only; "
        "here torch's layer (TNC default, dropout 0.1 on both, packed attention); "
        "key padding mask (True = pad; torch's numbers) or valid_length (padded outputs are 0); "
        "unbatched (T, E) inputs.",
        dualdl={"activation": "torch's default is the function F.relu; the name 'relu' selects the same "
                               "function; MXNet runs 'relu'/'gelu', F.relu/F.gelu and dl.ops.relu/gelu",
                **_LAYOUT},
        example=(4, 2, 8)),
    "TransformerEncoder": layer(
        'encoder_layer, num_layers, norm=None, enable_nested_tensor=False, mask_check=True',
        "gluonnlp's encoder also scales x by sqrt(units), adds its PE and an input LayerNorm; "
        "here torch's stack of copies of one layer (+ optional norm); padded outputs are 0 with "
        "valid_length; torch takes torch.nn's own layer too.",
        dualdl={"enable_nested_tensor": "False: torch's nested-tensor fast path is off (it zeroes padded "
                                         "outputs), so padded outputs are torch's reference path's on both "
                                         "backends"}),
    "TransformerDecoderLayer": layer(
        "d_model, nhead, dim_feedforward=2048, dropout=0.1, activation='relu', layer_norm_eps=1e-05, batch_first=None, norm_first=False, bias=True, device=None, dtype=None, layout=None",
        "gluonnlp's TransformerDecoderCell: NTC, no q/k/v/proj bias, dropout 0.0, its own cell names "
        "(attention_cell_in/inter, proj_in/inter, ffn) and 0/1 masks; here torch's layer (self_attn, "
        'multihead_attn, linear1/2, norm1-3), TNC default; bit-identical to torch.nn on torch, MXNet <= '
        '1.1e-5 (float32); unbatched (T, E) inputs.',
        dualdl={"activation": "torch's default is the function F.relu; the name 'relu' selects the same "
                               "function; MXNet runs 'relu'/'gelu', F.relu/F.gelu and dl.ops.relu/gelu",
                **_LAYOUT},
        example=(4, 2, 8)),
    "TransformerDecoder": layer(
        'decoder_layer, num_layers, norm=None',
        "gluonnlp's decoder adds scale+PE+dropout+input LayerNorm itself, takes valid lengths, zeroes padded "
        "steps and carries one-step decoding states; here torch's stack of copies (+ optional norm), full "
        "sequences with tgt_mask, no states (gluonnlp's decoder rebuilt: 3.6e-7 torch, 0.0 MXNet)."),
    "Transformer": layer(
        "d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048, dropout=0.1, activation='relu', custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-05, batch_first=False, norm_first=False, bias=True, device=None, dtype=None",
        "gluonnlp has no single block (its NMT model wires encoder, decoder, embeddings and output layer); "
        "here torch.nn.Transformer: encoder/decoder with final norms, xavier init, "
        "`generate_square_subsequent_mask`; unbatched (S, E)/(T, E) inputs.",
        dualdl={"activation": "torch's default is the function F.relu; the name 'relu' selects the same "
                               "function; MXNet runs 'relu'/'gelu', F.relu/F.gelu and dl.ops.relu/gelu"},
        example=(4, 2, 1, 1, 8)),
    "PositionalEncoding": layer(
        "d_model, max_len=5000, dropout=0.0, style='vaswani', scale=False, batch_first=None, layout=None",
        "gluonnlp's sinusoid uses angle pos/10000^(2j/d) with j the column index (style="
        "'gluonnlp'); style='vaswani' is the standard table. Raises past max_len (gluonnlp clamps).",
        torch=False, doc=(
            "Adds a sinusoidal positional encoding to a sequence (optionally scaled by sqrt(d_model) "
            "first), then dropout.",
            "Args:\n"
            "    d_model: the number of expected features in the input\n"
            "    max_len: the longest sequence; a longer one raises. Default: 5000\n"
            "    dropout: the dropout value applied after the addition. Default: 0.0\n"
            "    style: 'vaswani' (the standard table) or 'gluonnlp' (gluonnlp 0.10's). Default: 'vaswani'\n"
            "    scale: multiply the input by sqrt(d_model) before adding. Default: False\n"
            "    batch_first: (batch, seq, feature) if True, else (seq, batch, feature). Default: None\n"
            "    layout: 'NTC' or 'TNC' instead of batch_first. Default: None (TNC)\n\n"
            "Shape:\n"
            "    - Input: (T, N, d_model), or (N, T, d_model) with batch_first=True\n"
            "    - Output: the shape of the input")),
    "LSTM": layer(
        'input_size, hidden_size, num_layers=1, bias=True, batch_first=None, dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None, layout=None',
        "Gluon returns only the output without a state and a list of states with one; names l0_i2h_weight, "
        "init Uniform(0.07)/zero bias. Here (output, (h, c)) always, torch's names/init; layout= or "
        "batch_first=; `proj_size > 0` (torch's LSTMP, weight_hr_l{k}) runs step by step on MXNet (its "
        "fused projection is wrong on CPU); unbatched (T, C) inputs.",
        dualdl=_LAYOUT,
        example=(3, 4)),
    "GRU": layer(
        'input_size, hidden_size, num_layers=1, bias=True, batch_first=None, dropout=0.0, bidirectional=False, device=None, dtype=None, layout=None',
        "As LSTM (gates r, z, n in both); state h. Dropout between layers follows train()/eval().",
        dualdl=_LAYOUT,
        example=(3, 4)),
    "RNN": layer(
        "input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=None, dropout=0.0, bidirectional=False, device=None, dtype=None, layout=None",
        "Gluon RNN defaults to relu; here nonlinearity='tanh' as torch; (output, h) always; relu in "
        "float64 runs step by step on MXNet (its fused relu op has float32 precision).",
        dualdl=_LAYOUT,
        example=(3, 4)),
    "LSTMCell": layer(
        'input_size, hidden_size, bias=True, device=None, dtype=None',
        "Gluon LSTMCell returns (out, [h, c]) with i2h_/h2h_ names; here (h, c) and torch's names.",
        example=(3, 4)),
    "GRUCell": layer(
        'input_size, hidden_size, bias=True, device=None, dtype=None',
        "Gluon GRUCell returns (out, [h]); here h' and torch's names (gates r, z, n in both).",
        example=(3, 4)),
    "RNNCell": layer(
        "input_size, hidden_size, bias=True, nonlinearity='tanh', device=None, dtype=None",
        "Gluon RNNCell's activation is required; here nonlinearity='tanh' as torch; returns h'.",
        example=(3, 4)),
    "PReLU": layer(
        'num_parameters=1, init=0.25, device=None, dtype=None',
        "Gluon PReLU names its slope alpha (init 0.25, lazily shaped); here torch's weight (num_parameters,),"
        " one slope or one per channel (dim 1), via LeakyReLU(act_type='prelu')."),
    "ReLU6": layer(
        'inplace=False',
        'Gluon has no ReLU6 block; clip(x, 0, 6).'),
    "Hardswish": layer(
        'inplace=False',
        'Gluon/MXNet 1.x have no hard-swish; x * clip(x + 3, 0, 6) / 6 as torch.'),
    "Hardsigmoid": layer(
        'inplace=False',
        "MXNet's hard_sigmoid defaults to alpha=0.2 (x/5 + 0.5; torch x/6 + 0.5: 0.083 off at x = 2.5); here "
        'clip(x + 3, 0, 6) / 6.'),
    "Softplus": layer(
        'beta=1.0, threshold=20.0',
        "MXNet's Activation('softrelu') has no beta/threshold; here log1p(exp(beta x)) / beta, x above the "
        'threshold (finite gradients for large x).'),
    "Mish": layer(
        'inplace=False',
        'MXNet 1.x has no mish; x * tanh(softplus(x)).'),
    "Dropout1d": layer(
        'p=0.5, inplace=False',
        'Channel dropout (one mask value per (N, C), MXNet Dropout(axes=...)); train()/eval() decides as '
        'Dropout; p = 1 gives zeros (MXNet: NaN).'),
    "Dropout2d": layer(
        'p=0.5, inplace=False',
        'As Dropout1d for (N, C, H, W); a 3-D input is (N, C, L) as torch 2.13 takes it.'),
    "Upsample": layer(
        "size=None, scale_factor=None, mode='nearest', align_corners=None, recompute_scale_factor=None",
        "No Gluon block; MXNet's BilinearResize2D defaults to align_corners=True (torch False, 0.08-0.55 off)"
        " and computes its weights in float32, UpSampling takes integer scales of 4-D input only: "
        "dualdl.nn.functional.interpolate (eager every mode but bicubic, 3-D to 5-D, torch's weights; "
        "hybridized, 4-D nearest by one integer scale_factor, bilinear, 3-D linear)."),
    "PixelShuffle": layer(
        'upscale_factor',
        "No Gluon block in MXNet 1.x; reshape + transpose (torch's channel order)."),
    "ZeroPad2d": layer(
        'padding',
        "No Gluon block (legacy pad is 4-D/5-D only, no cropping): dualdl_mx.padding.pad_last, MXNet's pad on a"
        ' shape-free 4-D view, any rank >= 2 as torch; negative sides crop (slice_axis).'),
    "ReflectionPad2d": layer(
        'padding',
        "No Gluon block (legacy pad is 4-D/5-D only, no cropping): dualdl_mx.padding.pad_last, MXNet's pad"
        " mode 'reflect', batched or unbatched, each pad smaller than its dim; negative sides crop (slice_axis)."),
    "Unflatten": layer(
        'dim, unflattened_size',
        "No Gluon block; reshape (hybridized: reshape's -4 split codes, dim >= 0)."),
    "EmbeddingBag": layer(
        "num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None, dtype=None",
        "Gluon has no EmbeddingBag (Gluon users write Embedding + sum/mean); here torch's: 2-D (B, N) or 1-D "
        '+ offsets (MXNet: padded from the offsets read on the host, so not on Symbols), sum/mean/max, '
        'per_sample_weights (sum), empty bags 0, padding_idx left out, max_norm in place (MXNet: NDArray '
        'input); scale_grad_by_freq/sparse refused on MXNet. Parity table (18 rows): MXNet <= 4.8e-7 float32,'
        ' 8.9e-16 float64, eager and hybridized.',
        example=(6, 4)),
}

# the families declared in their own files (one file per family of layers added together)
for _family in ("activation", "padding", "conv_pool", "norm_linear"):
    LAYERS.update(__import__(f"{__package__}.layers_{_family}", fromlist=["LAYERS"]).LAYERS)


def _doc(name: str, decl: Declaration) -> str:
    summary, sections = TORCH_DOCS.get(name, decl.doc)
    own = "".join(f"\n    {k}: {v}" for k, v in decl.dualdl.items())
    return (f"{summary or 'dualdl.nn.' + name}\n\n``{name}({decl.signature})``"
            + (" (torch.nn's signature)" if decl.torch else " (dualdl's own layer)")
            + (f"\n\n{sections}" if sections else "")
            + (f"\n\nWhere dualdl departs from torch's signature:{own}" if own else "")
            + f"\n\nOn MXNet: {decl.mxnet}\n")


def _declare(name: str, decl: Union[Declaration, str]) -> type:
    if isinstance(decl, str):   # not declared yet (only the MXNet difference): built without binding
        return type(name, (Module,), {"_dl_layer": name, "__doc__": f"On MXNet: {decl}", "__module__": __name__})
    sig = decl.compile(name)[0]  # fail at import on a bad signature; bound calls reuse the cache
    return type(name, (Module,), {"_dl_layer": name, "_dl_decl": decl, "__doc__": _doc(name, decl),
                                  "__module__": __name__, "__signature__": sig})


globals().update({name: _declare(name, decl) for name, decl in LAYERS.items()})

def _generate_square_subsequent_mask(sz: int, device=None, dtype=None, backend=None):
    """torch.nn.Transformer.generate_square_subsequent_mask on the active backend (or ``backend=``):
    a native (sz, sz) float tensor, -inf above the diagonal, 0 elsewhere."""
    from ..backend import get_backend
    native = get_backend(backend).module("nn").Transformer
    return native.generate_square_subsequent_mask(sz, device=device, dtype=dtype)


globals()["Transformer"].generate_square_subsequent_mask = staticmethod(_generate_square_subsequent_mask)
__all__ = sorted(LAYERS)
