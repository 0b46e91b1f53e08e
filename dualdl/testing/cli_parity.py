"""``dualdl parity MODULE:FACTORY --input-shape 8,3,32,32``: run a parity check from the shell.

Exit status: 0 when torch and MXNet agree within tolerance, 1 when they do not (the table says
where), 2 when the factory or the arguments are wrong. Frameworks are imported only when run.
"""
from __future__ import annotations

import argparse
import importlib
import os
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


def load_factory(spec: str) -> Callable[..., Any]:
    """``module.path:attr.path`` -> the object (the current directory is importable)."""
    if ":" not in spec:
        raise ValueError(f"expected MODULE:FACTORY (e.g. mypkg.models:make_net), got {spec!r}")
    mod_name, attr = spec.split(":", 1)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"cannot import module {mod_name!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{spec} is a {type(obj).__name__}, not a callable model factory")
    return obj


def parse_shape(text: str) -> Tuple[int, ...]:
    try:
        shape = tuple(int(s) for s in text.replace("x", ",").split(",") if s.strip())
    except ValueError:
        raise ValueError(f"--input-shape must be comma-separated integers like 8,3,32,32, got {text!r}") from None
    if not shape or any(d <= 0 for d in shape):
        raise ValueError(f"--input-shape needs positive dimensions, got {text!r}")
    return shape


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


def _write_json(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> int:
    from .parity import check_parity
    try:
        factory = load_factory(args.factory)
        inputs = make_inputs(args)
    except ValueError as e:
        print(f"dualdl parity: {e}", file=sys.stderr)
        return 2
    kwargs = {k: v for k, v in (("momentum", args.momentum), ("weight_decay", args.weight_decay)) if v is not None}
    steps = 0 if args.forward_only else args.steps
    try:
        report = check_parity(factory, inputs[0] if len(inputs) == 1 else tuple(inputs), loss=args.loss,
                              optimizer=(args.optimizer, kwargs), lr=args.lr, steps=steps, rtol=args.rtol,
                              atol=args.atol, train=not args.eval, float64_reference=args.float64, seed=args.seed,
                              randomize=not args.no_randomize, backward=not args.forward_only)
    except (ValueError, TypeError) as e:
        print(f"dualdl parity: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(report)
    if args.json:
        _write_json(args.json, report.to_json())
    return 0 if report.passed else 1
