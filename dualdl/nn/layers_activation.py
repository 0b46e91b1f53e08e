"""Declarations of the activations added for torch's module tests (issue 34): merged into ``dualdl.nn.layers.LAYERS`` (see docs/concepts.md
"Adding a layer")."""
from __future__ import annotations

from .declaration import layer

_INPLACE = " `inplace` is accepted; on MXNet the result is a new array (the same values)."

LAYERS = {
    "GLU": layer(
        'dim=-1',
        "No Gluon block or MXNet op: the halves from split(num_outputs=2, axis=dim), a * sigmoid(b); an odd "
        "size along dim (or a 0-d input) is refused with torch's message (ValueError)."),
    "Hardtanh": layer(
        'min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None',
        "No Gluon block; MXNet's clip stores its bounds as float32 and passes the gradient at the bounds: "
        "where(x <= min_val, min_val, where(x >= max_val, max_val, x)) (torch's values, NaN kept, gradient 0 "
        "at the bounds and at NaN). The deprecated min_value/max_value replace min_val/max_val with torch's "
        "FutureWarning." + _INPLACE),
    "Hardshrink": layer(
        'lambd=0.5',
        "No Gluon block or MXNet op: where(-lambd <= x <= lambd, 0, x) (NaN kept, its gradient 0 as torch's)."),
    "Softshrink": layer(
        'lambd=0.5',
        "No Gluon block or MXNet op: x - lambd above lambd, x + lambd below -lambd, else x * 0 (NaN kept). "
        "A negative lambd fails at construction (torch: at forward)."),
    "Tanhshrink": layer(
        '',
        "No Gluon block: x - tanh(x)."),
    "Threshold": layer(
        'threshold, value, inplace=False',
        "No Gluon block: where(x <= threshold, value, x) (NaN kept, gradient 0 where replaced)." + _INPLACE),
    "Softmin": layer(
        'dim=None',
        "No Gluon block: MXNet softmax of -x along dim (None: torch's legacy implicit dim, NDArray only)."),
    "Softsign": layer(
        '',
        "Gluon: Activation('softsign'); here x / (1 + |x|) as torch."),
    "LogSigmoid": layer(
        '',
        "No Gluon block (log(sigmoid(x)) overflows): x - log1p(exp(x)) for x < 0, -log1p(exp(-x)) otherwise, "
        "as torch (stable, exact gradient sigmoid(-x))."),
    "CELU": layer(
        'alpha=1.0, inplace=False',
        "No Gluon block or MXNet op: where(x > 0, x, alpha * expm1(x * (1 / alpha))) as torch's kernel, with "
        "the exact gradient (torch's float64 backward takes 1 / alpha of alpha rounded to float32: up to 6e-8 "
        "relative off for an alpha such as 0.7). alpha=0 fails at construction (torch: at forward)." + _INPLACE),
    "SELU": layer(
        'inplace=False',
        "Gluon SELU runs MXNet's LeakyReLU operator (float32 precision in float64); here scale * x for x > 0,"
        " else alpha * scale * expm1(x), with torch's constants." + _INPLACE),
    "Softmax2d": layer(
        '',
        "No Gluon block: MXNet softmax over the channel axis -3 of a 3-D (C, H, W) or 4-D (N, C, H, W) "
        "input; other ranks are refused with torch's ValueError."),
}
