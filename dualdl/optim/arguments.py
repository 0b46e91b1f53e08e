"""Argument checks shared by both backends' optimizers, so both refuse the same calls with the
same words: torch.optim's own hyper-parameter messages, and the refusal of torch's switches that
MXNet cannot honour. Imports no framework."""
from __future__ import annotations

__all__ = ["check_hyperparameters", "check_torch_switches"]

_WORDS = {"lr": "learning rate", "eps": "epsilon value"}


def check_hyperparameters(**values) -> None:
    """torch.optim's checks and messages: ``Invalid learning rate: -1``, ``Invalid beta
    parameter at index 1: 1.0``, ``Invalid rho value: 2``, ``Invalid <name> value: -1``."""
    for name, value in values.items():
        if name == "betas":
            for i, b in enumerate(value):
                if not 0.0 <= b < 1.0:
                    raise ValueError(f"Invalid beta parameter at index {i}: {b}")
        elif name == "rho":
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"Invalid rho value: {value}")
        elif not 0.0 <= value:
            raise ValueError(f"Invalid {_WORDS.get(name, name + ' value')}: {value}")


def check_torch_switches(name: str, differentiable: bool = False, capturable: bool = False) -> None:
    """torch.optim's implementation switches on the mxnet backend: ``foreach`` and ``fused`` pick
    kernels, not numbers, and are accepted as they are; ``differentiable=True`` (autograd through
    ``step``) and ``capturable=True`` (CUDA-graph capture) have no MXNet counterpart: refused."""
    for arg, value in (("differentiable", differentiable), ("capturable", capturable)):
        if value:
            raise ValueError(f"{name}({arg}=True) cannot be honoured on the mxnet backend (its "
                             f"optimizers update Gluon Parameters outside autograd, without graph "
                             f"capture); expected {arg}=False")
