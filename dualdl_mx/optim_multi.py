"""SGD's multi-tensor update on MXNet: parameters grouped into ``multi_sgd_mom_update`` calls
(``_size_chunks``) and the prepared calls kept per parameter group (``_MultiSGDPlan``), plus
``_broadcast``, which writes an updated first-context value to a parameter's other contexts (the
per-parameter path in dualdl_mx/optim.py uses it too).

MXNet difference hidden here: torch's foreach SGD takes any number of tensors; MXNet's
multi-tensor kernels take at most ``MULTI_MAX`` per call and run one thread per element of the
largest tensor, testing every tensor at each element, so a call holds tensors of similar size.
The momentum stays in MXNet's layout (``mx_mom = -lr * buf``); dualdl_mx/optim.py converts it to
torch's.
"""
from __future__ import annotations

from typing import Any, List, Tuple

from mxnet import nd

from .fast.invoke import MULTI_MAX, PreparedCall


def _broadcast(data: List[nd.NDArray]) -> None:
    """Copy the updated first-context value to the parameter's other contexts."""
    for d in data[1:]:
        data[0].copyto(d)


# MXNet's multi-tensor update kernels run one thread per element of the *largest* tensor of a
# call and test every tensor at each element, and take at most MULTI_MAX tensors. A chunk
# therefore holds tensors of similar size.
_MULTI_SLACK = 1 << 16      # wasted element tests allowed beyond the chunk's real work


def _size_chunks(items: List[Tuple[int, Any]]) -> List[List[Any]]:
    """Group ``(size, item)`` pairs into chunks for a multi-tensor op, largest first, so that the
    kernel's wasted tests (``count * max_size - sum``) stay below the real work plus 64k."""
    chunks: List[List[Any]] = []
    top = total = 0
    for size, item in sorted(items, key=lambda si: -si[0]):
        if chunks and len(chunks[-1]) < MULTI_MAX and \
                (len(chunks[-1]) + 1) * top - (total + size) <= max(_MULTI_SLACK, total + size):
            chunks[-1].append(item)
            total += size
        else:
            chunks.append([item])
            top = total = size
    return chunks


class _MultiSGDPlan:
    """SGD's multi-tensor calls for one parameter group, kept while the same parameters with the
    same arrays (weight, gradient, ``mx_mom`` state) step: the per-parameter walk (context, dtype
    and storage-type reads, state lookups) and each call's C arguments are built once
    (``invoke.PreparedCall``). Checked at every step against the live arrays and state, so a
    ``state_dict()`` (which switches the state to torch's layout), a load, ``reset_ctx`` or
    ``cast`` rebuilds it. The calls are the same operator on the same arrays as the unprepared
    path, so the update is the same bit for bit."""

    def __init__(self, params, rest, items) -> None:
        self.params, self.rest = list(params), rest
        # what must still be true: (param, data list, weight, gradient, state dict, momentum)
        self.check = [(p, p._data, w, g, st, mom) for p, _, w, g, mom, st in items]
        self.check_rest = [(p, p._data) for p in rest]
        self.lr = items[0][5]["mx_lr"] if items else None
        self.copies = [data for _, data, *_ in items if len(data) > 1]
        self.calls = []
        for chunk in _size_chunks([(it[2].size, it) for it in items]):
            args = [a for _, _, w, g, mom, _ in chunk for a in (w, g, mom)]
            self.calls.append((len(chunk), PreparedCall("multi_sgd_mom_update", args, [c[2] for c in chunk],
                                                        num_weights=len(chunk))))

    def matches(self, params, state) -> bool:
        if len(params) != len(self.params) or any(a is not b for a, b in zip(params, self.params)):
            return False
        for p, data, w, g, st, mom in self.check:
            if p._data is not data or data[0] is not w or not p._grad or p._grad[0] is not g \
                    or state.get(p) is not st \
                    or st.get("mx_mom") is not mom or st.get("mx_lr") != self.lr:
                return False
        return all(p._data is data for p, data in self.check_rest)

    def run(self, lr: float, mu: float, wd: float, rs: float) -> None:
        for n, call in self.calls:
            call.set_attrs(lrs=(lr,) * n, wds=(wd,) * n, momentum=mu * lr / self.lr, rescale_grad=rs)
            call()
        self.set_lr(lr)
        for data in self.copies:
            _broadcast(data)

    def set_lr(self, lr: float) -> None:
        """The lr the momentum layout (-lr*buf) is scaled by: the step's, or the one before a
        step that was rolled back."""
        if lr != self.lr:
            for _, _, _, _, st, _ in self.check:
                st["mx_lr"] = lr
            self.lr = lr

    def triples(self) -> List[nd.NDArray]:
        """Each parameter's weight, gradient and momentum (first context), in the order and layout
        of the calls' inputs."""
        return [a for _, _, w, g, _, mom in self.check for a in (w, g, mom)]
