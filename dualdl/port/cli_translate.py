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
from typing import Any, Optional

import numpy as np

from .. import config

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


def _per_input(values, n: int, flag: str, parse, default):
    """One value per input from repeated and/or comma-separated flag values (one value: all inputs)."""
    items = [v.strip() for text in (values or []) for v in str(text).split(",") if v.strip()]
    if not items:
        return [default] * n
    if len(items) not in (1, n):
        raise ValueError(f"{flag} takes one value for all inputs or one per input ({n} inputs), got {len(items)}: "
                         f"{','.join(items)}")
    parsed = [parse(v) for v in items]
    return parsed * n if len(parsed) == 1 else parsed


def _dtype(text: str) -> str:
    if text not in ("float32", "int64"):
        raise ValueError(f"--input-dtype must be float32 or int64, got {text!r}")
    return text


def _high(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"--input-high must be an integer, got {text!r}") from None
    if v < 1:
        raise ValueError(f"--input-high must be 1 or more, got {v}")
    if v > 2 ** 24:
        raise ValueError(f"--input-high {v} is above 2**24, the largest id Gluon's float32 inputs hold exactly")
    return v


def _read_sample(path: str) -> list:
    """The arrays of a .npz (in the order saved) or .npy file; refuses object arrays (pickles)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = [data[k] for k in data.files]
    except AttributeError:       # .npy: np.load gives the array itself, not a context manager
        arrays = [np.load(path, allow_pickle=False)]
    except (ValueError, OSError, EOFError) as e:
        raise ValueError(f"--sample {path} is not a numpy .npz/.npy file of arrays ({_first_line(e)})") from None
    if not arrays:
        raise ValueError(f"--sample {path} holds no arrays")
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "fiub":
            raise ValueError(f"--sample {path}: input {i} has dtype {a.dtype}; give numeric arrays")
    return arrays


def sample_inputs(args: argparse.Namespace) -> list:
    """The sample inputs the command line describes: --sample's arrays, or random ones of each
    --input-shape with its --input-dtype and --input-high."""
    from ..testing.cli_parity import parse_shape
    if args.sample:
        if args.input_shape or args.input_dtype or args.input_high:
            raise ValueError("--sample gives the inputs themselves: leave out --input-shape, --input-dtype and "
                             "--input-high")
        return _read_sample(args.sample)
    shapes = [parse_shape(s) for s in args.input_shape]
    dtypes = _per_input(args.input_dtype, len(shapes), "--input-dtype", _dtype, "float32")
    highs = _per_input(args.input_high, len(shapes), "--input-high", _high, 10)
    rng = np.random.default_rng(args.seed + 1)
    return [rng.integers(0, h, s).astype(np.int64) if d == "int64" else rng.standard_normal(s).astype(np.float32)
            for s, d, h in zip(shapes, dtypes, highs)]


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
            return _fail(f"cannot load {args.params} into {type(block).__name__}: {_first_line(e)}")
    else:
        _initialize(block, say)
    if args.name is None and not isinstance(block, mx.gluon.SymbolBlock):
        from .translate.publish import name_from
        args.name = name_from(args.factory.split(":", 1)[1].split(".")[-1])
    rows = _embedding_rows(block)
    with _ids_guard(block, inputs):
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
    _check_symbol_ids(args.factory, args.input_name, inputs)
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


def _check_symbol_ids(path: str, names, inputs) -> None:
    """An exported graph's data inputs that feed an Embedding directly: their ids must be below its
    rows (``input_dim``), checked before MXNet runs it. Inputs are named ``data`` (one) or ``data0``,
    ``data1``, ... (export's order) unless --input-name says otherwise; a file that cannot be read
    here is left to the translator's own checks."""
    import json
    try:
        if os.path.getsize(path) > 200_000_000:
            return
        with open(path, encoding="utf-8") as f:
            nodes = json.load(f)["nodes"]
        feeds = {}
        for n in nodes:
            if n.get("op") == "Embedding" and n.get("inputs"):
                src = nodes[n["inputs"][0][0]]
                if src.get("op") == "null":
                    rows = int(n.get("attrs", {}).get("input_dim", 0))
                    if rows and rows < feeds.get(src["name"], (rows + 1, ""))[0]:
                        feeds[src["name"]] = (rows, n.get("name", "Embedding"))
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
        return
    order = list(names) if names else (["data"] if len(inputs) == 1 else [f"data{i}" for i in range(len(inputs))])
    for i, (name, a) in enumerate(zip(order, inputs)):
        if name in feeds and a.dtype.kind in "iu" and a.size and (a.max() >= feeds[name][0] or a.min() < 0):
            rows, node = feeds[name]
            raise IdsOutOfRange(f"input {i} ({name}) has values up to {int(a.max())} but the embedding {node} has "
                                f"{rows} rows; torch refuses them: pass --input-high with one value per input (e.g. "
                                f"--input-high 30522,2,129) or --sample with ids the model takes")


def _translate(args: argparse.Namespace, go, say, inputs, files=(), rows=None) -> int:
    from .translate import TranslationError
    from .translate.publish import on_step
    steps = {"staged": "traced and written; proving it (float64: eval, train mode, one SGD step)"
             if not args.no_verify else "traced and written", "locking": "publishing the files"}
    say(f"tracing the model on inputs {_describe(inputs)}")
    try:
        with on_step(lambda point: say(steps[point]) if point in steps else None):
            report = go()
    except TranslationError as e:   # exit 2 when it blames an input file (unreadable, wrong shapes)
        mine = _input_problem(str(e), inputs, args, rows or {})
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
        return _fail(_input_problem(str(e), inputs, args, rows or {}) or e)
    except OSError as e:   # read-only or full disk, existing files, a folder in the way
        return _fail(_os_message(e, args.out))
    except RecursionError:
        return _fail(f"{' or '.join(files) or 'the model'} is nested too deeply to translate (Python's recursion "
                     f"limit); give the file MXNet exported" if files else "the model is nested too deeply to "
                     f"translate (Python's recursion limit)", 2 if files else 1)
    except Exception as e:  # never a raw traceback; DUALDL_DEBUG=1 shows it
        mine = _input_problem(f"{type(e).__name__} ({e})", inputs, args, rows or {})
        if mine:                # torch refused the user's ids in the proof of an exported graph
            return _fail(mine, 2)
        if config.get("DUALDL_DEBUG"):
            raise
        return _fail(f"internal error {type(e).__name__}: {_first_line(e)} (rerun with DUALDL_DEBUG=1 "
                     f"for the traceback and report it)", 1)
    say(f"done: {'OK' if report.ok else 'NOT OK'}")
    print(report.summary())
    return 0 if report.ok or (args.no_verify and not report.untranslated) else 1


def _describe(inputs) -> str:
    return ", ".join(f"{a.dtype}{list(a.shape)}" for a in inputs)


def _input_problem(text: str, inputs, args: argparse.Namespace, rows: dict) -> Optional[str]:
    """The user's sample inputs, not translate, are wrong: integer ids beyond an Embedding's rows
    (torch refuses them where MXNet clips them), or int64 inputs to a model that computes in
    floating point. The message names the input and the flag; None when the error is another."""
    ints = [(i, int(a.max()) if a.size else 0) for i, a in enumerate(inputs) if a.dtype.kind in "iu"]
    if not ints:
        return None
    flag = "--sample" if args.sample else "--input-high"
    if "index out of range" in text:
        m = re.search(r"'[^']*self\.([A-Za-z_][\w.]*)\(", text)
        n = rows.get(m.group(1)) if m else None
        where = f" (at {m.group(1)} in the generated module)" if m and n is None else ""
        big = [(i, v) for i, v in ints if n is None or v >= n]
        says = ", ".join(f"input {i} has values up to {v}" for i, v in big or ints)
        has = f"the embedding {m.group(1)} has {n} rows" if n is not None else "an Embedding has fewer rows"
        return (f"the sample inputs are out of range: {says} but {has}{where}; torch refuses ids beyond an "
                f"Embedding where MXNet clips them: pass {flag} with ids the model takes, one per input "
                f"(e.g. --input-high 30522,2,129)")
    if re.search(r"\b(Long|Int|int64)\b", text) and re.search(r"dtype|scalar type|Double|Float", text):
        which = ", ".join(str(i) for i, _ in ints)
        if "this is a bug" not in text and text.startswith("translate: "):   # the API's own words: add the flag
            return (f"{text[len('translate: '):].rstrip('.')} (on the command line: --input-dtype float32 for "
                    f"input {which}, one value per input, e.g. --input-dtype int64,float32)")
        m = re.search(r"raised (\w+ \(.*?\)) at its line", text)
        cause = (m.group(1) if m else _first_line(ValueError(text)))[:200]
        return (f"input {which} is int64 (--input-dtype int64) but the model computes with it in floating point "
                f"({cause}); give --input-dtype float32 for that input (one value per input, e.g. "
                f"--input-dtype int64,float32)")
    return None


def _embeddings(block: Any, prefix: str = ""):
    """(child path, Gluon Embedding) for each Embedding in ``block``."""
    import mxnet as mx
    for name, child in getattr(block, "_children", {}).items():
        child = child() if callable(child) and not isinstance(child, mx.gluon.Block) else child  # weakrefs
        path = f"{prefix}{name}"
        if isinstance(child, mx.gluon.nn.Embedding):
            yield path, child
        yield from _embeddings(child, path + ".")


def _embedding_rows(block: Any) -> dict:
    """Each Gluon Embedding in ``block`` by its child path: its number of rows."""
    return {path: int(e._kwargs.get("input_dim", 0)) or None for path, e in _embeddings(block)}


class IdsOutOfRange(ValueError):
    """A sample input holds ids an Embedding does not have (the user's input, not translate's error)."""


class _ids_guard:
    """Check the ids reaching each Gluon Embedding before MXNet's kernel reads them: MXNet's CPU
    Embedding reads out of bounds on ids >= its rows (a BERT token-type embedding of 2 rows fed
    ids up to 99 ended the process with "malloc(): corrupted top size"). The check raises
    :class:`IdsOutOfRange` naming the input, the embedding and the flag instead."""

    def __init__(self, block: Any, inputs):
        self.block, self.inputs, self.handles = block, inputs, []

    def __enter__(self):
        for path, emb in _embeddings(self.block):
            rows = int(emb._kwargs.get("input_dim", 0))
            if rows:
                self.handles.append(emb.register_forward_pre_hook(self._check(path, rows)))
        return self

    def _check(self, path: str, rows: int):
        def pre(_block, args):
            x = args[0] if args else None
            if not hasattr(x, "asnumpy") or not getattr(x, "size", 0):
                return
            ids = x.asnumpy()
            if ids.max() < rows and ids.min() >= 0:
                return
            which = [i for i, a in enumerate(self.inputs) if a.shape == ids.shape and np.array_equal(a, ids)]
            name = f"input {which[0]}" if which else "an input"
            raise IdsOutOfRange(f"{name} has values up to {int(ids.max())} but the embedding {path} has {rows} rows; "
                                f"MXNet reads out of bounds there and torch refuses them: pass --input-high with one "
                                f"value per input (e.g. --input-high 30522,2,129) or --sample with ids the model takes")
        return pre

    def __exit__(self, *exc):
        for h in self.handles:
            h.detach()


def _os_message(e: OSError, out: str) -> str:
    for text in (e.strerror, str(e)):
        if isinstance(text, str) and text.startswith("translate:"):
            return text[len("translate:"):].strip()
    text = str(e)
    where = f" ({e.filename})" if e.filename else ""
    return f"cannot write the result in {out}: {e.strerror or text}{where}"


def _first_line(e: BaseException) -> str:
    """The line that says what went wrong: MXNet's errors carry a C++/Python traceback first."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    said = [ln for ln in lines if not ln.startswith(("Traceback", "File ", "[bt]", "Stack trace", "Error in"))
            and not re.match(r"^\[\d+:\d+:\d+\]", ln)]
    errors = [ln for ln in said if re.search(r"Error:|Check failed|error:", ln)]
    return (errors or said or lines or [type(e).__name__])[-1 if errors else 0][:300]
