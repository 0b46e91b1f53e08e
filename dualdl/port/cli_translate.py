"""``dualdl translate MODULE:FACTORY --input-shape N,C,H,W --out DIR``: write a Gluon model as
PyTorch source + safetensors weights + a report proving both compute the same (eval and one
training step). Exit status 0 when the report is ok, 1 when a check failed or a part could not be
translated, 2 for bad arguments. Frameworks are imported only when run."""
from __future__ import annotations

import argparse
import sys

import numpy as np

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("factory", metavar="MODULE:FACTORY",
                   help="importable callable returning the Gluon block, e.g. mypkg.models:make_net or "
                        "mxnet.gluon.model_zoo.vision:resnet18_v1")
    p.add_argument("--input-shape", action="append", required=True, metavar="N,C,H,W",
                   help="shape of one sample input (repeat for several inputs)")
    p.add_argument("--input-dtype", choices=("float32", "int64"), default="float32",
                   help="int64 draws token ids in [0, --input-high) (for Embedding inputs)")
    p.add_argument("--input-high", type=int, default=10, help="upper bound of int64 token ids")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for NAME.py, NAME.safetensors, "
                                                                "NAME.report.json")
    p.add_argument("--name", help="file/module name (default: from the Gluon class)")
    p.add_argument("--params", metavar="FILE.params", help="Gluon save_parameters file to load into the block")
    p.add_argument("--no-verify", action="store_true", help="write the files without running the checks")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate of the verified SGD step")
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    from ..testing.cli_parity import load_factory, parse_shape
    from .translate import TranslationError, translate
    try:
        factory = load_factory(args.factory)
        shapes = [parse_shape(s) for s in args.input_shape]
    except ValueError as e:
        print(f"dualdl translate: {e}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed + 1)
    inputs = [rng.integers(0, args.input_high, s).astype(np.int64) if args.input_dtype == "int64"
              else rng.standard_normal(s).astype(np.float32) for s in shapes]
    block = factory()
    if args.params:
        try:
            block.load_parameters(args.params)
        except Exception as e:  # MXNet's own message names the missing / extra keys
            print(f"dualdl translate: cannot load {args.params} into {type(block).__name__}: {e}", file=sys.stderr)
            return 2
    else:
        import mxnet as mx
        try:
            block.initialize(mx.init.Xavier())
        except Exception:
            pass   # already initialised by the factory
    try:
        report = translate(block, inputs, args.out, name=args.name, verify=not args.no_verify, lr=args.lr,
                           seed=args.seed)
    except (TranslationError, ValueError, TypeError) as e:
        print(f"dualdl translate: {e}", file=sys.stderr)
        return 1 if isinstance(e, TranslationError) else 2
    print(report.summary())
    return 0 if report.ok or (args.no_verify and not report.untranslated) else 1
