"""Import gluoncv (0.10.x, MXNet side) in a process that also has torch >= 2.

``gluoncv/__init__.py`` calls ``check._require_pytorch_version('1.4.0', '2.0.0')``, which raises
``RuntimeError`` for torch >= 2 (its own "torch not installed" path raises ``ImportError`` and is
skipped). ``import_gluoncv()`` imports gluoncv with that one check answering "no torch" *for the
duration of the import only*: gluoncv then loads its MXNet modules (``model_zoo``, ``data``,
``utils``, ``nn``, ``loss``) as it does on a machine without torch, and does not load its own torch
backend (``gluoncv.torch``). torch itself is not imported, patched or replaced; the check function
is put back afterwards. gluoncv's model zoo imports ``portalocker`` (``pip install portalocker``,
part of ``dualdl[gluoncv]``); its absence is reported as such instead of gluoncv's silent
"no mxnet" fallback.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from types import ModuleType

__all__ = ["import_gluoncv"]

_INSTALL = ("pip install 'dualdl[gluoncv]' (or: pip install portalocker && "
            "pip install --no-deps gluoncv==0.10.5.post0)")


def _no_torch(*args, **kwargs):
    raise ImportError("dualdl.port.import_gluoncv: gluoncv's torch backend is not loaded (it needs torch<2)")


def import_gluoncv() -> ModuleType:
    """Return the ``gluoncv`` package with its MXNet parts imported (``gluoncv.model_zoo``,
    ``gluoncv.data``, ``gluoncv.utils``, ``gluoncv.nn``, ``gluoncv.loss``), also when torch >= 2 is
    installed. Safe to call more than once; raises ``ImportError`` naming what to install."""
    done = sys.modules.get("gluoncv")
    if done is not None and getattr(done, "_found_mxnet", False):
        return done
    spec = importlib.util.find_spec("gluoncv")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"gluoncv is not installed: {_INSTALL}")
    if importlib.util.find_spec("portalocker") is None:
        raise ImportError(f"gluoncv's model zoo imports portalocker, which is not installed: {_INSTALL}")
    import mxnet  # noqa: F401  (gluoncv's MXNet modules need it; a missing mxnet is its own error)

    before = set(sys.modules)
    check_spec = importlib.util.spec_from_file_location(
        "gluoncv.check", os.path.join(spec.submodule_search_locations[0], "check.py"))
    check = importlib.util.module_from_spec(check_spec)
    check_spec.loader.exec_module(check)
    original = check._require_pytorch_version
    check._require_pytorch_version = _no_torch
    sys.modules["gluoncv.check"] = check
    try:
        with warnings.catch_warnings():
            # gluoncv's version checks use distutils' LooseVersion (deprecated since Python 3.10)
            warnings.simplefilter("ignore", DeprecationWarning)
            gluoncv = importlib.import_module("gluoncv")
            if not getattr(gluoncv, "_found_mxnet", False):
                # gluoncv swallows the ImportError of its MXNet modules: import one to show it
                for sub in ("data", "model_zoo", "nn", "utils", "loss"):
                    importlib.import_module(f"gluoncv.{sub}")
                raise ImportError("gluoncv did not load its MXNet modules (gluoncv._found_mxnet is False)")
    except BaseException as e:
        for name in set(sys.modules) - before:         # no half-imported gluoncv left behind
            if name == "gluoncv" or name.startswith("gluoncv."):
                del sys.modules[name]
        if not isinstance(e, Exception):
            raise
        raise ImportError(f"import gluoncv failed: {type(e).__name__}: {e}. Install: {_INSTALL}") from e
    finally:
        check._require_pytorch_version = original
    gluoncv._require_pytorch_version = original     # the name gluoncv/__init__.py bound
    gluoncv.check = check                           # the submodule attribute a normal import sets
    return gluoncv
