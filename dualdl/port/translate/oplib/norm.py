"""Normalisation ops called inside a block's own forward (``F.BatchNorm(x, gamma, beta, mean, var)``,
``F.GroupNorm``) -> F.batch_norm / F.group_norm; MXNet 1.9.1's GroupNorm scales per group. MXNet's
defaults differ from torch's: ``fix_gamma=True`` (gamma taken as 1),
eps 1e-3 and momentum 0.9 kept as float32 (torch's momentum is 1 - MXNet's); a Gluon BatchNorm
*layer* is translated as a layer (leaves.py / symbol_layers.py). Measured: in eval mode without
``use_global_stats`` MXNet's gradient is that of batch statistics although its forward used the
moving ones (4.8 off torch's); train mode (batch statistics on both sides) and use_global_stats agree."""
from __future__ import annotations

from .base import Expr, f32, ndim, op, parse_attr, refuse, unsupported

__all__: list = []


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


op("BatchNorm", "_npx_batch_norm")(_batch_norm)
op("BatchNorm_v1", "_contrib_SyncBatchNorm", float32_only=True, torch="F.batch_norm (as BatchNorm)",
   float32_note="measured: MXNet 1.9.1's CPU kernel fails on float64 ('data type do not match')")(_batch_norm)
refuse("an MKL-DNN fused op (float32 only) whose gradient with use_global_stats is not that of relu(BatchNorm) "
       "(measured 4.6 off); call BatchNorm and relu", "_contrib_BatchNormWithReLU")


GROUP_NORM = '''def group_norm_mx(x, groups, gamma, beta, eps):
    """MXNet GroupNorm (1.9.1): gamma and beta hold one value per group (torch's per channel)."""
    per = x.shape[1] // groups
    shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)
    return (F.group_norm(x, groups, None, None, eps) * gamma.repeat_interleave(per).reshape(shape)
            + beta.repeat_interleave(per).reshape(shape))
'''


@op("GroupNorm")
def _group_norm(a, attrs, node):
    """group_norm_mx(x, num_groups, gamma, beta, eps) (gamma, beta per group)"""
    if parse_attr(attrs.get("output_mean_var"), False):
        raise unsupported(node, "GroupNorm(output_mean_var=True)")
    groups = int(parse_attr(attrs.get("num_groups"), 1))
    return Expr(f"group_norm_mx({a[0].text}, {groups}, {a[1].text}, {a[2].text}, {f32(attrs.get('eps', '1e-5'))})",
                helpers=(GROUP_NORM,))
