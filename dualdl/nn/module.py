"""Write-once modules: a subclass of :class:`Module` is instantiated as a *native* module.

``class Net(dl.nn.Module)`` written once; ``Net()`` under ``dl.use("torch")`` is a
``torch.nn.Module``, under ``dl.use("mxnet")`` a Gluon ``HybridBlock`` (or pass ``backend=``).
The native class is built on first use as ``type("Net", (Net, <adapter Module base>), {...})`` and
cached, so the user's ``__init__``/``forward`` run unchanged, ``isinstance(net, Net)`` holds, and
native tools (hooks, optimizers, ``hybridize()``, ``torch.compile``, ``.to()``) keep working.

Built-in layers (``Linear``, ``Conv2d``, ...) are declared here with ``_dl_layer``; instantiating
one returns the adapter's native implementation of that layer. Children created inside a module's
``__init__`` are built on the same backend as the module.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..backend import _using, get_backend
from .arguments import check_arguments
from .declaration import fit_keywords, refuse

__all__ = ["Module", "ModuleMeta", "Parameter", "native_class"]

_NATIVE_CACHE: Dict[Tuple[type, str], type] = {}


class ModuleMeta(type):
    """Turns ``SomeModule(...)`` into the construction of a native module of the active backend."""

    def __call__(cls, *args, backend: Optional[str] = None, **kwargs):
        if "_dl_native_for" in cls.__dict__:          # already a native class: plain construction
            if backend is not None and backend != cls.__dict__["_dl_native_for"]:
                raise ValueError(f"{cls.__name__} is the {cls._dl_native_for} build; "
                                 f"backend={backend!r} does not match")
            return super().__call__(*args, **kwargs)
        be = get_backend(backend)
        layer = cls.__dict__.get("_dl_layer")
        with _using(be.name):
            if layer is not None:
                return _build_layer(cls, layer, be, args, kwargs)
            return native_class(cls, be.name)(*args, **kwargs)

    def __instancecheck__(cls, obj: Any) -> bool:
        if type.__instancecheck__(cls, obj):
            return True
        layer = cls.__dict__.get("_dl_layer")
        if layer is not None:                          # nn.Linear matches every backend's Linear
            return getattr(type(obj), "_dl_layer", None) == layer
        if cls is Module:                              # any module dualdl built
            return getattr(type(obj), "_dl_layer", None) is not None
        return False


def _build_layer(cls: type, layer: str, be: Any, args: tuple, kwargs: dict) -> Any:
    """The adapter's ``layer`` built from ``args``/``kwargs`` (see :func:`_bound_init`)."""
    impl = getattr(be.module("nn"), layer)
    return _bound_init(layer, cls.__dict__.get("_dl_decl"), impl, be, args, kwargs, impl)


def _bound_init(layer: str, decl: Any, impl: type, be: Any, args: tuple, kwargs: dict, make: Any) -> Any:
    """Bind the call against the layer's declaration (same acceptance and TypeError wording on both
    backends), refuse an invalid value as torch does (dualdl/nn/arguments.py, the same error on both
    backends), refuse what the adapter declares it cannot honour, then build the adapter's layer
    with every declared argument by name (``make``: the class, or a subclass's ``super().__init__``);
    ``device``/``dtype`` are made native by the adapter's ``factory_kwargs`` (MXNet: the
    parameters' context and dtype)."""
    if decl is None:                                   # an entry without a declared signature
        return make(*args, **kwargs)
    pos, kw, bound = decl.bind(layer, args, kwargs)
    check_arguments(layer, bound)
    refuse(layer, impl, bound, be.name)
    kw = fit_keywords(layer, decl, impl, kw, be.framework)
    if kw.get("device") is not None or kw.get("dtype") is not None:
        kw["device"], kw["dtype"], scope = be.module("nn").factory_kwargs(layer, kw.get("device"), kw.get("dtype"))
        with scope:
            return make(*pos, **kw)
    return make(*pos, **kw)


def declared_layer(cls: type) -> Optional[type]:
    """The built-in layer class (``nn.Sequential``, ``nn.Transformer``...) a write-once class
    derives from, if any: ``class Block(nn.Sequential)`` is built on the adapter's Sequential."""
    for c in cls.__mro__[1:]:
        if "_dl_layer" in c.__dict__ and isinstance(c, ModuleMeta):
            return c
    return None


def native_class(cls: type, backend: str) -> type:
    """The native class for write-once class ``cls`` on ``backend`` (built once, then cached)."""
    key = (cls, backend)
    native = _NATIVE_CACHE.get(key)
    if native is None:
        nn = get_backend(backend).module("nn")
        layer = declared_layer(cls)
        base = nn.Module if layer is None else getattr(nn, layer.__dict__["_dl_layer"])
        ns = {"_dl_native_for": backend, "__module__": cls.__module__,
              "__qualname__": cls.__qualname__, "__doc__": cls.__doc__, "_dl_layer_base": layer}
        namespace = getattr(base, "_dl_native_namespace", None)      # torch's layers need none
        ns.update(namespace(cls) if namespace is not None else {})
        native = ModuleMeta(cls.__name__, (cls, base), ns)
        _NATIVE_CACHE[key] = native
    return native


class Module(metaclass=ModuleMeta):
    """Base class of write-once models. Define ``__init__`` (create layers, call
    ``super().__init__()`` first) and ``forward(self, x, ...)`` as in PyTorch.

    On MXNet, ``forward`` runs inside ``hybrid_forward``: its arguments are NDArrays, or Symbols
    after ``hybridize()``. Write it with ``dualdl.ops`` and layers only; parameter attributes
    (``self.w``) hold the bound tensor while it runs. Under ``hybridize()`` a Symbol has no
    ``.shape``: use ``ops.flatten`` / ``ops.reshape(x, (-1, n))`` instead of reading sizes.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        layer = getattr(type(self), "_dl_layer_base", None)
        if layer is None:
            if args or kwargs:          # torch's wording (Gluon's HybridBlock would take prefix, params)
                raise TypeError(f"Module.__init__() takes 1 positional argument but {len(args) + 1} were "
                                f"given" if args else f"Module.__init__() got an unexpected keyword "
                                f"argument {next(iter(kwargs))!r}")
            super().__init__()
            return
        # a subclass of a built-in layer (torchvision's Conv2dNormActivation(nn.Sequential)):
        # bound against the layer's declaration, then the adapter layer's __init__
        name = layer.__dict__["_dl_layer"]
        be = get_backend(_native_for(type(self)))
        _bound_init(name, layer.__dict__.get("_dl_decl"), getattr(be.module("nn"), name), be, args, kwargs,
                    super().__init__)


def _native_for(cls: type) -> str:
    for c in cls.__mro__:
        if "_dl_native_for" in c.__dict__:
            return c.__dict__["_dl_native_for"]
    raise TypeError(f"{cls.__name__} is a write-once declaration; instantiate it to build a native module")


class Parameter:
    """``nn.Parameter(data, requires_grad=True)``: a learnable tensor registered by assigning it
    to a module attribute (``self.w = nn.Parameter(np.zeros((3, 4)))``).

    ``data`` is a numpy array or a native tensor. On torch this *is* ``torch.nn.Parameter``; on
    MXNet a spec that the module turns into a Gluon ``Parameter`` named after the attribute.
    """

    def __new__(cls, data: Any, requires_grad: bool = True, backend: Optional[str] = None):
        return get_backend(backend).module("nn").make_parameter(data, requires_grad)
