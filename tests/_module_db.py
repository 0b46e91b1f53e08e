"""torch's own module tests as a peer test suite (issue 34): every ``ModuleInfo`` of
``torch.testing._internal.common_modules.module_db`` (114 entries: constructor arguments and forward
inputs, batched and unbatched, train and eval) run through ``dualdl.nn.<name>`` on torch, on MXNet
and on MXNet hybridized, against the native ``torch.nn`` module from the same weights: forward
outputs, input gradients and parameter gradients.

Each (entry, input, dtype, mode, candidate) gets one status:

- ``match``: every compared tensor within tolerance (float32: 1e-5 x max(1, max |reference|),
  float64: 1e-12 x the same, or the entry's declared, measured limit in ``LIMITS``);
- ``mismatch``: a number, shape or dtype differs (silent wrong numbers: never allowed);
- ``refused``: dualdl raised its own error (raised from dualdl's code: a declared ``_dl_cannot``
  or a neutral check, naming what and why);
- ``raw``: an exception raised inside torch or mxnet reached the user (never allowed);
- ``skip``: the reference itself raised on this input, or the layer draws random numbers in train
  mode (``RANDOM_IN_TRAIN``: compared in eval mode only).

``python tests/_module_db.py [--only A,B] [--backends torch,mxnet,mxnet:hybridized] [-v]`` prints the
table; tests/test_module_db.py asserts the issue's bar on it.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

CANDIDATES = {"torch": ("torch", False), "mxnet": ("mxnet", False), "mxnet:hybridized": ("mxnet", True)}
STATUSES = ("match", "mismatch", "refused", "raw", "skip")
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}
# layers whose train-mode forward draws random numbers: compared in eval mode only (both
# frameworks' generators differ), the train mode run must not crash
# (FractionalMaxPool is not: module_db passes its _random_samples, so its output is deterministic)
RANDOM_IN_TRAIN = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
                   "RReLU"}
# (entry, candidate, dtype) -> (tolerance, reason): a documented limit of an MXNet operator, measured
LIMITS: Dict[Tuple[str, str, str], Tuple[float, str]] = {
    (e, c, "float32"): (1e-4, "CTC float32 gradients up to 5.1e-5 relative: MXNet's CTC operator and torch's "
                              "float32 kernel round differently (torch's float32 kernel is itself 8.2e-5 from its "
                              "float64 result on these inputs); float64 matches to 1.8e-13")
    for e in ("CTCLoss",) for c in ("mxnet", "mxnet:hybridized")}
# MXNet 1.x has no 0-d result from a reduction: a reduced loss has shape (1,) where torch's is ()
# (dualdl's documented convention, docs/losses.md); compared as the same value
ONE_FOR_SCALAR = ("mxnet", "mxnet:hybridized")
# where the torch reference and the torch candidate run: "cpu", or "cuda" (``--device cuda``, make
# gpu-check: every dualdl.nn layer on a GPU against torch.nn on the same GPU; MXNet candidates stay on CPU)
DEVICE = "cpu"
_FRAMEWORK_DIRS = tuple(os.sep + p + os.sep for p in ("torch", "mxnet", "numpy"))
_OURS = tuple(os.sep + p + os.sep for p in ("dualdl", "dualdl_torch", "dualdl_mx"))


@dataclass
class Outcome:
    entry: str
    index: int
    dtype: str
    mode: str
    candidate: str
    status: str
    detail: str = ""
    max_abs: float = 0.0


@dataclass
class Table:
    outcomes: List[Outcome] = field(default_factory=list)

    def counts(self, candidate: str) -> Counter:
        return Counter(o.status for o in self.outcomes if o.candidate == candidate)

    def entries(self, candidate: str, status: str) -> Dict[str, int]:
        return dict(Counter(o.entry for o in self.outcomes if o.candidate == candidate and o.status == status))

    def first(self, candidate: str, status: str) -> Dict[str, Outcome]:
        out: Dict[str, Outcome] = {}
        for o in self.outcomes:
            if o.candidate == candidate and o.status == status:
                out.setdefault(o.entry, o)
        return out


def module_db() -> list:
    from torch.testing._internal.common_modules import module_db as db
    return list(db)


def entry_name(info: Any) -> str:
    return info.module_cls.__name__


def covered(info: Any) -> bool:
    import dualdl.nn as dn
    return hasattr(dn, entry_name(info))


# ---- structure: torch tensors <-> numpy leaves ---------------------------------------------------
class _Leaf:
    def __init__(self, i: int):
        self.i = i


def _flatten(obj: Any, leaves: list, grads: list) -> Any:
    """A template of ``obj`` with every tensor replaced by a _Leaf (numpy copy in ``leaves``)."""
    import torch
    if isinstance(obj, torch.Tensor):
        leaves.append(obj.detach().cpu().numpy().copy())
        grads.append(bool(obj.requires_grad and obj.is_floating_point()))
        return _Leaf(len(leaves) - 1)
    if isinstance(obj, tuple):
        return tuple(_flatten(o, leaves, grads) for o in obj)
    if isinstance(obj, list):
        return [_flatten(o, leaves, grads) for o in obj]
    if isinstance(obj, dict):
        return {k: _flatten(v, leaves, grads) for k, v in obj.items()}
    return obj


def _fill(tmpl: Any, values: Sequence[Any]) -> Any:
    if isinstance(tmpl, _Leaf):
        return values[tmpl.i]
    if isinstance(tmpl, tuple):
        return tuple(_fill(o, values) for o in tmpl)
    if isinstance(tmpl, list):
        return [_fill(o, values) for o in tmpl]
    if isinstance(tmpl, dict):
        return {k: _fill(v, values) for k, v in tmpl.items()}
    return tmpl


def _raised_by_us(exc: BaseException) -> bool:
    """Whether dualdl raised ``exc`` itself (its innermost frame is dualdl's code), not a framework."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    if last is None:
        return False
    if any(d in last for d in _OURS):
        return True
    return False


# ---- one input -------------------------------------------------------------------------------------
def _cases(info: Any, dtype: str, training: bool) -> list:
    import torch
    torch.manual_seed(0)
    return list(info.module_inputs_func(info, device="cpu", dtype=getattr(torch, dtype),
                                        requires_grad=True, training=training))


def _reference(info: Any, mi: Any, dtype: str, training: bool):
    import torch
    torch.manual_seed(0)
    m = info.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs)
    m = m.to(getattr(torch, dtype))
    m.train(training)
    return m


def _run(backend: str, model: Any, leaves: List[np.ndarray], want: List[bool], tmpl: Tuple[Any, Any],
         training: bool, dtype: str, gouts: Optional[List[Optional[np.ndarray]]], seed: bool):
    """Forward (and backward of ``gouts``) of ``model`` on ``backend``: outputs, input grads, param grads."""
    from dualdl.testing.capture import flatten
    from dualdl.testing.runners import adapter
    impl = adapter(backend)
    is_module = hasattr(model, "named_parameters")      # a loss may be a plain callable
    on_gpu = backend == "torch" and DEVICE != "cpu"
    if is_module:
        if on_gpu:
            model.to(DEVICE)
        impl.zero_grad(model)
        impl.set_mode(model, training)
    xs = [_on_device(impl.tensor(a, w), w) if on_gpu and isinstance(a, np.ndarray) else
          impl.tensor(a, w) if isinstance(a, np.ndarray) else a for a, w in zip(leaves, want)]
    args, kwargs = _fill(tmpl[0], xs), _fill(tmpl[1], xs)
    if seed and backend == "torch":
        import torch
        torch.manual_seed(1)
    with impl.recording(training):
        out = model(*args, **kwargs)
    flat = [o for o in flatten(out) if o is not None]
    outs = [impl.to_numpy(o) for o in flat]
    if gouts is None:
        return outs, None, None
    params = list(model.named_parameters()) if is_module else []
    if any(want) or params:
        if any(impl.is_float(o) for o in flat):
            impl.backward(flat, [g if g is not None and impl.is_float(o) else None for o, g in zip(flat, gouts)])
    return outs, [impl.input_grad(x) if w else None for x, w in zip(xs, want)], \
        impl.param_grads(model) if is_module else {}


def _on_device(t: Any, grad: bool) -> Any:
    """A leaf copy of the CPU tensor ``t`` on DEVICE (its .grad is what the comparison reads)."""
    return t.detach().to(DEVICE).requires_grad_(bool(grad and t.is_floating_point()))


def _twin(m: Any) -> Any:
    """A dualdl layer built with the constructor arguments of the torch.nn layer ``m`` (module_db
    passes a built ``nn.TransformerEncoderLayer`` to ``nn.TransformerEncoder``): what write-once
    code passes on MXNet, where a torch module cannot run."""
    import dualdl.nn as dn
    name = type(m).__name__
    if name not in ("TransformerEncoderLayer", "TransformerDecoderLayer"):
        raise TypeError(f"no dualdl twin for a torch {name} given as a constructor argument")
    return getattr(dn, name)(
        m.self_attn.embed_dim, m.self_attn.num_heads, dim_feedforward=m.linear1.out_features,
        dropout=m.dropout.p, activation=m.activation, layer_norm_eps=m.norm1.eps,
        batch_first=m.self_attn.batch_first, norm_first=m.norm_first, bias=m.linear1.bias is not None)


def _convert_ctor(obj: Any, backend: str, dtype: str) -> Any:
    """Constructor arguments for a dualdl layer: torch tensors (a loss's class weights) as the
    backend's tensors; a torch.nn layer as is on torch (torch.nn takes it), as its dualdl twin on
    other backends."""
    import torch
    from dualdl.testing.runners import adapter
    if isinstance(obj, torch.nn.Module):
        return obj if backend == "torch" else _twin(obj)
    if isinstance(obj, torch.Tensor):
        t = adapter(backend).tensor(obj.detach().cpu().numpy().copy(), False)
        return t.to(DEVICE) if backend == "torch" else t
    if isinstance(obj, (list, tuple)):
        return type(obj)(_convert_ctor(o, backend, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _convert_ctor(v, backend, dtype) for k, v in obj.items()}
    return obj


def _compare(got, ref, tol: float, scalar_as_one: bool = False) -> Tuple[str, float]:
    """('' or what differs, max abs difference)."""
    g_out, g_in, g_par = got
    r_out, r_in, r_par = ref
    worst = 0.0
    pairs = [(f"output[{i}]", a, b) for i, (a, b) in enumerate(zip(g_out, r_out))]
    if len(g_out) != len(r_out):
        return f"{len(g_out)} outputs, reference {len(r_out)}", worst
    if r_in is not None:
        pairs += [(f"grad input[{i}]", a, b) for i, (a, b) in enumerate(zip(g_in, r_in))]
        pairs += [(f"grad {k}", (g_par or {}).get(k), v) for k, v in r_par.items()]
    for what, a, b in pairs:
        if b is None:
            if a is not None and np.any(np.asarray(a) != 0):
                return f"{what}: a gradient where the reference has none", worst
            continue
        if a is None:
            if np.any(np.asarray(b) != 0):
                return f"{what}: no value on the candidate", worst
            continue
        a, b = np.asarray(a), np.asarray(b)
        if scalar_as_one and b.shape == () and a.shape == (1,):
            a = a.reshape(())
        if a.shape != b.shape:
            return f"{what}: shape {a.shape}, reference {b.shape}", worst
        if a.dtype != b.dtype:
            return f"{what}: dtype {a.dtype}, reference {b.dtype}", worst
        if b.dtype.kind not in "fc":
            if not np.array_equal(a, b):
                return f"{what}: values differ ({b.dtype})", worst
            continue
        fa, fb = np.isfinite(a), np.isfinite(b)
        if not np.array_equal(fa, fb) or not np.array_equal(a[~fb], b[~fb], equal_nan=True):
            return f"{what}: non-finite values differ", worst
        if not fb.any():
            continue
        d = float(np.abs(a[fb].astype(np.float64) - b[fb]).max())
        worst = max(worst, d)
        scale = max(1.0, float(np.abs(b[fb]).max()))
        if d > tol * scale:
            return f"{what}: max abs {d:.2e} > {tol:.0e} x {scale:.3g}", worst
    return "", worst


def _is_loss(name: str) -> bool:
    return name.endswith("Loss")


def run_input(info: Any, index: int, mi: Any, dtype: str, training: bool,
              candidates: Sequence[str] = tuple(CANDIDATES)) -> List[Outcome]:
    """Every candidate on one ModuleInput, against the native torch.nn module."""
    from dualdl.backend import _using
    from dualdl.state import load_state_dict
    name = entry_name(info)
    mode = "train" if training else "eval"
    leaves: List[np.ndarray] = []
    want: List[bool] = []
    tmpl = (_flatten(tuple(mi.forward_input.args), leaves, want), _flatten(dict(mi.forward_input.kwargs), leaves, want))
    random = training and name in RANDOM_IN_TRAIN
    mk = lambda c, status, detail="", d=0.0: Outcome(name, index, dtype, mode, c, status, detail, d)
    try:
        ref_model = _reference(info, mi, dtype, training)
        ref = _run("torch", ref_model, leaves, want, tmpl, training, dtype, None, True)
        rng = np.random.default_rng(index)
        gouts = [rng.standard_normal(o.shape).astype(o.dtype) if o.dtype.kind == "f" else None for o in ref[0]]
        ref = _run("torch", ref_model, leaves, want, tmpl, training, dtype, gouts, True)
        state = {k: v.detach().cpu().numpy().copy() for k, v in ref_model.state_dict().items()}
    except Exception as e:      # torch refuses its own input (an error input or a skipped case)
        return [mk(c, "skip", f"reference raised {type(e).__name__}: {str(e)[:120]}") for c in candidates]
    out = []
    for cand in candidates:
        backend, hyb = CANDIDATES[cand]
        try:
            with _using(backend):
                import dualdl.nn as dn
                cls = getattr(dn, name)
                args = _convert_ctor(tuple(mi.constructor_input.args), backend, dtype)
                kwargs = _convert_ctor(dict(mi.constructor_input.kwargs), backend, dtype)
                model = cls(*args, **kwargs)
                from dualdl.testing.runners import adapter
                if hasattr(model, "named_parameters"):
                    model = adapter(backend).cast_model(model, np.dtype(dtype))
                if getattr(info, "is_lazy", False) or name.startswith("Lazy"):
                    _run(backend, model, leaves, [False] * len(leaves), tmpl, training, dtype, None, True)
                if state:
                    load_state_dict(model, state)
                if hyb:
                    model.hybridize()
                got = _run(backend, model, leaves, want, tmpl, training, dtype, gouts, True)
        except Exception as e:
            status = "refused" if _raised_by_us(e) else "raw"
            out.append(mk(cand, status, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"))
            continue
        if random:
            out.append(mk(cand, "skip", "random in train mode (compared in eval mode)"))
            continue
        tol = LIMITS.get((name, cand, dtype), (TOLERANCE[dtype], ""))[0]
        what, worst = _compare(got, ref, tol, cand in ONE_FOR_SCALAR and _is_loss(name))
        out.append(mk(cand, "mismatch" if what else "match", what, worst))
    return out


def run(only: Optional[Sequence[str]] = None, dtypes: Sequence[str] = ("float32", "float64"),
        modes: Sequence[bool] = (True, False), candidates: Sequence[str] = tuple(CANDIDATES),
        limit: Optional[int] = None) -> Table:
    """The table over module_db (``only``: entry names; ``limit``: the first inputs of each)."""
    table = Table()
    for info in module_db():
        name = entry_name(info)
        if only and name not in only:
            continue
        if not covered(info):
            continue
        for dtype in dtypes:
            for training in modes:
                if not training and not info.train_and_eval_differ and True in modes:
                    continue            # the same computation: train mode covers it
                try:
                    cases = _cases(info, dtype, training)
                except Exception:
                    continue
                for i, mi in enumerate(cases[:limit]):
                    table.outcomes += run_input(info, i, mi, dtype, training, candidates)
    return table


def report(table: Table, candidates: Sequence[str], verbose: bool = False) -> str:
    db = module_db()
    n_cov = sum(covered(i) for i in db)
    lines = ["| | covered | " + " | ".join(STATUSES) + " |", "|---|---|" + "---|" * len(STATUSES)]
    for c in candidates:
        cnt = table.counts(c)
        lines.append(f"| {c} | {n_cov}/{len(db)} | " + " | ".join(str(cnt.get(s, 0)) for s in STATUSES) + " |")
    for c in candidates:
        for status in ("mismatch", "raw", "refused"):
            firsts = table.first(c, status)
            if not firsts:
                continue
            lines.append(f"\n{c} {status}: {len(firsts)} entries")
            per = table.entries(c, status)
            for e, o in sorted(firsts.items()):
                lines.append(f"  {e} x{per[e]}: [{o.index} {o.dtype} {o.mode}] {o.detail}")
    if verbose:
        lines.append("\nmissing: " + ", ".join(entry_name(i) for i in db if not covered(i)))
    return "\n".join(lines)


DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "parity.md")
BEGIN, END = "<!-- module_db table: begin (python tests/_module_db.py --write-docs) -->", "<!-- module_db table: end -->"


def docs_block(table: Table, candidates: Sequence[str]) -> str:
    """The docs/parity.md block: the counts per candidate, the entries covered and not."""
    import torch
    db = module_db()
    cov = [entry_name(i) for i in db if covered(i)]
    miss = [entry_name(i) for i in db if not covered(i)]
    lines = [BEGIN, "", f"Measured with torch {torch.__version__.split('+')[0]} and MXNet 1.9.1 on CPU "
             f"(float32 and float64; train mode, and eval mode where torch's entry says the two differ):", "",
             "| candidate | entries covered | match | mismatch | refused | raw | skip |",
             "|---|---|---|---|---|---|---|"]
    for c in candidates:
        cnt = table.counts(c)
        lines.append(f"| {c} | {len(cov)}/{len(db)} | " + " | ".join(str(cnt.get(s, 0)) for s in STATUSES) + " |")
    refusals: Dict[str, set] = {}
    for o in table.outcomes:
        if o.status == "refused":
            refusals.setdefault(o.detail.split(":", 1)[-1].strip()[:160], set()).add(o.candidate)
    lines += ["", "Covered entries: " + ", ".join(f"`{n}`" for n in sorted(cov)) + ".", ""]
    lines += ["Not covered: " + (", ".join(f"`{n}`" for n in sorted(miss)) or "none") + ".", ""]
    if refusals:
        lines += ["Refusals (declared):", ""]
        lines += [f"- {msg} ({', '.join(sorted(c))})" for msg, c in sorted(refusals.items())]
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_docs(table: Table, candidates: Sequence[str]) -> None:
    text = open(DOCS).read()
    block = docs_block(table, candidates)
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(DOCS, "w") as f:
        f.write(text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="comma-separated entry names")
    p.add_argument("--backends", default=",".join(CANDIDATES))
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--limit", type=int, default=None, help="the first N inputs of each entry")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--write-docs", action="store_true", help="write the table into docs/parity.md")
    p.add_argument("--device", default="cpu", help="cpu, or cuda: the torch reference and candidate on a GPU")
    a = p.parse_args(argv)
    global DEVICE
    DEVICE = a.device
    import warnings
    warnings.simplefilter("ignore")
    cands = [c for c in a.backends.split(",") if c]
    table = run([s for s in a.only.split(",") if s] or None, a.dtypes.split(","), (True, False), cands, a.limit)
    print(report(table, cands, a.verbose))
    if a.write_docs:
        write_docs(table, cands)
    return 0


if __name__ == "__main__":
    sys.exit(main())
