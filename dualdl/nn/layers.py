"""The built-in layers. Each class is a declaration: instantiating it returns the active backend's
native implementation (``torch.nn.Linear`` subclass on torch, a Gluon ``HybridBlock`` on MXNet)
with PyTorch's signature, parameter names, shapes and default initialisation on both.

``isinstance(layer, dualdl.nn.Linear)`` holds for either backend's Linear.
"""
from __future__ import annotations

from .module import Module

# name -> what MXNet does differently that the MXNet implementation hides
LAYERS = {
    "Linear": "Gluon Dense flattens non-batch axes by default and infers in_units lazily; "
              "Linear applies to the last axis and creates its weight (out, in) at once.",
    "Conv1d": "F.Convolution with torch's weight (out, in/groups, k) and U(+-1/sqrt(fan_in)) init; "
              "padding='same' with an even kernel crops MXNet's symmetric padding; padding_mode 'reflect'/"
              "'replicate' via F.pad ('circular' unsupported).",
    "Conv2d": "F.Convolution (NCHW) with torch's weight layout and init (Gluon: Uniform(0.07), zero bias); "
              "padding='same' handled as Conv1d; batched input only.",
    "MaxPool1d": "ceil_mode=True: MXNet's 'full' convention adds a last window starting in the right padding "
                 "(torch drops it) and its MKLDNN backward can fail; dualdl pads explicitly (-inf) instead.",
    "MaxPool2d": "ceil_mode as MaxPool1d (MXNet's extra row/column holds -3.4e38); no dilation/return_indices. "
                 "MKLDNN's backward is wrong under record(train_mode=False): pooled in float64 then "
                 "(non-hybridized only).",
    "AvgPool1d": "ceil_mode=True: besides the extra window, MXNet's backward divides a clipped window by the "
                 "full kernel (0.17-0.25 off); dualdl uses explicit padding + sum pooling / counted elements.",
    "AvgPool2d": "ceil_mode as AvgPool1d; count_include_pad as torch; no divisor_override.",
    "AdaptiveAvgPool2d": "(1, 1) is a global mean; other sizes use contrib.AdaptiveAvgPooling2D (torch's bins).",
    "BatchNorm1d": "Gluon: gamma/beta, momentum 0.9 = weight of the old value, stats updated in backward with the "
                   "biased variance, mode from autograd.record(). Here torch's semantics (non-hybridized).",
    "BatchNorm2d": "As BatchNorm1d. Hybridized, the running stats (torch's values) are updated by the fused op "
                   "at backward inside autograd.record() only.",
    "BatchNorm3d": "As BatchNorm1d/2d on (N, C, D, H, W) (Gluon: BatchNorm(axis=1) on 5-d input).",
    "GroupNorm": "MXNet 1.9's GroupNorm op/Gluon block: gamma/beta of shape (num_groups,), not per channel; "
                 "here torch's weight/bias (C,), statistics in float64 (float32 rounding parity).",
    "InstanceNorm1d": "Gluon InstanceNorm: beta (center=True), gamma fixed at 1 (scale=False), no running stats; "
                      "here torch's affine=False, track_running_stats=False defaults, running stats as torch's.",
    "InstanceNorm2d": "As InstanceNorm1d on (N, C, H, W).",
    "LayerNorm": "Gluon LayerNorm takes one axis and gamma/beta; here weight/bias over normalized_shape.",
    "Dropout": "Gluon Dropout is active only inside autograd.record(); here module.train()/eval() decides.",
    "Embedding": "Gluon clips out-of-range and accepts float indices, init U(+-0.07), no padding_idx; "
                 "here IndexError/TypeError, N(0,1), padding_idx row zero with no gradient.",
    "Flatten": "Gluon Flatten keeps axis 0 only; here start_dim/end_dim (hybridized: end_dim -1 or >= 0).",
    "Identity": "Gluon has no Identity block (returns the input).",
    "ReLU": "Gluon: Activation('relu').",
    "Sigmoid": "Gluon: Activation('sigmoid').",
    "Tanh": "Gluon: Activation('tanh').",
    "GELU": "Gluon GELU is erf only; approximate='tanh' is computed from its formula (they differ by <= 1e-3).",
    "LeakyReLU": "Gluon LeakyReLU(alpha) has no default; torch's negative_slope=0.01.",
    "ELU": "Gluon ELU(alpha=1.0); same formula.",
    "SiLU": "Gluon Swish(beta=1.0); x * sigmoid(x).",
    "Softmax": "MXNet softmax(axis=-1); torch's dim (None: torch's legacy implicit dim, NDArray only).",
    "LogSoftmax": "MXNet log_softmax(axis=-1) is off by up to 3.5e-6 (torch 1.8e-7): computed from its formula.",
    "Sequential": "Gluon (Hybrid)Sequential uses add(); here Sequential(*modules) or an OrderedDict, children "
                  "'0', '1', ..., torch's indexing/append/insert.",
    "ModuleList": "Gluon has none (a list plus register_child); children '0', '1', ..., not callable.",
    "ModuleDict": "Gluon has none; children named by key, not callable.",
    "MultiheadAttention": "Gluon/gluonnlp keep separate query/key/value Dense layers without bias and a 0/1 "
                          "mask; here torch's packed in_proj_weight (3E, E), additive float or bool masks, "
                          "masked scores -1e18 (finite) on both backends.",
    "TransformerEncoderLayer": "gluonnlp: NTC input, dropout 0.0, no q/k/v/proj bias, dropout after ffn_2 only; "
                               "here torch's layer (TNC default, dropout 0.1 on both, packed attention); "
                               "key padding mask (True = pad) or valid_length; padded outputs are 0.",
    "TransformerEncoder": "gluonnlp's encoder also scales x by sqrt(units), adds its PE and an input LayerNorm; "
                          "here torch's stack of copies of one layer (+ optional norm); padded outputs are 0.",
    "TransformerDecoderLayer": "gluonnlp's TransformerDecoderCell: NTC, no q/k/v/proj bias, dropout "
                               "0.0, its own cell names (attention_cell_in/inter, proj_in/inter, ffn) "
                               "and 0/1 masks; here torch's layer (self_attn, multihead_attn, "
                               "linear1/2, norm1-3), TNC default; bit-identical to torch.nn on torch, "
                               "MXNet <= 1.1e-5 (float32).",
    "TransformerDecoder": "gluonnlp's decoder adds scale+PE+dropout+input LayerNorm itself, takes "
                          "valid lengths, zeroes padded steps and carries one-step decoding states; "
                          "here torch's stack of copies (+ optional norm), full sequences with "
                          "tgt_mask, no states (gluonnlp's decoder rebuilt: 3.6e-7 torch, 0.0 MXNet).",
    "Transformer": "gluonnlp has no single block (its NMT model wires encoder, decoder, embeddings "
                   "and output layer); here torch.nn.Transformer: encoder/decoder with final norms, "
                   "xavier init, generate_square_subsequent_mask; warns when padded memory is not "
                   "masked (dualdl's encoder zeroes it).",
    "PositionalEncoding": "gluonnlp's sinusoid uses angle pos/10000^(2j/d) with j the column index (style="
                          "'gluonnlp'); style='vaswani' is the standard table. Raises past max_len (gluonnlp clamps).",
    "LSTM": "Gluon returns only the output without a state and a list of states with one; names l0_i2h_weight, "
            "init Uniform(0.07)/zero bias. Here (output, (h, c)) always, torch's names/init; layout= or batch_first=.",
    "GRU": "As LSTM (gates r, z, n in both); state h. Dropout between layers follows train()/eval().",
    "RNN": "Gluon RNN defaults to relu; here nonlinearity='tanh' as torch; (output, h) always.",
    "LSTMCell": "Gluon LSTMCell returns (out, [h, c]) with i2h_/h2h_ names; here (h, c) and torch's names.",
    "GRUCell": "Gluon GRUCell returns (out, [h]); here h' and torch's names (gates r, z, n in both).",
    "RNNCell": "Gluon RNNCell's activation is required; here nonlinearity='tanh' as torch; returns h'.",
    "PReLU": "Gluon PReLU names its slope alpha (init 0.25, lazily shaped); here torch's weight (num_parameters,), "
             "one slope or one per channel (dim 1), via LeakyReLU(act_type='prelu').",
    "ReLU6": "Gluon has no ReLU6 block; clip(x, 0, 6).",
    "Hardswish": "Gluon/MXNet 1.x have no hard-swish; x * clip(x + 3, 0, 6) / 6 as torch.",
    "Hardsigmoid": "MXNet's hard_sigmoid defaults to alpha=0.2 (x/5 + 0.5; torch x/6 + 0.5: 0.083 off at x = 2.5); "
                   "here clip(x + 3, 0, 6) / 6.",
    "Softplus": "MXNet's Activation('softrelu') has no beta/threshold; here log1p(exp(beta x)) / beta, x above "
                "the threshold (finite gradients for large x).",
    "Mish": "MXNet 1.x has no mish; x * tanh(softplus(x)).",
    "Dropout1d": "Channel dropout (one mask value per (N, C), MXNet Dropout(axes=...)); train()/eval() decides "
                 "as Dropout; p = 1 gives zeros (MXNet: NaN).",
    "Dropout2d": "As Dropout1d for (N, C, H, W); a 3-D input is (N, C, L) as torch 2.13 takes it.",
    "Upsample": "No Gluon block; MXNet's BilinearResize2D defaults to align_corners=True (torch False, 0.08-0.55 "
                "off) and UpSampling takes integer scales only: dualdl.ops.interpolate (4-D; hybridized, "
                "nearest needs one integer scale_factor).",
    "PixelShuffle": "No Gluon block in MXNet 1.x; reshape + transpose (torch's channel order).",
    "ZeroPad2d": "No Gluon block (legacy pad is 4-D/5-D only); dualdl.ops.pad; negative (cropping) padding refused.",
    "ReflectionPad2d": "No Gluon block; dualdl.ops.pad(mode='reflect'), each pad smaller than its dim.",
    "Unflatten": "No Gluon block; reshape (hybridized: reshape's -4 split codes, dim >= 0).",
    "Conv3d": "F.Convolution (NCDHW) with torch's weight layout (out, in/groups, kd, kh, kw) and init; "
             "padding ('same', reflect/replicate via 5-d F.pad) as Conv2d.",
    "ConvTranspose1d": "F.Deconvolution, same weight layout (in, out/groups, k), adj = output_padding; torch's init "
                      "(fan_in = out/groups * k; Gluon: Uniform(0.07)). MXNet refuses adj >= stride (torch allows "
                      "output_padding < max(stride, dilation)) and its float64 Deconvolution is wrong with stride > "
                      "1 and dilation > 1 (7.1 off): both run as a stride-1 deconvolution of the zero-interleaved "
                      "input, cropped to torch's window.",
    "ConvTranspose2d": "As ConvTranspose1d (NCHW). forward(x, output_size=) as torch (eager and hybridized); MXNet's "
                      "target_shape is fixed per layer and refuses sizes that need output_padding > padding.",
    "MaxPool3d": "As MaxPool2d on NCDHW (ceil_mode via explicit -inf padding; MKLDNN's eval-mode backward "
                "quirk measured here too, 2.0-5.7 off hybridized).",
    "AvgPool3d": "As AvgPool2d on NCDHW (ceil_mode via sum pooling / counted elements); no divisor_override.",
    "AdaptiveAvgPool1d": "MXNet has no 1-d adaptive pooling: contrib.AdaptiveAvgPooling2D on (N, C, 1, L) (torch's "
                        "bins).",
    "AdaptiveMaxPool1d": "MXNet has no adaptive max pooling: ROIPooling with one whole-map region per sample has "
                        "torch's bins (exact, incl. overlapping and upsampling bins); no return_indices.",
    "AdaptiveMaxPool2d": "As AdaptiveMaxPool1d (NCHW); None in output_size unsupported on MXNet.",
    "EmbeddingBag": "Gluon has no EmbeddingBag (Gluon users write Embedding + sum/mean); here torch's: 2-D (B, N) "
                    "or 1-D + offsets (MXNet: padded from the offsets read on the host, so not on Symbols), "
                    "sum/mean/max, per_sample_weights (sum), empty bags 0, padding_idx left out, max_norm in place "
                    "(MXNet: NDArray input); scale_grad_by_freq/sparse refused on MXNet. Parity table (18 rows): "
                    "MXNet <= 4.8e-7 float32, 8.9e-16 float64, eager and hybridized.",
}


def _declare(name: str, doc: str) -> type:
    return type(name, (Module,), {"_dl_layer": name, "__doc__": doc, "__module__": __name__})


globals().update({name: _declare(name, doc) for name, doc in LAYERS.items()})


def _generate_square_subsequent_mask(sz: int, device=None, dtype=None, backend=None):
    """torch.nn.Transformer.generate_square_subsequent_mask on the active backend (or ``backend=``):
    a native (sz, sz) float tensor, -inf above the diagonal, 0 elsewhere."""
    from ..backend import get_backend
    native = get_backend(backend).module("nn").Transformer
    return native.generate_square_subsequent_mask(sz, device=device, dtype=dtype)


globals()["Transformer"].generate_square_subsequent_mask = staticmethod(_generate_square_subsequent_mask)
__all__ = sorted(LAYERS)
