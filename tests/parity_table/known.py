"""Measured MXNet-vs-torch differences that several rows share (each with its reason)."""

# dualdl's MXNet GELU/LeakyReLU/ELU layers and gelu/leaky_relu ops run MXNet's LeakyReLU operator
F32_ACT = dict(tol64=1e-6, reason="MXNet's LeakyReLU operator (act_type leaky/elu/gelu), which dualdl uses, "
                                  "has float32 precision in float64 (measured <= 2e-7, 8.4e-7 inside a layer)")
