"""Rows for the Transformer decoder family (TransformerDecoderLayer, TransformerDecoder, Transformer)
against torch.nn's own classes: layouts, pre-/post-LN, relu/gelu, no bias, additive float and bool
attention masks, key padding masks, per-head (N*nhead, T, S) masks, odd sizes (batch 1, T 1); and
torch's inputs of issue 34 for the attention/recurrent family: unbatched inputs, MultiheadAttention's
kdim/vdim, bias_k/bias_v and zero attention, LSTM's projection (proj_size)."""
from dualdl.testing.spec import In, layer, mask


D, H, FF = 8, 2, 16
NOGRAD = dict(grad=False)
# stacked attention + LayerNorm blocks with random weights amplify MXNet-vs-torch float32
# rounding to <= 1.5e-5 relative (dualdl on torch is bit-identical to torch.nn in every row)
STACK = dict(tol=5e-5, tol64=1e-10, reason="MXNet-vs-torch float32 rounding through 2-3 stacked attention/LayerNorm "
                                          "blocks (<= 1.5e-5 rel), MXNet's float64 LayerNorm (~1e2 ulp)")


def _m(*shape):                       # an additive float mask (standard normal), no gradient
    return In(tuple(shape), **NOGRAD)


ROWS = [
    layer("TransformerDecoderLayer", [(5, 2, D), (4, 2, D)], D, H, FF, dropout=0.0, id="TNC"),
    layer("TransformerDecoderLayer", [(2, 5, D), (2, 3, D)], D, H, FF, dropout=0.0, batch_first=True,
          norm_first=True, activation="gelu", id="norm_first gelu batch_first"),
    layer("TransformerDecoderLayer", [(5, 2, D), (4, 2, D)], D, H, FF, dropout=0.0, bias=False, id="no bias",
         ),
    layer("TransformerDecoderLayer", [(5, 2, D), (4, 2, D), _m(5, 5), _m(5, 4)], D, H, FF, dropout=0.0,
          id="float tgt_mask memory_mask"),
    layer("TransformerDecoderLayer", [(5, 3, D), (4, 3, D), _m(3 * H, 5, 5), _m(3 * H, 5, 4)], D, H, FF,
          dropout=0.0, id="per-head masks (N*nhead, T, S)"),
    # bool key padding masks (True = pad) with float attention masks; the draws leave no query with every
    # key masked (there torch's SDPA path gives 0 and dualdl uniform weights: tests/test_nn_transformer_decoder.py)
    layer("TransformerDecoderLayer", [(3, 4, D), (3, 3, D), _m(4, 4), _m(4, 3), mask(3, 4), mask(3, 3)],
          D, H, FF, dropout=0.0, batch_first=True, id="float masks + bool key padding masks"),
    layer("TransformerDecoderLayer", [(5, 2, D), (4, 2, D), mask(5, 5)], D, H, FF, dropout=0.0, id="bool tgt_mask"),
    layer("TransformerDecoderLayer", [(1, 1, D), (1, 1, D)], D, H, FF, dropout=0.0, id="T 1 S 1 batch 1"),
    layer("TransformerDecoder", [(5, 2, D), (4, 2, D)],
          lambda nn: (nn.TransformerDecoderLayer(D, H, FF, dropout=0.0), 2, nn.LayerNorm(D)), id="2 layers + norm",
          **STACK),
    layer("TransformerDecoder", [(2, 5, D), (2, 4, D), _m(5, 5)],
          lambda nn: (nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=True), 2),
          id="batch_first norm_first tgt_mask", **STACK),
    layer("Transformer", [(4, 2, D), (5, 2, D)], D, H, 1, 1, FF, dropout=0.0, id="1+1 layers TNC",
          **STACK),
    layer("Transformer", [(2, 4, D), (2, 5, D), _m(4, 4), _m(5, 5), _m(5, 4)], D, H, 2, 1, FF, dropout=0.0,
          batch_first=True, norm_first=True, id="2+1 layers batch_first norm_first masks", **STACK),
    # torch's unbatched inputs (T, E): run as a batch of one on MXNet
    layer("TransformerEncoderLayer", [(5, D), _m(5, 5)], D, H, FF, dropout=0.0, batch_first=True,
          id="unbatched float src_mask"),
    layer("TransformerDecoderLayer", [(5, D), (4, D)], D, H, FF, dropout=0.0, id="unbatched"),
    layer("Transformer", [(4, D), (5, D)], D, H, 1, 1, FF, dropout=0.0, batch_first=True, id="unbatched", **STACK),
]

# MultiheadAttention beyond the packed projection, and LSTM's projection (issue 34)
ATTN = 6
ROWS += [
    layer("MultiheadAttention", [(4, 2, ATTN), (5, 2, 4), (5, 2, 3)], ATTN, 2, kdim=4, vdim=3,
          id="kdim vdim (q/k/v_proj_weight)"),
    layer("MultiheadAttention", [(4, 2, ATTN), (5, 2, ATTN), (5, 2, ATTN), mask(2, 5)], ATTN, 3, add_bias_kv=True,
          add_zero_attn=True, id="bias_k bias_v zero attention key padding"),
    layer("MultiheadAttention", [(2, 4, ATTN), (2, 5, 4), (2, 5, 3)], ATTN, 2, batch_first=True, bias=False,
          add_bias_kv=True, kdim=4, vdim=3, id="batch_first kdim vdim bias_kv no bias"),
    layer("MultiheadAttention", [(4, ATTN), (5, ATTN), (5, ATTN)], ATTN, 3, add_zero_attn=True,
          id="unbatched zero attention"),
    layer("LSTM", (5, 2, 3), 3, 4, 2, proj_size=2, bidirectional=True, id="proj_size 2 layers bidirectional"),
    layer("LSTM", (5, 3), 3, 4, proj_size=3, batch_first=True, id="proj_size unbatched"),
    layer("RNN", (5, 3), 3, 4, 2, nonlinearity="relu", id="relu unbatched 2 layers"),
]
