"""The generated file's text from a module tree (mixed into ``codegen.Generator``): instances of
one Gluon class grouped by their full nested structure, one torch class per group (a numeric
literal that differs between its instances becomes a constructor argument), children's classes
first, parameter ties and aliases, the header, and one load of the result: code that cannot load
its own weights is refused, never written."""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Tuple

from .errors import TranslationError
from .module_tree import (Alias, ClassNames, Instance, MapEntry, access, alias_lines, assign, finish_class, plain_name,
                          structure_ids)
from .registry import Call
from .render import camel, collect_refs, defined_names, free_name, render_args, render_call, statement
from .safe import comment, docstring_text, literal

__all__ = ["ClassWriter", "class_source", "file_text"]


class ClassWriter:
    """The source half of :class:`~dualdl.port.translate.codegen.Generator` (its state: instances,
    by_class, refs, variants, class_src, helpers, entries, root)."""

    # ---- class variants and constructor arguments ----
    def resolve_all(self) -> None:
        """Group every class's instances by full nested structure, then write the classes,
        children's classes first (a parent's constructor arguments include its children's)."""
        memo = structure_ids([i for insts in self.by_class.values() for i in insts],
                             lambda ref: self.instances[id(ref.block)],
                             lambda i: type(i.block).__qualname__ + type(i.block).__module__)
        groups: "OrderedDict[Tuple[type, int], List[Instance]]" = OrderedDict()
        for cls, insts in self.by_class.items():
            for inst in insts:
                groups.setdefault((cls, memo[id(inst)]), []).append(inst)
        taken = ClassNames({"Concurrent"} | defined_names(self.helpers.values()))
        names = {(cls, sid): taken.new(camel(cls.__name__)) for cls, sid in groups}
        of = {id(i.block): key for key, insts in groups.items() for i in insts}
        done: set = set()

        def finish(key):
            if key in done:
                return
            done.add(key)
            for inst in groups[key]:
                for _, call in inst.init:
                    if isinstance(call, Call):
                        for ref in collect_refs(call):
                            finish(of[id(ref.block)])
            self._variant(names[key], groups[key])
        for key in groups:
            finish(key)

    def _variant(self, cname: str, members: List[Instance]) -> None:
        self.class_src[cname], arg_list, values = finish_class(
            cname, members, lambda c, ms, names, args: self._class_source(c, ms[0], names, args),
            lambda m: self.refs.get(id(m.block), []))
        for m, vals in zip(members, values):
            self.variants[id(m.block)] = (cname, vals, arg_list)

    def _class_source(self, cname, inst: Instance, names: Dict[int, str], args: List[str]) -> str:
        block = inst.block
        gl = f"{type(block).__module__}.{type(block).__qualname__}"
        # a cell stack whose layers the parent indexes (ELMo: self.forward_layers[0][1]): nn.Sequential indexes
        base = "nn.Sequential" if (block._children and not inst.own and not inst.consts and
                                   all(str(k).isdigit() for k in block._children)) else "nn.Module"
        ties = self._tie_lines() if inst is self.instances.get(id(self.root)) else []
        return class_source(cname, base, f"Translated from Gluon {gl}.", args, inst, names, ties)

    def _tie_lines(self) -> List[str]:
        lines = alias_lines(self.root_aliases)
        owner: Dict[int, MapEntry] = {}
        for e in self.entries:
            if e.param is None:
                continue
            first = owner.setdefault(id(e.param), e)
            if first is e:
                continue
            if e.tied_to is None:
                e.tied_to = first.torch_key
            if any(e.torch_key.startswith(a + ".") for a in self.aliased):
                continue      # the whole module is the other one
            mod, local = e.torch_key.rsplit(".", 1) if "." in e.torch_key else ("", e.torch_key)
            fmod, flocal = first.torch_key.rsplit(".", 1) if "." in first.torch_key else ("", first.torch_key)
            lines.append(f"        {self._param_access(mod, local)} = {self._param_access(fmod, flocal)}"
                         f"  # shared with {comment(first.gluon_key)} in Gluon")
        return lines

    def _param_access(self, mod: str, local: str) -> str:
        base = access(self.parts.get(mod, tuple(("a", p) for p in mod.split(".") if p)))
        return f"{base}.{local}" if plain_name(local) else f"getattr({base}, {literal(local)})"

    # ---- the whole file ----
    def source(self) -> str:
        kind = self.kind(self.root)
        top = camel(self.name)
        if kind == "traced":
            self._build_instance_root()
            self.resolve_all()
            cname = self.variants[id(self.root)][0]
            body = list(self.class_src.items())
            src = [s for n, s in body if n != cname] + [self.class_src[cname]]
            self.top_class = cname
        else:
            call = self.ctor(self.root, "", "", ())
            self.resolve_all()
            if not call.fn.startswith("nn.") and call.fn != "Concurrent":
                raise TranslationError("a top-level block of this kind", block=type(self.root).__name__)
            src = list(self.class_src.values())
            top = free_name(top, set(self.class_src) | defined_names(self.helpers.values()))
            ties = self._tie_lines()
            doc = docstring_text(type(self.root).__qualname__)
            src.append(f"class {top}({call.fn}):\n    \"\"\"Translated from Gluon {doc}.\"\"\"\n\n"
                       f"    def __init__(self):\n        super().__init__({render_args(call, 8)})\n" +
                       ("\n".join(ties) + "\n" if ties else ""))
            self.top_class = top
        return file_text(["PyTorch translation of a Gluon model, generated by `dualdl translate`."], self.name,
                         list(self.helpers.values()) + src)


def class_source(cname: str, base: str, doc: str, args: List[str], inst: Instance, names: Dict[int, str],
                 tail: List[str] = ()) -> str:
    """The source of one class of the module tree, for either reader: ``__init__`` (its members'
    constructor calls, numeric literal ``i`` written as ``names[i]``; own parameters; buffers;
    aliases; ``inst.extra`` and ``tail`` statements) and ``forward``."""
    lines = [f"class {cname}({base}):", f'    """{docstring_text(doc)}"""', "",
             f"    def __init__(self{''.join(', ' + a for a in args)}):", "        super().__init__()"]
    counter = [0]
    seen_comments: set = set()
    for part, call in inst.init:
        if isinstance(call, Alias):
            lines.append(f"        {assign([part], access(call.source))}"
                         f"  # the same Gluon block as {comment(call.gluon)}: one module, two names")
            continue
        notes: list = []
        text = render_call(call, 8, names, counter, seen=seen_comments, notes=notes)
        lines.append(f"        {statement(assign([part], text), notes)}")
    for part, shape, trainable in inst.own:
        value = f"nn.Parameter(torch.empty{literal(shape)})" if trainable else \
            f"nn.Parameter(torch.empty{literal(shape)}, requires_grad=False)"
        lines.append(statement(f"        self.{part[1]} = {value}" if part[0] == "a" else
                               f"        self.register_parameter({literal(part[1])}, {value})",
                               [] if trainable else ["grad_req='null' in Gluon"]))
    for part, shape, dtype in inst.consts:
        zeros = f"torch.zeros({literal(shape)}, dtype=torch.{dtype})"
        lines.append(f"        self.register_buffer({literal(part[1])}, {zeros})"
                     f"  # an array Gluon's block holds as an attribute (values in the weights file)")
    lines += alias_lines(inst.aliases)
    lines += [f"        {ln}" for ln in inst.extra]
    lines += list(tail)
    lines += ["", f"    def forward(self{''.join(', ' + a for a in inst.signature)}):"]
    lines += [f"        {ln}" for ln in inst.forward]
    return "\n".join(lines) + "\n"


def file_text(title: List[str], name: str, blocks: List[str]) -> str:
    """The generated file, for either reader: a docstring (what it translates, how to load its
    weights), torch's three imports, then ``blocks`` (helpers first, the top class last)."""
    header = ['"""' + title[0], *title[1:], "",
              "Only torch is needed to run it. Every MXNet convention that changes numbers is an",
              "explicit argument or line with a comment. Load the weights with",
              f"`model.load_state_dict(safetensors.torch.load_file(\"{name}.safetensors\"))`.",
              '"""', "import torch", "import torch.nn.functional as F", "from torch import nn", "", "", ""]
    return "\n".join(header) + "\n\n".join(blocks)
