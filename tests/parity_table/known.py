"""Measured MXNet-vs-torch differences that several rows share (each with its reason)."""

# dualdl's MXNet gelu/leaky_relu ops compute their exact formula on float64 NDArrays; a Symbol has no
# dtype, so inside a hybridized graph the ops keep MXNet's fast LeakyReLU operator (the GELU/LeakyReLU/ELU
# layers take the dtype from the input or the layer's cast(), the Transformer layers' activation from
# their weights: exact in float64, hybridized too, so their rows carry no known divergence)
F32_ACT_HYB = dict(known={"float64 mxnet:hybridized": "MXNet's LeakyReLU operator (act_type leaky/gelu), "
                          "which a hybridized graph runs for the ops (a Symbol has no dtype), has float32 "
                          "precision in float64 (measured <= 1.9e-7)"})
