"""Rules for what pairing by execution order, role and shape cannot see.

Each rule is explicit and every use of it is listed in the port report:

* :class:`Fused` - one tensor on one side is the concatenation of several on the other
  (torch ``MultiheadAttention.in_proj_weight`` = [W_q; W_k; W_v] vs Gluon's separate q/k/v).
* :class:`Transpose` - a tensor is stored transposed on one side.
* :class:`Rename` - pair by name (regex), optionally through a registered transform.
* :class:`Ignore` - leave tensors out of the port (the target keeps its values).
* :class:`FoldConvBias` - a conv bias on the source, none on the target: fold it into the next
  BatchNorm's running mean (exact in eval mode).
* :class:`ZeroMissingBias` - a bias on the target, none on the source: it becomes 0.

Tied weights need no rule: a tensor shared under two names is detected by identity and reported.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

__all__ = ["Rule", "Fused", "Transpose", "Rename", "Ignore", "FoldConvBias", "ZeroMissingBias",
           "DEFAULT_RULES"]


class Rule:
    kind = "rule"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, **{k: v for k, v in vars(self).items() if not k.startswith("_")}}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "kind")
        return f"{type(self).__name__}({args})"


class _Pattern(Rule):
    def __init__(self, pattern: str):
        self.pattern = pattern
        self._re = re.compile(pattern)

    def matches(self, key: str) -> bool:
        return self._re.search(key) is not None


class Fused(_Pattern):
    """Tensors whose key matches ``pattern`` (on either side) are ``parts`` tensors concatenated
    along ``axis``; each part pairs on its own, in execution order."""
    kind = "fused"

    def __init__(self, pattern: str, parts: int = 3, axis: int = 0):
        super().__init__(pattern)
        if parts < 2:
            raise ValueError("Fused needs parts >= 2")
        self.parts, self.axis = int(parts), int(axis)


class Transpose(_Pattern):
    """Tensors whose key matches ``pattern`` (on either side) are stored transposed (all axes
    reversed) relative to the other framework's layout."""
    kind = "transpose"


class Ignore(_Pattern):
    """Tensors whose key matches ``pattern`` (on either side) are not ported."""
    kind = "ignore"


class Rename(Rule):
    """Pair source key ``source`` (regex, full match) with target key ``target`` (``re.sub``
    template, e.g. ``r"encoder.\\1.weight"``), through ``transform`` (``"copy"``, ``"transpose"``
    or a name given to :func:`dualdl.port.register_transform`)."""
    kind = "rename"

    def __init__(self, source: str, target: str, transform: str = "copy"):
        self.source, self.target, self.transform = source, target, transform
        self._re = re.compile(source)

    def target_for(self, key: str) -> Optional[str]:
        m = self._re.fullmatch(key)
        return m.expand(self.target) if m else None


class FoldConvBias(Rule):
    """Source conv has a bias, target conv has none and a BatchNorm follows: the target's
    running mean becomes ``running_mean - conv_bias`` (exact for inference)."""
    kind = "fold_conv_bias"


class ZeroMissingBias(Rule):
    """Target layer has a bias the source layer lacks (``use_bias=False`` vs ``bias=True``):
    the target bias is set to 0."""
    kind = "zero_missing_bias"


#: Rules used unless ``default_rules=False``: torch MultiheadAttention's packed projections,
#: conv-bias folding and zero-filling of missing biases.
DEFAULT_RULES: List[Rule] = [Fused(r"(^|\.)in_proj_(weight|bias)$", parts=3, axis=0),
                             FoldConvBias(), ZeroMissingBias()]
