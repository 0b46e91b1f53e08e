"""Gradient reduction across processes on PyTorch (``dl.Trainer`` under ``dualdl launch`` /
torchrun): one flat SUM all-reduce per (dtype, device)."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch

__all__ = ["DistReducer"]


class DistReducer:
    """Sums gradients over the processes of ``torch.distributed`` (gloo on CPU, NCCL on CUDA).

    Not DDP: DDP *averages* in backward hooks and owns the model; the Trainer already weights
    each piece by its share of the *global* batch, so a plain SUM all-reduce gives the gradient
    of the global batch. Each step sends one flat buffer per (dtype, device) holding every
    gradient (zeros where a rank has none), a has-gradient count per parameter (a parameter
    that got a gradient on no rank stays ``None``, as in one process) and rank 0's floating
    buffers (zeros elsewhere), so BatchNorm running statistics become rank 0's everywhere.
    """

    def __init__(self, model: torch.nn.Module, named: Sequence[Tuple[str, torch.nn.Parameter]]):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        if isinstance(model, (DistributedDataParallel, torch.nn.DataParallel)):
            raise TypeError(f"pass the plain model to dl.Trainer, not a {type(model).__name__}: the "
                            f"Trainer combines gradients over processes itself (DDP would average "
                            f"them a second time)")
        self.dist = dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.params = [p for _, p in named]
        self.buffers = [b for b in model.buffers() if b.is_floating_point()]
        nccl = dist.get_backend() == "nccl"
        self.scalar_device = (torch.device("cuda", torch.cuda.current_device()) if nccl
                              else torch.device("cpu"))

    def sum_scalars(self, values: Sequence[float]) -> List[float]:
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self.scalar_device)
        self.dist.all_reduce(t)
        return t.cpu().tolist()

    def broadcast_model(self, model: torch.nn.Module) -> None:
        with torch.no_grad():
            for t in list(model.parameters()) + list(model.buffers()):
                self.dist.broadcast(t.data, 0)

    @torch.no_grad()
    def allreduce(self, extra: Sequence[float]) -> List[float]:
        """Sum gradients (and ``extra`` scalars) over ranks, in place; rank 0's buffers to all.
        Returns the summed ``extra``."""
        groups: Dict[Any, List[Tuple[str, Any]]] = {}
        for p in self.params:
            groups.setdefault((p.dtype, p.device), []).append(("g", p))
        for b in self.buffers:
            groups.setdefault((b.dtype, b.device), []).append(("b", b))
        if not groups:
            return self.sum_scalars(extra)
        out: List[float] = []
        keys = list(groups)
        xi = max(range(len(keys)), key=lambda i: keys[i][0].itemsize)   # extras in the widest dtype
        for gi, ((dtype, dev), items) in enumerate(groups.items()):
            parts = []
            for kind, t in items:
                if kind == "g":
                    parts.append(t.grad.reshape(-1) if t.grad is not None else t.new_zeros(t.numel()))
                else:
                    parts.append(t.reshape(-1) if self.rank == 0 else torch.zeros_like(t).reshape(-1))
            grads = [t for kind, t in items if kind == "g"]
            tail = [0.0 if p.grad is None else 1.0 for p in grads] + (list(extra) if gi == xi else [])
            parts.append(torch.tensor(tail, dtype=dtype, device=dev))
            flat = torch.cat(parts)
            self.dist.all_reduce(flat)
            o = 0
            for kind, t in items:
                n = t.numel()
                piece = flat[o:o + n].view_as(t)
                o += n
                if kind == "b":
                    t.copy_(piece)
                elif t.grad is not None:
                    t.grad.copy_(piece)
                else:
                    t.grad = piece.clone()          # set back to None below if no rank had one
            tail_out = flat[o:].tolist()
            for p, f in zip(grads, tail_out):
                if f <= 0:
                    p.grad = None
            if gi == xi:
                out = tail_out[len(grads):]
        return out
