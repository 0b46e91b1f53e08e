"""A griffe extension for the API reference (mkdocs.yml): ``dualdl.nn``'s layers and loss modules
are classes built at import time from declarations (``dualdl.nn.layers.LAYERS``), and
``dualdl.nn.functional``'s functions from ``dualdl.functional_spec``, which static analysis cannot see. Their modules get them from runtime inspection (torch's signatures and the
docstrings as ``help()`` shows them); importing them imports no framework."""
from __future__ import annotations

import importlib
import os
import sys
import inspect
from typing import Any

import griffe

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from griffe import Extension

RUNTIME = ("dualdl.nn.layers", "dualdl.losses.modules", "dualdl.nn.functional")


class RuntimeClasses(Extension):
    def on_module(self, *, mod: Any, **kwargs: Any) -> None:
        if mod.path not in RUNTIME:
            return
        module = importlib.import_module(mod.path)
        names = [n for n in module.__all__ if n not in mod.members and (
            isinstance(getattr(module, n, None), type) or getattr(getattr(module, n, None), "__module__", "") == mod.path)]
        # a loss class says it is dualdl.nn's (its __module__): inspected as is, it would be an alias
        # to a name static analysis cannot see; for the inspection it is this module's
        moved = {n: getattr(module, n).__module__ for n in names}
        for n in names:
            getattr(module, n).__module__ = mod.path
        try:
            inspected = griffe.inspect(mod.path, docstring_parser=mod.docstring.parser if mod.docstring else None)
        finally:
            for n, home in moved.items():
                getattr(module, n).__module__ = home
        for name in names:
            if name not in mod.members and name in inspected.members:
                member = inspected.members[name]
                member.parent = mod
                if isinstance(getattr(module, name), type):
                    _torch_signature(member, getattr(module, name))
                _roles(member)
                mod.set_member(name, member)


def _roles(obj: Any) -> None:
    """Sphinx roles rendered, as docs/_ext/sphinx_roles.py does for the statically loaded objects."""
    from sphinx_roles import convert
    if obj.docstring is not None:
        obj.docstring.value = convert(obj.docstring.value)
    for m in getattr(obj, "members", {}).values():
        if not m.is_alias:
            _roles(m)


def _torch_signature(cls: Any, obj: type) -> None:
    """The class's ``__init__`` as ``inspect.signature`` gives it (torch's, set by the declaration)
    instead of the ``(*args, **kwargs)`` of the shared constructor."""
    params = [griffe.Parameter(p.name, kind=griffe.ParameterKind(p.kind.description),
                               default=None if p.default is inspect.Parameter.empty else repr(p.default))
              for p in inspect.signature(obj).parameters.values()]
    if not params or params[0].name != "self":
        params.insert(0, griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword))
    init = griffe.Function("__init__", parameters=griffe.Parameters(*params))
    for name in list(cls.members):      # the shared base's machinery: documented on dualdl.nn.Module
        cls.del_member(name)
    cls.set_member("__init__", init)
