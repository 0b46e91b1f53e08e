"""Normalisation ops called inside a block's own forward (``F.BatchNorm(x, gamma, beta, mean, var)``)
-> F.batch_norm. MXNet's defaults differ from torch's: ``fix_gamma=True`` (gamma taken as 1),
eps 1e-3 and momentum 0.9 kept as float32 (torch's momentum is 1 - MXNet's); a Gluon BatchNorm
*layer* is translated as a layer (leaves.py / symbol_layers.py). Measured: in eval mode without
``use_global_stats`` MXNet's gradient is that of batch statistics although its forward used the
moving ones (4.8 off torch's); train mode (batch statistics on both sides) and use_global_stats agree."""
from __future__ import annotations

from .base import Expr, f32, ndim, op, parse_attr, unsupported

__all__: list = []


@op("BatchNorm", "_npx_batch_norm", "BatchNorm_v1", "_contrib_SyncBatchNorm")
def _batch_norm(a, attrs, node):
    """F.batch_norm(x, moving_mean, moving_var, gamma (1 with fix_gamma), beta, training, 1 - momentum, eps)"""
    if int(parse_attr(attrs.get("axis"), 1)) % ndim(node) != 1:
        raise unsupported(node, f"{node.op}(axis={attrs['axis']}) (only the channel axis 1)")
    if parse_attr(attrs.get("output_mean_var"), False):
        raise unsupported(node, f"{node.op}(output_mean_var=True)")
    eps = f32(attrs.get("eps", "0.001"))
    momentum = float(1 - float(f32(attrs.get("momentum", "0.9"))))
    gamma = "None" if parse_attr(attrs.get("fix_gamma"), True) else a[1].text
    train = "False" if parse_attr(attrs.get("use_global_stats"), False) else "self.training"
    return Expr(f"F.batch_norm({a[0].text}, {a[3].text}, {a[4].text}, {gamma}, {a[2].text}, {train}, {momentum!r}, {eps})")
