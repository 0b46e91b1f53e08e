"""The sample inputs of ``dualdl translate`` and the checks that tell the user's input errors
from translate's: per-input ``--input-dtype``/``--input-high`` (token ids, token types and valid
lengths need different ranges), ``--sample FILE.npz``, ids beyond an Embedding's rows (MXNet's CPU
kernel reads out of bounds where torch refuses), int64 inputs into a float layer."""
from __future__ import annotations

import argparse
import os
import re
from typing import Any, Optional

import numpy as np

__all__ = ["sample_inputs", "IdsOutOfRange", "ids_guard", "check_symbol_ids", "input_problem", "embedding_rows",
           "describe"]


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
    import zipfile
    try:
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.ndarray):     # .npy: the array itself, not an archive
            arrays = [data]
        else:
            with data:
                arrays = [data[k] for k in data.files]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"--sample {path} is not a numpy .npz/.npy file of arrays ({first_line(e)})") from None
    if not arrays:
        raise ValueError(f"--sample {path} holds no arrays")
    for i, a in enumerate(arrays):
        if a.dtype.kind not in "fiub":
            raise ValueError(f"--sample {path}: input {i} has dtype {a.dtype}; give numeric arrays")
        if a.dtype.kind == "f" and np.isnan(a).any():
            raise ValueError(f"--sample {path}: input {i} holds {int(np.isnan(a).sum())} NaN values; the proof "
                             f"compares numbers: give a sample without NaN")
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


def check_symbol_ids(path: str, names, inputs) -> None:
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


def describe(inputs) -> str:
    return ", ".join(f"{a.dtype}{list(a.shape)}" for a in inputs)


def input_problem(text: str, inputs, args: argparse.Namespace, rows: dict) -> Optional[str]:
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
        cause = (m.group(1) if m else first_line(ValueError(text)))[:200]
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


def embedding_rows(block: Any) -> dict:
    """Each Gluon Embedding in ``block`` by its child path: its number of rows."""
    return {path: int(e._kwargs.get("input_dim", 0)) or None for path, e in _embeddings(block)}


class IdsOutOfRange(ValueError):
    """A sample input holds ids an Embedding does not have (the user's input, not translate's error)."""


class ids_guard:
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


def first_line(e: BaseException) -> str:
    """The line that says what went wrong: MXNet's errors carry a C++/Python traceback first."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    said = [ln for ln in lines if not ln.startswith(("Traceback", "File ", "[bt]", "Stack trace", "Error in"))
            and not re.match(r"^\[\d+:\d+:\d+\]", ln)]
    errors = [ln for ln in said if re.search(r"Error:|Check failed|error:", ln)]
    return (errors or said or lines or [type(e).__name__])[-1 if errors else 0][:300]
