"""The API reference pages (docs/api*.md), generated from the modules' ``__all__``: one mkdocstrings
entry (``::: path``) per public name, under the name a user imports it by. Run

    python tests/docs_api.py          # rewrite docs/api*.md

tests/test_docs_api.py fails when a page differs from what this writes (a public name without
an entry). The docstrings' Sphinx roles are rendered by docs/_ext/sphinx_roles.py."""
from __future__ import annotations

import importlib
import inspect
import pathlib
import sys
from typing import Dict, List, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# page -> (title, intro, [(section title, module, names or None for its __all__)])
PAGES: Dict[str, Tuple[str, str, List[Tuple[str, str, object]]]] = {
    "api.md": ("API reference: `dualdl`",
               "Generated from the docstrings (`python tests/docs_api.py`). The names below are `dualdl.*`; "
               "the submodules have their own pages: [`dualdl.nn`](api-nn.md), [`dualdl.ops`](api-ops.md), "
               "[`dualdl.losses`](api-losses.md), [`dualdl.optim`](api-optim.md), [`dualdl.data`](api-data.md), "
               "[`dualdl.distributed`](api-distributed.md), [`dualdl.port`](api-port.md), "
               "[`dualdl.testing`](api-testing.md); writing a backend: [Extending](api-extending.md).",
               [("Backends", "dualdl", ["use", "backend", "get_backend", "backend_for", "available_backends",
                                        "BackendNotInstalledError"]),
                ("Devices", "dualdl", ["Device", "cpu", "gpu", "device", "devices", "visible_gpus"]),
                ("Tensors", "dualdl", ["from_numpy", "to_numpy", "item", "reshape", "to_device", "device_of",
                                       "is_tensor", "zeros", "ones", "full", "arange", "zeros_like", "ones_like",
                                       "full_like"]),
                ("Random numbers", "dualdl", ["seed", "rand", "randn", "randint", "rand_like", "randn_like",
                                              "randint_like", "multinomial", "bernoulli", "normal"]),
                ("Random state and in-place fills (`dualdl.random`)", "dualdl.random", None),
                ("Parameters and models", "dualdl", ["numel", "dim", "requires_grad", "requires_grad_", "grad",
                                                     "add_", "to_dtype"]),
                ("Autograd", "dualdl", ["record", "backward", "no_grad"]),
                ("State dicts and checkpoints", "dualdl", ["state_dict", "load_state_dict", "named_parameters",
                                                           "save", "load"]),
                ("Training", "dualdl", ["Trainer"]),
                ("State dict helpers (`dualdl.state`)", "dualdl.state", None),
                ("Tensor files (`dualdl.formats`)", "dualdl.formats", None)]),
    "api-nn.md": ("API reference: `dualdl.nn`",
                  "Layers with PyTorch's names and signatures; each builds a `torch.nn` module on torch and a "
                  "Gluon block on MXNet (what each hides: [Models](models.md)).",
                  [("Modules", "dualdl.nn", ["Module", "Parameter", "native_class"]),
                   ("Layers", "dualdl.nn", "layers"),
                   ("Losses as modules", "dualdl.nn", "losses"),
                   ("Functional (`dualdl.nn.functional`)", "dualdl.nn.functional", "functional"),
                   ("Initialisation (`dualdl.nn.init`)", "dualdl.nn.init", None)]),
    "api-ops.md": ("API reference: `dualdl.ops`", "Functions on native tensors with torch's semantics on both backends.",
                   [("Operations", "dualdl.ops", None)]),
    "api-losses.md": ("API reference: `dualdl.losses`", "Losses with PyTorch's semantics ([Losses](losses.md)).",
                      [("Losses", "dualdl.losses", None),
                       ("Functional (`dualdl.losses.functional`)", "dualdl.losses.functional", None),
                       ("Gluon's variants (`dualdl.losses.gluon`)", "dualdl.losses.gluon", None)]),
    "api-optim.md": ("API reference: `dualdl.optim`", "Optimizers and schedulers with torch's update rules on both "
                     "backends ([Training](training.md#optimizers)).",
                     [("Optimizers and gradient helpers", "dualdl.optim", None),
                      ("Schedulers (`dualdl.optim.lr_scheduler`)", "dualdl.optim.lr_scheduler", None)]),
    "api-data.md": ("API reference: `dualdl.data`", "Datasets, samplers and the DataLoader ([Data pipeline](data.md)).",
                    [("Data", "dualdl.data", None)]),
    "api-distributed.md": ("API reference: `dualdl.distributed`",
                           "Several processes, one job ([Distributed training](distributed.md)).",
                           [("Distributed", "dualdl.distributed", None)]),
    "api-port.md": ("API reference: `dualdl.port`",
                    "Porting Gluon to PyTorch: translate a block to source, map weights, port the recipe "
                    "([Port a Gluon project](porting-project.md)).",
                    [("Translate a Gluon block to PyTorch source", "dualdl.port",
                      ["translate", "TranslateReport", "TranslationError", "register_translation", "import_gluoncv"]),
                     ("Map weights onto a PyTorch model", "dualdl.port",
                      ["port", "port_gluon_to_torch", "port_torch_to_gluon", "PortReport", "PortWarning",
                       "PortInputError", "Mapping", "Entry", "as_mapping", "MappingError", "register_transform"]),
                     ("Pairing rules", "dualdl.port", ["Rule", "Fused", "Transpose", "Rename", "Ignore",
                                                       "FoldConvBias", "ZeroMissingBias", "DEFAULT_RULES"]),
                     ("The training recipe", "dualdl.port", ["translate_trainer", "TrainerTranslation",
                                                              "TrainerTranslationError", "translate_recipe",
                                                              "Recipe", "RecipeError"])]),
    "api-testing.md": ("API reference: `dualdl.testing`", "Parity tests ([Parity testing](parity.md)).",
                       [("Parity", "dualdl.testing", None)]),
    "api-extending.md": ("Extending: a new backend",
                         "A backend is an adapter package (`dualdl_torch/`, `dualdl_mx/`) that provides the modules "
                         "and names of the contract below; `dualdl.backend.Backend` is its entry point "
                         "([Concepts](concepts.md#backends-and-adapters)).",
                         [("The backend class", "dualdl.backend", ["Backend", "backend_of"]),
                          ("The adapter contract (`dualdl.contract`)", "dualdl.contract", None)]),
}
# the modules whose every public name must have an entry (tests/test_docs_api.py)
MODULES = ("dualdl", "dualdl.nn", "dualdl.nn.functional", "dualdl.random", "dualdl.ops", "dualdl.losses",
           "dualdl.optim", "dualdl.data", "dualdl.port", "dualdl.testing", "dualdl.nn.init", "dualdl.optim.lr_scheduler",
           "dualdl.distributed", "dualdl.formats", "dualdl.contract", "dualdl.losses.functional", "dualdl.losses.gluon")


def _names(module: str, names) -> List[str]:
    mod = importlib.import_module(module)
    if names is None:
        return [n for n in mod.__all__ if not inspect.ismodule(getattr(mod, n))]
    if names == "layers":
        from dualdl.nn.layers import __all__ as layers
        return list(layers)
    if names == "losses":
        return list(mod.LOSSES)
    if names == "functional":      # its losses are dualdl.losses.functional's (on that page)
        return [n for n in mod.__all__ if not target(module, n).startswith("dualdl.losses.")]
    return list(names)


def target(module: str, name: str) -> str:
    """The path mkdocstrings loads: where a class or function is defined (dualdl's lazy names and
    re-exports are invisible to static analysis), else the module's own attribute."""
    obj = getattr(importlib.import_module(module), name)
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and "<" not in obj.__qualname__:
        # classes built at import time live where docs/_ext/runtime_classes.py shows them
        for home in ("dualdl.nn.layers", "dualdl.losses.modules"):
            if getattr(importlib.import_module(home), obj.__qualname__, None) is obj:
                return f"{home}.{obj.__qualname__}"
        return f"{obj.__module__}.{obj.__qualname__}"
    return f"{module}.{name}"


def _entry(module: str, name: str) -> str:
    path, shown = target(module, name), f"{module}.{name}"
    opts = [f"      heading: \"{shown}\"", f"      toc_label: \"{name}\""]
    return f"::: {path}\n    options:\n" + "\n".join(opts) + "\n"


def pages() -> Dict[str, str]:
    """``{page: text}``; an object re-exported under two names gets one entry (the first). A public
    name that no section lists gets an entry in "Other names" of its module's first page."""
    seen, out, first_page = set(), {}, {}
    for name, (title, intro, sections) in PAGES.items():
        text = [f"# {title}", "", "<!-- generated by python tests/docs_api.py: do not edit -->", "", intro, ""]
        for heading, module, names in sections:
            first_page.setdefault(module, name)
            entries = []
            for n in _names(module, names):
                if target(module, n) not in seen:
                    seen.add(target(module, n))
                    entries.append(_entry(module, n))
            if entries:
                text += [f"## {heading}", "", *entries]
        out[name] = text
    for module in MODULES:
        rest = [n for n in public(module) if target(module, n) not in seen]
        seen |= {target(module, n) for n in rest}
        if rest:
            out[first_page[module]] += [f"## Other names of `{module}`", "", *(_entry(module, n) for n in rest)]
    return {name: "\n".join(text) for name, text in out.items()}


def documented() -> set:
    """The objects with an entry (``::: path``) on the pages on disk."""
    import re
    return {path for p in PAGES if (DOCS / p).exists()
            for path in re.findall(r"^::: ([\w.]+)$", (DOCS / p).read_text(), re.M)}


def public(module: str) -> List[str]:
    """A module's public names that are not submodules (those have their own pages)."""
    mod = importlib.import_module(module)
    return [n for n in mod.__all__ if not inspect.ismodule(getattr(mod, n))]


def main() -> None:
    for p, text in pages().items():
        (DOCS / p).write_text(text)
    print(f"wrote {', '.join(PAGES)}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
