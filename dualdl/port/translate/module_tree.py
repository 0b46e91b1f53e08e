"""The module tree a writer builds, between a reader's graph and the generated source: one
``MapEntry`` per torch ``state_dict`` key (the Gluon tensor or value it takes), one ``Instance`` per
Gluon block (its constructor calls, own parameters, buffers, forward lines), and how a member is
written in source (``self.name``, ``getattr(self, "a-b")``, ``self[3]``): a Gluon name torch
accepts as a module key is kept, one Python cannot write as an attribute goes through
``add_module``, anything else is renamed to an identifier unique within the class (``free_attr``).
Both readers' trees become classes with the parts here: instances of one structure share a class
(``structure_ids``), classes are named ``Base``, ``Base_2``... (``ClassNames``), numbers that differ
between a class's instances become its constructor arguments (``finish_class``)."""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .registry import Call
from .render import collect_refs, free_name, ident, is_number, render_call
from .safe import comment, literal

__all__ = ["Part", "MapEntry", "LeafInfo", "Instance", "Alias", "access", "assign", "torch_names", "plain_name",
           "registrable", "part_key", "alias_lines", "constructor_arguments", "literal_slots", "CONCURRENT_HELPER", "skeleton", "structure_ids", "ClassNames", "finish_class",
           "free_attr"]

CONCURRENT_HELPER = '''class Concurrent(nn.ModuleList):
    """Gluon HybridConcurrent: every child runs on the same input; outputs concatenated on `dim`."""

    def __init__(self, *modules, dim=1):
        super().__init__(modules)
        self.dim = dim

    def forward(self, x):
        return torch.cat([self[i](x) for i in range(len(self))], dim=self.dim)
'''

Part = Tuple[str, Any]     # ("a", name): self.name; ("g", name): getattr(self, "name"); ("i", k): self[k]


@dataclass
class MapEntry:
    """One torch state_dict entry: the Gluon tensor it comes from (``param``) or a fixed value."""
    torch_key: str
    gluon_key: Optional[str]
    param: Any = None
    value: Any = None
    gluon_path: str = ""
    tied_to: Optional[str] = None
    gluon_attr: Optional[str] = None    # a buffer from an array the Gluon block holds as this attribute


@dataclass
class LeafInfo:
    path: str
    in_shapes: List[Tuple[int, ...]]
    out_shapes: List[Tuple[int, ...]]
    n_args: int
    after_trainable: bool = True
    batchnorm: str = "torch"


@dataclass
class Instance:
    """One module of the tree, for either reader (``block``: the Gluon block or the symbol scope):
    what its class writes in ``__init__`` and ``forward``."""
    block: Any
    path: str
    tpath: str
    init: List[Tuple[Part, Any]] = field(default_factory=list)   # (part, Call or Alias)
    own: List[Tuple[Part, Tuple[int, ...], bool]] = field(default_factory=list)   # (part, shape, trainable)
    consts: List[Tuple[Part, Tuple[int, ...], str]] = field(default_factory=list)  # buffers: (part, shape, dtype)
    forward: List[str] = field(default_factory=list)
    signature: List[str] = field(default_factory=list)
    untraced: str = ""
    names: Dict[str, Part] = field(default_factory=dict)   # Gluon child/param name -> torch part
    aliases: List[Tuple[tuple, tuple, str]] = field(default_factory=list)   # (target, source, gluon path)
    extra: List[str] = field(default_factory=list)     # __init__ statements after the members


@dataclass
class Alias:
    """An attribute that is another module of the same instance (the same Gluon block)."""
    source: tuple
    gluon: str


def access(parts, base: str = "self") -> str:
    """Source text of the module at ``parts`` below ``base`` (names as ASCII string literals)."""
    out = base
    for kind, name in parts:
        if kind == "i":
            out += f"[{name}]"
        elif kind == "a":
            out += f".{name}"
        else:
            out = f"getattr({out}, {literal(name)})"
    return out


def assign(parts, value: str, base: str = "self") -> str:
    """Statement setting the module at ``parts`` (below ``base``) to ``value``."""
    parent, (kind, name) = access(parts[:-1], base), parts[-1]
    if kind == "i":
        return f"{parent}[{name}] = {value}"
    if kind == "a":
        return f"{parent}.{name} = {value}"
    return f"{parent}.add_module({literal(name)}, {value})"


_MODULE_ATTRS: Optional[frozenset] = None


def module_attrs() -> frozenset:
    global _MODULE_ATTRS
    if _MODULE_ATTRS is None:
        from torch import nn
        _MODULE_ATTRS = frozenset(dir(nn.Module)) | frozenset(vars(nn.Module()))
    return _MODULE_ATTRS


def plain_name(name: str) -> bool:
    """Writable as ``self.name`` and kept as is in ``state_dict``: ASCII (Python NFKC-normalises
    other identifiers in source: ``ﬁ`` is ``fi``), not a keyword, not mangled (``__x``)."""
    return (name.isascii() and name.isidentifier() and not keyword.iskeyword(name) and name != "__debug__"
            and not name.startswith("__") and name not in module_attrs())


def registrable(name: str) -> bool:
    """torch's ``add_module`` / ``register_parameter`` accept it (and it shadows nothing)."""
    return bool(name) and "." not in name and name not in module_attrs()


def torch_names(names: List[str]) -> Dict[str, Part]:
    """Gluon child/parameter names of one block -> torch attribute parts: the Gluon name itself
    wherever torch accepts it as a module key (``self.add_module("a-b", ...)`` when Python cannot
    write it as an attribute), else a renamed identifier unique within the class."""
    out: Dict[str, Part] = {}
    used = set()
    for n in names:
        if plain_name(n):
            out[n] = ("a", n)
        elif registrable(n):
            out[n] = ("g", n)
        else:
            continue
        used.add(n)
    for n in names:
        if n not in out:
            out[n] = ("a", free_attr(n, used))
    return out


def free_attr(name: str, used: set) -> str:
    """An identifier for ``name`` writable as ``self.attr`` (see :func:`plain_name`), not in
    ``used`` (``_`` appended until free); added to ``used``. For either reader."""
    s = ident(name)
    if not plain_name(s):
        s = "m_" + re.sub(r"[^0-9A-Za-z_]", "_", s).strip("_")
    while s in used or not plain_name(s):
        s += "_"
    used.add(s)
    return s


def part_key(part: Part) -> str:
    return str(part[1])


def alias_lines(aliases) -> List[str]:
    return [f"        {assign(target, access(source))}  # the same Gluon block as {comment(gluon)}: one module"
            for target, source, gluon in aliases]


def literal_slots(init: List[Tuple[Part, Any]]) -> List[Tuple[Tuple, Any, str]]:
    """(slot path, value, label) of every numeric literal in an instance's constructor calls, in
    the order ``render_call`` meets them; the label is the argument's torch name where known."""
    out: List[Tuple[Tuple, Any, str]] = []

    def go(v, path, label):
        if isinstance(v, Call):
            for i, a in enumerate(v.args):
                go(a, path + (i,), v.names[i] if i < len(v.names) else label)
            for k, a in v.kwargs:
                go(a, path + (k,), k)
        elif isinstance(v, list):
            for i, a in enumerate(v):
                go(a, path + (i,), label)
        elif is_number(v):
            out.append((path, v, label))
    for part, call in init:
        if isinstance(call, Call):
            go(call, (part[1],), str(part[1]))
    return out


def constructor_arguments(slots: List[List[Tuple[Any, str]]]) -> Tuple[Dict[int, str], List[str], List[List[Any]]]:
    """Instances of one generated class differ only in numbers (``slots[k]``: instance k's numeric
    literals as (value, label), in the same order for all): the numbers that differ become
    constructor arguments, named after their label (``in_channels``); literals with the same values in
    every instance share one argument. Returns (literal index -> argument name, the arguments'
    names, each instance's argument values)."""
    n = len(slots[0])
    differing = [k for k in range(n) if len({repr(s[k][0]) for s in slots}) > 1]
    by_values: "OrderedDict[str, List[int]]" = OrderedDict()
    for k in differing:
        by_values.setdefault(repr([s[k][0] for s in slots]), []).append(k)
    names: Dict[int, str] = {}
    arg_list: List[str] = []
    for idxs in by_values.values():
        label = ident(slots[0][idxs[0]][1] or "arg")
        nm, j = label, 2
        while nm in arg_list or nm == "self":
            nm, j = f"{label}_{j}", j + 1
        arg_list.append(nm)
        for k in idxs:
            names[k] = nm
    values = [[s[idxs[0]][0] for idxs in by_values.values()] for s in slots]
    return names, arg_list, values


def skeleton(inst: Instance) -> str:
    """What instances of one generated class share, for either reader: their members' constructor
    calls with the numbers left out (a child's call names its class, or its structure), own
    parameters, buffers, aliases, extra statements and forward."""
    return repr([(part, repr(c) if isinstance(c, Alias) else render_call(c, 0, {}, None, skeleton=True))
                 for part, c in inst.init]) + repr(inst.own) + "\n".join(inst.forward) + repr(inst.signature) + \
        repr(inst.aliases) + repr(inst.consts) + repr(inst.extra)


def structure_ids(insts: Iterable[Instance], child_of: Callable[[Call], Instance],
                  kind: Callable[[Instance], str]) -> Dict[int, int]:
    """id(instance) -> an id of its full nested structure, for either reader: equal for instances
    of one ``kind`` (the Gluon class, the scope's base name) whose skeletons are equal once each
    child's constructor call (a ``Ref``; ``child_of`` gives its instance) names the child's structure."""
    memo: Dict[int, int] = {}
    table: Dict[str, int] = {}

    def go(inst: Instance) -> int:
        key = id(inst)
        if key in memo:
            return memo[key]
        memo[key] = -1      # a cycle cannot happen (module trees), but stay finite
        for _, call in inst.init:
            if isinstance(call, Call):
                for ref in collect_refs(call):
                    ref.fn = f"S{go(child_of(ref))}"
        memo[key] = table.setdefault(skeleton(inst) + kind(inst), len(table))
        return memo[key]
    for i in insts:
        go(i)
    return memo


class ClassNames:
    """Class names of one generated file, for either reader: the first free of ``base``,
    ``base_2``, ``base_3``... (``_`` appended where that shadows a name the file uses)."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken = set(taken)

    def new(self, base: str) -> str:
        cname, k = base, 2
        while cname in self.taken:
            cname, k = f"{base}_{k}", k + 1
        cname = free_name(cname, self.taken)
        self.taken.add(cname)
        return cname


def finish_class(cname: str, members: List[Instance], write: Callable[..., str],
                 refs: Callable[[Instance], Iterable[Call]]) -> Tuple[str, List[str], List[List[Any]]]:
    """One generated class for ``members`` (instances that differ only in numbers), for either
    reader: the numbers that differ become constructor arguments; every call that builds a member
    (``refs(m)``) is pointed at ``cname`` with its own values. Returns (the class source from
    ``write(cname, members, literal index -> argument, arguments)``, the arguments, their values)."""
    names, arg_list, values = constructor_arguments([[(v, label) for _, v, label in literal_slots(m.init)]
                                                     for m in members])
    src = write(cname, members, names, arg_list)
    for m, vals in zip(members, values):
        for ref in refs(m):
            ref.fn, ref.kwargs = cname, list(zip(arg_list, vals))
    return src, arg_list, values
