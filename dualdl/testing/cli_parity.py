"""``dualdl parity MODULE:FACTORY --input-shape 8,3,32,32``: run a parity check from the shell.

Exit status: 0 when torch and MXNet agree within tolerance, 1 when they do not (the table says
where), 2 when the factory or the arguments are wrong. Frameworks are imported only when run.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import os
import re
import sys
from typing import Any, Callable, List, Tuple

import numpy as np


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("factory", metavar="MODULE:FACTORY",
                   help="importable model factory or dualdl.nn.Module class, e.g. mypkg.models:make_net")
    p.add_argument("--input-shape", action="append", required=True, metavar="D0,D1,...",
                   help="shape of a random input (repeat for several positional inputs)")
    p.add_argument("--input-dtype", default="float32", choices=["float32", "int64"],
                   help="float32: standard normal inputs; int64: integers in [0, --input-high)")
    p.add_argument("--input-high", type=int, default=10, help="upper bound (exclusive) of integer inputs")
    p.add_argument("--steps", type=int, default=1, help="optimizer steps (0: one forward/backward)")
    p.add_argument("--loss", default=None,
                   help="mse, l1, smooth_l1, huber, cross_entropy, nll, bce_with_logits, kl_div or a dualdl "
                        "loss class name (random targets are drawn); default: sum(output * random tensor)")
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adam", "adamw", "rmsprop"])
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 0.1 for sgd, 1e-3 otherwise)")
    p.add_argument("--momentum", type=float, default=None)
    p.add_argument("--weight-decay", type=float, default=None)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-5)
    p.add_argument("--float64", action="store_true", help="also run torch in float64 and report distances to it")
    p.add_argument("--eval", action="store_true", help="compare in eval mode (model.eval()) instead of train mode")
    p.add_argument("--forward-only", action="store_true", help="compare forward outputs only (implies --steps 0)")
    p.add_argument("--no-randomize", action="store_true", help="keep the factory's initial weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON to PATH")


class FactoryError(ValueError):
    """The MODULE:FACTORY given on the command line cannot give a model (one line, names why)."""


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _installed_first(mod_name: str = "") -> None:
    """Move the current folder to the end of ``sys.path``: a ``./torch.py`` or ``./mxnet.py``
    must not replace the installed package (``python -m`` puts the folder first); the user's
    own modules in the folder stay importable. When ``mod_name`` is an installed package (a model
    zoo), the folder leaves the path altogether: a ``./cv2.py`` is then never imported by the
    package's optional imports."""
    cwd = os.path.realpath(os.getcwd())
    rest = [p for p in sys.path if os.path.realpath(p or ".") != cwd]
    top = mod_name.split(".")[0]
    if top:
        saved, sys.path[:] = list(sys.path), rest
        try:
            installed = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            installed = False
        finally:
            sys.path[:] = saved
        if installed:
            sys.path[:] = rest
            return
    sys.path[:] = rest + [cwd]


def _import(mod_name: str) -> Any:
    """Import the factory's module as the script's own ``python FILE`` would, but with
    ``sys.argv = [FILE]`` and its output captured: a script that parses arguments at import
    exits, which becomes a FactoryError saying so."""
    import contextlib
    import io
    _installed_first(mod_name)
    if mod_name.split(".")[0] == "gluoncv":      # gluoncv refuses torch >= 2 unless imported by dualdl
        from ..port import import_gluoncv
        try:
            import_gluoncv()
        except ImportError as e:
            raise FactoryError(f"cannot import module {mod_name!r}: {_one_line(e)}") from None
    argv, out = sys.argv, io.StringIO()
    try:
        spec = importlib.util.find_spec(mod_name.split(".")[0])    # imports nothing
    except (ImportError, ValueError) as e:
        raise FactoryError(f"cannot import module {mod_name!r}: {_one_line(e)}") from None
    if spec is None:
        raise FactoryError(f"cannot import module {mod_name!r}: no module of that name on the path (the current "
                           f"folder {os.getcwd()} is searched after the installed packages)")
    sys.argv = [spec.origin or mod_name]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            return importlib.import_module(mod_name)
    except SystemExit as e:
        said = [ln for ln in out.getvalue().splitlines() if ln.strip()]
        raise FactoryError(
            f"module {mod_name!r} exits when imported (status {e.code}"
            f"{': ' + said[-1].strip() if said else ''}): it parses command-line arguments at import; move "
            f"that code under `if __name__ == '__main__':` or put the factory in a module that does not "
            f"run the script") from None
    except ImportError as e:
        raise FactoryError(f"cannot import module {mod_name!r}: {_one_line(e)}") from None
    except Exception as e:
        raise FactoryError(f"importing module {mod_name!r} failed: {type(e).__name__}: {_one_line(e)}") from None
    finally:
        sys.argv = argv


def load_factory(spec: str) -> Callable[..., Any]:
    """``module.path:attr.path`` -> the object. Installed packages come first on ``sys.path``;
    the current folder is searched after them."""
    if ":" not in spec:
        raise FactoryError(f"expected MODULE:FACTORY (e.g. mypkg.models:make_net), got {spec!r}")
    mod_name, attr = spec.split(":", 1)
    if not mod_name or not attr:
        raise FactoryError(f"expected MODULE:FACTORY (e.g. mypkg.models:make_net), got {spec!r}")
    obj: Any = _import(mod_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise FactoryError(f"{mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise FactoryError(f"{spec} is not callable (it is a {type(obj).__name__} value); give a function or "
                           f"class that returns the model")
    return obj


def call_factory(factory: Callable[..., Any], spec: str) -> Any:
    """``factory()``; a factory that needs arguments, or that raises, becomes one FactoryError line."""
    import inspect
    try:
        inspect.signature(factory).bind()
    except TypeError as e:
        raise FactoryError(f"{spec} cannot be called without arguments ({_one_line(e)}); give a function "
                           f"that builds the model with none (in a module of yours: def make(): return "
                           f"{spec.split(':')[-1]}(...))") from None
    except ValueError:
        pass        # no signature (a builtin): just call it
    try:
        return factory()
    except SystemExit as e:
        raise FactoryError(f"{spec}() exited (status {e.code}): it parses command-line arguments") from None
    except Exception as e:
        raise FactoryError(f"{spec}() raised {type(e).__name__}: {_one_line(e)}") from None


def parse_shape(text: str) -> Tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in re.split(r"[,x]", text.strip()))
    except ValueError:
        raise ValueError(f"--input-shape must be comma-separated integers like 8,3,32,32, got {text!r}") from None
    if not shape or any(d <= 0 for d in shape):
        raise ValueError(f"--input-shape needs positive dimensions, got {text!r}")
    size = math.prod(shape)
    if size > MAX_INPUT_VALUES:
        raise ValueError(f"--input-shape {text} has {size:.3g} values; a sample input may have at most "
                         f"{MAX_INPUT_VALUES:,} (512 MiB of float32): a small batch is enough for the check")
    return shape


#: the most values one sample input drawn from --input-shape may have
MAX_INPUT_VALUES = 2 ** 27


def make_inputs(args: argparse.Namespace) -> List[np.ndarray]:
    rng = np.random.default_rng(args.seed + 1)
    out = []
    for text in args.input_shape:
        shape = parse_shape(text)
        if args.input_dtype == "int64":
            out.append(rng.integers(0, args.input_high, shape).astype(np.int64))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


def _write_json_check(path: str) -> None:
    """Refuse a --json path that is not a regular file (``/dev/full``, a FIFO, a folder): renaming
    the report over it would replace the device node itself."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise ValueError(f"--json {path} is {'a folder' if stat.S_ISDIR(mode) else 'not a regular file'}; "
                         f"give a file to write the report to")


def _write_json(path: str, text: str) -> None:
    """Write the report atomically (after :func:`_write_json_check`)."""
    from ..atomic import atomic_write_file
    _write_json_check(path)
    data = text.encode()
    atomic_write_file(os.path.realpath(path), lambda f: f.write(data))


def run(args: argparse.Namespace) -> int:
    from ..cli import progress
    from .parity import check_parity
    say = progress(args, "dualdl parity")
    try:
        if args.input_high < 1:
            raise ValueError(f"--input-high must be 1 or more, got {args.input_high}")
        for flag, v in (("--rtol", args.rtol), ("--atol", args.atol), ("--lr", args.lr),
                        ("--momentum", args.momentum), ("--weight-decay", args.weight_decay)):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{flag} must be a finite number >= 0, got {v}")
        if args.json:
            _write_json_check(args.json)
        factory = load_factory(args.factory)
        inputs = make_inputs(args)
    except ValueError as e:
        print(f"dualdl parity: {_one_line(e)}", file=sys.stderr)
        return 2
    kwargs = {k: v for k, v in (("momentum", args.momentum), ("weight_decay", args.weight_decay)) if v is not None}
    steps = 0 if args.forward_only else args.steps
    say(f"building {args.factory} on torch and mxnet and comparing "
        f"{'the forward' if args.forward_only else f'{steps} step(s)'}"
        f"{' with a float64 reference' if args.float64 else ''}")
    try:
        report = check_parity(factory, inputs[0] if len(inputs) == 1 else tuple(inputs), loss=args.loss,
                              optimizer=(args.optimizer, kwargs), lr=args.lr, steps=steps, rtol=args.rtol,
                              atol=args.atol, train=not args.eval, float64_reference=args.float64, seed=args.seed,
                              randomize=not args.no_randomize, backward=not args.forward_only)
    except Exception as e:  # the user's model, or a bad argument: one line, never a traceback
        from .. import config
        if config.get("DUALDL_DEBUG"):
            raise
        where = _user_frame(e, factory)
        if where or isinstance(e, (ValueError, TypeError)):
            said = f" at {where}" if where else ""
            print(f"dualdl parity: {type(e).__name__}{said}: {_one_line(e)[:500]}", file=sys.stderr)
            return 2
        print(f"dualdl parity: internal error {type(e).__name__}: {_one_line(e)[:500]} (rerun with "
              f"DUALDL_DEBUG=1 for the traceback and report it)", file=sys.stderr)
        return 1
    say("done")
    print(_in_flags(str(report)))
    if args.json:
        try:
            _write_json(args.json, report.to_json())
        except (OSError, ValueError) as e:
            print(f"dualdl parity: cannot write --json {args.json}: {_one_line(e)}", file=sys.stderr)
            return 2
    return 0 if report.passed else 1


#: the Python arguments a parity report's hints name -> the flags of this command
_FLAGS = {"float64_reference=True": "--float64", "randomize=False": "--no-randomize",
          "backward=False": "--forward-only"}


def _in_flags(text: str) -> str:
    """The report's advice in this command's words (``--float64``, not ``float64_reference=True``)."""
    for arg, flag in _FLAGS.items():
        text = text.replace(arg, flag)
    return text


def _user_frame(e: BaseException, factory: Any) -> str:
    """``file:line`` of the deepest frame in the user's code (the factory's module or a file outside
    dualdl, its adapters and installed packages), or "" when the error did not pass through it."""
    import dualdl
    root = os.path.dirname(os.path.dirname(os.path.abspath(dualdl.__file__)))
    ours = tuple(os.path.join(root, d) + os.sep for d in ("dualdl", "dualdl_torch", "dualdl_mx"))
    mine = getattr(sys.modules.get(getattr(factory, "__module__", "")), "__file__", None)
    found, tb = "", e.__traceback__
    while tb is not None:
        f = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if (mine and f == os.path.abspath(mine)) or not (f.startswith(ours) or "site-packages" in f
                                                         or f.startswith(sys.prefix) or f.startswith("<")):
            found = f"{os.path.relpath(f) if not os.path.relpath(f).startswith('..') else f}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found
