"""The ``dualdl`` command line. Each subcommand lives in its own module and is imported only
when run, so ``dualdl --help`` imports no framework.

Conventions every subcommand shares: ``--help`` shows each option's default; an error is one
line on stderr (``dualdl SUB: what was wrong and what to do``) with exit status 2 for bad input
and 1 for a check that failed; progress goes to stderr on a terminal (``--progress`` forces it,
``--quiet`` silences it); ``dualdl --version``."""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from typing import Any, List, NoReturn, Optional

# subcommand -> (module, one-line help). Each module defines add_arguments(parser) and run(args) -> int.
SUBCOMMANDS = {
    "demo": ("dualdl.demo.cli", "train the CRNN digit-string demo on both backends and compare"),
    "launch": ("dualdl.distributed.launch", "start a multi-process training run on this host or across hosts"),
    "convert": ("dualdl.port.cli_convert", "convert checkpoints between Gluon, torch and safetensors"),
    "translate": ("dualdl.port.cli_translate", "translate a Gluon model into PyTorch source + weights, with proof"),
    "convert-project": ("dualdl.port.cli_project", "convert a Gluon project's source to PyTorch source, with a proof over its run"),
    "parity": ("dualdl.testing.cli_parity", "run a parity check of a model factory on both backends"),
    "info": ("dualdl.info", "show installed backends, versions and devices"),
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help with every option's default shown (``(default: X)``), unless its help
    already says it or there is none to show (flags, required options, None)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or not _shows(action.default) or action.required or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


def _shows(default: Any) -> bool:
    """A default worth printing: not None, not a flag's False, not a list, not suppressed."""
    return not (default is None or default is False or default is argparse.SUPPRESS or isinstance(default, list))


class OneLineParser(argparse.ArgumentParser):
    """An argument error is one line with exit 2 (no usage block): ``PROG: message (see PROG --help)``."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {' '.join(message.split())} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def subcommand_parser(name: str, width: Optional[int] = None) -> argparse.ArgumentParser:
    """The parser of ``dualdl NAME`` with its module's arguments and the shared ``--quiet``/``--progress``."""
    module = importlib.import_module(SUBCOMMANDS[name][0])
    fmt = HelpFormatter if width is None else (lambda prog: HelpFormatter(prog, width=width))
    p = OneLineParser(prog=f"dualdl {name}", description=SUBCOMMANDS[name][1], formatter_class=fmt)
    module.add_arguments(p)
    p.error = OneLineParser.error.__get__(p)   # type: ignore[method-assign]  # a module's own error() too
    for a in p._actions:           # options without help text still show their default
        if not a.help and a.option_strings and _shows(a.default):
            a.help = "(default: %(default)s)"
    shown = {a.dest for a in p._actions}
    if "quiet" not in shown:
        p.add_argument("--quiet", action="store_true", help="print no progress on stderr")
    if "progress" not in shown:
        p.add_argument("--progress", action="store_true",
                       help="print progress on stderr even when it is not a terminal")
    return p


def build_parser(width: Optional[int] = None) -> argparse.ArgumentParser:
    fmt = HelpFormatter if width is None else (lambda prog: HelpFormatter(prog, width=width))
    parser = OneLineParser(prog="dualdl", formatter_class=fmt,
                           description="dualdl: write deep-learning code once, run it on PyTorch or MXNet/Gluon.")
    parser.add_argument("--version", action="version", version=f"dualdl {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
    return parser


def _version() -> str:
    from . import __version__
    return __version__


class Progress:
    """Progress lines on stderr, ``[dualdl SUB 3.2 s] what is happening``: shown on a terminal or
    with ``--progress``, never with ``--quiet``."""

    def __init__(self, prog: str, args: Optional[argparse.Namespace] = None, stream: Any = None):
        self.prog, self.stream, self.t0 = prog, stream, time.perf_counter()
        quiet = bool(getattr(args, "quiet", False))
        forced = bool(getattr(args, "progress", False))
        out = stream if stream is not None else sys.stderr
        self.enabled = not quiet and (forced or bool(getattr(out, "isatty", lambda: False)()))

    def __call__(self, text: str) -> None:
        if self.enabled:
            out = self.stream if self.stream is not None else sys.stderr
            print(f"[{self.prog} {time.perf_counter() - self.t0:.1f} s] {text}", file=out, flush=True)


def progress(args: argparse.Namespace, prog: str) -> Progress:
    """The :class:`Progress` of a subcommand run with ``args``."""
    return Progress(prog, args)


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0].startswith("-") or argv[0] not in SUBCOMMANDS:
        if argv and not argv[0].startswith("-"):
            parser.error(f"unknown command {argv[0]!r}; choose from {', '.join(SUBCOMMANDS)}")
        if argv:
            parser.parse_args(argv)        # --help, --version, or a one-line error
        parser.print_help()
        return 0 if argv else 2
    name = argv[0]
    args = subcommand_parser(name).parse_args(argv[1:])
    try:
        return int(importlib.import_module(SUBCOMMANDS[name][0]).run(args) or 0)
    except BrokenPipeError:            # `dualdl ... | head`: the reader left; not an error of ours
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # no second error at exit
        return 1
    except KeyboardInterrupt:
        print(f"dualdl {name}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:             # never a raw traceback; DUALDL_DEBUG=1 shows it
        from . import config
        if config.get("DUALDL_DEBUG"):
            raise
        text = " ".join(str(e).split())[:500] or type(e).__name__
        print(f"dualdl {name}: internal error {type(e).__name__}: {text} (rerun with DUALDL_DEBUG=1 for the "
              f"traceback and report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
