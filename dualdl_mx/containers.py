"""MXNet/Gluon containers with PyTorch's API: Sequential, ModuleList, ModuleDict.

Gluon has ``HybridSequential.add`` and ``register_child`` for lists of blocks; these are
HybridBlocks with torch's constructors, children names ("0", "1", ... or the keys), indexing and
list/dict methods. They accept HybridBlocks only: a torch module gets a clear TypeError.
"""
from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Union

from mxnet.gluon import HybridBlock

from dualdl.nn.arguments import check_child_name
from dualdl.nn.registry import defined_in
from . import fast
from .fast import sequential as fast_sequential
from .base import Layer


def _check_child(container: str, module: Any, key: Any) -> HybridBlock:
    """``module`` if it is a Gluon block with a name torch's ``add_module`` would take (an int
    key is a Sequential's position), else torch's error for the name or a TypeError saying what
    the MXNet backend expects."""
    if isinstance(module, HybridBlock):
        if not isinstance(key, int):
            check_child_name(key)
        return module
    torch = sys.modules.get("torch")
    hint = ("a torch module: build every layer under the same backend (dl.use('mxnet'))"
            if torch is not None and isinstance(module, torch.nn.Module)
            else "expected a dualdl module (a Gluon HybridBlock)")
    raise TypeError(f"{container} on the mxnet backend got {type(module).__module__}."
                    f"{type(module).__name__} for {key!r}, {hint}")


class _ChildList(Layer):
    """Children named "0", "1", ... kept in ``_children`` order (shared by Sequential/ModuleList)."""

    def _renumber(self, items: Sequence[HybridBlock]) -> None:
        self._children.clear()
        for i, m in enumerate(items):
            self._children[str(i)] = m
        self._clear_cached_op()

    def _index(self, idx: int) -> int:
        n = len(self._children)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for {type(self).__name__} of length {n}")
        return idx % n

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self) -> Iterator[HybridBlock]:
        return iter(list(self._children.values()))

    def __getitem__(self, idx):
        items = list(self._children.values())
        if isinstance(idx, slice):
            return type(self)(*items[idx]) if isinstance(self, Sequential) else type(self)(items[idx])
        return items[self._index(idx)]

    def __setitem__(self, idx: int, module: HybridBlock) -> None:
        items = list(self._children.values())
        items[self._index(idx)] = _check_child(type(self).__name__, module, idx)
        self._renumber(items)

    def __delitem__(self, idx) -> None:
        items = list(self._children.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[self._index(idx)]
        self._renumber(items)

    def append(self, module: HybridBlock):
        self.register_child(_check_child(type(self).__name__, module, len(self)), str(len(self)))
        return self

    def extend(self, modules: Iterable[HybridBlock]):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: HybridBlock) -> None:
        items = list(self._children.values())
        items.insert(index, _check_child(type(self).__name__, module, index))
        self._renumber(items)

    def pop(self, index: int = -1) -> HybridBlock:
        items = list(self._children.values())
        m = items.pop(self._index(index))
        self._renumber(items)
        return m


class Sequential(_ChildList):
    """``torch.nn.Sequential(*modules)`` or ``Sequential(OrderedDict)``: children "0", "1", ...
    (or the dict's keys); calls them in order. A HybridBlock, so ``hybridize()`` works."""

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], Mapping):
            for key, m in args[0].items():
                self.register_child(_check_child("Sequential", m, key), str(key))
        else:
            for i, m in enumerate(args):
                self.register_child(_check_child("Sequential", m, i), str(i))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._children.items())[idx]))
        return super().__getitem__(idx)

    def hybrid_forward(self, F, x):
        children = list(self._children.values())
        if fast.enabled():              # BatchNorm-ReLU(-MaxPool) runs fused (same numbers)
            return fast_sequential.forward(children, x)
        for m in children:
            x = m(x)
        return x


class ModuleList(_ChildList):
    """``torch.nn.ModuleList``: registers its items as children "0", "1", ... (what Gluon needs
    ``register_child`` for); it is not callable."""

    def __init__(self, modules: Optional[Iterable[HybridBlock]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def index(self, module: HybridBlock) -> int:
        for i, m in enumerate(self._children.values()):
            if m is module:
                return i
        raise ValueError(f"{type(module).__name__} is not in the ModuleList")

    def __iadd__(self, modules: Iterable[HybridBlock]) -> "ModuleList":
        return self.extend(modules)

    def forward(self, *args: Any):
        raise NotImplementedError("ModuleList is not callable: iterate over it in forward()")


class ModuleDict(Layer):
    """``torch.nn.ModuleDict``: children named by their keys, in insertion order; not callable."""

    def __init__(self, modules: Optional[Union[Mapping[str, HybridBlock],
                                               Iterable[Tuple[str, HybridBlock]]]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> HybridBlock:
        return self._children[key]

    def __getattr__(self, name: str) -> HybridBlock:
        """``self.transformer.wte`` (nanoGPT): torch's ModuleDict children are attributes too."""
        children = self.__dict__.get("_children")
        if children is not None and name in children:
            return children[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __setitem__(self, key: str, module: HybridBlock) -> None:
        self.register_child(_check_child("ModuleDict", module, key), key)

    def __delitem__(self, key: str) -> None:
        del self._children[key]
        self._clear_cached_op()

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._children))

    def __contains__(self, key: str) -> bool:
        return key in self._children

    def keys(self):
        return list(self._children.keys())

    def values(self):
        return list(self._children.values())

    def items(self):
        return list(self._children.items())

    def pop(self, key: str) -> HybridBlock:
        m = self._children[key]
        del self[key]
        return m

    def clear(self) -> None:
        self._children.clear()
        self._clear_cached_op()

    def update(self, modules) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, m in pairs:
            self[key] = m

    def forward(self, *args: Any):
        raise NotImplementedError("ModuleDict is not callable: index it in forward()")


__all__ = defined_in(__name__)  # the layers defined above (registered by class name)
