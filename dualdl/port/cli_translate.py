"""``dualdl translate MODULE:FACTORY --input-shape N,C,H,W --out DIR``: write a Gluon model as
PyTorch source + safetensors weights + a report proving both compute the same (eval and one
training step). ``dualdl translate model-symbol.json --params model-0000.params --input-shape ...``
does the same for an exported model. Exit status: 0 when the report is ok, 1 when a check failed
or a part could not be translated, 2 for bad arguments (one line on stderr, no traceback: the
factory, shapes, numbers, output folder, existing files without ``--force``, a full or read-only
disk; sample inputs that do not fit the model, see :mod:`.cli_samples`). Frameworks are imported
only when run."""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from typing import Any

from .. import config
from .cli_samples import (IdsOutOfRange, check_symbol_ids, describe, embedding_rows, first_line,
                          ids_guard, input_problem, sample_inputs)

__all__ = ["add_arguments", "run"]

PROG = "dualdl translate"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("factory", metavar="MODULE:FACTORY|SYMBOL.json",
                   help="importable callable returning the Gluon block, e.g. mypkg.models:make_net or "
                        "mxnet.gluon.model_zoo.vision:resnet18_v1 (gluoncv.model_zoo:NAME works too); or an "
                        "exported model-symbol.json (with --params model-0000.params)")
    p.add_argument("--input-shape", action="append", metavar="N,C,H,W",
                   help="shape of one sample input (repeat for several inputs; not needed with --sample)")
    p.add_argument("--input-dtype", action="append", metavar="float32|int64",
                   help="float32 (default) or int64 (token ids in [0, --input-high), for Embedding inputs): "
                        "one for all inputs, or one per input, comma-separated or repeated")
    p.add_argument("--input-high", action="append", metavar="N",
                   help="upper bound (exclusive) of int64 ids (default 10): one for all inputs, or one per "
                        "input, e.g. 30522,2,129 for token ids, token types and valid lengths")
    p.add_argument("--sample", metavar="FILE.npz",
                   help="the sample inputs themselves (numpy .npz, arrays in order; .npy for one input) "
                        "instead of random ones")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for NAME.py, NAME.safetensors, "
                                                                "NAME.report.json")
    p.add_argument("--name", help="file/module name (default: the factory's name, e.g. resnet18_v1, or the "
                                  "symbol file's)")
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
    p.add_argument("--seed", type=int, default=0, help="seed of the random sample inputs and the proof")
    p.add_argument("--batchnorm", choices=("torch", "gluon"), default="torch",
                   help="torch: nn.BatchNorm*d (torch's unbiased running variance); gluon: a BatchNorm that "
                        "keeps Gluon's biased running variance, so statistics stay equal over training")
    p.add_argument("--inference", action="store_true",
                   help="translate for inference (train=False): blocks that branch on autograd.is_training() get their "
                        "inference forward only; needed where training asks autograd.is_recording() (detectors)")
    p.add_argument("--force", action="store_true",
                   help="overwrite NAME.py/.safetensors/.report.json even if translate did not write them, they "
                        "were changed since, or they hold another model's translation")


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
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"--out {args.out} is a file; give a folder")
    for flag, path in (("--params", args.params), ("--sample", args.sample)):
        if path and not os.path.isfile(path):
            raise ValueError(f"{flag} {path} does not exist" if not os.path.exists(path)
                             else f"{flag} {path} is not a regular file")
    if args.name is not None:
        from .translate.publish import name_problem
        if name_problem(args.name):
            raise ValueError(f"cannot use the name {args.name!r}: {name_problem(args.name)}; choose another --name")
    if not args.input_shape and not args.sample:
        raise ValueError("give the sample inputs: --input-shape N,C,H,W (once per input) or --sample FILE.npz")


def run(args: argparse.Namespace) -> int:
    from ..cli import progress
    from ..testing.cli_parity import FactoryError, call_factory, load_factory
    say = progress(args, PROG)
    try:
        _check_numbers(args)
        inputs = sample_inputs(args)
        if args.factory.endswith(".json") and ":" not in args.factory:
            return _symbol_file(args, inputs, say)
        if args.input_name or args.output:
            raise ValueError("--input-name and --output are for an exported SYMBOL.json; a MODULE:FACTORY "
                             "block is translated whole")
        say(f"importing {args.factory}")
        factory = load_factory(args.factory)
        block = call_factory(factory, args.factory)
    except (ValueError, FactoryError) as e:
        return _fail(e)
    import mxnet as mx
    if not isinstance(block, mx.gluon.Block):
        return _fail(f"{args.factory} returned a {type(block).__name__}, not a Gluon Block")
    if args.params:
        try:
            block.load_parameters(args.params)
        except Exception as e:  # MXNet's own message names the missing / extra keys
            return _fail(f"cannot load {args.params} into {type(block).__name__}: {first_line(e)}")
    else:
        _initialize(block, say)
    if args.name is None and not isinstance(block, mx.gluon.SymbolBlock):
        from .translate.publish import name_from
        args.name = name_from(args.factory.split(":", 1)[1].split(".")[-1])
    rows = embedding_rows(block)
    with ids_guard(block, inputs):
        return _translate(args, lambda: _translate_block(block, inputs, args), say, inputs, rows=rows)


def _initialize(block: Any, say) -> None:
    """Initialise what the factory left uninitialised; parameters it already initialised (a
    pretrained gluonnlp model) are kept, said in one line instead of one warning each."""
    import warnings
    import mxnet as mx
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            block.initialize(mx.init.Xavier())
        except Exception:
            pass   # initialised by the factory in a way initialize() refuses to repeat
    kept = [w for w in seen if "already initialized" in str(w.message)]
    for w in seen:
        if w not in kept:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if kept:
        say(f"{len(kept)} parameters were already initialised by the factory: kept as they are")


def _translate_block(block: Any, inputs, args):
    from .translate import translate
    return translate(block, inputs, args.out, name=args.name, verify=not args.no_verify, lr=args.lr,
                     seed=args.seed, force=args.force, batchnorm=args.batchnorm, train=not args.inference)


def _symbol_file(args: argparse.Namespace, inputs, say) -> int:
    if not os.path.isfile(args.factory):
        raise ValueError(f"{args.factory} is not a regular file (an exported model-symbol.json was expected)"
                         if os.path.exists(args.factory) else
                         f"{args.factory} does not exist (an exported model-symbol.json was expected)")
    if not args.params:
        raise ValueError(f"{args.factory} needs its weights: add --params MODEL-0000.params")
    if args.input_name and len(args.input_name) != len(inputs):
        raise ValueError(f"give one --input-name per input ({len(args.input_name)} names, {len(inputs)} inputs)")
    check_symbol_ids(args.factory, args.input_name, inputs)
    shapes = [a.shape for a in inputs]
    dtypes = ["int64" if a.dtype.kind in "iu" else "float32" for a in inputs]
    given = bool(args.sample or args.input_high)     # else ids are drawn below each Embedding's size

    def go():
        from .translate.symbol_file import translate_symbol_file
        return translate_symbol_file(args.factory, args.params, shapes, args.out, name=args.name,
                                     verify=not args.no_verify, lr=args.lr, seed=args.seed,
                                     input_dtypes=dtypes if "int64" in dtypes else None, force=args.force,
                                     input_names=args.input_name, outputs=args.output,
                                     sample_inputs=inputs if given else None)
    return _translate(args, go, say, inputs, files=(args.factory, args.params))


def _translate(args: argparse.Namespace, go, say, inputs, files=(), rows=None) -> int:
    from .translate import TranslationError
    from .translate.publish import on_step
    steps = {"staged": "traced and written; proving it (float64: eval, train mode, one SGD step)"
             if not args.no_verify else "traced and written", "locking": "publishing the files"}
    say(f"tracing the model on inputs {describe(inputs)}")
    try:
        with on_step(lambda point: say(steps[point]) if point in steps else None):
            report = go()
    except TranslationError as e:   # exit 2 when it blames an input file (unreadable, wrong shapes)
        mine = input_problem(str(e), inputs, args, rows or {})
        if mine:
            return _fail(mine, 2)
        blamed = any(str(e).rstrip(".").endswith(f"({f})") for f in files)
        text = re.sub(r"outputs=\[([^\]]*)\]",       # the API's hint in the CLI's words
                      lambda m: " ".join(f"--output {n.strip(chr(39) + chr(34) + ' ')}" for n in m.group(1).split(",")),
                      str(e)) if files else str(e)
        return _fail(text, 2 if blamed else 1)
    except (ValueError, TypeError) as e:
        cause = e if isinstance(e, IdsOutOfRange) else e.__cause__
        if isinstance(cause, IdsOutOfRange):
            return _fail(cause)
        return _fail(input_problem(str(e), inputs, args, rows or {}) or e)
    except OSError as e:   # read-only or full disk, existing files, a folder in the way
        return _fail(_os_message(e, args.out))
    except RecursionError:
        return _fail(f"{' or '.join(files) or 'the model'} is nested too deeply to translate (Python's recursion "
                     f"limit); give the file MXNet exported" if files else "the model is nested too deeply to "
                     f"translate (Python's recursion limit)", 2 if files else 1)
    except Exception as e:  # never a raw traceback; DUALDL_DEBUG=1 shows it
        mine = input_problem(f"{type(e).__name__} ({e})", inputs, args, rows or {})
        if mine:                # torch refused the user's ids in the proof of an exported graph
            return _fail(mine, 2)
        if config.get("DUALDL_DEBUG"):
            raise
        return _fail(f"internal error {type(e).__name__}: {first_line(e)} (rerun with DUALDL_DEBUG=1 "
                     f"for the traceback and report it)", 1)
    say(f"done: {'OK' if report.ok else 'NOT OK'}")
    print(report.summary())
    return 0 if report.ok or (args.no_verify and not report.untranslated) else 1


def _os_message(e: OSError, out: str) -> str:
    for text in (e.strerror, str(e)):
        if isinstance(text, str) and text.startswith("translate:"):
            return text[len("translate:"):].strip()
    text = str(e)
    where = f" ({e.filename})" if e.filename else ""
    return f"cannot write the result in {out}: {e.strerror or text}{where}"
