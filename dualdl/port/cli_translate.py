"""``dualdl translate MODULE:FACTORY --input-shape N,C,H,W --out DIR``: write a Gluon model as
PyTorch source + safetensors weights + a report proving both compute the same (eval and one
training step). ``dualdl translate model-symbol.json --params model-0000.params --input-shape ...``
does the same for an exported model. Exit status: 0 when the report is ok, 1 when a check failed
or a part could not be translated, 2 for bad arguments (one line on stderr, no traceback: the
factory, shapes, numbers, output folder, existing files without ``--force``, a full or read-only
disk). Frameworks are imported only when run."""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from typing import Any, NoReturn

import numpy as np

from .. import config

__all__ = ["add_arguments", "run"]

PROG = "dualdl translate"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("factory", metavar="MODULE:FACTORY|SYMBOL.json",
                   help="importable callable returning the Gluon block, e.g. mypkg.models:make_net or "
                        "mxnet.gluon.model_zoo.vision:resnet18_v1; or an exported model-symbol.json "
                        "(with --params model-0000.params)")
    p.add_argument("--input-shape", action="append", required=True, metavar="N,C,H,W",
                   help="shape of one sample input (repeat for several inputs)")
    p.add_argument("--input-dtype", choices=("float32", "int64"), default="float32",
                   help="int64 draws token ids in [0, --input-high) (for Embedding inputs)")
    p.add_argument("--input-high", type=int, default=10, help="upper bound of int64 token ids")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for NAME.py, NAME.safetensors, "
                                                                "NAME.report.json")
    p.add_argument("--name", help="file/module name (default: from the Gluon class)")
    p.add_argument("--params", metavar="FILE.params", help="Gluon save_parameters file to load into the block "
                                                           "(for SYMBOL.json: the exported -0000.params)")
    p.add_argument("--input-name", action="append", metavar="NAME",
                   help="SYMBOL.json only: the data input each --input-shape belongs to (repeat; default data, "
                        "data0, data1, ...)")
    p.add_argument("--output", action="append", metavar="NAME",
                   help="SYMBOL.json only: translate up to these internal outputs (repeat), e.g. fc1_output "
                        "for a Module-API symbol ending in SoftmaxOutput")
    p.add_argument("--no-verify", action="store_true", help="write the files without running the checks")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate of the verified SGD step (> 0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batchnorm", choices=("torch", "gluon"), default="torch",
                   help="torch: nn.BatchNorm*d (torch's unbiased running variance); gluon: a BatchNorm that "
                        "keeps Gluon's biased running variance, so statistics stay equal over training")
    p.add_argument("--inference", action="store_true",
                   help="translate for inference (train=False): blocks that branch on autograd.is_training() get their "
                        "inference forward only; needed where training asks autograd.is_recording() (detectors)")
    p.add_argument("--force", action="store_true",
                   help="overwrite NAME.py/.safetensors/.report.json even if translate did not write them")

    def error(message: str) -> NoReturn:      # one line, exit 2 (argparse prints the usage too)
        print(f"{PROG}: {message} (see {PROG} --help)", file=sys.stderr)
        sys.exit(2)
    p.error = error  # type: ignore[method-assign]


def _fail(message: Any, code: int = 2) -> int:
    text = " ".join(str(message).split())
    if text.startswith("translate: "):
        text = text[len("translate: "):]
    print(f"{PROG}: {text}", file=sys.stderr)
    return code


def _check_numbers(args: argparse.Namespace) -> None:
    if not math.isfinite(args.lr) or args.lr <= 0:
        raise ValueError(f"--lr must be a positive finite number, got {args.lr}")
    if args.seed < 0:
        raise ValueError(f"--seed must be 0 or more, got {args.seed}")
    if args.input_high < 1:
        raise ValueError(f"--input-high must be 1 or more, got {args.input_high}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out {args.out} is a file; give a folder")
    if args.params and not os.path.isfile(args.params):
        raise ValueError(f"--params {args.params} does not exist" if not os.path.exists(args.params)
                         else f"--params {args.params} is not a file")


def run(args: argparse.Namespace) -> int:
    from ..testing.cli_parity import FactoryError, call_factory, load_factory, parse_shape
    try:
        _check_numbers(args)
        shapes = [parse_shape(s) for s in args.input_shape]
        if args.factory.endswith(".json") and ":" not in args.factory:
            return _symbol_file(args, shapes)
        if args.input_name or args.output:
            raise ValueError("--input-name and --output are for an exported SYMBOL.json; a MODULE:FACTORY "
                             "block is translated whole")
        factory = load_factory(args.factory)
    except (ValueError, FactoryError) as e:
        return _fail(e)
    rng = np.random.default_rng(args.seed + 1)
    inputs = [rng.integers(0, args.input_high, s).astype(np.int64) if args.input_dtype == "int64"
              else rng.standard_normal(s).astype(np.float32) for s in shapes]
    try:
        block = call_factory(factory, args.factory)
    except FactoryError as e:
        return _fail(e)
    import mxnet as mx
    if not isinstance(block, mx.gluon.Block):
        return _fail(f"{args.factory} returned a {type(block).__name__}, not a Gluon Block")
    if args.params:
        try:
            block.load_parameters(args.params)
        except Exception as e:  # MXNet's own message names the missing / extra keys
            return _fail(f"cannot load {args.params} into {type(block).__name__}: {_first_line(e)}")
    else:
        try:
            block.initialize(mx.init.Xavier())
        except Exception:
            pass   # already initialised by the factory
    return _translate(args, lambda: _translate_block(block, inputs, args))


def _translate_block(block: Any, inputs, args):
    from .translate import translate
    return translate(block, inputs, args.out, name=args.name, verify=not args.no_verify, lr=args.lr,
                     seed=args.seed, force=args.force, batchnorm=args.batchnorm, train=not args.inference)


def _symbol_file(args: argparse.Namespace, shapes) -> int:
    if not os.path.isfile(args.factory):
        raise ValueError(f"{args.factory} does not exist (an exported model-symbol.json was expected)")
    if not args.params:
        raise ValueError(f"{args.factory} needs its weights: add --params MODEL-0000.params")
    if args.input_name and len(args.input_name) != len(shapes):
        raise ValueError(f"give one --input-name per --input-shape ({len(args.input_name)} names, "
                         f"{len(shapes)} shapes)")

    def go():
        from .translate.symbol_file import translate_symbol_file
        return translate_symbol_file(args.factory, args.params, shapes, args.out, name=args.name,
                                     verify=not args.no_verify, lr=args.lr, seed=args.seed,
                                     input_dtypes=None if args.input_dtype == "float32" else
                                     [args.input_dtype] * len(shapes), force=args.force,
                                     input_names=args.input_name, outputs=args.output)
    return _translate(args, go, files=(args.factory, args.params))


def _translate(args: argparse.Namespace, go, files=()) -> int:
    from .translate import TranslationError
    try:
        report = go()
    except TranslationError as e:   # exit 2 when it blames an input file (unreadable, wrong shapes)
        blamed = any(str(e).rstrip(".").endswith(f"({f})") for f in files)
        text = re.sub(r"outputs=\[([^\]]*)\]",       # the API's hint in the CLI's words
                      lambda m: " ".join(f"--output {n.strip(chr(39) + chr(34) + ' ')}" for n in m.group(1).split(",")),
                      str(e)) if files else str(e)
        return _fail(text, 2 if blamed else 1)
    except (ValueError, TypeError) as e:
        return _fail(e)
    except OSError as e:   # read-only or full disk, existing files, a folder in the way
        return _fail(_os_message(e, args.out))
    except Exception as e:  # never a raw traceback; DUALDL_DEBUG=1 shows it
        if config.get("DUALDL_DEBUG"):
            raise
        return _fail(f"internal error {type(e).__name__}: {_first_line(e)} (rerun with DUALDL_DEBUG=1 "
                     f"for the traceback and report it)", 1)
    print(report.summary())
    return 0 if report.ok or (args.no_verify and not report.untranslated) else 1


def _os_message(e: OSError, out: str) -> str:
    for text in (e.strerror, str(e)):
        if isinstance(text, str) and text.startswith("translate:"):
            return text[len("translate:"):].strip()
    text = str(e)
    where = f" ({e.filename})" if e.filename else ""
    return f"cannot write the result in {out}: {e.strerror or text}{where}"


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return lines[0].strip() if lines else type(e).__name__
