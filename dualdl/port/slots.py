"""What identifies a tensor when porting: its layer's execution rank, its role and its shape.

Roles use PyTorch's vocabulary: ``weight``, ``bias``, ``scale`` / ``shift`` (norm layers: Gluon
``gamma``/``beta``, torch ``weight``/``bias``), ``running_mean``, ``running_var``, and for RNNs
``weight_ih`` / ``weight_hh`` / ``bias_ih`` / ``bias_hh`` (Gluon ``i2h``/``h2h``; gate order is
the same in both frameworks, so RNN tensors copy without permutation). ``tensor`` is a wildcard
for names no rule recognises.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Tuple

ROLE_RANK = {"weight": 0, "bias": 1, "scale": 2, "shift": 3, "running_mean": 4, "running_var": 5,
             "weight_ih": 0, "weight_hh": 1, "bias_ih": 2, "bias_hh": 3, "tensor": 6}
#: roles whose values are randomised during verification (they are 0/1 right after init, so a
#: swapped LayerNorm or bias would otherwise go unnoticed).
RANDOMISED_ROLES = ("bias", "scale", "shift", "running_mean", "running_var", "bias_ih", "bias_hh")


@dataclass
class Slot:
    """One tensor of one model, as the pairing sees it."""
    key: str                      # checkpoint key: Gluon save_parameters key / torch state_dict key
    layer: str                    # path of the layer owning it
    name: str                     # its name inside that layer
    role: str
    shape: Tuple[int, ...]
    rank: Tuple[int, ...] = ()    # sort key: (execution rank of the layer, position inside the layer)
    ident: int = 0                # identity of the storage (tied weights share it)
    ran: bool = True              # its layer ran on the sample input
    constant: Optional[float] = None   # Gluon fixed gamma/beta: ignored/constant value
    dtype: str = "float32"
    part: Optional[Tuple[int, int, int]] = None   # (index, parts, axis) of a fused tensor
    transposed: bool = False
    notes: list = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.part is None:
            return self.key
        return f"{self.key}[part {self.part[0] + 1}/{self.part[1]}]"


_RNN_GLUON = re.compile(r"^(?P<d>[lr])(?P<k>\d+)_(?P<w>i2h|h2h)_(?P<t>weight|bias)$")
_CELL_GLUON = re.compile(r"^(?P<w>i2h|h2h)_(?P<t>weight|bias)$")
_RNN_TORCH = re.compile(r"^(?P<t>weight|bias)_(?P<w>ih|hh)(?:_l(?P<k>\d+)(?P<r>_reverse)?)?$")


def gluon_role(name: str, ndim: int) -> Tuple[str, Tuple[int, ...]]:
    """(role, sub-rank) of a Gluon parameter from its registered name."""
    m = _RNN_GLUON.match(name)
    if m:
        return f"{m['t']}_{m['w'][0]}h", (int(m["k"]), m["d"] == "r")
    m = _CELL_GLUON.match(name)
    if m:
        return f"{m['t']}_{m['w'][0]}h", (0, 0)
    if name == "gamma":
        return "scale", ()
    if name == "beta":
        return "shift", ()
    if name in ("running_mean", "moving_mean"):
        return "running_mean", ()
    if name in ("running_var", "moving_var"):
        return "running_var", ()
    return _generic_role(name, ndim), ()


def torch_role(name: str, ndim: int, is_norm: bool) -> Tuple[str, Tuple[int, ...]]:
    """(role, sub-rank) of a torch parameter/buffer from its name and its module's kind."""
    m = _RNN_TORCH.match(name)
    if m:
        return f"{m['t']}_{m['w']}", (int(m["k"] or 0), bool(m["r"]))
    if is_norm and name == "weight":
        return "scale", ()
    if is_norm and name == "bias":
        return "shift", ()
    if name in ("running_mean", "running_var"):
        return name, ()
    return _generic_role(name, ndim), ()


def _generic_role(name: str, ndim: int) -> str:
    low = name.lower()
    if low.endswith("bias"):
        return "bias"
    if low.endswith(("weight", "kernel", "embedding", "embeddings")):
        return "weight"
    return "tensor"


def compatible(a: str, b: str) -> bool:
    return a == b or a == "tensor" or b == "tensor"
