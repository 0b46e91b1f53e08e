"""The ``dualdl`` command line. Each subcommand lives in its own module and is imported only
when run, so ``dualdl --help`` imports no framework."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

# subcommand -> (module, one-line help). Each module defines add_arguments(parser) and run(args) -> int.
SUBCOMMANDS = {
    "demo": ("dualdl.demo.cli", "train the CRNN digit-string demo on both backends and compare"),
    "launch": ("dualdl.distributed.launch", "start a multi-process training run on this host or across hosts"),
    "convert": ("dualdl.port.cli_convert", "convert checkpoints between Gluon, torch and safetensors"),
    "translate": ("dualdl.port.cli_translate", "translate a Gluon model into PyTorch source + weights, with proof"),
    "parity": ("dualdl.testing.cli_parity", "run a parity check of a model factory on both backends"),
    "info": ("dualdl.info", "show installed backends, versions and devices"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dualdl", description="dualdl: write deep-learning code once, run it on PyTorch or MXNet/Gluon.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in SUBCOMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            parser.error(f"unknown command {argv[0]!r}; choose from {', '.join(SUBCOMMANDS)}")
        parser.print_help()
        return 0 if argv else 2
    name = argv[0]
    module = importlib.import_module(SUBCOMMANDS[name][0])
    p = argparse.ArgumentParser(prog=f"dualdl {name}", description=SUBCOMMANDS[name][1])
    module.add_arguments(p)
    args = p.parse_args(argv[1:])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
