"""LAMB's contract, declared once for both backends (torch has no LAMB; MXNet 1.9.1 has
``mx.optimizer.LAMB``, whose formula dualdl follows). The formula, per parameter::

    g = -grad if maximize else grad
    m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2                       (exp_avg, exp_avg_sq)
    m^, v^ = (m/(1-b1^t), v/(1-b2^t)) if bias_correction else (m, v)
    u = m^ / (sqrt(v^) + eps) + weight_decay*w
    r1 = ||w|| clamped to [lower_bound, upper_bound] (where given);  r2 = ||u||
    w -= lr * (r1/r2 if r1 > 0 and r2 > 0 else 1) * u

(``lamb_update_phase1/2``; their docstring says ``max(r1, upper_bound)``, the op computes the
``min``, as measured against ``mx.optimizer.LAMB`` in tests/test_parity_optim_more.py.)
Imports no framework."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .arguments import check_hyperparameters

__all__ = ["LAMBArguments", "trust_ratio"]


class LAMBArguments:
    """LAMB's signature, defaults and checks, mixed in before each backend's optimizer base
    (whose ``__init__(params, defaults)`` receives the param-group defaults)."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0, bias_correction: bool = True, lower_bound: Optional[float] = None,
                 upper_bound: Optional[float] = None, *, maximize: bool = False) -> None:
        check_hyperparameters(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      bias_correction=bias_correction, lower_bound=lower_bound,
                                      upper_bound=upper_bound, maximize=maximize))


def trust_ratio(weight_norm: float, update_norm: float, group: Dict[str, Any]) -> float:
    """``r1/r2`` with ``r1`` clamped to the group's bounds; 1 where either norm is 0."""
    r1 = weight_norm
    if group["lower_bound"] is not None:
        r1 = max(r1, group["lower_bound"])
    if group["upper_bound"] is not None:
        r1 = min(r1, group["upper_bound"])
    return r1 / update_norm if r1 > 0 and update_norm > 0 else 1.0
